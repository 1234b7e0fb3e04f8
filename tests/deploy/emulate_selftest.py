#!/usr/bin/env python3
"""Shows that deploy/emulate/run.sh passes a healthy run and fails each broken one, using the
stand-in daemons of tests/deploy/fake_build (no C++ build needed). Cases: a good run with a
bandwidth cap, the Kubernetes probes and --require-self-exit (the one-shot `certs` service runs
first, the shards exit by themselves once every worker has left, the workers expand the
server-{shard} address); a shard that does not exit by itself, drained by SIGTERM (passes with
exit 143, fails with 0) or failing --require-self-exit; a shard failing at the end; a worker
given fewer server addresses than the job's shards;
the certificates step failing; a daemon without its TLS folder; a checkpoint key that the one-shot
`checkpoint-key` service made too short (the stand-ins check the key file as the daemons do, so the
good run shows the key made before the daemons start); a healthcheck on the TLS port; a
probe naming a health service the shard does not serve, and one on the TLS port; diverged
replicas; a worker that cannot reach a shard; a shard that never becomes healthy; `ip netns add`
failing; binaries missing. --kill: a shard killed at a round (read from its metrics port) or after
some seconds while the workers train, restarted on its checkpoint volume (--expect-log finds
"resumed from its checkpoint" in its log since the restart); --expect-log failing on a shard that
was not restarted; a kill the job never reaches; a kill of a worker (bad usage). Prints one line per case and a closing "N passed, M failed"; exits 1 if
any case did not behave. Needs root (network namespaces).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from netns_leftovers import namespaces, new_namespaces

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "deploy/emulate/run.sh"
FAKE = Path(__file__).resolve().parent / "fake_build"

COMPOSE = "compose/docker-compose.yml"
SERVERS_YAML = "k8s/base/servers.yaml"
WORKER0_ENV = '      RANK: "0"\n'
WORKER1_ENV = '      RANK: "1"\n'
SHARD1_ENV = '      SKETCHPS_SHARD: "1"\n'
PROBES = "{deploy}/" + SERVERS_YAML


def shard1(env: str) -> list[tuple[str, str, str]]:
    """An environment line added to server-1."""
    return [(COMPOSE, SHARD1_ENV, SHARD1_ENV + f"      {env}\n")]


# The workers "train" 3 s between their first and last requests, so a shard can be killed meanwhile.
TRAIN = [(COMPOSE, env, env + '      FAKE_TRAIN_SECONDS: "3"\n') for env in (WORKER0_ENV, WORKER1_ENV)]
RESUMED = "server-1=resumed from its checkpoint"


# (name, edits [(file under deploy/, old, new)], extra run.sh args, fake `ip` on PATH, expected exit,
#  expected text). "{deploy}" in an argument is the copy of deploy/ the case runs on.
CASES = [
    ("good run, 100mbit links, k8s probes, shards exit by themselves", [],
     ["--bandwidth", "100mbit", "--check-probes", PROBES, "--require-self-exit"], False, 0,
     "same final weights checksum"),
    ("shard ignores Leave: drained by SIGTERM, exit 143", shard1('FAKE_IGNORE_LEAVE: "1"'), ["--exit-wait", "2"], False, 0,
     "server-1 stopped cleanly after SIGTERM (exit 143)"),
    ("shard exits 0 after SIGTERM", shard1('FAKE_IGNORE_LEAVE: "1"\n      FAKE_TERM_EXIT: "0"'), ["--exit-wait", "2"],
     False, 1, "server-1 exited 0 after SIGTERM (expected 143"),
    ("shard ignores Leave with --require-self-exit", shard1('FAKE_IGNORE_LEAVE: "1"'),
     ["--exit-wait", "2", "--require-self-exit"], False, 1, "server-1 still running 2 s after the workers finished"),
    ("shard fails at the end of the job", shard1('FAKE_DONE_EXIT: "3"'), [], False, 1, "server-1 exited 3"),
    ("certificates step fails", [(COMPOSE, '    entrypoint: ["sketchps", "certs"]\n',
                                  '    entrypoint: ["sketchps", "certs"]\n    environment: {FAKE_CERTS_FAIL: "1"}\n')],
     [], False, 1, "certs exited 1; server-0 waits for it to complete successfully"),
    ("daemons without their TLS folder", [(COMPOSE, "    SKETCHPS_TLS_DIR: /certs\n", "")], [], False, 1,
     "server-0 exited 2 before it became healthy"),
    # The one-shot checkpoint-key service runs before the daemons, which refuse a short key (exit 2).
    ("checkpoint key too short", [(COMPOSE, "head -c 32 /dev/urandom", "head -c 16 /dev/urandom")], [], False, 1,
     "server-0 exited 2 before it became healthy"),
    ("healthcheck on the TLS port", [(COMPOSE, '"health", "127.0.0.1:7071"', '"health", "127.0.0.1:7070"')],
     ["--health-deadline", "4"], False, 1, "server-0 did not become healthy"),
    ("k8s probe asks an unserved health service", shard1('FAKE_HEALTH_SERVICES: "other"'),
     ["--check-probes", PROBES], False, 1, "Kubernetes livenessProbe (grpc port 7071, service liveness) on server-1 fails"),
    ("k8s probe on the TLS port", [(SERVERS_YAML, "          readinessProbe:\n            grpc:\n              port: 7071",
                                    "          readinessProbe:\n            grpc:\n              port: 7070")],
     ["--check-probes", PROBES], False, 1, "Kubernetes readinessProbe (grpc port 7070, service (overall)) on server-0 fails"),
    ("diverged replicas", [(COMPOSE, WORKER1_ENV, WORKER1_ENV + '      FAKE_CHECKSUM_SALT: "x"\n')], [], False, 1,
     "replicas differ"),
    ("unreachable shard", [(COMPOSE, '"--patience-seconds=300"', '"--patience-seconds=3"'),
                           (COMPOSE, '      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: "server-{shard}:7070"',
                            '      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: server-0:7070,server-1:7999')],
     [], False, 1, "worker-1 exited 1"),
    ("worker given one address for two shards", [(COMPOSE, '      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: "server-{shard}:7070"',
                                            '      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: server-0:7070')],
     [], False, 1, "worker-1 exited 2"),
    ("shard never healthy", shard1('FAKE_UNHEALTHY: "1"'), ["--health-deadline", "4"], False, 1,
     "server-1 did not become healthy"),
    ("--kill a shard at round 5: restarted on its checkpoint volume", TRAIN,
     ["--kill", "server-1@5", "--expect-log", RESUMED, "--require-self-exit"], False, 0,
     "--expect-log: server-1 logged 'resumed from its checkpoint' since its restart"),
    ("--kill a shard after 1 s: restarted", TRAIN, ["--kill", "server-1@1s", "--expect-log", RESUMED], False, 0,
     "s after the first worker started (exit -9); starting it again"),
    ("--expect-log on a shard that was not restarted", [], ["--expect-log", RESUMED], False, 1,
     "the log of server-1 (it was not restarted) does not match"),
    ("--kill the job never reaches", [], ["--kill", "server-1@100000"], False, 1,
     "--kill server-1@100000 did not happen: the job ended first"),
    ("--kill a worker", [], ["--kill", "worker-0@5"], False, 2, "'worker-0' is not a long-running service"),
    ("no network namespaces", [], [], True, 1, "cannot create network namespaces"),
    ("binaries missing", [], ["--build-dir", "/nonexistent"], False, 2, "no executable at /nonexistent"),
]


def run_case(case) -> tuple[bool, str]:
    name, edits, extra, fake_ip, want_rc, expect = case
    before = namespaces()
    with tempfile.TemporaryDirectory(prefix="sketchps-emu-case-") as tmp:
        copy = Path(tmp) / "deploy"
        shutil.copytree(REPO / "deploy", copy, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
        compose = copy / COMPOSE
        for rel, old, new in edits:
            text = (copy / rel).read_text()
            if old not in text:
                return False, f"edit target not in {rel} (update the case): {old!r}"
            (copy / rel).write_text(text.replace(old, new))
        env = dict(os.environ)
        if fake_ip:
            bindir = Path(tmp) / "bin"
            bindir.mkdir()
            (bindir / "ip").write_text("#!/bin/sh\necho 'mount --make-shared /run/netns failed: Operation not permitted' >&2\nexit 1\n")
            (bindir / "ip").chmod(0o755)
            env["PATH"] = f"{bindir}:{env['PATH']}"
        extra = [a.replace("{deploy}", str(copy)) for a in extra]
        argv = ["bash", str(RUN), "--compose", str(compose), "--build-dir", str(FAKE), "--timeout", "240", *extra]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    if proc.returncode != want_rc:
        return False, f"exit {proc.returncode}, expected {want_rc}\n{out}"
    if expect not in out:
        return False, f"output lacks {expect!r}\n{out}"
    leftovers = new_namespaces(before)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(FAKE).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                leftovers.append(f"process {pid}")
        except OSError:
            pass
    if leftovers:
        return False, f"left behind: {leftovers}"
    return True, ""


def stale_namespace_case() -> tuple[bool, str]:
    """A run killed before its cleanup leaves namespaces named after its pid; the next run removes them."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"sps{dead.pid}-worker-0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    ok, detail = run_case(("good run after a killed one", [], [], False, 0, f"removed namespace {stale}"))
    if stale in namespaces():
        subprocess.run(["ip", "netns", "del", stale])
        return False, f"{stale} is still there\n{detail}"
    return ok, detail


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    args = ap.parse_args()
    passed = failed = 0
    for case in [c for c in CASES if args.only in (None, c[0])]:
        ok, detail = run_case(case)
        print(f"{'ok  ' if ok else 'FAIL'} {case[0]}", flush=True)
        if not ok:
            print("     " + detail.replace("\n", "\n     "))
        passed, failed = passed + ok, failed + (not ok)
    if args.only in (None, "stale namespaces"):
        ok, detail = stale_namespace_case()
        print(f"{'ok  ' if ok else 'FAIL'} stale namespaces", flush=True)
        if not ok:
            print("     " + detail.replace("\n", "\n     "))
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
