#!/usr/bin/env python3
"""Stand-ins for the sketchps daemons, for testing deploy/emulate without a C++ build. They follow
the daemon contract's shape (flags, env fallbacks, exit codes, log lines) over plain TCP instead of
gRPC; the role is the name this file is run under (symlinks in server/, worker/, tools/):
  sketchps certs --out DIR --workers P --servers S [--new-ca]
                   writes ca.pem/ca.key (an existing CA is reused unless --new-ca) and
                   worker-<r>.pem/.key, server-<s>.pem/.key naming the CA that signed them; keys
                   mode 0600. FAKE_CERTS_FAIL=1: exit 1 without writing.
  sketchps-server  needs --tls-dir/SKETCHPS_TLS_DIR (ca.pem, server-<shard>.pem/.key signed by that
                   CA) or --insecure/SKETCHPS_INSECURE=1, else exit 2. Listens on --listen: with TLS
                   only requests carrying the job's CA and a worker identity are answered (a
                   plaintext health check there fails, as with the real TLS port); --health-listen
                   answers health checks only, in plaintext. "health [SERVICE]": SERVING for the
                   overall service and the names in FAKE_HEALTH_SERVICES (default "liveness", as the
                   Kubernetes probes expect), UNKNOWN for others; FAKE_UNHEALTHY=1: NOT_SERVING.
                   "weights": a digest of the job file and its shard. "leave R": worker R has
                   finished; once every worker of the job (`workers:` of the job file, or
                   --set workers=N) has left, it logs "every worker has finished the job" and exits
                   0 (FAKE_DONE_EXIT=N: exits N; FAKE_IGNORE_LEAVE=1: keeps running). SIGTERM:
                   writes a checkpoint, exits 143 (128 + SIGTERM; FAKE_TERM_EXIT=N: exits N).
                   The first "weights" request also writes the checkpoint (shard-<shard>.ckpt in
                   --checkpoint-dir); at start it logs "resumed from its checkpoint" if that file
                   exists, else "no checkpoint". --metrics-listen: plain HTTP, any path answers
                   "sketchps_rounds_applied N", N growing by FAKE_ROUNDS_PER_SECOND (10) from
                   the first "weights" request; --port-file FILE: the bound ports as JSON
                   ({"grpc": N, "health": N, "metrics": N}, common/net/port_file.h).
                   Exit 2 if the job file is unreadable.
                   --checkpoint-key-file/SKETCHPS_CHECKPOINT_KEY_FILE: as the real daemons, exit 2
                   naming the file when it cannot be read, is not a regular file, holds fewer than
                   32 bytes or other users may read it; logs "checkpoint key <file>" otherwise.
  sketchps-worker  the same TLS rule for worker-<rank>; connects to every server of
                   --servers/SKETCHPS_SERVERS (comma-separated, or one address with {shard} in it,
                   expanded for the job's `servers:` or --set servers=N, exit 2 if the count is
                   not that), retrying until --patience-seconds (then exit 1),
                   logs "final weights checksum <hex>" over the servers' digests (plus
                   FAKE_CHECKSUM_SALT, to fake diverged replicas), tells every server it leaves
                   (FAKE_NO_LEAVE=1: it does not), exit 0. FAKE_TRAIN_SECONDS=T: after the first
                   digests it "trains" T seconds, then asks every server again (the same retries),
                   so a shard can be killed and restarted meanwhile. The same checkpoint key rule.
  sketchps health HOST:PORT [--service NAME]   plaintext; exit 0 only if the answer is SERVING.
"""
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import stat
import sys
import threading
import time


def flag(args, name, default=None):
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return default


def overrides(args):
    out = {}
    for i, a in enumerate(args):
        kv = a.split("=", 1)[1] if a.startswith("--set=") else args[i + 1] if a == "--set" and i + 1 < len(args) else None
        if kv and "=" in kv:
            k, v = kv.split("=", 1)
            out[k] = v
    return out


def log(role, msg):
    print(f"{role}: {msg}", flush=True)


