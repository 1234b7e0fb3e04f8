#!/usr/bin/env python3
"""Checks the deployment rules of RELIABILITY.md section 8.8 (as the daemons now work: mutual TLS,
shards that end with the job), and that the pieces agree, on rendered Kubernetes manifests
(kustomize output) and compose files. Exit 1 with one line per violation ("policy: SOURCE:
OBJECT: message"), 0 when there is none, 2 on bad usage.

The daemons' effective flags and environment are worked out as the kubelet would (podsim.py: env
with $(VAR) expansion and the completion index, the container's command (or the image's
entrypoint) run with stand-ins for the daemons), so the checks see what a daemon would get.

Kubernetes (per rendered overlay):
  - shards: an Indexed Job (a StatefulSet or Deployment would restart a shard that exited at the end
    of the job forever), completions = parallelism = S, restartPolicy Never, a podFailurePolicy that
    fails the Job on exit codes 2 (bad configuration) and 4 (idle) and ignores DisruptionTarget, a
    subdomain naming a headless Service; shard i gets shard id i (SKETCHPS_SHARD / --shard from the
    completion index, or the hostname); a shard stopped by SIGTERM (it drains and exits 143) must
    not exit 0 from its container, or the Job would count its index as complete and never replace
    it, nor with a code the Job fails on; the shards' --idle-exit-seconds (default 3600) is 0 or at
    least twice the workers' --patience-seconds (default 120): a worker can wait that long for
    another shard, and then be replaced, without calling this one;
  - shard probes: startup, readiness and liveness; every gRPC probe on a declared containerPort
    that is the plaintext --health-listen port (the --listen port speaks TLS, which the kubelet's
    probes do not); liveness and readiness ask different gRPC service names;
  - no PodDisruptionBudget on the shards with maxUnavailable or a percentage (Job pods have no scale
    subresource: such a PDB blocks every eviction); shard terminationGracePeriodSeconds >= 2 x
    CHECKPOINT_SECONDS;
  - workers: an Indexed Job, completions = parallelism = P, restartPolicy Never, a podFailurePolicy
    failing the Job on exit codes 2 and 3 and ignoring DisruptionTarget, a headless subdomain;
  - TLS: no daemon runs --insecure; each has a TLS folder (--tls-dir / SKETCHPS_TLS_DIR) that is
    the read-only mount, without subPath, of a Secret volume whose files the pod's user can read
    (defaultMode and fsGroup); if the volume lists items, they cover ca.pem and every identity of
    its role; the manifests define none of these Secrets (kubectl apply -k would overwrite the real
    certificates) and no placeholder Secret (empty values, or the sketchps.io/placeholder
    annotation); no secret reaches a container through env (secretKeyRef, envFrom, or a literal
    value under a secret-like name);
  - checkpoint key: every daemon gets --checkpoint-key-file (or SKETCHPS_CHECKPOINT_KEY_FILE), a
    file in the read-only mount, without subPath, of a Secret volume that the pod's user can read
    (as the certificates; if the volume lists items, one of them is that file), the same Secret and
    file for the shards and the workers (one key per job); the manifests do not define that Secret;
  - S and P agree everywhere: the one setting (ConfigMap sketchps-scale), the Jobs' completions and
    parallelism, each daemon's effective
    `workers`/`servers` (--set, else job.yaml), the workers' WORLD_SIZE, and the server list the
    workers get (the S stable names <server Job>-<i>.<its subdomain>:<gRPC port>, in shard order;
    a comma-separated list, or one address with {shard} in it, expanded as the worker does);
  - every pod: runAsNonRoot, no host namespaces; every container: readOnlyRootFilesystem, no
    privilege escalation, capabilities drop ALL, cpu and memory requests and limits; images tagged;
  - a NetworkPolicy admits the shards' gRPC port from worker pods only.
Compose:
  - every service declares a healthcheck; a shard's runs `sketchps health` on its plaintext port
    (--health-listen when TLS is on, else --listen);
  - workers depend on every shard with condition service_healthy; restart is on-failure[:N], except
    for one-shot services (others wait for them with service_completed_successfully): "no"; the
    daemons' is bounded, on-failure:N (compose restarts on any non-zero exit, and 2, a worker's 3
    and a shard's 4 are permanent); the shards' --idle-exit-seconds against the workers'
    --patience-seconds as in Kubernetes;
  - services run as a numeric non-root user, read-only, with cap_drop ALL;
  - TLS: a one-shot `sketchps certs` service writes into a named volume; every daemon waits for it
    to complete successfully, mounts that volume read-only at its TLS folder, and does not run
    --insecure; certs --workers/--servers are P and S;
  - checkpoint key: every daemon gets --checkpoint-key-file (or SKETCHPS_CHECKPOINT_KEY_FILE), the
    same file for all, on a read-only mount: a bind mount, or a named volume that a one-shot service
    mounts writable and names the file in its command (the key's maker), which the daemon waits for
    (service_completed_successfully);
  - the mounted job file agrees with the number of shard and worker services, their SKETCHPS_SHARD
    and RANK values, WORLD_SIZE and SKETCHPS_SERVERS (a list, or a {shard} address).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "emulate"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import podsim  # noqa: E402
import topology  # noqa: E402

CHECKPOINT_SECONDS = 10        # RELIABILITY.md C5: a shard checkpoints and exits within 10 s of SIGTERM
WORKER_EXIT_CODES = {2, 3}     # 2 bad configuration, 3 replica/server checksum mismatch
SERVER_EXIT_CODES = {2, 4}     # 2 bad configuration (job, flags, certificates), 4 idle (no worker called)
IDLE_EXIT_SECONDS = 3600.0     # sketchps-server --idle-exit-seconds default (0: never)
PATIENCE_SECONDS = 120.0       # sketchps-worker --patience-seconds default
SERVER_BINARY, WORKER_BINARY = "sketchps-server", "sketchps-worker"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE|CREDENTIAL|(^|_)KEY($|_)", re.I)
WORKLOADS = ("Job", "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet")
SCALE_CONFIGMAP = "sketchps-scale"   # the one S/P setting (deploy/k8s/base/kustomization.yaml)


class Report:
    def __init__(self):
        self.lines: list[str] = []

    def add(self, source: str, obj: str, message: str):
        self.lines.append(f"policy: {source}: {obj}: {message}")


def name_of(o: dict) -> str:
    return f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"


def selects(selector: dict | None, labels: dict | None) -> bool:
    match = (selector or {}).get("matchLabels") or {}
    return bool(match) and all((labels or {}).get(k) == v for k, v in match.items())


def flag_value(args: list[str], flag: str) -> str | None:
    """The last value of a flag (as CLI11 takes it), `--flag=v` or `--flag v`."""
    value = None
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        elif a == flag and i + 1 < len(args):
            value = args[i + 1]
    return value


def set_values(args: list[str]) -> dict[str, str]:
    """--set key=value overrides, the last one of a key winning."""
    out = {}
    for i, a in enumerate(args):
        kv = a.split("=", 1)[1] if a.startswith("--set=") else args[i + 1] if a == "--set" and i + 1 < len(args) else None
        if kv and "=" in kv:
            k, v = kv.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def server_addresses(value: str | None, servers: int) -> list[str]:
    """The addresses a worker makes of --servers / SKETCHPS_SERVERS (ServerAddresses, common/config/cli.h):
    comma-separated in shard order, or one address with {shard} in it, expanded for 0 .. servers-1."""
    out = [a for a in str(value or "").split(",") if a]
    if len(out) == 1 and "{shard}" in out[0]:
        out = [out[0].replace("{shard}", str(s)) for s in range(servers)]
    return out


def seconds(value: str | None, default: float) -> float | None:
    try:
        return default if value is None else float(value)
    except ValueError:
        return None


def check_idle_exit(src: str, owner: str, idle_flag: str | None, patience_flags: list[str | None], r: Report):
    """A shard that hears from no worker for --idle-exit-seconds exits 4, which fails the job; a
    worker may spend its --patience-seconds on another shard (and then be replaced) meanwhile."""
    idle = seconds(idle_flag, IDLE_EXIT_SECONDS)
    patience = max((p for p in (seconds(f, PATIENCE_SECONDS) for f in patience_flags) if p is not None), default=None)
    if idle is None or patience is None or idle == 0:
        return
    if idle < 2 * patience:
        r.add(src, owner, f"--idle-exit-seconds {idle:g} < 2 x the workers' --patience-seconds {patience:g}: a shard "
              "would exit 4 (permanent) while the workers still wait for another shard")


def truthy(value: str | None) -> bool:
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def port_of(address: str | None) -> int | None:
    try:
        return int(str(address).rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def component(workload: dict) -> str | None:
    return ((workload["spec"]["template"].get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")


def pod_containers(spec: dict) -> list[dict]:
    return (spec.get("containers") or []) + (spec.get("initContainers") or [])


def check_pod(src: str, owner: str, spec: dict, r: Report):
    sc = spec.get("securityContext") or {}
    if sc.get("runAsNonRoot") is not True:
        r.add(src, owner, "pod securityContext.runAsNonRoot is not true")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            r.add(src, owner, f"{key} is set")
    secret_volumes = {v["name"]: v["secret"].get("secretName") for v in spec.get("volumes") or [] if "secret" in v}
    for c in pod_containers(spec):
        where = f"{owner} container {c.get('name')}"
        csc = c.get("securityContext") or {}
        if csc.get("readOnlyRootFilesystem") is not True:
            r.add(src, where, "readOnlyRootFilesystem is not true")
        if csc.get("allowPrivilegeEscalation") is not False:
            r.add(src, where, "allowPrivilegeEscalation is not false")
        if "ALL" not in ((csc.get("capabilities") or {}).get("drop") or []):
            r.add(src, where, "capabilities.drop does not include ALL")
        if csc.get("privileged"):
            r.add(src, where, "privileged")
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for what in ("cpu", "memory"):
                if what not in (res.get(kind) or {}):
                    r.add(src, where, f"resources.{kind}.{what} is not set")
        image = str(c.get("image", ""))
        if "@sha256:" not in image and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")):
            r.add(src, where, f"image '{image}' has no tag (or 'latest')")
        for e in c.get("env") or []:
            if "secretKeyRef" in (e.get("valueFrom") or {}):
                r.add(src, where, f"env {e.get('name')} comes from a Secret: mount secrets as volumes")
            elif SECRET_NAME.search(str(e.get("name", ""))) and "value" in e:
                r.add(src, where, f"env {e.get('name')} holds a literal secret-like value")
        for ef in c.get("envFrom") or []:
            if "secretRef" in ef:
                r.add(src, where, "envFrom a Secret: mount secrets as volumes")
        for m in c.get("volumeMounts") or []:
            if m.get("name") in secret_volumes and m.get("subPath"):
                r.add(src, where, f"secret volume {m['name']} is mounted with subPath (no updates, partial)")
    return secret_volumes


def check_probes(src: str, owner: str, container: dict, health_port: int | None, listen_port: int | None, r: Report):
    where = f"{owner} container {container.get('name')}"
    ports = {p.get("containerPort") for p in container.get("ports") or []}
    named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
    services = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = container.get(probe)
        if not p:
            r.add(src, where, f"no {probe}")
            continue
        for handler in ("grpc", "tcpSocket", "httpGet"):
            if handler in p:
                port = p[handler].get("port")
                if port not in ports and port not in named:
                    r.add(src, where, f"{probe}.{handler}.port {port} is not a declared containerPort {sorted(ports)}")
                    continue
                number = named.get(port, port)
                if handler == "grpc" and health_port is None and listen_port is not None and number == listen_port:
                    pass  # plaintext daemon (--insecure): reported by the TLS checks
                elif handler == "grpc" and number != health_port:
                    r.add(src, where, f"{probe}.grpc.port {port} is not the plaintext health port "
                          f"(--health-listen {health_port}): the kubelet's gRPC probes cannot speak TLS")
        if "grpc" in p:
            services[probe] = p["grpc"].get("service", "")
    if "livenessProbe" in services and services.get("livenessProbe") == services.get("readinessProbe"):
        r.add(src, where, "liveness and readiness probes ask the same gRPC service name: a draining shard would be killed")


def failjob_codes(spec: dict) -> set[int]:
    """Exit codes a Job's podFailurePolicy fails the Job on (FailJob, operator In)."""
    failed = set()
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        ec = rule.get("onExitCodes") or {}
        if rule.get("action") == "FailJob" and ec.get("operator") == "In":
            failed |= set(ec.get("values") or [])
    return failed


