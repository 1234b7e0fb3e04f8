#!/usr/bin/env python3
"""Tests of the scripts behind the Kubernetes manifests (no cluster needed):

  - deploy/k8s/base/launch/worker.sh: SKETCHPS_SERVERS is the S stable names in shard order, the
    arguments reach sketchps-worker unchanged, a missing or bad SKETCHPS_SERVER_COUNT is refused;
  - deploy/k8s/base/launch/server.sh with a stand-in shard: its own exit code passes through (0 at
    the end of the job, 2, ...), a SIGTERM reaches the shard, and a shard that then drains and exits
    0 makes the script exit 143 (so the Job recreates the index); a failure after SIGTERM stays;
    with --server PATH also with the real sketchps-server;
  - deploy/k8s/make-certs.py on the example overlay (S = 3, P = 4), with the stand-in `sketchps`
    of tests/deploy/fake_build and, with --sketchps PATH, the real one: the overlay's Namespace,
    then one Secret per role with exactly ca.pem and that role's certificates and keys, never
    ca.key, in that namespace, valid Kubernetes objects (deploy/validate/k8s.mjs); the CA is reused on a second run
    and replaced with --new-ca; failures are named.
Prints one line per case and "N passed, M failed"; exit 1 if any failed.
  k8s_scripts_test.py [--server PATH] [--sketchps PATH]
"""
from __future__ import annotations

import argparse
import base64
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "deploy/k8s/base/launch"
MAKE_CERTS = REPO / "deploy/k8s/make-certs.py"
EXAMPLE = REPO / "deploy/k8s/overlays/example"
FAKE_SKETCHPS = Path(__file__).resolve().parent / "fake_build/tools/sketchps"

STUB_WORKER = '#!/bin/sh\nprintf "%s\\n" "SERVERS=$SKETCHPS_SERVERS" "$@"\n'
STUB_SERVER = """#!/bin/sh
echo started > "$STUB_DIR/started"
case "$STUB_MODE" in
  exit0) exit 0 ;;
  exit2) exit 2 ;;
esac
trap 'echo TERM > "$STUB_DIR/got-term"; sleep 0.3; exit "${STUB_TERM_RC:-0}"' TERM
while :; do sleep 0.05; done
"""


class Failed(Exception):
    pass


def expect(cond: bool, what: str):
    if not cond:
        raise Failed(what)


