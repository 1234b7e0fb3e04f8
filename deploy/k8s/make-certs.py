#!/usr/bin/env python3
"""Makes the certificates and the checkpoint key of a Kubernetes deployment of sketchps and prints
the Secrets that hold them, for `kubectl apply -f -`. The manifests mount these Secrets but never
define them, so `kubectl apply -k` cannot overwrite them:

  deploy/k8s/make-certs.py deploy/k8s/overlays/cpu ~/sketchps-certs | kubectl apply -f -
  kubectl apply -k deploy/k8s/overlays/cpu

What it does:
  1. renders OVERLAY (`kubectl kustomize`; --rendered FILE uses an earlier rendering) and reads S
     and P (the shard and worker Jobs' completions, i.e. the overlay's `sketchps-scale`), the
     namespace, the Secret each role mounts at its TLS folder (SKETCHPS_TLS_DIR), and the Secret
     (and its key) each role mounts as its --checkpoint-key-file (SKETCHPS_CHECKPOINT_KEY_FILE);
  2. runs `sketchps certs --out CERTS_DIR --workers P --servers S [--days N] [--new-ca]`: the CA in
     CERTS_DIR is reused if there is one (new leaf certificates, same CA: safe while a job runs),
     --new-ca replaces it (only between jobs: old and new certificates do not trust each other);
  3. makes the job's checkpoint key CERTS_DIR/checkpoint.key (32 random bytes, mode 0600) if it is
     not there yet, and otherwise reuses it: the checkpoints (with components/durable-checkpoints,
     on a claim that outlives the Jobs) are tagged with it, and a new key would make them
     unreadable. Delete the file to start over with a new key, between jobs only;
  4. prints the overlay's Namespace (so that the Secrets can be applied first) and one Secret per
     role: the shards' (ca.pem and every server-<s>.pem/.key) and the workers' (ca.pem and every
     worker-<r>.pem/.key), so that a pod holds no key of the other role; then the checkpoint key's
     Secret (the base's sketchps-checkpoint-key, with checkpoint.key, mounted by both roles), when
     the overlay's daemons get a --checkpoint-key-file. ca.key never leaves CERTS_DIR: keep that
     folder off the cluster.
Exit 0 when the Secrets were printed, 1 when a step failed (the message names it), 2 on bad usage.
Needs python3 with PyYAML, kubectl with kustomize v5 (or --rendered) and the `sketchps` binary.
"""
from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml


KEY_FILE = "checkpoint.key"    # the job's checkpoint key in CERTS_DIR, made once and reused
KEY_BYTES = 32                 # what the daemons need at least (common/wire/file_key.h)


class Failure(Exception):
    pass


def render(args) -> list[dict]:
    if args.rendered:
        text = Path(args.rendered).read_text()
    else:
        kubectl = args.kubectl or shutil.which("kubectl")
        if not kubectl:
            raise Failure("no kubectl on PATH (give --kubectl, or --rendered FILE from `kubectl kustomize OVERLAY`)")
        proc = subprocess.run([kubectl, "kustomize", args.overlay], capture_output=True, text=True)
        if proc.returncode != 0:
            raise Failure(f"`kubectl kustomize {args.overlay}` failed: {proc.stderr.strip()}")
        text = proc.stdout
    return [o for o in yaml.safe_load_all(text) if o]


def role_of(job: dict) -> str | None:
    labels = (job["spec"]["template"].get("metadata") or {}).get("labels") or {}
    return {"server": "server", "worker": "worker"}.get(labels.get("app.kubernetes.io/component"))


