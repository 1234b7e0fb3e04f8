#!/usr/bin/env python3
"""Shows that deploy/validate.sh can fail: each case breaks one thing in a copy of deploy/ and
asserts that the validator exits 1 and names the problem. A baseline case checks that the
unmodified copy passes, so a failure is the mutation's doing. Prints one line per case and a
closing "N passed, M failed"; exits 1 if any case did not behave.

Usage: validate_mutations.py [--only NAME]   (run from anywhere; finds deploy/ next to tests/)
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"

# (name, file under deploy/, text to find, replacement, what the output must contain)
CASES = [
    ("baseline", None, None, None, "all checks passed"),
    ("k8s unknown field", "k8s/base/servers.yaml",
     "  podManagementPolicy: Parallel", "  podManagementPolicy: Parallel\n  replica: 3",
     "'\"replica\"' does not exist in type 'StatefulSetSpec'"),
    ("k8s wrong type", "k8s/base/workers.yaml",
     "  backoffLimit: 6", "  backoffLimit: six", "backoffLimit must be integer"),
    ("k8s bad probe port", "k8s/base/servers.yaml",
     "          readinessProbe:\n            grpc:\n              port: 7070",
     "          readinessProbe:\n            grpc:\n              port: 7071",
     "readinessProbe.grpc.port 7071 is not a declared containerPort"),
    ("k8s liveness = readiness", "k8s/base/servers.yaml",
     "              service: liveness\n", "", "ask the same gRPC service name"),
    ("k8s no permanent exit code 3", "k8s/base/workers.yaml",
     "values: [2, 3]", "values: [2]", "does not FailJob on exit codes [3]"),
    ("k8s writable root", "k8s/base/workers.yaml",
     "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not true"),
    ("k8s network policy open", "k8s/base/network-policy.yaml",
     "      ports:\n        - port: 7070", "    - from:\n        - namespaceSelector: {}\n      ports:\n        - port: 7070",
     "to the shards' gRPC port"),
    ("k8s replicas vs job spec", "k8s/base/job.yaml", "workers: 2", "workers: 3", "!= workers 3 in job.yaml"),
    ("kustomize broken", "k8s/overlays/gpu/kustomization.yaml", "path: worker-gpu.yaml", "path: missing.yaml",
     "overlay gpu does not build"),
    ("compose unknown key", "compose/docker-compose.yml",
     "  server-1:\n", "  server-1:\n    imagee: nope\n", "must NOT have additional properties ('imagee')"),
    ("compose missing healthcheck", "compose/docker-compose.yml",
     "  healthcheck:\n    test: [\"CMD\", \"sketchps\", \"health\", \"127.0.0.1:7070\"]\n"
     "    interval: 2s\n    timeout: 2s\n    retries: 30\n    start_period: 120s\n", "",
     "server-0: no healthcheck"),
    ("compose worker not waiting for health", "compose/docker-compose.yml",
     "server-1: {condition: service_healthy}", "server-1: {condition: service_started}",
     "does not depend on server-1 with condition service_healthy"),
    ("compose wrong server list", "compose/docker-compose.yml",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: server-0:7070,server-1:7070",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: server-1:7070,server-0:7070",
     "worker-1: servers 'server-1:7070,server-0:7070' != 'server-0:7070,server-1:7070'"),
    ("dockerfile root user", "docker/Dockerfile.cpu", "USER 10001:10001", "USER 0", "USER is root"),
    ("dockerfile unpinned base", "docker/Dockerfile.cuda", "debian:12.11-slim", "debian", "is not pinned to a tag"),
    ("dockerfile syntax", "docker/Dockerfile.cpu", "EXPOSE 7071", "EXPOSE seven", "Invalid containerPort"),
]


def run_case(case, validator: Path) -> tuple[bool, str]:
    name, rel, old, new, expect = case
    with tempfile.TemporaryDirectory(prefix="sketchps-mutant-") as tmp:
        copy = Path(tmp) / "deploy"
        shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("node_modules"))
        if rel is not None:
            f = copy / rel
            text = f.read_text()
            if text.count(old) < 1:
                return False, f"mutation target not found in {rel} (update the case): {old!r}"
            f.write_text(text.replace(old, new, 1))
        proc = subprocess.run(["bash", str(validator), "--deploy-dir", str(copy)],
                              capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    want_rc = 0 if rel is None else 1
    if proc.returncode != want_rc:
        return False, f"exit {proc.returncode}, expected {want_rc}\n{out}"
    if expect not in out:
        return False, f"output lacks {expect!r}\n{out}"
    return True, ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run the case with this name only")
    args = ap.parse_args()
    validator = DEPLOY / "validate.sh"
    # Install the validators once up front so that each case's output is the validator's alone.
    subprocess.run(["bash", str(validator)], check=False, stdout=subprocess.DEVNULL)
    cases = [c for c in CASES if args.only in (None, c[0])]
    passed = failed = 0
    for case in cases:
        ok, detail = run_case(case, validator)
        print(f"{'ok  ' if ok else 'FAIL'} {case[0]}", flush=True)
        if not ok:
            print("     " + detail.replace("\n", "\n     "))
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
