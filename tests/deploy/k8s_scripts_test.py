"""Tests of what the Kubernetes manifests run besides the manifests themselves (no cluster needed):

  - with --server PATH, the real sketchps-server as the shard containers run it (the image's
    entrypoint, no wrapper): a SIGTERM makes it drain and exit 143, also as PID 1 of its own PID
    namespace with the signal coming from outside (as the container runtime sends it); no call for
    --idle-exit-seconds makes it exit 4 and bad usage 2;
  - exactly 2 and 4 are the codes on which the shard Job's podFailurePolicy
    (deploy/k8s/base/servers.yaml) fails the Job, 143 not;
  - deploy/k8s/make-certs.py on the example overlay (S = 3, P = 4), with the stand-in `sketchps`
    of tests/deploy/fake_build and, with --sketchps PATH, the real one: the overlay's Namespace,
    then one Secret per role with exactly ca.pem and that role's certificates and keys, never
    ca.key, and the checkpoint key's Secret (the one the rendered shard and worker Jobs mount as
    their --checkpoint-key-file) holding CERTS_DIR/checkpoint.key, 32 bytes of mode 0600, in that
    namespace, valid Kubernetes objects (deploy/validate/k8s.mjs); the CA is reused on a second run
    and replaced with --new-ca, the checkpoint key is kept by both; an overlay whose daemons get no
    key gets no key Secret; failures are named.
Prints one line per case and "N passed, M failed"; exit 1 if any failed.
  k8s_scripts_test.py [--server PATH] [--sketchps PATH]
pytest collects the cases that need no binary (test_*); the check_* ones take a binary's path and
run from main() only (CTest deploy/k8s_scripts passes the built ones).
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
SERVERS_YAML = REPO / "deploy/k8s/base/servers.yaml"
MAKE_CERTS = REPO / "deploy/k8s/make-certs.py"
EXAMPLE = REPO / "deploy/k8s/overlays/example"
FAKE_SKETCHPS = Path(__file__).resolve().parent / "fake_build/tools/sketchps"


class Failed(Exception):
    pass


def expect(cond: bool, what: str):
    if not cond:
        raise Failed(what)


def shard_argv(server: str, tmp: Path, *extra: str) -> list[str]:
    return [server, "--insecure", "--shard=0", "--listen=127.0.0.1:0", f"--port-file={tmp / 'port'}",
            f"--checkpoint-dir={tmp}", "--set=model=mlp", *extra]


def stop(proc: subprocess.Popen):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def wait_for_port(proc: subprocess.Popen, tmp: Path):
    deadline = time.monotonic() + 30
    while not (tmp / "port").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    expect((tmp / "port").exists(), f"the real shard did not start (exit {proc.poll()})")


def check_server_sigterm(server: str):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        proc = subprocess.Popen(shard_argv(server, tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=tmp)
        try:
            wait_for_port(proc, tmp)
            proc.send_signal(signal.SIGTERM)   # the kubelet signals the container's main process
            out, _ = proc.communicate(timeout=30)
        finally:
            stop(proc)
        expect("SIGTERM: stopping" in out, f"the real shard did not drain: {out}")
        expect(proc.returncode == 143, f"exit {proc.returncode}, expected 143: {out}")


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def check_server_sigterm_as_pid1(server: str):
    """PID 1 of a namespace gets no signal it has no handler for, unless the signal is blocked and
    waited for, as the shard does: the case a wrapper script used to be needed for."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ns = ["unshare", "--pid", "--fork", "--kill-child"] + ([] if os.geteuid() == 0 else ["--user", "--map-root-user"])
        proc = subprocess.Popen(ns + shard_argv(server, tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=tmp)
        try:
            wait_for_port(proc, tmp)
            kids = children(proc.pid)
            expect(len(kids) == 1, f"unshare has children {kids}, expected the shard only")
            status = Path(f"/proc/{kids[0]}/status").read_text()
            nspid = next((line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")), None)
            expect(nspid == "1", f"the shard is not PID 1 of its namespace (NSpid {nspid})")
            os.kill(kids[0], signal.SIGTERM)   # from outside the namespace, as the container runtime
            out, _ = proc.communicate(timeout=30)
        finally:
            stop(proc)
        expect("SIGTERM: stopping" in out, f"the shard as PID 1 did not drain on SIGTERM: {out}")
        expect(proc.returncode == 143, f"the shard as PID 1: exit {proc.returncode}, expected 143: {out}")


def failjob_codes() -> set[int]:
    job = next(d for d in yaml.safe_load_all(SERVERS_YAML.read_text()) if d and d.get("kind") == "Job")
    codes = set()
    for rule in job["spec"]["podFailurePolicy"]["rules"]:
        if rule.get("action") == "FailJob" and (rule.get("onExitCodes") or {}).get("operator") == "In":
            codes |= set(rule["onExitCodes"]["values"])
    return codes


def check_server_permanent_codes(server: str):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.monotonic()
        idle = subprocess.run(shard_argv(server, tmp, "--idle-exit-seconds=1"), capture_output=True, text=True,
                              timeout=60, cwd=tmp)
        took = time.monotonic() - t0
        out = idle.stdout + idle.stderr
        expect(idle.returncode == 4 and "--idle-exit-seconds" in out, f"idle shard: exit {idle.returncode}: {out}")
        expect(took >= 1, f"the idle shard exited after {took:.2f} s, before --idle-exit-seconds=1")
        bad = subprocess.run(shard_argv(server, tmp, "--set=model=nope"), capture_output=True, text=True, timeout=60,
                             cwd=tmp)
        expect(bad.returncode == 2, f"bad job spec: exit {bad.returncode}: {bad.stdout}{bad.stderr}")
    test_failjob_codes()


def test_failjob_codes():
    codes = failjob_codes()
    expect(codes == {2, 4}, f"{SERVERS_YAML.relative_to(REPO)}: FailJob on {sorted(codes)}, the shard's permanent "
           "exit codes are 2 (bad configuration) and 4 (idle)")
    expect(143 not in codes and 0 not in codes, "a drained shard (143) must be replaced, not fail the Job")


def kubectl() -> str:
    return subprocess.run(["bash", str(REPO / "deploy/validate/kubectl.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()


def make_certs(certs: Path, sketchps: Path, *extra: str, overlay: Path = EXAMPLE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MAKE_CERTS), str(overlay), str(certs), "--sketchps", str(sketchps),
                           "--kubectl", kubectl(), *extra], capture_output=True, text=True, timeout=120)


def rendered(overlay: Path = EXAMPLE) -> list[dict]:
    proc = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def mounted_key(job: dict) -> tuple[str, str]:
    """(Secret, file) of the job's --checkpoint-key-file, read from the rendered Job as a pod sees it."""
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    path = next((a.split("=", 1)[1] for a in c.get("args") or [] if a.startswith("--checkpoint-key-file=")), None)
    expect(path is not None, f"Job {job['metadata']['name']} passes no --checkpoint-key-file")
    folder, name = path.rsplit("/", 1)
    mount = next((m for m in c.get("volumeMounts") or [] if m["mountPath"].rstrip("/") == folder), None)
    expect(mount is not None and mount.get("readOnly") is True,
           f"Job {job['metadata']['name']}: {folder} (its checkpoint key's folder) is not a read-only mount")
    volume = next((v for v in pod.get("volumes") or [] if v["name"] == mount["name"]), {})
    expect("secret" in volume, f"Job {job['metadata']['name']}: the volume at {folder} is not a Secret")
    return volume["secret"]["secretName"], name


def check_make_certs(sketchps: Path):
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp) / "certs"
        p = make_certs(certs, sketchps)
        expect(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        docs = list(yaml.safe_load_all(p.stdout))
        expect([d["kind"] for d in docs] == ["Namespace", "Secret", "Secret", "Secret"], f"kinds {[d['kind'] for d in docs]}")
        docs = docs[1:]
        # The key's Secret is the one the rendered Jobs mount (both roles: one key per job).
        jobs = {d["metadata"]["name"]: d for d in rendered() if d["kind"] == "Job"}
        key_mounts = {mounted_key(jobs["sketchps-server"]), mounted_key(jobs["sketchps-worker"])}
        expect(len(key_mounts) == 1, f"the shards and the workers mount different checkpoint keys: {key_mounts}")
        key_secret, key_name = key_mounts.pop()
        want = {"sketchps-server-certs": ["ca.pem"] + [f"server-{s}.{e}" for s in range(3) for e in ("pem", "key")],
                "sketchps-worker-certs": ["ca.pem"] + [f"worker-{r}.{e}" for r in range(4) for e in ("pem", "key")],
                key_secret: [key_name]}
        got = {d["metadata"]["name"]: sorted(d["data"]) for d in docs}
        expect(got == {k: sorted(v) for k, v in want.items()}, f"Secrets {got}, expected {want}")
        key_file = certs / "checkpoint.key"
        expect(key_file.is_file() and len(key_file.read_bytes()) == 32, "CERTS_DIR/checkpoint.key is not 32 bytes")
        expect(key_file.stat().st_mode & 0o777 == 0o600, f"checkpoint.key has mode {key_file.stat().st_mode & 0o777:o}")
        for d in docs:
            expect(d["kind"] == "Secret" and d["metadata"]["namespace"] == "sketchps", f"{d['metadata']}")
            for key, value in d["data"].items():
                if d["metadata"]["name"] == key_secret:
                    expect(base64.b64decode(value) == key_file.read_bytes(), f"{key} differs from {key_file}")
                    continue
                expect(base64.b64decode(value) == (certs / key).read_bytes(), f"{key} differs from the file")
                expect(base64.b64decode(value).startswith(b"-----BEGIN"), f"{key} is not PEM")
        expect((certs / "ca.key").exists() and "ca.key" not in p.stdout, "ca.key must stay in the folder, out of the Secrets")
        secrets_file = Path(tmp) / "secrets.yaml"
        secrets_file.write_text(p.stdout)
        v = subprocess.run(["node", str(REPO / "deploy/validate/k8s.mjs"), str(secrets_file)], capture_output=True, text=True)
        expect(v.returncode == 0, f"k8s.mjs rejects the Secrets: {v.stdout}{v.stderr}")
        ca, key = (certs / "ca.pem").read_bytes(), key_file.read_bytes()
        p = make_certs(certs, sketchps)
        expect(p.returncode == 0 and (certs / "ca.pem").read_bytes() == ca, "a second run must keep the CA")
        expect(key_file.read_bytes() == key and "was reused" in p.stderr, "a second run must keep the checkpoint key")
        p = make_certs(certs, sketchps, "--new-ca")
        expect(p.returncode == 0 and (certs / "ca.pem").read_bytes() != ca, "--new-ca must replace the CA")
        expect(key_file.read_bytes() == key, "--new-ca must keep the checkpoint key (the checkpoints are tagged with it)")
        key_file.write_bytes(b"short")
        p = make_certs(certs, sketchps)
        expect(p.returncode == 1 and "checkpoint.key: not a key of at least 32 bytes" in p.stderr and p.stdout == "",
               f"a short checkpoint key: exit {p.returncode} {p.stderr!r}")


def test_make_certs_stand_in():
    check_make_certs(FAKE_SKETCHPS)


def test_make_certs_without_key():
    """An overlay whose daemons get no --checkpoint-key-file (here: a rendering with the flag taken
    out) gets no key Secret and no key file."""
    objects = rendered()
    for d in objects:
        if d["kind"] == "Job":
            c = d["spec"]["template"]["spec"]["containers"][0]
            c["args"] = [a for a in c["args"] if not a.startswith("--checkpoint-key-file")]
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "rendered.yaml"
        plain.write_text(yaml.safe_dump_all(objects))
        p = make_certs(Path(tmp) / "c", FAKE_SKETCHPS, "--rendered", str(plain))
        expect(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        names = [d["metadata"]["name"] for d in yaml.safe_load_all(p.stdout) if d["kind"] == "Secret"]
        expect(names == ["sketchps-server-certs", "sketchps-worker-certs"], f"Secrets {names}")
        expect(not (Path(tmp) / "c/checkpoint.key").exists(), "a checkpoint key was made for daemons that take none")


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
    ap.add_argument("--server", help="also run this sketchps-server as the shard containers do")
    ap.add_argument("--sketchps", help="also run make-certs.py with this sketchps")
    args = ap.parse_args()
    # The validators (deploy/node_modules) are installed by deploy/validate.sh.
    if not (REPO / "deploy/node_modules/kubernetes-models").is_dir():
        subprocess.run(["bash", str(REPO / "deploy/validate.sh")], check=False, stdout=subprocess.DEVNULL)
    cases = [("servers.yaml: FailJob on exit 2 and 4 only (143 is replaced)", test_failjob_codes),
             ("make-certs.py with the stand-in sketchps", lambda: check_make_certs(FAKE_SKETCHPS)),
             ("make-certs.py: no checkpoint key Secret for daemons without a key", test_make_certs_without_key),
             ("make-certs.py failures are named", test_make_certs_failures)]
    if args.server:
        cases += [("sketchps-server drained by SIGTERM exits 143", lambda: check_server_sigterm(args.server)),
                  ("sketchps-server as PID 1 of its namespace: SIGTERM, drain, 143",
                   lambda: check_server_sigterm_as_pid1(args.server)),
                  ("sketchps-server exits 4 idle, 2 on bad usage: the shard Job's FailJob codes",
                   lambda: check_server_permanent_codes(args.server))]
    if args.sketchps:
        cases.append(("make-certs.py with the real sketchps", lambda: check_make_certs(Path(args.sketchps))))
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