def tls(args, identity, role):
    """The CA id this process trusts, "" when insecure; exits 2 like the daemons on a bad setup."""
    tls_dir = flag(args, "--tls-dir", os.environ.get("SKETCHPS_TLS_DIR", ""))
    insecure = "--insecure" in args or os.environ.get("SKETCHPS_INSECURE", "") in ("1", "true")
    if insecure and tls_dir:
        log(role, "--tls-dir / --insecure: give one of them, not both")
        sys.exit(2)
    if insecure:
        return ""
    if not tls_dir:
        log(role, "--tls-dir: no certificates given (make them with `sketchps certs`), or pass --insecure")
        sys.exit(2)
    try:
        ca = open(os.path.join(tls_dir, "ca.pem")).read().split()[-1]
        cert = open(os.path.join(tls_dir, f"{identity}.pem")).read()
        open(os.path.join(tls_dir, f"{identity}.key")).read()
    except OSError as e:
        log(role, f"TLS {e.filename}: cannot read")
        sys.exit(2)
    if f"signed-by {ca}" not in cert:
        log(role, f"TLS {identity}.pem: not signed by the CA in ca.pem")
        sys.exit(2)
    return ca


def checkpoint_key(args, role):
    """The key file check of common/wire/file_key.cc; exits 2 like the daemons."""
    path = flag(args, "--checkpoint-key-file", os.environ.get("SKETCHPS_CHECKPOINT_KEY_FILE", ""))
    if not path:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        log(role, f"--checkpoint-key-file: {path}: cannot open the checkpoint key file: {e.strerror}")
        sys.exit(2)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            log(role, f"--checkpoint-key-file: {path}: the checkpoint key file is not a regular file")
            sys.exit(2)
        if st.st_mode & stat.S_IROTH:
            log(role, f"--checkpoint-key-file: {path}: the checkpoint key file is readable by other users")
            sys.exit(2)
        size = len(f.read())
    if size < 32:
        log(role, f"--checkpoint-key-file: {path}: the checkpoint key holds {size} bytes, fewer than the 32 needed")
        sys.exit(2)
    log(role, f"checkpoint key {path}")


def ask(host_port, request, timeout=2.0):
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request.encode() + b"\n")
        return s.makefile().readline().strip()


