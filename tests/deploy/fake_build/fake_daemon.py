#!/usr/bin/env python3
"""Stand-ins for the sketchps daemons, for testing deploy/emulate without a C++ build. They follow
the daemon contract's shape (flags, env fallbacks, exit codes, log line) over plain TCP instead of
gRPC; the role is the name this file is run under (symlinks in server/, worker/, tools/):
  sketchps-server  listens on --listen; answers "health [SERVICE]" with SERVING for the overall
                   service and the names in FAKE_HEALTH_SERVICES (default "liveness", as the
                   Kubernetes probes expect), UNKNOWN for others, and "weights" with a digest of the
                   job file and its shard; exits 0 on SIGTERM. FAKE_UNHEALTHY=1: answers
                   NOT_SERVING. Exit 2 if the job file is unreadable.
  sketchps-worker  connects to every server of --servers/SKETCHPS_SERVERS, retrying until
                   --patience-seconds (then exit 1), and logs "final weights checksum <hex>" over the
                   servers' digests (plus FAKE_CHECKSUM_SALT, to fake diverged replicas); exit 0.
  sketchps health HOST:PORT [--service NAME]   exit 0 only if the server answers SERVING.
"""
import hashlib
import os
import signal
import socket
import sys
import time


def flag(args, name, default=None):
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return default


def ask(host_port, request, timeout=2.0):
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request.encode() + b"\n")
        return s.makefile().readline().strip()


def server(args):
    job = flag(args, "--job", os.environ.get("SKETCHPS_JOB"))
    shard = flag(args, "--shard", os.environ.get("SKETCHPS_SHARD", "0"))
    try:
        digest = hashlib.sha256(open(job, "rb").read() + shard.encode()).hexdigest()[:16]
    except (OSError, TypeError) as e:
        print(f"sketchps-server: cannot read job file {job}: {e}", flush=True)
        return 2
    host, port = flag(args, "--listen", "0.0.0.0:7070").rsplit(":", 1)
    ckpt = flag(args, "--checkpoint-dir")
    sock = socket.create_server((host, int(port)))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(0)))
    print(f"sketchps-server: shard {shard} listening on {host}:{port}", flush=True)
    try:
        while True:
            conn, _ = sock.accept()
            try:
                serve_one(conn, digest)
            except OSError:
                pass  # a client that gave up (timeout, reset) must not take the server down
            finally:
                conn.close()
    except SystemExit:
        if ckpt:
            open(os.path.join(ckpt, f"shard-{shard}.ckpt"), "w").write(digest)
        print("sketchps-server: SIGTERM: checkpoint written, exiting", flush=True)
        return 0


def serve_one(conn, digest):
    conn.settimeout(5)
    req = conn.makefile().readline().split()
    known = ["", *os.environ.get("FAKE_HEALTH_SERVICES", "liveness").split(",")]
    if req[:1] == ["health"]:
        service = req[1] if len(req) > 1 else ""
        if service not in known:
            conn.sendall(b"UNKNOWN\n")
        else:
            conn.sendall(b"NOT_SERVING\n" if os.environ.get("FAKE_UNHEALTHY") else b"SERVING\n")
    elif req == ["weights"]:
        conn.sendall(digest.encode() + b"\n")


def worker(args):
    servers = flag(args, "--servers", os.environ.get("SKETCHPS_SERVERS", "")).split(",")
    rank = flag(args, "--rank", os.environ.get("RANK", os.environ.get("JOB_COMPLETION_INDEX")))
    timeout = float(flag(args, "--patience-seconds", "120"))
    parts = []
    for srv in servers:
        deadline = time.monotonic() + timeout
        while True:
            try:
                parts.append(ask(srv, "weights"))
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    print(f"sketchps-worker {rank}: server {srv} unreachable for {timeout:.0f} s: {e}", flush=True)
                    return 1
                time.sleep(0.5)
    salt = os.environ.get("FAKE_CHECKSUM_SALT", "")
    print(f"sketchps-worker {rank}: final weights checksum {hashlib.sha256((''.join(parts) + salt).encode()).hexdigest()[:16]}", flush=True)
    return 0


def health(args):
    service = flag(args, "--service", "")
    try:
        answer = ask(args[1], f"health {service}".strip())
        print(f"{args[1]}: {answer}")
        return 0 if answer == "SERVING" else 1
    except (OSError, IndexError) as e:
        print(f"sketchps health: {e}")
        return 1


if __name__ == "__main__":
    role = os.path.basename(sys.argv[0])
    if role == "sketchps-server":
        sys.exit(server(sys.argv[1:]))
    if role == "sketchps-worker":
        sys.exit(worker(sys.argv[1:]))
    if role == "sketchps" and sys.argv[1:2] == ["health"]:
        sys.exit(health(sys.argv[1:]))
    print(f"fake_daemon: unknown role {role} {sys.argv[1:]}", file=sys.stderr)
    sys.exit(2)
