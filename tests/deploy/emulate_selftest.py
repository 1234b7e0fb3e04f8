#!/usr/bin/env python3
"""Shows that deploy/emulate/run.sh passes a healthy run and fails each broken one, using the
stand-in daemons of tests/deploy/fake_build (no C++ build needed). Cases: a good run with a
bandwidth cap and the Kubernetes probes; a probe naming a health service the shard does not serve;
diverged replicas; a worker that cannot reach a shard; a shard that never becomes
healthy; `ip netns add` failing; binaries missing. Prints one line per case and a closing
"N passed, M failed"; exits 1 if any case did not behave. Needs root (network namespaces).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "deploy/emulate/run.sh"
FAKE = Path(__file__).resolve().parent / "fake_build"

WORKER1_ENV = '      RANK: "1"\n'
PROBES = "{deploy}/k8s/base/servers.yaml"
# (name, compose edits [(old, new)], extra run.sh args, fake `ip` on PATH, expected exit, expected text)
# "{deploy}" in an argument is the copy of deploy/ the case runs on.
CASES = [
    ("good run, 100mbit links, k8s probes", [], ["--bandwidth", "100mbit", "--check-probes", PROBES], False, 0,
     "same final weights checksum"),
    ("k8s probe asks an unserved health service", [('      SKETCHPS_SHARD: "1"\n', '      SKETCHPS_SHARD: "1"\n      FAKE_HEALTH_SERVICES: "other"\n')],
     ["--check-probes", PROBES], False, 1, "Kubernetes livenessProbe (grpc port 7070, service liveness) on server-1 fails"),
    ("diverged replicas", [(WORKER1_ENV, WORKER1_ENV + '      FAKE_CHECKSUM_SALT: "x"\n')], [], False, 1, "replicas differ"),
    ("unreachable shard", [('"--patience-seconds=300"', '"--patience-seconds=3"'),
                           ('      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: server-0:7070,server-1:7070',
                            '      RANK: "1"\n      WORLD_SIZE: "2"\n      SKETCHPS_SERVERS: server-0:7070,server-1:7999')],
     [], False, 1, "worker-1 exited 1"),
    ("shard never healthy", [('      SKETCHPS_SHARD: "1"\n', '      SKETCHPS_SHARD: "1"\n      FAKE_UNHEALTHY: "1"\n')],
     ["--health-deadline", "4"], False, 1, "server-1 did not become healthy"),
    ("no network namespaces", [], [], True, 1, "cannot create network namespaces"),
    ("binaries missing", [], ["--build-dir", "/nonexistent"], False, 2, "no executable at /nonexistent"),
]


def run_case(case) -> tuple[bool, str]:
    name, edits, extra, fake_ip, want_rc, expect = case
    with tempfile.TemporaryDirectory(prefix="sketchps-emu-case-") as tmp:
        copy = Path(tmp) / "deploy"
        shutil.copytree(REPO / "deploy", copy, ignore=shutil.ignore_patterns("node_modules"))
        compose = copy / "compose/docker-compose.yml"
        text = compose.read_text()
        for old, new in edits:
            if old not in text:
                return False, f"edit target not in docker-compose.yml (update the case): {old!r}"
            text = text.replace(old, new)
        compose.write_text(text)
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
    leftovers = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                 if n.startswith("sps")]
    if leftovers:
        return False, f"namespaces left behind: {leftovers}"
    return True, ""


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
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
