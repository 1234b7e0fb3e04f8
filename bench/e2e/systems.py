"""The systems the benchmark compares and how one run of each is launched in the namespaces.

Systems: "sketchps <scheme>" (mode ps: S sketchps-server hosts + P worker hosts), "sketchps <scheme>
decentralized" (P workers with a Peer service each), "DDP + sketchps hook <scheme>" (a workload's
script under DDP, --backend ddp --hook sketchps, the gradients through sketchps.ddp.comm_hook to
the shards: the DDP ranks' environment plus the sketchps package's; records in the DDP format with
the hook's bytes), and the DDP systems "DDP dense", "DDP fp16",
"DDP PowerSGD r<R>", "DDP post-local SGD <H>", "DDP DiLoCo H<H>" (local_rivals.py) (P ranks, rank 0's
host is MASTER_ADDR). The workers depend on the workload:
cnn (the default job) runs sketchps-worker and, for DDP, ddp_train.py; vgg and vit run their script
(bench/e2e/workload_<name>.py) with --backend sketchps (the sketchps package, PYTHONPATH
ctx.python_path, configured by RANK, WORLD_SIZE and SKETCHPS_* variables) or --backend ddp --hook
none|fp16|powersgd|postlocal|diloco. Every process runs in its own host (namespace) of a netns_run.Network with
services server-0.. and worker-0..; every process gets OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE.

The daemons' command lines come from the launcher library through `sketchps launch argv`
(launch/py/launcher.py), with the harness's binaries as their programs; ports from their port files.
The processes are started, reaped (with their rusage) and stopped by launch/py/supervisor.py.

A workload's sketchps job must hold its model's layout: describe_script() runs the script once
outside the namespaces with SKETCHPS_DESCRIBE set, as `sketchps run --script` does, and
system_job() adds the keys it wrote (model: custom, layers, the optimizer's keys) to the job with
the system's scheme and mode; servers and workers both read that one file (ctx.job_files).

run_system(system, ctx, folder) launches one run and returns its record: the launch time of the
first process, per-process start/end/exit/CPU, the metrics file of every rank, and samples of the
bytes each host's link has carried (rx/tx counters of eth0, before the launch, every LINK_EVERY
seconds, and after the last worker). The daemons and
the Python workers get the TLS setting of ctx.tls_args (--tls-dir with the harness's certificates, or
--insecure; SKETCHPS_TLS_DIR or SKETCHPS_INSECURE=1). Servers start first; workers start once every
server's --port-file exists (grpc_port). Each server exits 0 by itself once every worker has left (possibly
before the last worker process has ended); when the workers have all exited 0, every server must
have exited 0 within ctx.server_exit_wait seconds. A worker that exits non-zero, a server that
exits non-zero or is still running then, or the per-run timeout raise RunFailure naming the process
with its log tail; whatever was started is always killed before run_system returns or raises.
"""
from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import job as jobspec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "launch/py"))
from launcher import LaunchError, daemon_argv, read_ports  # noqa: E402
from supervisor import Procs  # noqa: E402

BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "OMP_WAIT_POLICY": "PASSIVE"}
PEER_PORT = 7080
LINK_EVERY = 1.0  # seconds between two samples of the hosts' link counters


class RunFailure(Exception):
    """A benchmark run failed; the message names the process and carries its log tail."""


@dataclass
class System:
    name: str       # "sketchps gs_sgd", "sketchps topk decentralized", "DDP dense", "DDP PowerSGD r2"
    kind: str       # "sketchps" or "ddp"
    scheme: str = ""        # sketchps scheme, or the DDP compression ("none", "fp16" or "powersgd")
    mode: str = "ps"        # sketchps: ps or decentralized
    powersgd_rank: int = 0  # DDP PowerSGD: matrix_approximation_rank
    worker: str = "script"  # sketchps on a workload: its script (the package), "cpp": sketchps-worker, or
    #                         "hook": the script's DDP loop with sketchps.ddp.comm_hook
    period: int = 0         # DDP postlocal: steps between model averages; diloco: inner steps H
    rival_args: tuple = ()  # DDP diloco: the script's further local_rivals options (--outer-lr 1 ..., --inner-reset)
    overrides: tuple = ()   # sketchps: the system's own job overrides (local steps), after --set
    local_steps: int = 0    # sketchps SCHEME/lsH: H (its job's round-counted keys become exchanges of H steps)