def check_indexed_job(src: str, job: dict, services: list[dict], codes: set[int], role: str, r: Report):
    owner, spec = name_of(job), job["spec"]
    pod = spec["template"]["spec"]
    if spec.get("completionMode") != "Indexed":
        r.add(src, owner, f"completionMode is not Indexed (the completion index is the {role})")
    if spec.get("completions") != spec.get("parallelism"):
        r.add(src, owner, f"completions {spec.get('completions')} != parallelism {spec.get('parallelism')}: "
              "every index must run at once")
    if pod.get("restartPolicy") != "Never":
        r.add(src, owner, "restartPolicy is not Never (podFailurePolicy needs it)")
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    failed = failjob_codes(spec)
    if not codes <= failed:
        r.add(src, owner, f"podFailurePolicy does not FailJob on exit codes {sorted(codes - failed)}")
    if not any(rule.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
               for rule in rules):
        r.add(src, owner, "podFailurePolicy does not Ignore DisruptionTarget")
    sub = pod.get("subdomain")
    labels = spec["template"]["metadata"].get("labels")
    svc = next((s for s in services if s["metadata"]["name"] == sub), None)
    if svc is None or svc["spec"].get("clusterIP") != "None" or not selects({"matchLabels": svc["spec"].get("selector")}, labels):
        r.add(src, owner, f"subdomain {sub!r} is not a headless Service selecting the {role}s' pods")