class Server:
    def __init__(self, args):
        self.args = args
        job = flag(args, "--job", os.environ.get("SKETCHPS_JOB"))
        self.shard = flag(args, "--shard", os.environ.get("SKETCHPS_SHARD", "0"))
        try:
            text = open(job, "rb").read()
        except (OSError, TypeError) as e:
            log("sketchps-server", f"cannot read job file {job}: {e}")
            sys.exit(2)
        m = re.search(rb"^workers:\s*(\d+)", text, re.M)
        self.workers = int(overrides(args).get("workers") or (m.group(1) if m else 4))
        self.digest = hashlib.sha256(text + self.shard.encode()).hexdigest()[:16]
        self.ca = tls(args, f"server-{self.shard}", "sketchps-server")
        checkpoint_key(args, "sketchps-server")
        self.left: set[str] = set()
        self.first_ask: float | None = None   # the first "weights" request: the fake rounds start
        self.checkpoint = flag(args, "--checkpoint-dir")
        self.finished = False   # every worker has left (and FAKE_IGNORE_LEAVE is not set)
        self.done = threading.Event()
        self.lock = threading.Lock()

    def health(self, req):
        known = ["", *os.environ.get("FAKE_HEALTH_SERVICES", "liveness").split(",")]
        service = req[1] if len(req) > 1 else ""
        if service not in known:
            return "UNKNOWN"
        return "NOT_SERVING" if os.environ.get("FAKE_UNHEALTHY") else "SERVING"

    def answer(self, line: str, health_port: bool) -> str:
        words = line.split()
        creds = dict(w.split("=", 1) for w in words if "=" in w)
        req = [w for w in words if "=" not in w]
        if health_port:
            return self.health(req) if req[:1] == ["health"] else "UNAUTHENTICATED"
        if self.ca and (creds.get("ca") != self.ca or not creds.get("from", "").startswith("worker-")):
            return "UNAUTHENTICATED"  # no client certificate from the job's CA (plaintext, or another job)
        if req[:1] == ["health"]:
            return self.health(req)
        if req == ["weights"]:
            with self.lock:
                if self.first_ask is None:
                    self.first_ask = time.monotonic()
                    self.write_checkpoint()
            return self.digest
        if req[:1] == ["leave"] and len(req) == 2:
            with self.lock:
                self.left.add(req[1])
                log("sketchps-server", f"shard {self.shard}: worker {req[1]} finished the job "
                    f"({len(self.left)} of {self.workers} workers)")
                if len(self.left) >= self.workers and not os.environ.get("FAKE_IGNORE_LEAVE"):
                    self.finished = True
                    self.done.set()
            return "OK"
        return "UNKNOWN_REQUEST"

    def write_checkpoint(self):
        if self.checkpoint:
            open(os.path.join(self.checkpoint, f"shard-{self.shard}.ckpt"), "w").write(self.digest)

    def rounds(self) -> int:
        if self.first_ask is None:
            return 0
        return int((time.monotonic() - self.first_ask) * float(os.environ.get("FAKE_ROUNDS_PER_SECOND", "10")))

    def serve_metrics(self, sock):
        while True:
            conn, _ = sock.accept()
            try:
                conn.settimeout(5)
                conn.recv(4096)
                body = f"# TYPE sketchps_rounds_applied gauge\nsketchps_rounds_applied {self.rounds()}\n"
                conn.sendall(f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
            except OSError:
                pass
            finally:
                conn.close()

    def serve(self, sock, health_port):
        while True:
            conn, _ = sock.accept()
            try:
                conn.settimeout(5)
                conn.sendall(self.answer(conn.makefile().readline(), health_port).encode() + b"\n")
            except OSError:
                pass  # a client that gave up (timeout, reset) must not take the server down
            finally:
                conn.close()

    def run(self):
        listeners = [(flag(self.args, "--listen", "0.0.0.0:7070"), False)]
        if flag(self.args, "--health-listen"):
            listeners.append((flag(self.args, "--health-listen"), True))
        ports = {}
        for address, health_port in listeners:
            host, port = address.rsplit(":", 1)
            sock = socket.create_server((host, int(port)))
            ports["health" if health_port else "grpc"] = sock.getsockname()[1]
            threading.Thread(target=self.serve, args=(sock, health_port), daemon=True).start()
        metrics = ""
        if flag(self.args, "--metrics-listen"):
            host, port = flag(self.args, "--metrics-listen").rsplit(":", 1)
            sock = socket.create_server((host, int(port)))
            threading.Thread(target=self.serve_metrics, args=(sock,), daemon=True).start()
            ports["metrics"] = sock.getsockname()[1]
            metrics = f", metrics on port {ports['metrics']}"
        if flag(self.args, "--port-file"):  # common/net/port_file.h: written once serving, atomically
            path = flag(self.args, "--port-file")
            with open(path + ".tmp", "w") as out:
                json.dump(ports, out)
            os.replace(path + ".tmp", path)
        signal.signal(signal.SIGTERM, lambda *_: self.done.set())
        resumed = self.checkpoint and os.path.exists(os.path.join(self.checkpoint, f"shard-{self.shard}.ckpt"))
        log("sketchps-server", f"shard {self.shard} listening on {', '.join(a for a, _ in listeners)} "
            f"({'mutual TLS' if self.ca else 'plaintext: --insecure'}){metrics}; "
            f"{'resumed from its checkpoint' if resumed else 'no checkpoint'}")
        while not self.done.wait(0.1):
            pass
        why = "every worker has finished the job" if self.finished else "SIGTERM"
        self.write_checkpoint()
        log("sketchps-server", f"{why}: checkpoint written, exiting")
        if why == "SIGTERM":
            return int(os.environ.get("FAKE_TERM_EXIT", "143"))
        return int(os.environ.get("FAKE_DONE_EXIT", "0"))


def job_servers(args) -> int:
    job = flag(args, "--job", os.environ.get("SKETCHPS_JOB"))
    try:
        m = re.search(rb"^servers:\s*(\d+)", open(job, "rb").read(), re.M)
    except (OSError, TypeError):
        m = None
    return int(overrides(args).get("servers") or (m.group(1) if m else 2))


def worker(args):
    servers = [s for s in flag(args, "--servers", os.environ.get("SKETCHPS_SERVERS", "")).split(",") if s]
    rank = flag(args, "--rank", os.environ.get("RANK", os.environ.get("JOB_COMPLETION_INDEX")))
    count = job_servers(args)
    if len(servers) == 1 and "{shard}" in servers[0]:
        servers = [servers[0].replace("{shard}", str(s)) for s in range(count)]
    if len(servers) != count:
        log(f"sketchps-worker {rank}", f"--servers: {len(servers)} addresses for a job with servers: {count}")
        return 2
    ca = tls(args, f"worker-{rank}", "sketchps-worker")
    checkpoint_key(args, f"sketchps-worker {rank}")
    creds = f" from=worker-{rank} ca={ca}" if ca else ""
    timeout = float(flag(args, "--patience-seconds", "120"))

    def digests():
        parts = []
        for srv in servers:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    answer = ask(srv, "weights" + creds)
                    if answer == "UNAUTHENTICATED":
                        raise OSError(f"{srv}: handshake refused (UNAUTHENTICATED)")
                    parts.append(answer)
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        log(f"sketchps-worker {rank}", f"server {srv} unreachable for {timeout:.0f} s: {e}")
                        return None
                    time.sleep(0.5)
        return parts

    parts = digests()
    if parts is not None and os.environ.get("FAKE_TRAIN_SECONDS"):
        time.sleep(float(os.environ["FAKE_TRAIN_SECONDS"]))
        parts = digests()
    if parts is None:
        return 1
    salt = os.environ.get("FAKE_CHECKSUM_SALT", "")
    checksum = hashlib.sha256((''.join(parts) + salt).encode()).hexdigest()[:16]
    if not os.environ.get("FAKE_NO_LEAVE"):
        for srv in servers:
            try:
                ask(srv, f"leave {rank}" + creds)
            except OSError:
                pass  # a shard that is already gone
    log(f"sketchps-worker {rank}", f"final weights checksum {checksum}")
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


def certs(args):
    out = flag(args, "--out")
    if not out:
        print("sketchps certs: --out is required", file=sys.stderr)
        return 2
    if os.environ.get("FAKE_CERTS_FAIL"):
        print(f"sketchps certs: {out}: cannot open for writing (FAKE_CERTS_FAIL)", file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)

    def write(name, text, mode):
        path = os.path.join(out, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    ca_pem, ca_key = os.path.join(out, "ca.pem"), os.path.join(out, "ca.key")
    if "--new-ca" in args or not (os.path.exists(ca_pem) and os.path.exists(ca_key)):
        write("ca.key", "-----BEGIN PRIVATE KEY----- fake\n", 0o600)
        write("ca.pem", f"-----BEGIN CERTIFICATE----- fake-ca {secrets.token_hex(8)}\n", 0o644)
    ca = open(ca_pem).read().split()[-1]
    names = [f"worker-{r}" for r in range(int(flag(args, "--workers", "0")))] + \
            [f"server-{s}" for s in range(int(flag(args, "--servers", "0")))]
    for name in names:
        write(f"{name}.key", "-----BEGIN PRIVATE KEY----- fake\n", 0o600)
        write(f"{name}.pem", f"-----BEGIN CERTIFICATE----- {name} signed-by {ca}\n", 0o644)
    print(f"sketchps certs: {out} holds the CA and {len(names)} certificates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    role = os.path.basename(sys.argv[0])
    if role == "sketchps-server":
        sys.exit(Server(sys.argv[1:]).run())
    if role == "sketchps-worker":
        sys.exit(worker(sys.argv[1:]))
    if role == "sketchps" and sys.argv[1:2] == ["health"]:
        sys.exit(health(sys.argv[1:]))
    if role == "sketchps" and sys.argv[1:2] == ["certs"]:
        sys.exit(certs(sys.argv[1:]))
    print(f"fake_daemon: unknown role {role} {sys.argv[1:]}", file=sys.stderr)
    sys.exit(2)
