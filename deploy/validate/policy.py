#!/usr/bin/env python3
"""Checks the deployment rules of RELIABILITY.md section 8.8, and that the pieces agree, on
rendered Kubernetes manifests (kustomize output) and compose files. Exit 1 with one line per
violation ("policy: SOURCE: OBJECT: message"), 0 when there is none, 2 on bad usage.

Kubernetes (per rendered overlay):
  - shard pods (StatefulSet) have startup, readiness and liveness probes; a gRPC probe's port is a
    declared containerPort; liveness and readiness ask different gRPC service names;
  - a PodDisruptionBudget selects the shards with maxUnavailable <= 1;
  - shard terminationGracePeriodSeconds >= 2 x CHECKPOINT_SECONDS;
  - a Secret of type kubernetes.io/tls exists and is mounted as a volume without subPath; no secret
    reaches a container through env (secretKeyRef, envFrom, or a literal value under a secret-like name);
  - the worker Job is Indexed, restartPolicy Never, with a podFailurePolicy that fails the Job on
    the permanent exit codes and ignores DisruptionTarget, and a subdomain naming a headless Service;
  - every pod: runAsNonRoot, no host namespaces; every container: readOnlyRootFilesystem, no
    privilege escalation, capabilities drop ALL, cpu and memory requests and limits; images tagged;
  - a NetworkPolicy admits the shards' gRPC port from worker pods only;
  - job.yaml in the ConfigMap agrees with the replica counts, WORLD_SIZE and SKETCHPS_SERVERS.
Compose:
  - every service declares a healthcheck; a shard's runs `sketchps health` on its --listen port;
  - workers depend on every shard with condition service_healthy; restart is on-failure[:N];
  - services run as a numeric non-root user, read-only, with cap_drop ALL;
  - the mounted job file agrees with the number of shard and worker services, their SKETCHPS_SHARD
    and RANK values, WORLD_SIZE and SKETCHPS_SERVERS.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "emulate"))
import topology  # noqa: E402

CHECKPOINT_SECONDS = 10        # RELIABILITY.md C5: a shard checkpoints and exits within 10 s of SIGTERM
PERMANENT_EXIT_CODES = {2, 3}  # 2 bad configuration, 3 replica/server checksum mismatch
SERVER_BINARY, WORKER_BINARY = "sketchps-server", "sketchps-worker"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE|CREDENTIAL|(^|_)KEY($|_)", re.I)


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
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
        if a == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def check_pod(src: str, owner: str, spec: dict, r: Report):
    sc = spec.get("securityContext") or {}
    if sc.get("runAsNonRoot") is not True:
        r.add(src, owner, "pod securityContext.runAsNonRoot is not true")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            r.add(src, owner, f"{key} is set")
    secret_volumes = {v["name"]: v["secret"].get("secretName") for v in spec.get("volumes") or [] if "secret" in v}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
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


def check_probes(src: str, owner: str, container: dict, r: Report):
    where = f"{owner} container {container.get('name')}"
    ports = {p.get("containerPort") for p in container.get("ports") or []}
    names = {p.get("name") for p in container.get("ports") or []}
    services = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = container.get(probe)
        if not p:
            r.add(src, where, f"no {probe}")
            continue
        for handler in ("grpc", "tcpSocket", "httpGet"):
            if handler in p:
                port = p[handler].get("port")
                if port not in ports and port not in names:
                    r.add(src, where, f"{probe}.{handler}.port {port} is not a declared containerPort {sorted(ports)}")
        if "grpc" in p:
            services[probe] = p["grpc"].get("service", "")
    if "livenessProbe" in services and services.get("livenessProbe") == services.get("readinessProbe"):
        r.add(src, where, "liveness and readiness probes ask the same gRPC service name: a draining shard would be killed")


def check_k8s(src: str, objects: list[dict], r: Report):
    by_kind: dict[str, list[dict]] = {}
    for o in objects:
        by_kind.setdefault(o.get("kind"), []).append(o)
    services = by_kind.get("Service", [])
    stss, jobs = by_kind.get("StatefulSet", []), by_kind.get("Job", [])
    if not stss:
        r.add(src, "-", "no StatefulSet for the shards")
    if not jobs:
        r.add(src, "-", "no Job for the workers")
    tls = [s for s in by_kind.get("Secret", []) if s.get("type") == "kubernetes.io/tls"]
    if not tls:
        r.add(src, "-", "no Secret of type kubernetes.io/tls")
    tls_names = {s["metadata"]["name"] for s in tls}

    for sts in stss:
        owner, spec = name_of(sts), sts["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"].get("labels")
        vols = check_pod(src, owner, pod, r)
        for t in tls_names:
            if t not in vols.values():
                r.add(src, owner, f"TLS secret {t} is not mounted as a volume")
        for c in pod.get("containers") or []:
            check_probes(src, owner, c, r)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if grace < 2 * CHECKPOINT_SECONDS:
            r.add(src, owner, f"terminationGracePeriodSeconds {grace} < 2 x checkpoint time ({2 * CHECKPOINT_SECONDS})")
        svc = next((s for s in services if s["metadata"]["name"] == spec.get("serviceName")), None)
        if svc is None or svc["spec"].get("clusterIP") != "None" or not selects({"matchLabels": svc["spec"].get("selector")}, labels):
            r.add(src, owner, f"serviceName {spec.get('serviceName')} is not a headless Service selecting the shards")
        pdbs = [p for p in by_kind.get("PodDisruptionBudget", []) if selects(p["spec"].get("selector"), labels)]
        if not pdbs:
            r.add(src, owner, "no PodDisruptionBudget selects the shards")
        for p in pdbs:
            mu = p["spec"].get("maxUnavailable")
            if not isinstance(mu, int) or mu > 1:
                r.add(src, name_of(p), f"maxUnavailable must be an integer <= 1 (got {mu!r})")
        check_network_policy(src, sts, labels, by_kind.get("NetworkPolicy", []), jobs, r)

    for job in jobs:
        owner, spec = name_of(job), job["spec"]
        pod = spec["template"]["spec"]
        check_pod(src, owner, pod, r)
        if spec.get("completionMode") != "Indexed":
            r.add(src, owner, "completionMode is not Indexed (the completion index is the rank)")
        if pod.get("restartPolicy") != "Never":
            r.add(src, owner, "restartPolicy is not Never (podFailurePolicy needs it)")
        rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
        failed = set()
        for rule in rules:
            ec = rule.get("onExitCodes") or {}
            if rule.get("action") == "FailJob" and ec.get("operator") == "In":
                failed |= set(ec.get("values") or [])
        if not PERMANENT_EXIT_CODES <= failed:
            r.add(src, owner, f"podFailurePolicy does not FailJob on exit codes {sorted(PERMANENT_EXIT_CODES - failed)}")
        if not any(rule.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
                   for rule in rules):
            r.add(src, owner, "podFailurePolicy does not Ignore DisruptionTarget")
        sub = pod.get("subdomain")
        labels = spec["template"]["metadata"].get("labels")
        svc = next((s for s in services if s["metadata"]["name"] == sub), None)
        if svc is None or svc["spec"].get("clusterIP") != "None" or not selects({"matchLabels": svc["spec"].get("selector")}, labels):
            r.add(src, owner, f"subdomain {sub!r} is not a headless Service selecting the workers")
    check_k8s_job_spec(src, by_kind, stss, jobs, r)


def check_network_policy(src, sts, labels, policies, jobs, r):
    owner = name_of(sts)
    worker_labels = [j["spec"]["template"]["metadata"].get("labels") for j in jobs]
    ports = {p.get("containerPort") for c in sts["spec"]["template"]["spec"]["containers"] for p in c.get("ports") or []
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


def check_k8s_job_spec(src, by_kind, stss, jobs, r):
    cms = [c for c in by_kind.get("ConfigMap", []) if "job.yaml" in (c.get("data") or {})]
    if len(cms) != 1 or not stss or not jobs:
        r.add(src, "-", f"expected one ConfigMap with job.yaml (found {len(cms)})")
        return
    job_spec = yaml.safe_load(cms[0]["data"]["job.yaml"]) or {}
    servers, workers = job_spec.get("servers", 2), job_spec.get("workers", 4)
    sts, job = stss[0], jobs[0]
    if sts["spec"].get("replicas") != servers:
        r.add(src, name_of(sts), f"replicas {sts['spec'].get('replicas')} != servers {servers} in job.yaml")
    for key in ("completions", "parallelism"):
        if job["spec"].get(key) != workers:
            r.add(src, name_of(job), f"{key} {job['spec'].get(key)} != workers {workers} in job.yaml")
    grpc_port = next((p["containerPort"] for c in sts["spec"]["template"]["spec"]["containers"]
                      for p in c.get("ports") or [] if p.get("name") == "grpc"), None)
    expected = ",".join(f"{sts['metadata']['name']}-{i}.{sts['spec'].get('serviceName')}:{grpc_port}" for i in range(servers))
    for c in job["spec"]["template"]["spec"]["containers"]:
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        args = c.get("args") or []
        ws = env.get("WORLD_SIZE") or flag_value(args, "--world-size")
        if ws is not None and str(ws) != str(workers):
            r.add(src, name_of(job), f"WORLD_SIZE {ws} != workers {workers} in job.yaml")
        srv = env.get("SKETCHPS_SERVERS") or flag_value(args, "--servers")
        if srv != expected:
            r.add(src, name_of(job), f"servers '{srv}' != '{expected}' (shard i is pod <statefulset>-i)")


def check_compose(src: str, compose_file: str, r: Report):
    try:
        services = topology.load(compose_file)
        topology.start_order(services)
    except topology.TopologyError as e:
        r.add(src, "-", str(e))
        return
    servers = {n: s for n, s in services.items() if s.argv and s.argv[0] == SERVER_BINARY}
    workers = {n: s for n, s in services.items() if s.argv and s.argv[0] == WORKER_BINARY}
    if not servers or not workers:
        r.add(src, "-", f"expected {SERVER_BINARY} and {WORKER_BINARY} services")
    for name, s in services.items():
        if not s.healthcheck_declared:
            r.add(src, name, "no healthcheck (declare one, or `disable: true` with the reason)")
        if not re.fullmatch(r"on-failure(:\d+)?", s.restart or ""):
            r.add(src, name, f"restart is {s.restart!r}, not on-failure[:N]")
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
        port = listen.rsplit(":", 1)[-1]
        if s.healthcheck is None:
            r.add(src, name, "a shard needs a healthcheck test (workers wait for service_healthy)")
        elif s.healthcheck.argv[:2] != ["sketchps", "health"] or not s.healthcheck.argv[2:3] or \
                not s.healthcheck.argv[2].endswith(":" + port):
            r.add(src, name, f"healthcheck {s.healthcheck.argv} does not run `sketchps health HOST:{port}`")
        shard_of[name] = (s.environment.get("SKETCHPS_SHARD") or flag_value(s.argv, "--shard"), port)
    for name, s in workers.items():
        for server in servers:
            if s.depends_on.get(server) != "service_healthy":
                r.add(src, name, f"does not depend on {server} with condition service_healthy")
    check_compose_job_spec(src, servers, workers, shard_of, r)


def check_compose_job_spec(src, servers, workers, shard_of, r):
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
        if srv != expected:
            r.add(src, name, f"servers '{srv}' != '{expected}' (ordered by SKETCHPS_SHARD)")


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