class Daemon:
    """One daemon container of a workload, with what it effectively gets (podsim) at one index."""

    def __init__(self, workload: dict, container: dict, role: str, sim: podsim.Result):
        self.workload, self.container, self.role, self.sim = workload, container, role, sim
        self.owner = f"{name_of(workload)} container {container.get('name')}"

    def flag(self, name: str, env: str | None = None) -> str | None:
        value = flag_value(self.sim.argv[1:], name)
        return value if value is not None or env is None else self.sim.env.get(env)


def simulate(src: str, workload: dict, container: dict, index: int, objects: list[dict], r: Report,
             stop_after: bool = False) -> podsim.Result | None:
    try:
        return podsim.run(workload, container, index, objects, stop_after=stop_after)
    except podsim.SimError as e:
        r.add(src, name_of(workload), str(e))
        return None


def daemons_of(src: str, workload: dict, objects: list[dict], index: int, r: Report) -> list[Daemon]:
    out = []
    for c in workload["spec"]["template"]["spec"].get("containers") or []:
        role = podsim.daemon_of(c)
        if role is None:
            continue
        sim = simulate(src, workload, c, index, objects, r)
        if sim is None:
            continue
        if sim.argv[0] != role:
            r.add(src, name_of(workload), f"container {c.get('name')} (image {c.get('image')}) runs {sim.argv[0]}, not {role}")
            continue
        out.append(Daemon(workload, c, role, sim))
    return out


def secret_readable(mode: int, pod_security: dict) -> bool:
    """Whether the pod's user can read the files of a Secret volume (root-owned, group fsGroup)."""
    return bool((mode & 0o004) or ((mode & 0o040) and pod_security.get("fsGroup") is not None)
                or ((mode & 0o400) and pod_security.get("runAsUser") == 0))