def own_overrides(system: System, job: dict) -> list[str]:
    """The system's overrides of the workload's job (after --set): its own, and for local steps the
    job's round-counted keys as exchanges of H steps (job.local_step_overrides)."""
    return [*system.overrides, *jobspec.local_step_overrides(job, system.local_steps)]


def runs_on(system: System, workload: str) -> bool:
    """Whether a planned system runs on a workload: the C++ worker's on vgg only (its network is
    built into sketchps-worker; cnn runs on it anyway, vit has none); the comm hook's on the workload
    scripts only (the hook refuses train.local_steps, so SCHEME/lsH runs through DistributedOptimizer:
    every workload script's sketchps backend)."""
    if system.worker == "cpp":
        return workload == "vgg"
    if system.worker == "hook":
        return workload != "cnn" and not system.local_steps
    return True


@dataclass
class Context:
    net: object             # netns_run.Network with hosts server-0.., worker-0..
    bandwidth: str          # label, e.g. "100mbit" or "none"
    server_bin: str
    worker_bin: str
    sketchps_bin: str       # the front end: `sketchps launch` gives the daemons' command lines
    ddp_script: str
    job_path: Path          # the job YAML the harness wrote
    overrides: list[str]    # --set, passed to both daemons
    ddp_args: list[str]
    workers: int
    servers: int
    rounds: int
    timeout: float
    progress_every: float = 5.0
    tls_args: list[str] = field(default_factory=lambda: ["--insecure"])  # or ["--tls-dir", DIR]
    server_exit_wait: float = 30.0  # seconds a server gets to exit by itself after the last worker
    port_base: int = 29500
    runs: int = field(default=0)  # systems run so far on this network (fresh DDP port each time)
    workload: str = "cnn"   # cnn: the daemons and ddp_train.py; vgg, vit: their script
    script: str = ""        # the workload's script (both backends)
    python_path: str = ""   # the sketchps package (PYTHONPATH of the script's sketchps workers)
    job_files: dict = field(default_factory=dict)  # sketchps system name -> its job file (workloads)
    job: dict = field(default_factory=dict)  # the workload's job with --set (own_overrides)


