"""The systems the benchmark compares and how one run of each is launched in the namespaces.

Systems: "sketchps <scheme>" (mode ps: S sketchps-server hosts + P sketchps-worker hosts),
"sketchps <scheme> decentralized" (P workers with --listen/--peers), "DDP dense" and "DDP fp16"
(P ranks of ddp_train.py, rank 0's host is MASTER_ADDR). Every process runs in its own host
(namespace) of a netns_run.Network with services server-0.. and worker-0..; every process gets
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE.

run_system(system, ctx, folder) launches one run and returns its record: the launch time of the
first process, per-process start/end/exit/CPU, the metrics file of every rank. Both daemons get
ctx.tls_args (--tls-dir with the harness's certificates, or --insecure). Servers start first;
workers start once every server's --port-file exists. Each server exits 0 by itself once every
worker has left (possibly before the last worker process has ended); when the workers have all
exited 0, every server must have exited 0 within ctx.server_exit_wait seconds. A worker that exits
non-zero, a server that exits non-zero or is still running then, or the per-run timeout raise
RunFailure naming the process with its log tail; whatever was started is always killed before
run_system returns or raises.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from procs import Procs, RunFailure

BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "OMP_WAIT_POLICY": "PASSIVE"}
PEER_PORT = 7080


@dataclass
class System:
    name: str       # "sketchps gs_sgd", "sketchps topk decentralized", "DDP dense", "DDP fp16"
    kind: str       # "sketchps" or "ddp"
    scheme: str = ""        # sketchps scheme, or the DDP compression ("none" or "fp16")
    mode: str = "ps"        # sketchps: ps or decentralized


@dataclass
class Context:
    net: object             # netns_run.Network with hosts server-0.., worker-0..
    bandwidth: str          # label, e.g. "100mbit" or "none"
    server_bin: str
    worker_bin: str
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


def say(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


def sketchps_common(system: System, ctx: Context) -> list[str]:
    args = ["--job", str(ctx.job_path), *ctx.tls_args]
    for kv in [*ctx.overrides, f"scheme.name={system.scheme}", f"mode={system.mode}"]:
        args += ["--set", kv]
    return args


def start_servers(procs: Procs, system: System, ctx: Context, folder: Path) -> list[str]:
    """Starts the shards; returns their host:port once every port file exists."""
    ports = [folder / f"server-{i}.port" for i in range(ctx.servers)]
    servers = []
    for i in range(ctx.servers):
        argv = [ctx.server_bin, *sketchps_common(system, ctx), "--shard", str(i), "--listen", "0.0.0.0:0",
                "--port-file", str(ports[i])]
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
    return [f"server-{i}:{ports[i].read_text().strip()}" for i in range(ctx.servers)]


def start_sketchps_workers(procs: Procs, system: System, ctx: Context, folder: Path, servers: list[str]) -> None:
    for r in range(ctx.workers):
        argv = [ctx.worker_bin, *sketchps_common(system, ctx), "--rank", str(r), "--world-size", str(ctx.workers),
                "--metrics-out", str(folder / f"worker-{r}.jsonl"), "--threads", "1"]
        if system.mode == "ps":
            argv += ["--servers", ",".join(servers)]
        else:
            peers = ",".join(f"worker-{i}:{PEER_PORT}" for i in range(ctx.workers))
            argv += ["--listen", f"0.0.0.0:{PEER_PORT}", "--peers", peers]
        procs.start(f"worker-{r}", "worker", ctx.net.ns[f"worker-{r}"], argv, BASE_ENV, folder / f"worker-{r}.log")


def start_ddp_ranks(procs: Procs, system: System, ctx: Context, folder: Path) -> None:
    port = ctx.port_base + ctx.runs  # a fresh port: no TIME_WAIT of an earlier run on this host
    for r in range(ctx.workers):
        env = {**BASE_ENV, "RANK": str(r), "WORLD_SIZE": str(ctx.workers), "MASTER_ADDR": "worker-0",
               "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "eth0"}
        argv = ["/usr/bin/python3", ctx.ddp_script, "--compression", system.scheme, *ctx.ddp_args,
                "--metrics-out", str(folder / f"worker-{r}.jsonl")]
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


def wait_for_workers(procs: Procs, system: System, ctx: Context, folder: Path, t0: float) -> None:
    deadline = time.monotonic() + ctx.timeout
    next_progress = time.monotonic() + ctx.progress_every
    while procs.running("worker"):
        for p in procs.poll():
            if p.role == "worker" and p.rc != 0:
                raise RunFailure(f"{system.name} ({ctx.bandwidth}): {p.name} exited {p.rc}\n{procs.tail(p)}")
            if p.role == "server" and p.rc != 0:
                raise RunFailure(f"{system.name} ({ctx.bandwidth}): {p.name} exited {p.rc} while the "
                                 f"workers still ran\n{procs.tail(p)}")
        now = time.monotonic()
        if now > deadline:
            raise RunFailure(f"{system.name} ({ctx.bandwidth}): timeout after {ctx.timeout:.0f} s (--timeout); still "
                             f"running: {', '.join(p.name for p in procs.running())}")
        if now >= next_progress:
            next_progress = now + ctx.progress_every
            r = last_round(folder / "worker-0.jsonl")
            where = "starting" if r is None else f"round {r + 1}/{ctx.rounds}"
            say(f"[{ctx.bandwidth}] {system.name}: {where}, {time.time() - t0:.0f} s")
        time.sleep(0.1)


def wait_for_servers(procs: Procs, system: System, ctx: Context) -> None:
    """The shards end with the job: each exits 0 once every worker has left."""
    servers = procs.of_role("server")
    if not procs.wait(servers, ctx.server_exit_wait):
        names = ", ".join(s.name for s in servers if s.rc is None)
        raise RunFailure(f"{system.name} ({ctx.bandwidth}): {names} still running {ctx.server_exit_wait:.0f} s after the "
                         f"last worker exited (a shard exits once every worker has left)\n"
                         + "\n".join(procs.tail(s) for s in servers if s.rc is None))
    for s in servers:
        if s.rc != 0:
            raise RunFailure(f"{system.name} ({ctx.bandwidth}): {s.name} exited {s.rc} at the end of the job (expected 0)\n"
                             f"{procs.tail(s)}")


def run_system(system: System, ctx: Context, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("*.jsonl"), *folder.glob("*.port")]:
        stale.unlink()  # the daemons append to metrics files
    procs = Procs()
    try:
        t0 = time.time()
        if system.kind == "ddp":
            start_ddp_ranks(procs, system, ctx, folder)
        else:
            servers = start_servers(procs, system, ctx, folder) if system.mode == "ps" else []
            start_sketchps_workers(procs, system, ctx, folder, servers)
        wait_for_workers(procs, system, ctx, folder, t0)
        wait_for_servers(procs, system, ctx)
    finally:
        procs.kill_all()
        ctx.runs += 1
    return {"system": system.name, "kind": system.kind, "scheme": system.scheme, "mode": system.mode,
            "bandwidth": ctx.bandwidth, "launch": min(p.start for p in procs.procs.values()),
            "procs": [p.summary() for p in procs.procs.values()], "expected_rounds": ctx.rounds,
            "metrics": {str(r): str(folder / f"worker-{r}.jsonl") for r in range(ctx.workers)}}