def check_secret_mount(src: str, d: Daemon, mount: dict, volumes: dict, secret_names: dict[str, set], what: str,
                       r: Report):
    """A daemon's mount of a Secret volume: records the Secret's name in secret_names and reports a mount
    that is not readOnly or has a subPath (`what` names the volume: "the certificates'"). Returns the
    volume's secret and whether it has a subPath."""
    secret = volumes[mount["name"]]["secret"]
    secret_names.setdefault(secret.get("secretName"), set()).add(d.owner)
    if mount.get("readOnly") is not True:
        r.add(src, d.owner, f"{what} volume {mount['name']} is not mounted readOnly")
    if mount.get("subPath"):
        r.add(src, d.owner, f"{what} volume {mount['name']} is mounted with subPath")
    return secret, bool(mount.get("subPath"))


def check_checkpoint_key(src: str, d: Daemon, secret_names: dict[str, set], r: Report) -> tuple[str, str] | None:
    """The daemon's --checkpoint-key-file is a file of a read-only, readable Secret mount; returns
    (Secret, key in it) and records the Secret's name."""
    path = d.flag("--checkpoint-key-file", "SKETCHPS_CHECKPOINT_KEY_FILE")
    if not path:
        r.add(src, d.owner, "no checkpoint key: neither --checkpoint-key-file nor SKETCHPS_CHECKPOINT_KEY_FILE (its "
              "checkpoints or state files would carry no integrity tag; deploy/k8s/make-certs.py makes the key's Secret)")
        return None
    pod = d.workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    folder, _, name = path.rstrip("/").rpartition("/")
    mount = next((m for m in d.container.get("volumeMounts") or []
                  if m.get("mountPath", "").rstrip("/") in (folder.rstrip("/"), path.rstrip("/"))), None)
    if mount is None or "secret" not in volumes.get(mount.get("name"), {}):
        r.add(src, d.owner, f"the checkpoint key file {path} is not in the mount of a Secret volume")
        return None
    secret, sub_path = check_secret_mount(src, d, mount, volumes, secret_names, "the checkpoint key's", r)
    if sub_path:
        return None
    if mount.get("mountPath", "").rstrip("/") == path.rstrip("/"):
        r.add(src, d.owner, f"the checkpoint key file {path} is the mount point of the Secret volume {mount['name']} "
              "(a folder): name a file in it")
        return None
    items = secret.get("items")
    key = name if items is None else next((i.get("key") for i in items if i.get("path") == name), None)
    if key is None:
        r.add(src, d.owner, f"the checkpoint key's volume {mount['name']} lists items without the file {name}")
    mode = secret.get("defaultMode", 0o644)
    if not secret_readable(mode, pod.get("securityContext") or {}):
        r.add(src, d.owner, f"the checkpoint key file (defaultMode {mode:#o}, owner root) is not readable by the "
              "pod's user: give the group read bit and set the pod's fsGroup")
    return secret.get("secretName"), key


def check_tls(src: str, d: Daemon, identities: list[str], secret_names: dict[str, set], r: Report):
    """The daemon runs with TLS from a read-only, readable Secret mount; records the Secret's name."""
    if d.flag("--insecure") is not None or "--insecure" in d.sim.argv or truthy(d.sim.env.get("SKETCHPS_INSECURE")):
        r.add(src, d.owner, "runs --insecure (SKETCHPS_INSECURE): mutual TLS is what the deployments run")
        return
    tls_dir = d.flag("--tls-dir", "SKETCHPS_TLS_DIR")
    if not tls_dir:
        r.add(src, d.owner, "no TLS folder: neither --tls-dir nor SKETCHPS_TLS_DIR (the daemon refuses to start)")
        return
    pod = d.workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mount = next((m for m in d.container.get("volumeMounts") or [] if m.get("mountPath", "").rstrip("/") == tls_dir.rstrip("/")), None)
    if mount is None or "secret" not in volumes.get(mount.get("name"), {}):
        r.add(src, d.owner, f"the TLS folder {tls_dir} is not the mount of a Secret volume (the certificates)")
        return
    secret, _ = check_secret_mount(src, d, mount, volumes, secret_names, "the certificates'", r)
    items = secret.get("items")
    if items is not None:
        keys = {i.get("key") for i in items if i.get("path") == i.get("key")}
        missing = [k for k in ["ca.pem"] + [f"{n}.{ext}" for n in identities for ext in ("pem", "key")] if k not in keys]
        if missing:
            r.add(src, d.owner, f"the certificates' volume lists items without {', '.join(missing[:6])}"
                  f"{' ...' if len(missing) > 6 else ''} (the daemon reads ca.pem, <identity>.pem and .key)")
    mode = secret.get("defaultMode", 0o644)
    if not secret_readable(mode, pod.get("securityContext") or {}):
        r.add(src, d.owner, f"the certificate files (defaultMode {mode:#o}, owner root) are not readable by the "
              "pod's user: give the group read bit and set the pod's fsGroup")


def effective_scale(d: Daemon, job_spec: dict) -> tuple[str, str]:
    sets = set_values(d.sim.argv[1:])
    return sets.get("workers", str(job_spec.get("workers", 4))), sets.get("servers", str(job_spec.get("servers", 2)))