def say(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


def describe_script(script: str, python_path: str, job_path: Path, workers: int, log: Path,
                    backend: tuple[str, ...] = ("--backend", "sketchps")) -> list[str]:
    """The job keys the script's model and optimizer define ("key=value" lines), written by the
    sketchps package when SKETCHPS_DESCRIBE is set; RunFailure (with the log tail) if it fails.
    backend: the script's arguments (("--backend", "ddp", "--hook", "sketchps", ...) describes the
    DDP loop's comm hook: optimizer.name external)."""
    with tempfile.TemporaryDirectory(prefix="sketchps-e2e-describe-") as tmp:
        keys = Path(tmp) / "keys.txt"
        env = {**BASE_ENV, "SKETCHPS_DESCRIBE": str(keys), "SKETCHPS_JOB": str(job_path), "RANK": "0",
               "WORLD_SIZE": str(workers), "PYTHONPATH": python_path}
        if "ddp" in backend:  # a gloo group of one, as `sketchps run --script` describes
            env.update(WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        with open(log, "w") as out:
            try:
                proc = subprocess.run(["/usr/bin/python3", script, *backend], env=env, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=300)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout (300 s)"
        if rc != 0 or not keys.exists():
            tail = "\n".join(f"    describe| {line}" for line in log.read_text(errors="replace").splitlines()[-15:])
            raise RunFailure(f"describing {script} (SKETCHPS_DESCRIBE, PYTHONPATH={python_path}) "
                             f"{'exited ' + str(rc) if rc != 0 else 'wrote no keys'}\n{tail}")
        return [line.strip() for line in keys.read_text().splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def system_job(job: dict, system: System, keys: list[str]) -> dict:
    """The job of one sketchps system of a workload: its scheme and mode, then the script's keys."""
    out = copy.deepcopy(job)
    for kv in [f"scheme.name={system.scheme}", f"mode={system.mode}", *own_overrides(system, job), *keys]:
        jobspec.apply_override(out, kv)
    return out


def tls_env(ctx: Context) -> dict:
    """ctx.tls_args for the sketchps package."""
    if "--tls-dir" in ctx.tls_args:
        return {"SKETCHPS_TLS_DIR": ctx.tls_args[ctx.tls_args.index("--tls-dir") + 1]}
    return {"SKETCHPS_INSECURE": "1"}


def job_flags(system: System, ctx: Context) -> dict:
    """The job both daemons of a system read: the workload's file, or the default job with --set."""
    if ctx.workload == "cnn":
        return {"job": str(ctx.job_path), "overrides": [*ctx.overrides, f"scheme.name={system.scheme}",
                                                         f"mode={system.mode}", *own_overrides(system, ctx.job)]}
    if system.worker == "cpp":  # the workload's job with its network built into sketchps-worker
        return {"job": str(ctx.job_path), "overrides": [f"scheme.name={system.scheme}", f"mode={system.mode}",
                                                         f"model={ctx.workload}", *own_overrides(system, ctx.job)]}
    return {"job": str(ctx.job_files[system.name]), "overrides": []}


def start_servers(procs: Procs, system: System, ctx: Context, folder: Path) -> list[str]:
    """Starts the shards; returns their host:port once every port file exists."""
    ports = [folder / f"server-{i}.port" for i in range(ctx.servers)]
    servers = []
    for i in range(ctx.servers):
        argv = daemon_argv(ctx.sketchps_bin, "server", ctx.server_bin, tls_args=ctx.tls_args, shard=i,
                           listen="0.0.0.0:0", port_file=str(ports[i]), **job_flags(system, ctx))
        servers.append(procs.start(f"server-{i}", "server", ctx.net.ns[f"server-{i}"], argv, BASE_ENV,
                                   folder / f"server-{i}.log"))
    deadline = time.monotonic() + min(120.0, ctx.timeout)
    while not all(p.exists() for p in ports):
        procs.poll()
        for s in servers:
            if s.rc is not None:
                raise RunFailure(f"{s.name} exited {s.rc} before it wrote its port file\n{procs.tail(s)}")
        if time.monotonic() > deadline:
            missing = [str(p) for p in ports if not p.exists()]
            raise RunFailure(f"servers not serving after {min(120.0, ctx.timeout):.0f} s (no {', '.join(missing)})")
        time.sleep(0.05)
    return [f"server-{i}:{grpc_port(ports[i])}" for i in range(ctx.servers)]


def grpc_port(path: Path) -> int:
    """The service port of a shard's --port-file (common/net/port_file.h)."""
    try:
        return int(read_ports(path)["grpc"])
    except (LaunchError, KeyError) as e:
        raise RunFailure(f"{path}: no gRPC port in the port file ({e})")


def sketchps_env(system: System, ctx: Context, folder: Path, servers: list[str], rank: int) -> dict:
    """What the sketchps package of a script rank reads: its place, the job, the servers or peers, TLS."""
    peers = ",".join(f"worker-{i}:{PEER_PORT}" for i in range(ctx.workers))
    where = {"SKETCHPS_SERVERS": ",".join(servers)} if system.mode == "ps" else \
        {"SKETCHPS_LISTEN": f"0.0.0.0:{PEER_PORT}", "SKETCHPS_PEERS": peers}
    return {**BASE_ENV, "RANK": str(rank), "WORLD_SIZE": str(ctx.workers), "SKETCHPS_JOB": str(ctx.job_files[system.name]),
            "PYTHONPATH": ctx.python_path, **where, **tls_env(ctx)}


def start_script_workers(procs: Procs, system: System, ctx: Context, folder: Path, servers: list[str]) -> None:
    """The workload's script with --backend sketchps on every worker host."""
    for r in range(ctx.workers):
        env = {**sketchps_env(system, ctx, folder, servers, r), "SKETCHPS_METRICS_OUT": str(folder / f"worker-{r}.jsonl")}
        argv = ["/usr/bin/python3", ctx.script, "--backend", "sketchps"]
        procs.start(f"worker-{r}", "worker", ctx.net.ns[f"worker-{r}"], argv, env, folder / f"worker-{r}.log")


def start_hook_ranks(procs: Procs, system: System, ctx: Context, folder: Path, servers: list[str]) -> None:
    """The workload's script with --backend ddp --hook sketchps: DDP's ranks, the hook to sketchps."""
    port = ctx.port_base + ctx.runs
    for r in range(ctx.workers):
        env = {**sketchps_env(system, ctx, folder, servers, r), "MASTER_ADDR": "worker-0", "MASTER_PORT": str(port),
               "GLOO_SOCKET_IFNAME": "eth0"}
        argv = ["/usr/bin/python3", ctx.script, "--backend", "ddp", "--job", str(ctx.job_path), "--hook", "sketchps",
                "--metrics-out", str(folder / f"worker-{r}.jsonl")]
        procs.start(f"worker-{r}", "worker", ctx.net.ns[f"worker-{r}"], argv, env, folder / f"worker-{r}.log")


def start_sketchps_workers(procs: Procs, system: System, ctx: Context, folder: Path, servers: list[str]) -> None:
    if ctx.workload != "cnn" and system.worker == "hook":
        start_hook_ranks(procs, system, ctx, folder, servers)
        return
    if ctx.workload != "cnn" and system.worker != "cpp":
        start_script_workers(procs, system, ctx, folder, servers)
        return
    for r in range(ctx.workers):
        where = {"servers": servers} if system.mode == "ps" else \
            {"listen": f"0.0.0.0:{PEER_PORT}", "peers": [f"worker-{i}:{PEER_PORT}" for i in range(ctx.workers)]}
        argv = daemon_argv(ctx.sketchps_bin, "worker", ctx.worker_bin, tls_args=ctx.tls_args, rank=r,
                           world_size=ctx.workers, metrics_out=str(folder / f"worker-{r}.jsonl"), threads=1,
                           **where, **job_flags(system, ctx))
        procs.start(f"worker-{r}", "worker", ctx.net.ns[f"worker-{r}"], argv, BASE_ENV, folder / f"worker-{r}.log")


def ddp_system_args(system: System) -> list[str]:
    """The DDP script's arguments of the system beyond --compression/--hook."""
    if system.scheme == "powersgd":
        return ["--powersgd-rank", str(system.powersgd_rank)]
    if system.scheme in ("postlocal", "diloco"):
        return ["--period", str(system.period), *system.rival_args]
    return []


def start_ddp_ranks(procs: Procs, system: System, ctx: Context, folder: Path) -> None:
    port = ctx.port_base + ctx.runs  # a fresh port: no TIME_WAIT of an earlier run on this host
    for r in range(ctx.workers):
        env = {**BASE_ENV, "RANK": str(r), "WORLD_SIZE": str(ctx.workers), "MASTER_ADDR": "worker-0",
               "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "eth0"}
        rank_args = ddp_system_args(system)
        if ctx.workload == "cnn":
            argv = ["/usr/bin/python3", ctx.ddp_script, "--compression", system.scheme, *rank_args, *ctx.ddp_args]
        else:
            argv = ["/usr/bin/python3", ctx.script, "--backend", "ddp", "--job", str(ctx.job_path), "--hook",
                    system.scheme, *rank_args]
        argv += ["--metrics-out", str(folder / f"worker-{r}.jsonl")]
        procs.start(f"worker-{r}", "worker", ctx.net.ns[f"worker-{r}"], argv, env, folder / f"worker-{r}.log")


def last_round(path: Path) -> int | None:
    """The last round number in a metrics file (None before the first record)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if "round" in rec:
            return int(rec["round"])
    return None


def wait_for_workers(procs: Procs, system: System, ctx: Context, folder: Path, t0: float, links: list) -> None:
    """Polls the workers until all have exited; appends a link_sample() to `links` every LINK_EVERY s."""
    deadline = time.monotonic() + ctx.timeout
    next_progress = time.monotonic() + ctx.progress_every
    next_sample = time.monotonic() + LINK_EVERY
    run = f"{system.name} ({ctx.workload} {ctx.bandwidth})"
    while procs.running("worker"):
        if time.monotonic() >= next_sample:
            next_sample = time.monotonic() + LINK_EVERY
            links.append(link_sample(ctx.net))
        for p in procs.poll():
            if p.role == "worker" and p.rc != 0:
                raise RunFailure(f"{run}: {p.name} exited {p.rc}\n{procs.tail(p)}")
            if p.role == "server" and p.rc != 0:
                raise RunFailure(f"{run}: {p.name} exited {p.rc} while the workers still ran\n{procs.tail(p)}")
        now = time.monotonic()
        if now > deadline:
            raise RunFailure(f"{run}: timeout after {ctx.timeout:.0f} s (--timeout); still running: "
                             f"{', '.join(p.name for p in procs.running())}")
        if now >= next_progress:
            next_progress = now + ctx.progress_every
            r = last_round(folder / "worker-0.jsonl")
            where = "starting" if r is None else f"round {r + 1}/{ctx.rounds}"
            say(f"[{ctx.workload} {ctx.bandwidth}] {system.name}: {where}, {time.time() - t0:.0f} s")
        time.sleep(0.1)


def wait_for_servers(procs: Procs, system: System, ctx: Context) -> None:
    """The shards end with the job: each exits 0 once every worker has left."""
    servers = procs.of_role("server")
    run = f"{system.name} ({ctx.workload} {ctx.bandwidth})"
    if not procs.wait(servers, ctx.server_exit_wait):
        names = ", ".join(s.name for s in servers if s.rc is None)
        raise RunFailure(f"{run}: {names} still running {ctx.server_exit_wait:.0f} s after the last worker exited"
                         f" (a shard exits once every worker has left)\n"
                         + "\n".join(procs.tail(s) for s in servers if s.rc is None))
    for s in servers:
        if s.rc != 0:
            raise RunFailure(f"{run}: {s.name} exited {s.rc} at the end of the job (expected 0)\n{procs.tail(s)}")


def link_sample(net) -> list:
    """[unix time, {host: [rx bytes, tx bytes]}] of every host's eth0 now; the map is empty when
    the counters cannot be read (no network)."""
    counters = {}
    for host, ns in getattr(net, "ns", {}).items():
        proc = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"], capture_output=True, text=True)
        try:
            stats = json.loads(proc.stdout)[0]["stats64"]
            counters[host] = [int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])]
        except (ValueError, LookupError, TypeError):
            return [time.time(), {}]
    return [time.time(), counters]


def run_system(system: System, ctx: Context, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("*.jsonl"), *folder.glob("*.port")]:
        stale.unlink()  # the daemons append to metrics files
    procs = Procs()
    links = [link_sample(ctx.net)]
    try:
        t0 = time.time()
        if system.kind == "ddp":
            start_ddp_ranks(procs, system, ctx, folder)
        else:
            servers = start_servers(procs, system, ctx, folder) if system.mode == "ps" else []
            start_sketchps_workers(procs, system, ctx, folder, servers)
        wait_for_workers(procs, system, ctx, folder, t0, links)
        links.append(link_sample(ctx.net))
        wait_for_servers(procs, system, ctx)
    finally:
        procs.kill_all()
        ctx.runs += 1
    return {"system": system.name, "kind": system.kind, "scheme": system.scheme, "mode": system.mode,
            "workload": ctx.workload, "bandwidth": ctx.bandwidth, "launch": min(p.start for p in procs.procs.values()),
            "link_samples": links,
            "procs": [p.summary() for p in procs.procs.values()], "expected_rounds": ctx.rounds,
            "metrics": {str(r): str(folder / f"worker-{r}.jsonl") for r in range(ctx.workers)}}