def stubs(tmp: Path) -> Path:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    for name, text in (("sketchps-worker", STUB_WORKER), ("sketchps-server", STUB_SERVER)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    return bindir


def worker_sh(env: dict, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        bindir = stubs(Path(tmp))
        return subprocess.run(["/bin/sh", str(LAUNCH / "worker.sh"), *args], capture_output=True, text=True,
                              env={"PATH": f"{bindir}:/usr/bin:/bin", **env}, timeout=10)


def test_worker_list():
    p = worker_sh({"SKETCHPS_SERVER_COUNT": "3"}, "--job=/j.yaml", "--set=workers=4")
    expect(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    lines = p.stdout.splitlines()
    want = ",".join(f"sketchps-server-{s}.sketchps-server:7070" for s in range(3))
    expect(lines == [f"SERVERS={want}", "--job=/j.yaml", "--set=workers=4"], f"got {lines}")
    p = worker_sh({"SKETCHPS_SERVER_COUNT": "1", "SKETCHPS_SERVER_JOB": "ps", "SKETCHPS_SERVER_PORT": "9"})
    expect(p.stdout.splitlines() == ["SERVERS=ps-0.ps:9"], f"got {p.stdout!r}")


def test_worker_refuses():
    p = worker_sh({})
    expect(p.returncode != 0 and "SKETCHPS_SERVER_COUNT" in p.stderr, f"unset: exit {p.returncode} {p.stderr!r}")
    p = worker_sh({"SKETCHPS_SERVER_COUNT": "two"})
    expect(p.returncode == 2 and "is not a number" in p.stderr, f"'two': exit {p.returncode} {p.stderr!r}")


def server_sh(tmp: Path, env: dict, term_after: float | None, server: str | None = None, args=()) -> tuple[int, str]:
    bindir = stubs(tmp)
    path = f"{Path(server).parent}:/usr/bin:/bin" if server else f"{bindir}:/usr/bin:/bin"
    proc = subprocess.Popen(["/bin/sh", str(LAUNCH / "server.sh"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={"PATH": path, "STUB_DIR": str(tmp), **env},
                            start_new_session=True)
    try:
        if term_after is not None:
            time.sleep(term_after)
            proc.send_signal(signal.SIGTERM)   # the kubelet signals the container's main process
        out, _ = proc.communicate(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out


def test_server_exit_codes():
    for mode, want in (("exit0", 0), ("exit2", 2)):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = server_sh(Path(tmp), {"STUB_MODE": mode}, None)
            expect(rc == want, f"{mode}: exit {rc}, expected {want}: {out}")


def test_server_drained_by_sigterm():
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = server_sh(Path(tmp), {}, 0.5)
        expect((Path(tmp) / "got-term").exists(), "the shard did not get SIGTERM")
        expect(rc == 143 and "exiting 143" in out, f"exit {rc}, expected 143: {out}")
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = server_sh(Path(tmp), {"STUB_TERM_RC": "1"}, 0.5)
        expect(rc == 1, f"a shard failing after SIGTERM: exit {rc}, expected 1: {out}")


def test_server_real(server: str):
    with tempfile.TemporaryDirectory() as tmp:
        port = Path(tmp) / "port"
        argv = ["--insecure", "--shard=0", "--listen=127.0.0.1:0", f"--port-file={port}", "--set=model=mlp"]
        bindir = stubs(Path(tmp))
        proc = subprocess.Popen(["/bin/sh", str(LAUNCH / "server.sh"), *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                env={"PATH": f"{Path(server).parent}:{bindir}:/usr/bin:/bin"})
        try:
            deadline = time.monotonic() + 30
            while not port.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            expect(port.exists(), f"the real shard did not start (exit {proc.poll()})")
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        expect("SIGTERM: stopping" in out, f"the real shard did not drain: {out}")
        expect(proc.returncode == 143, f"exit {proc.returncode}, expected 143: {out}")


def kubectl() -> str:
    return subprocess.run(["bash", str(REPO / "deploy/validate/kubectl.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()


def make_certs(certs: Path, sketchps: Path, *extra: str, overlay: Path = EXAMPLE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MAKE_CERTS), str(overlay), str(certs), "--sketchps", str(sketchps),
                           "--kubectl", kubectl(), *extra], capture_output=True, text=True, timeout=120)


def test_make_certs(sketchps: Path):
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp) / "certs"
        p = make_certs(certs, sketchps)
        expect(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        docs = list(yaml.safe_load_all(p.stdout))
        expect([d["kind"] for d in docs] == ["Namespace", "Secret", "Secret"], f"kinds {[d['kind'] for d in docs]}")
        docs = docs[1:]
        want = {"sketchps-server-certs": ["ca.pem"] + [f"server-{s}.{e}" for s in range(3) for e in ("pem", "key")],
                "sketchps-worker-certs": ["ca.pem"] + [f"worker-{r}.{e}" for r in range(4) for e in ("pem", "key")]}
        got = {d["metadata"]["name"]: sorted(d["data"]) for d in docs}
        expect(got == {k: sorted(v) for k, v in want.items()}, f"Secrets {got}")
        for d in docs:
            expect(d["kind"] == "Secret" and d["metadata"]["namespace"] == "sketchps", f"{d['metadata']}")
            for key, value in d["data"].items():
                expect(base64.b64decode(value) == (certs / key).read_bytes(), f"{key} differs from the file")
                expect(base64.b64decode(value).startswith(b"-----BEGIN"), f"{key} is not PEM")
        expect((certs / "ca.key").exists() and "ca.key" not in p.stdout, "ca.key must stay in the folder, out of the Secrets")
        secrets_file = Path(tmp) / "secrets.yaml"
        secrets_file.write_text(p.stdout)
        v = subprocess.run(["node", str(REPO / "deploy/validate/k8s.mjs"), str(secrets_file)], capture_output=True, text=True)
        expect(v.returncode == 0, f"k8s.mjs rejects the Secrets: {v.stdout}{v.stderr}")
        ca = (certs / "ca.pem").read_bytes()
        p = make_certs(certs, sketchps)
        expect(p.returncode == 0 and (certs / "ca.pem").read_bytes() == ca, "a second run must keep the CA")
        p = make_certs(certs, sketchps, "--new-ca")
        expect(p.returncode == 0 and (certs / "ca.pem").read_bytes() != ca, "--new-ca must replace the CA")


def test_make_certs_failures():
    with tempfile.TemporaryDirectory() as tmp:
        p = make_certs(Path(tmp) / "c", Path(tmp) / "no-sketchps")
        expect(p.returncode == 1 and "make-certs:" in p.stderr, f"missing sketchps: exit {p.returncode} {p.stderr!r}")
        p = make_certs(Path(tmp) / "c", FAKE_SKETCHPS, overlay=Path(tmp))
        expect(p.returncode == 1 and "kubectl kustomize" in p.stderr, f"bad overlay: exit {p.returncode} {p.stderr!r}")
        env_fail = subprocess.run([sys.executable, str(MAKE_CERTS), str(EXAMPLE), str(Path(tmp) / "c"), "--sketchps",
                                   str(FAKE_SKETCHPS), "--kubectl", kubectl()], capture_output=True, text=True,
                                  env={**os.environ, "FAKE_CERTS_FAIL": "1"})
        expect(env_fail.returncode == 1 and "exited 1" in env_fail.stderr, f"failing certs: {env_fail.stderr!r}")
        expect(env_fail.stdout == "", "no Secret may be printed when the certificates were not made")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", help="also run launch/server.sh with this sketchps-server")
    ap.add_argument("--sketchps", help="also run make-certs.py with this sketchps")
    args = ap.parse_args()
    # The validators (deploy/node_modules) are installed by deploy/validate.sh.
    if not (REPO / "deploy/node_modules/kubernetes-models").is_dir():
        subprocess.run(["bash", str(REPO / "deploy/validate.sh")], check=False, stdout=subprocess.DEVNULL)
    cases = [("worker.sh: server list and arguments", test_worker_list),
             ("worker.sh: refuses a missing or bad S", test_worker_refuses),
             ("server.sh: exit codes pass through", test_server_exit_codes),
             ("server.sh: a shard drained by SIGTERM exits 143", test_server_drained_by_sigterm),
             ("make-certs.py with the stand-in sketchps", lambda: test_make_certs(FAKE_SKETCHPS)),
             ("make-certs.py failures are named", test_make_certs_failures)]
    if args.server:
        cases.append(("server.sh with the real sketchps-server", lambda: test_server_real(args.server)))
    if args.sketchps:
        cases.append(("make-certs.py with the real sketchps", lambda: test_make_certs(Path(args.sketchps))))
    passed = failed = 0
    for name, fn in cases:
        try:
            fn()
            print(f"ok   {name}", flush=True)
            passed += 1
        except (Failed, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