def check_k8s(src: str, objects: list[dict], r: Report):
    by_kind: dict[str, list[dict]] = {}
    for o in objects:
        by_kind.setdefault(o.get("kind"), []).append(o)
    services = by_kind.get("Service", [])
    workloads = [o for k in WORKLOADS for o in by_kind.get(k, [])]
    servers = [w for w in workloads if component(w) == "server"]
    workers = [w for w in workloads if component(w) == "worker"]
    if not servers:
        r.add(src, "-", "no workload for the shards (pods labelled app.kubernetes.io/component: server)")
    if not workers:
        r.add(src, "-", "no Job for the workers (pods labelled app.kubernetes.io/component: worker)")
    for w in servers + workers:
        if w["kind"] != "Job":
            what = "shards" if w in servers else "workers"
            r.add(src, name_of(w), f"the {what} run as a {w['kind']}, which restarts a pod that exited at the end of the "
                  "job forever: use an Indexed Job (the shards exit 0 once every worker has left)")
    cms = [c for c in by_kind.get("ConfigMap", []) if "job.yaml" in (c.get("data") or {})]
    if len(cms) != 1:
        r.add(src, "-", f"expected one ConfigMap with job.yaml (found {len(cms)})")
    job_spec = (yaml.safe_load(cms[0]["data"]["job.yaml"]) or {}) if len(cms) == 1 else {}
    secret_names: dict[str, set] = {}

    server_jobs = [w for w in servers if w["kind"] == "Job"]
    worker_jobs = [w for w in workers if w["kind"] == "Job"]
    for job in server_jobs:
        check_server_job(src, job, objects, by_kind, services, worker_jobs, r)
    for job in worker_jobs:
        check_pod(src, name_of(job), job["spec"]["template"]["spec"], r)
        check_indexed_job(src, job, services, WORKER_EXIT_CODES, "rank", r)
    if len(server_jobs) == 1 and len(worker_jobs) == 1:
        check_scale_and_tls(src, server_jobs[0], worker_jobs[0], objects, job_spec, secret_names, r)
    elif server_jobs and worker_jobs:
        r.add(src, "-", f"expected one shard Job and one worker Job (found {len(server_jobs)} and {len(worker_jobs)})")
    check_secrets(src, by_kind.get("Secret", []), secret_names, r)


def check_server_job(src, job, objects, by_kind, services, worker_jobs, r):
    owner, spec = name_of(job), job["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"].get("labels")
    check_pod(src, owner, pod, r)
    check_indexed_job(src, job, services, SERVER_EXIT_CODES, "shard id", r)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace < 2 * CHECKPOINT_SECONDS:
        r.add(src, owner, f"terminationGracePeriodSeconds {grace} < 2 x checkpoint time ({2 * CHECKPOINT_SECONDS})")
    for p in by_kind.get("PodDisruptionBudget", []):
        if selects(p["spec"].get("selector"), labels):
            mu, ma = p["spec"].get("maxUnavailable"), p["spec"].get("minAvailable")
            if mu is not None or isinstance(ma, str):
                r.add(src, name_of(p), "selects the shards' Job pods with maxUnavailable or a percentage: Jobs have no "
                      "scale subresource, so the budget allows no eviction at all (every node drain blocks)")
    check_network_policy(src, job, labels, by_kind.get("NetworkPolicy", []), worker_jobs, r)
    for c in pod.get("containers") or []:
        if podsim.daemon_of(c) != SERVER_BINARY:
            continue
        sim = simulate(src, job, c, 0, objects, r)
        if sim is None:
            continue
        health = port_of(flag_value(sim.argv[1:], "--health-listen"))
        listen = port_of(flag_value(sim.argv[1:], "--listen") or "0.0.0.0:7070")
        check_probes(src, owner, c, health, listen, r)
        # Kubernetes stops the shard: it drains and exits 143, which the container must pass on.
        stopped = simulate(src, job, c, 0, objects, r, stop_after=True)
        if stopped is not None and stopped.exit_code == 0:
            r.add(src, f"{owner} container {c.get('name')}", "exits 0 when the shard is stopped with SIGTERM (the shard "
                  "drains and exits 143): the Job would count its index as complete and never replace it; run "
                  "sketchps-server as the container's process (the image's entrypoint), or pass its exit code on")
        elif stopped is not None and stopped.exit_code in failjob_codes(spec):
            r.add(src, f"{owner} container {c.get('name')}", f"exits {stopped.exit_code} when the shard is stopped with "
                  "SIGTERM: the podFailurePolicy fails the whole Job on that code, before it looks at DisruptionTarget")