def certs_secret(job: dict) -> str:
    """The Secret mounted at the TLS folder of the job's daemon container."""
    pod = job["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for c in pod.get("containers") or []:
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        tls_dir = env.get("SKETCHPS_TLS_DIR")
        for a in c.get("args") or []:
            if a.startswith("--tls-dir="):
                tls_dir = a.split("=", 1)[1]
        for m in c.get("volumeMounts") or []:
            if tls_dir and m.get("mountPath", "").rstrip("/") == tls_dir.rstrip("/"):
                secret = volumes.get(m.get("name"), {}).get("secret")
                if secret:
                    return secret["secretName"]
    raise Failure(f"Job {job['metadata']['name']}: no Secret volume mounted at its TLS folder (SKETCHPS_TLS_DIR)")


def key_secret(job: dict) -> tuple[str, str] | None:
    """(Secret, key in it) mounted as the --checkpoint-key-file of the job's daemon container; None
    when the daemon gets no checkpoint key."""
    pod = job["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for c in pod.get("containers") or []:
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        path = env.get("SKETCHPS_CHECKPOINT_KEY_FILE")
        args = c.get("args") or []
        for i, a in enumerate(args):
            if a.startswith("--checkpoint-key-file="):
                path = a.split("=", 1)[1]
            elif a == "--checkpoint-key-file" and i + 1 < len(args):
                path = args[i + 1]
        if not path:
            continue
        folder, _, name = path.rstrip("/").rpartition("/")
        for m in c.get("volumeMounts") or []:
            if m.get("mountPath", "").rstrip("/") != folder.rstrip("/"):
                continue
            secret = volumes.get(m.get("name"), {}).get("secret")
            if not secret:
                break
            items = secret.get("items")
            key = name if items is None else next((i.get("key") for i in items if i.get("path") == name), None)
            if key is None:
                raise Failure(f"Job {job['metadata']['name']}: the items of Secret {secret['secretName']} do not "
                              f"include its checkpoint key file {name}")
            return secret["secretName"], key
        raise Failure(f"Job {job['metadata']['name']}: its checkpoint key file {path} is not in a Secret volume")
    return None


def plan(objects: list[dict]) -> tuple[str, dict[str, int], dict[str, str], dict[str, tuple[str, str] | None]]:
    """(namespace, {role: count}, {role: certificates' secret name}, {role: (key's secret, key) or None})."""
    jobs = {}
    for o in objects:
        if o.get("kind") == "Job" and role_of(o):
            if role_of(o) in jobs:
                raise Failure(f"more than one {role_of(o)} Job in the rendering")
            jobs[role_of(o)] = o
    for role in ("server", "worker"):
        if role not in jobs:
            raise Failure(f"no {role} Job (pods labelled app.kubernetes.io/component: {role}) in the rendering")
    counts = {role: int(j["spec"]["completions"]) for role, j in jobs.items()}
    namespaces = {j["metadata"].get("namespace", "default") for j in jobs.values()}
    if len(namespaces) != 1:
        raise Failure(f"the Jobs are in different namespaces {sorted(namespaces)}")
    return (namespaces.pop(), counts, {role: certs_secret(j) for role, j in jobs.items()},
            {role: key_secret(j) for role, j in jobs.items()})


def make(args, counts: dict[str, int]) -> None:
    sketchps = args.sketchps or shutil.which("sketchps")
    if not sketchps:
        raise Failure("no `sketchps` on PATH (give --sketchps PATH, e.g. build/ci/tools/sketchps)")
    argv = [sketchps, "certs", "--out", args.certs_dir, "--workers", str(counts["worker"]),
            "--servers", str(counts["server"])]
    if args.days:
        argv += ["--days", str(args.days)]
    if args.new_ca:
        argv.append("--new-ca")
    proc = subprocess.run(argv, capture_output=True, text=True)
    sys.stderr.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise Failure(f"`{' '.join(argv)}` exited {proc.returncode}")


def make_key(certs_dir: Path) -> bool:
    """Makes CERTS_DIR/checkpoint.key (32 random bytes, mode 0600) unless it exists; True if made."""
    path = certs_dir / KEY_FILE
    if path.exists():
        if not path.is_file() or path.stat().st_size < KEY_BYTES:
            raise Failure(f"{path}: not a key of at least {KEY_BYTES} bytes (delete it to make a new one, between "
                          "jobs only: checkpoints tagged with the old key are then refused)")
        return False
    certs_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(KEY_BYTES))
    return True


def secrets(namespace: str, counts: dict[str, int], names: dict[str, str],
            keys: dict[str, tuple[str, str] | None], certs_dir: Path) -> list[dict]:
    files: dict[str, dict[str, Path]] = {}   # Secret -> {its key: the file in CERTS_DIR}
    for role in ("server", "worker"):
        wanted = files.setdefault(names[role], {"ca.pem": certs_dir / "ca.pem"})
        for i in range(counts[role]):
            for name in (f"{role}-{i}.pem", f"{role}-{i}.key"):
                wanted[name] = certs_dir / name
    for role in ("server", "worker"):
        if keys[role]:
            secret, key = keys[role]
            files.setdefault(secret, {})[key] = certs_dir / KEY_FILE
    out = []
    for name, wanted in files.items():
        data = {}
        for key, path in wanted.items():
            if not path.is_file():
                raise Failure(f"{path} is missing (made by `sketchps certs`?)")
            data[key] = base64.b64encode(path.read_bytes()).decode()
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/name": "sketchps", "app.kubernetes.io/part-of": "sketchps"}},
                    "data": data})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("overlay", help="kustomize overlay, e.g. deploy/k8s/overlays/cpu")
    ap.add_argument("certs_dir", help="folder for the CA and the certificates (reused: keep it, off the cluster)")
    ap.add_argument("--sketchps", help="the sketchps binary (default: sketchps on PATH)")
    ap.add_argument("--kubectl", help="kubectl with kustomize v5 (default: kubectl on PATH)")
    ap.add_argument("--rendered", metavar="FILE", help="use this `kubectl kustomize OVERLAY` output instead of rendering")
    ap.add_argument("--days", type=int, help="validity of the certificates in days (sketchps certs' default: 365)")
    ap.add_argument("--new-ca", action="store_true", help="replace the CA in CERTS_DIR (rotation between jobs)")
    args = ap.parse_args(argv)
    try:
        objects = render(args)
        namespace, counts, names, keys = plan(objects)
        make(args, counts)
        key_made = make_key(Path(args.certs_dir)) if any(keys.values()) else None
        docs = [o for o in objects if o.get("kind") == "Namespace" and o["metadata"]["name"] == namespace]
        docs += secrets(namespace, counts, names, keys, Path(args.certs_dir))
    except (Failure, OSError, ValueError, KeyError, yaml.YAMLError) as e:
        print(f"make-certs: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    key_note = "" if key_made is None else \
        f"; the checkpoint key {Path(args.certs_dir) / KEY_FILE} was {'made' if key_made else 'reused'} (keep it)"
    print(f"make-certs: {', '.join(d['metadata']['name'] for d in docs if d['kind'] == 'Secret')} in namespace {namespace} for "
          f"{counts['server']} shard(s) and {counts['worker']} worker(s); the CA key stays in {args.certs_dir}{key_note}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
