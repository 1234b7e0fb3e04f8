"""What a container of a rendered Kubernetes workload would run, worked out the way the kubelet
does, so that deploy/validate/policy.py checks the daemons' effective flags and environment rather
than the manifests' text. No cluster, no image: the container's command runs on this machine with
stand-ins for the daemons.

  - environment(): the container's env in order (value with $(VAR) expansion, fieldRef to the
    completion-index annotation / metadata.name / metadata.namespace, configMapKeyRef and envFrom
    configMapRef from the rendered ConfigMaps), plus JOB_COMPLETION_INDEX for an Indexed Job, as
    the Job controller adds it;
  - invocation(): command + args with $(VAR) expanded ($$ escapes), or the image's entrypoint
    (sketchps-server / sketchps-worker, from the image name) when there is no command;
  - run(): runs that invocation with /bin/sh and friends from this machine, the ConfigMap volumes
    written to a temporary folder (their mount paths rewritten in the arguments), and stand-ins for
    sketchps-server and sketchps-worker on PATH that record the argv and environment they get; with
    stop_after set, the stand-in then waits, the container's main process gets SIGTERM (as the
    kubelet sends it) and the stand-in drains and exits 143 (128 + SIGTERM) like the real shard.
    Returns what the daemon got and the container's exit code.
Secrets are not read (they are not in the manifests); a secretKeyRef resolves to "<secret>".
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
DAEMONS = ("sketchps-server", "sketchps-worker")
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

STUB = r'''#!/usr/bin/env python3
import json, os, signal, sys, time
out = os.environ["PODSIM_RECORD"]
rec = {"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:], "env": {k: v for k, v in os.environ.items() if not k.startswith("PODSIM_")}}
open(out + ".tmp", "w").write(json.dumps(rec)); os.rename(out + ".tmp", out)
if os.environ.get("PODSIM_WAIT"):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # drain, then exit 128 + SIGTERM like the real shard
    time.sleep(30)
    sys.exit(1)
'''


class SimError(Exception):
    pass


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined variables are replaced, $$ becomes $, anything else stays."""
    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR.sub(repl, str(text))


def configmaps(objects: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: (o.get("data") or {}) for o in objects if o.get("kind") == "ConfigMap"}


def indexed(workload: dict) -> bool:
    return workload.get("kind") == "Job" and workload["spec"].get("completionMode") == "Indexed"


def environment(workload: dict, container: dict, index: int, cms: dict[str, dict]) -> dict[str, str]:
    env: dict[str, str] = {}
    meta = workload["spec"]["template"].get("metadata") or {}
    name = f"{workload['metadata']['name']}-{index}-abcde"
    for ef in container.get("envFrom") or []:
        ref = ef.get("configMapRef")
        if ref:
            for k, v in cms.get(ref.get("name"), {}).items():
                env[ef.get("prefix", "") + k] = str(v)
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
            continue
        source = e.get("valueFrom") or {}
        if "fieldRef" in source:
            path = source["fieldRef"].get("fieldPath", "")
            if path == COMPLETION_INDEX and indexed(workload):
                env[e["name"]] = str(index)
            elif path == "metadata.name":
                env[e["name"]] = name
            elif path == "metadata.namespace":
                env[e["name"]] = workload["metadata"].get("namespace", "default")
            elif path.startswith("metadata.labels['"):
                env[e["name"]] = (meta.get("labels") or {}).get(path[len("metadata.labels['"):-2], "")
            else:
                env[e["name"]] = ""
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[e["name"]] = str(cms.get(ref.get("name"), {}).get(ref.get("key"), ""))
        elif "secretKeyRef" in source:
            env[e["name"]] = "<secret>"
        else:
            env[e["name"]] = ""
    if indexed(workload):
        env.setdefault("JOB_COMPLETION_INDEX", str(index))
    return env


def daemon_of(container: dict) -> str | None:
    image = str(container.get("image", "")).rsplit("/", 1)[-1].split(":")[0].split("@")[0]
    return image if image in DAEMONS else None


def invocation(container: dict, env: dict[str, str]) -> list[str]:
    command = container.get("command")
    if command:
        argv = list(command)
    else:
        entry = daemon_of(container)
        if entry is None:
            raise SimError(f"container {container.get('name')}: no command and image {container.get('image')!r} "
                           "is not a sketchps daemon image (its entrypoint is unknown here)")
        argv = [entry]
    return [expand(a, env) for a in argv + list(container.get("args") or [])]


@dataclass
class Result:
    argv: list[str]          # what the daemon got (argv[0] its name)
    env: dict[str, str]      # its environment
    exit_code: int | None    # the container's exit code (None: not waited for)


def run(workload: dict, container: dict, index: int, objects: list[dict], stop_after: bool = False,
        timeout: float = 10.0) -> Result:
    cms = configmaps(objects)
    env = environment(workload, container, index, cms)
    argv = invocation(container, env)
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes") or []}
    with tempfile.TemporaryDirectory(prefix="sketchps-podsim-") as tmp:
        root, stubs = Path(tmp) / "root", Path(tmp) / "bin"
        stubs.mkdir()
        for d in DAEMONS:
            (stubs / d).write_text(STUB.replace("/usr/bin/env python3", sys.executable, 1))
            (stubs / d).chmod(0o755)
        mapping = []
        for m in container.get("volumeMounts") or []:
            v = volumes.get(m.get("name")) or {}
            host = root / m["mountPath"].strip("/")
            host.mkdir(parents=True, exist_ok=True)
            if "configMap" in v:
                for key, text in cms.get(v["configMap"].get("name"), {}).items():
                    (host / key).write_text(str(text))
            mapping.append((m["mountPath"].rstrip("/"), str(host)))
        mapping.sort(key=lambda kv: -len(kv[0]))

        def rewrite(a: str) -> str:
            for target, host in mapping:
                if a == target or a.startswith(target + "/"):
                    return host + a[len(target):]
            return a

        record = Path(tmp) / "record.json"
        run_env = {**env, "PATH": f"{stubs}:/usr/bin:/bin", "PODSIM_RECORD": str(record)}
        if stop_after:
            run_env["PODSIM_WAIT"] = "1"
        argv_host = [rewrite(a) for a in argv]
        if argv_host and not os.path.isabs(argv_host[0]) and argv_host[0] in DAEMONS:
            argv_host[0] = str(stubs / argv_host[0])
        try:
            proc = subprocess.Popen(argv_host, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=tmp, text=True, start_new_session=True)
        except OSError as e:
            raise SimError(f"container {container.get('name')}: cannot run {argv[0]!r}: {e}")
        try:
            if stop_after:
                deadline = time.monotonic() + timeout
                while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(0.2)   # the daemon is up; now the kubelet stops the container
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise SimError(f"container {container.get('name')}: `{' '.join(argv)}` did not finish within "
                           f"{timeout:.0f} s\n{out}")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not record.exists():
            raise SimError(f"container {container.get('name')}: `{' '.join(argv)}` exited {proc.returncode} without "
                           f"starting a sketchps daemon: {out.strip()[-400:]}")
        rec = json.loads(record.read_text())
        back = {host: target for target, host in mapping}

        def unmap(a: str) -> str:
            for host, target in back.items():
                if a.startswith(host):
                    return target + a[len(host):]
            return a
        env_out = {k: unmap(v) for k, v in rec["env"].items() if k != "PATH"}
        return Result([unmap(a) for a in rec["argv"]], env_out, proc.returncode)