def check_scale_and_tls(src, server_job, worker_job, objects, job_spec, secret_names, r):
    s_count, p_count = server_job["spec"].get("completions"), worker_job["spec"].get("completions")
    if not isinstance(s_count, int) or not isinstance(p_count, int) or s_count < 1 or p_count < 1:
        r.add(src, "-", f"completions of the shard Job ({s_count!r}) and the worker Job ({p_count!r}) must be positive integers")
        return
    S, P = str(s_count), str(p_count)
    for cm in objects:
        if cm.get("kind") == "ConfigMap" and cm["metadata"]["name"] == SCALE_CONFIGMAP:
            want = cm.get("data") or {}
            if (str(want.get("servers")), str(want.get("workers"))) != (S, P):
                r.add(src, name_of(cm), f"the one setting says servers {want.get('servers')}, workers {want.get('workers')}, "
                      f"but the Jobs run S = {S} shards and P = {P} workers (is the component components/scale "
                      "included by the overlay that sets it?)")
    server_pod = server_job["spec"]["template"]["spec"]
    grpc_port = next((p["containerPort"] for c in server_pod.get("containers") or []
                      for p in c.get("ports") or [] if p.get("name") == "grpc"), None)
    expected = ",".join(f"{server_job['metadata']['name']}-{i}.{server_pod.get('subdomain')}:{grpc_port}" for i in range(s_count))
    idle_flags = []
    keys: dict[str, tuple[str, str] | None] = {}
    for index in sorted({0, s_count - 1}):
        for d in daemons_of(src, server_job, objects, index, r):
            w, s = effective_scale(d, job_spec)
            if (w, s) != (P, S):
                r.add(src, d.owner, f"the shard runs with workers {w}, servers {s} (--set, else job.yaml) but the Jobs "
                      f"have P = {P} workers and S = {S} shards")
            shard = d.flag("--shard", "SKETCHPS_SHARD")
            if shard is None:  # the daemon's fallback: the hostname's -N suffix, <job>-<index> in an Indexed Job
                shard = str(index) if podsim.indexed(server_job) else None
            if shard != str(index):
                r.add(src, d.owner, f"the pod of completion index {index} runs shard {shard} (SKETCHPS_SHARD / --shard "
                      "must come from the completion index)")
            if index == 0:
                idle_flags.append((d.owner, d.flag("--idle-exit-seconds")))
                check_tls(src, d, [f"server-{i}" for i in range(s_count)], secret_names, r)
                keys[d.owner] = check_checkpoint_key(src, d, secret_names, r)
                if d.flag("--tls-dir", "SKETCHPS_TLS_DIR") and port_of(d.flag("--health-listen")) is None:
                    r.add(src, d.owner, "no --health-listen: with TLS the gRPC port cannot answer the kubelet's probes")
    patience = []
    for d in daemons_of(src, worker_job, objects, 0, r):
        patience.append(d.flag("--patience-seconds"))
        w, s = effective_scale(d, job_spec)
        if (w, s) != (P, S):
            r.add(src, d.owner, f"the worker runs with workers {w}, servers {s} (--set, else job.yaml) but the Jobs have "
                  f"P = {P} workers and S = {S} shards")
        ws = d.flag("--world-size", "WORLD_SIZE")
        if ws is not None and ws != P:
            r.add(src, d.owner, f"WORLD_SIZE {ws} != P = {P} (the worker Job's completions)")
        srv = d.flag("--servers", "SKETCHPS_SERVERS")
        got = ",".join(server_addresses(srv, s_count))
        if got != expected:
            shown = f"'{srv}'" + (f" (expanded: '{got}')" if got != srv else "")
            r.add(src, d.owner, f"servers {shown} != '{expected}' (shard i is pod <shard Job>-i of its subdomain)")
        check_tls(src, d, [f"worker-{i}" for i in range(p_count)], secret_names, r)
        keys[d.owner] = check_checkpoint_key(src, d, secret_names, r)
    found = {k for k in keys.values() if k is not None}
    if len(found) > 1:
        r.add(src, "-", "the daemons read different checkpoint keys (" + "; ".join(
            f"{owner}: Secret {k[0]} key {k[1]}" for owner, k in keys.items() if k) + "): give every shard and worker "
              "the job's one key (sketchps export reads the shards' checkpoints with it)")
    for owner, idle in idle_flags:
        check_idle_exit(src, owner, idle, patience or [None], r)


def check_secrets(src: str, secrets: list[dict], mounted: dict[str, set], r: Report):
    for s in secrets:
        name = s["metadata"]["name"]
        if name in mounted:
            r.add(src, name_of(s), "the daemons read their certificates or checkpoint key from this Secret, so the "
                  "manifests must not define it: every `kubectl apply -k` would overwrite the real certificates or key "
                  "(make it with deploy/k8s/make-certs.py)")
        values = list((s.get("data") or {}).values()) + list((s.get("stringData") or {}).values())
        if (s["metadata"].get("annotations") or {}).get("sketchps.io/placeholder") or any(v in ("", None) for v in values):
            r.add(src, name_of(s), "placeholder Secret (empty values): applying it overwrites real ones")


def check_network_policy(src, workload, labels, policies, jobs, r):
    owner = name_of(workload)
    worker_labels = [j["spec"]["template"]["metadata"].get("labels") for j in jobs]
    ports = {p.get("containerPort") for c in workload["spec"]["template"]["spec"]["containers"] for p in c.get("ports") or []
             if p.get("name") == "grpc"}
    covering = [p for p in policies if selects(p["spec"].get("podSelector"), labels) and "Ingress" in (p["spec"].get("policyTypes") or [])]
    if not covering:
        r.add(src, owner, "no NetworkPolicy restricts ingress to the shards")
        return
    for p in covering:
        for rule in p["spec"].get("ingress") or []:
            rule_ports = {x.get("port") for x in rule.get("ports") or []}
            if rule_ports and not rule_ports & ports:
                continue
            for peer in rule.get("from") or [{}]:
                ok = set(peer) == {"podSelector"} and any(selects(peer["podSelector"], wl) for wl in worker_labels)
                if not ok:
                    r.add(src, name_of(p), f"admits {peer or 'anyone'} to the shards' gRPC port {sorted(ports)}: only workers may")


def check_compose(src: str, compose_file: str, r: Report):
    try:
        services = topology.load(compose_file)
        topology.start_order(services)
        shots = topology.one_shot(services)
    except topology.TopologyError as e:
        r.add(src, "-", str(e))
        return
    servers = {n: s for n, s in services.items() if s.argv and s.argv[0] == SERVER_BINARY}
    workers = {n: s for n, s in services.items() if s.argv and s.argv[0] == WORKER_BINARY}
    certs = {n: s for n, s in services.items() if s.argv[:2] == ["sketchps", "certs"]}
    if not servers or not workers:
        r.add(src, "-", f"expected {SERVER_BINARY} and {WORKER_BINARY} services")
    for name, s in services.items():
        if not s.healthcheck_declared:
            r.add(src, name, "no healthcheck (declare one, or `disable: true` with the reason)")
        if name in shots:
            if s.restart not in ("no", None):
                r.add(src, name, f"restart is {s.restart!r}: a one-shot service (others wait for it to complete) must be \"no\"")
        elif not re.fullmatch(r"on-failure(:\d+)?", s.restart or ""):
            r.add(src, name, f"restart is {s.restart!r}, not on-failure[:N]")
        elif (name in servers or name in workers) and not re.fullmatch(r"on-failure:[1-9][0-9]*", s.restart):
            r.add(src, name, f"restart is {s.restart!r} without a limit: compose restarts on every non-zero exit, "
                  "and 2 (bad configuration), a worker's 3 and a shard's 4 (idle) are permanent; use on-failure:N")
        user = str(s.raw.get("user", ""))
        if not re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", user):
            r.add(src, name, f"user {user!r} is not a numeric non-root uid")
        if s.raw.get("read_only") is not True:
            r.add(src, name, "read_only is not true")
        if "ALL" not in (s.raw.get("cap_drop") or []):
            r.add(src, name, "cap_drop does not include ALL")
    shard_of = {}
    for name, s in servers.items():
        listen = flag_value(s.argv, "--listen") or "0.0.0.0:7070"
        tls_on = not is_insecure(s)
        health = flag_value(s.argv, "--health-listen")
        plain = health if tls_on else (health or listen)   # with TLS only --health-listen speaks plaintext
        port = plain.rsplit(":", 1)[-1] if plain else None
        if s.healthcheck is None:
            r.add(src, name, "a shard needs a healthcheck test (workers wait for service_healthy)")
        elif port is None:
            r.add(src, name, "no --health-listen: with TLS the shard's gRPC port cannot answer a plaintext health check")
        elif s.healthcheck.argv[:2] != ["sketchps", "health"] or not s.healthcheck.argv[2:3] or \
                not s.healthcheck.argv[2].endswith(":" + port):
            r.add(src, name, f"healthcheck {s.healthcheck.argv} does not run `sketchps health HOST:{port}` "
                  f"(the plaintext {'--health-listen' if tls_on else '--listen'} port)")
        shard_of[name] = (s.environment.get("SKETCHPS_SHARD") or flag_value(s.argv, "--shard"), listen.rsplit(":", 1)[-1])
    for name, s in workers.items():
        for server in servers:
            if s.depends_on.get(server) != topology.HEALTHY:
                r.add(src, name, f"does not depend on {server} with condition service_healthy")
    for name, s in servers.items():
        check_idle_exit(src, name, flag_value(s.argv, "--idle-exit-seconds"),
                        [flag_value(w.argv, "--patience-seconds") for w in workers.values()] or [None], r)
    check_compose_tls(src, servers, workers, certs, r)
    check_compose_key(src, services, servers, workers, shots, r)
    check_compose_job_spec(src, servers, workers, certs, shard_of, r)


def is_insecure(s: topology.Service) -> bool:
    return "--insecure" in s.argv or truthy(s.environment.get("SKETCHPS_INSECURE"))


def check_compose_tls(src, servers, workers, certs, r):
    if len(certs) != 1:
        r.add(src, "-", f"expected one one-shot `sketchps certs` service (found {len(certs)})")
        return
    cname, c = next(iter(certs.items()))
    out = flag_value(c.argv, "--out")
    volume = next((m for m in c.mounts if m.target.rstrip("/") == str(out).rstrip("/")), None)
    if volume is None or volume.kind != "volume" or volume.read_only:
        r.add(src, cname, f"--out {out} is not a writable named volume (the daemons mount it)")
        return
    for name, s in {**servers, **workers}.items():
        if is_insecure(s):
            r.add(src, name, "runs --insecure (SKETCHPS_INSECURE): mutual TLS is what the deployments run")
            continue
        if s.depends_on.get(cname) != topology.COMPLETED:
            r.add(src, name, f"does not wait for {cname} with condition service_completed_successfully")
        tls_dir = flag_value(s.argv, "--tls-dir") or s.environment.get("SKETCHPS_TLS_DIR")
        if not tls_dir:
            r.add(src, name, "no TLS folder: neither --tls-dir nor SKETCHPS_TLS_DIR (the daemon refuses to start)")
            continue
        m = next((m for m in s.mounts if m.target.rstrip("/") == tls_dir.rstrip("/")), None)
        if m is None or m.kind != "volume" or m.source != volume.source:
            r.add(src, name, f"the TLS folder {tls_dir} is not the volume {volume.source} that {cname} writes")
        elif not m.read_only:
            r.add(src, name, f"mounts the certificates' volume {volume.source} read-write (use :ro)")


def mount_of(mounts: list[topology.Mount], path: str) -> topology.Mount | None:
    """The mount a container path is on (the longest target that holds it)."""
    holding = [m for m in mounts if path == m.target.rstrip("/") or path.startswith(m.target.rstrip("/") + "/")]
    return max(holding, key=lambda m: len(m.target), default=None)


def check_compose_key(src, services, servers, workers, shots, r):
    """Every daemon reads the job's one checkpoint key from a read-only mount that exists before it starts."""
    keys = {}
    for name, s in {**servers, **workers}.items():
        path = flag_value(s.argv, "--checkpoint-key-file") or s.environment.get("SKETCHPS_CHECKPOINT_KEY_FILE")
        if not path:
            r.add(src, name, "no checkpoint key: neither --checkpoint-key-file nor SKETCHPS_CHECKPOINT_KEY_FILE (its "
                  "checkpoints or state files would carry no integrity tag)")
            continue
        m = mount_of(s.mounts, path)
        if m is None or m.kind == "tmpfs":
            r.add(src, name, f"the checkpoint key file {path} is on no volume or bind mount (the image holds no key)")
            continue
        keys[name] = (path, m.kind, m.source)
        if not m.read_only:
            r.add(src, name, f"mounts the checkpoint key's {m.kind} {m.source} read-write (use :ro): the daemon only "
                  "reads the key")
        if m.kind == "volume":
            # The maker: a one-shot service that mounts the volume writable and names the file there.
            rel = path[len(m.target.rstrip("/")):]
            makers = [o for o in sorted(shots) if any(
                x.kind == "volume" and x.source == m.source and not x.read_only
                and x.target.rstrip("/") + rel in " ".join(services[o].argv) for x in services[o].mounts)]
            if not makers:
                r.add(src, name, f"the checkpoint key file {path} is on the volume {m.source}, but no one-shot service "
                      "writes that volume naming the file: nothing makes the key")
            elif not any(s.depends_on.get(o) == topology.COMPLETED for o in makers):
                r.add(src, name, f"does not wait for {', '.join(makers)} (which makes the checkpoint key {path}) with "
                      "condition service_completed_successfully: the key may not exist when it starts")
    if len(set(keys.values())) > 1:
        r.add(src, "-", "the daemons read different checkpoint keys (" + "; ".join(
            f"{n}: {k[0]} on {k[1]} {k[2]}" for n, k in keys.items()) + "): give every shard and worker the job's one key")


def check_compose_job_spec(src, servers, workers, certs, shard_of, r):
    any_service = next(iter({**servers, **workers}.values()), None)
    if any_service is None:
        return
    job_path = any_service.environment.get("SKETCHPS_JOB") or flag_value(any_service.argv, "--job")
    host = next((m.source for m in any_service.mounts if m.kind == "bind" and m.target == job_path), None)
    if host is None or not Path(host).is_file():
        r.add(src, any_service.name, f"job file {job_path} is not bind-mounted from an existing file")
        return
    job = yaml.safe_load(Path(host).read_text()) or {}
    n_servers, n_workers = job.get("servers", 2), job.get("workers", 4)
    if len(servers) != n_servers:
        r.add(src, "-", f"{len(servers)} shard services != servers {n_servers} in {host}")
    if len(workers) != n_workers:
        r.add(src, "-", f"{len(workers)} worker services != workers {n_workers} in {host}")
    for name, c in certs.items():
        for flag, n in (("--workers", n_workers), ("--servers", n_servers)):
            if flag_value(c.argv, flag) != str(n):
                r.add(src, name, f"certs {flag} {flag_value(c.argv, flag)} != {n} in {host}: every rank and shard needs a certificate")
    shards = sorted(shard_of.items(), key=lambda kv: int(kv[1][0]) if str(kv[1][0]).isdigit() else -1)
    if [v[0] for _, v in shards] != [str(i) for i in range(len(servers))]:
        r.add(src, "-", f"SKETCHPS_SHARD values {[v[0] for _, v in shards]} are not 0..{len(servers) - 1}")
    expected = ",".join(f"{name}:{port}" for name, (_, port) in shards)
    ranks = sorted(str(w.environment.get("RANK") or flag_value(w.argv, "--rank")) for w in workers.values())
    if ranks != sorted(str(i) for i in range(len(workers))):
        r.add(src, "-", f"worker RANK values {ranks} are not 0..{len(workers) - 1}")
    for name, w in workers.items():
        ws = w.environment.get("WORLD_SIZE") or flag_value(w.argv, "--world-size")
        if str(ws) != str(n_workers):
            r.add(src, name, f"WORLD_SIZE {ws} != workers {n_workers} in {host}")
        srv = w.environment.get("SKETCHPS_SERVERS") or flag_value(w.argv, "--servers")
        got = ",".join(server_addresses(srv, n_servers))
        if got != expected:
            shown = f"'{srv}'" + (f" (expanded: '{got}')" if got != srv else "")
            r.add(src, name, f"servers {shown} != '{expected}' (ordered by SKETCHPS_SHARD)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k8s", action="append", default=[], metavar="RENDERED.yaml")
    ap.add_argument("--compose", action="append", default=[], metavar="COMPOSE.yml")
    args = ap.parse_args()
    if not args.k8s and not args.compose:
        ap.error("nothing to check: give --k8s and/or --compose")
    r = Report()
    for f in args.k8s:
        objects = [o for o in yaml.safe_load_all(Path(f).read_text()) if o]
        check_k8s(f, objects, r)
    for f in args.compose:
        check_compose(f, f, r)
    for line in r.lines:
        print(line)
    checked = f"{len(args.k8s)} rendered overlay(s), {len(args.compose)} compose file(s)"
    print(f"policy: {len(r.lines)} violation(s) in {checked}" if r.lines else f"policy: {checked}: ok")
    return 1 if r.lines else 0


if __name__ == "__main__":
    sys.exit(main())
