#!/usr/bin/env python3
"""End-to-end benchmark: sketchps against PyTorch DDP on emulated hosts (network namespaces).

For each --bandwidth (tc rate such as 100mbit, 1gbit, or none), one netns_run.Network of hosts
server-0.. and worker-0.. is made and, for each --workload, each system runs on it in turn (never
two at once): sketchps in each --mode for each of --schemes (S servers + P workers from one job
YAML), then the DDP systems of --ddp (dense, fp16, PowerSGD of rank R, and issue 35's local-step rivals
post-local SGD and DiLoCo from local_rivals.py: P ranks on the same job). sketchps' own local steps
(--schemes SCHEME/lsH) run in sketchps-worker on cnn (and vgg with --cpp-worker) and in the workload
scripts' DistributedOptimizer on vgg and vit. --dry-run
checks the options (no root needed) and prints every run the command would make instead.
Workloads: cnn, the default job (the C++ daemons sketchps-server/sketchps-worker, --set overrides
passed through; DDP: ddp_train.py); vgg and vit, a Python script each (bench/e2e/workload_*.py)
that runs under both backends (sketchps: the sketchps package from --python-path on every worker
host, with the job's model layout found by running the script once in describe mode; DDP: gloo).
The daemons and the Python workers run with mutual TLS, as deployed: `sketchps certs` makes a CA
and the certificates of every worker and shard once per harness run, in --out/certs (--insecure:
plaintext instead). The shards exit by themselves once every worker has left; a shard that fails,
or is still running --server-exit-wait seconds after the last worker, fails the run. Progress goes
to stderr. Outputs in --out: <workload>/job.yaml (and the sketchps systems' job-*.yaml), certs/,
one folder of logs and metrics per run (<workload>/<bandwidth>/<system>/), results.json, table.md,
accuracy-<workload>-<bandwidth>.png/.svg; --write-doc also rewrites the generated block of a
Markdown file (plots copied to img/ beside it). The headline figure is the time to accuracy
(figures.py); the performance targets (targets.py) are printed with PASS/MISS; a MISS never fails
the run.

Exit codes: 0 every run completed; 1 a run failed (the failing process and its log tail are
printed; whatever was started is killed; results.json holds what finished); 2 bad usage (the
message names the option or file). Namespaces are always removed, also on SIGINT/SIGTERM.
Needs root, iproute2, and /usr/bin/python3 with torch, matplotlib, yaml and numpy.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path



def _early_signal(signum, _frame):
    """Until main() installs on_signal: nothing has started yet, so there is nothing to clean up."""
    print(f"e2e: FAILED: interrupted by signal {signum} (before any run started)", file=sys.stderr, flush=True)
    sys.exit(1)


# The imports below (matplotlib, numpy) take seconds on a loaded machine: a SIGTERM meanwhile must
# still end the harness with exit 1, as documented, not kill it.
signal.signal(signal.SIGINT, _early_signal)
signal.signal(signal.SIGTERM, _early_signal)
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "deploy/emulate"))
import figures  # noqa: E402
import job as jobspec  # noqa: E402
import describe  # noqa: E402
import report  # noqa: E402
import targets  # noqa: E402
from netns_run import Network, RunError  # noqa: E402
from systems import (Context, RunFailure, System, describe_script, ddp_system_args, own_overrides,  # noqa: E402
                     run_system, runs_on, say, system_job)

SCHEMES = ["dense", "topk", "dgc", "gtopk", "sketched_sgd", "gs_sgd", "fetchsgd", "sdagc", "sidco", "scalecom"]
DDP_VARIANTS = re.compile(r"^(dense|fp16|powersgd-r([1-9][0-9]*)|postlocal([1-9][0-9]*)|diloco([1-9][0-9]*)(avg)?(reset)?)$")
# A sketchps scheme with local steps: topk/ls4 (H = 4, the Nesterov outer step), topk/ls4avg (plain averaging);
# a keep suffix (topk/ls4avgkeep) keeps the inner optimizer's state across rounds (train.inner_state keep).
LOCAL_STEPS = re.compile(r"^([a-z_]+)/ls([1-9][0-9]*)(avg)?(keep)?$")
# The up-front accuracy of DDP dense on the cnn job (docs/reports/performance.md: 88.00%); the workloads state theirs.
CNN_EXPECTED_ACCURACY = 0.88
BINARIES = {"sketchps-server": "server/sketchps-server", "sketchps-worker": "worker/sketchps-worker",
            "sketchps": "tools/sketchps"}
BANDWIDTH = re.compile(r"^\d+(\.\d+)?[kmgt]?(bit|bps)$", re.I)


class UsageError(Exception):
    """Bad options (exit 2)."""


def comma_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv):
    ap = argparse.ArgumentParser(description="sketchps against PyTorch DDP on emulated hosts (see the module doc)")
    ap.add_argument("--bin-dir", default=str(REPO / "build/ci"),
                    help="build folder (server/sketchps-server, worker/sketchps-worker, tools/sketchps) or a folder holding them")
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH",
                    help="a binary's path, NAME sketchps-server, sketchps-worker or sketchps (overrides --bin-dir)")
    ap.add_argument("--insecure", action="store_true",
                    help="run the daemons in plaintext (--insecure) instead of mutual TLS; no certificates, no sketchps binary")
    ap.add_argument("--python-path", help="the sketchps package for the workload scripts (default: BIN_DIR/python)")
    ap.add_argument("--cpp-worker", action="store_true",
                    help="also run each ps scheme on the vgg workload with sketchps-worker (its network is built in) "
                         "beside the Python script: the Python path against the C++ worker; the only way to run "
                         "SCHEME/lsH on vgg with the C++ worker (the scripts run them through DistributedOptimizer)")
    ap.add_argument("--hook", default="", metavar="SCHEMES",
                    help="also run the workload's DDP script with sketchps.ddp.comm_hook, one run per scheme "
                         "(comma-separated; vgg and vit): one script, the DDP variants' backends and ours")
    ap.add_argument("--workload", action="append", metavar="NAME",
                    help=f"{', '.join(jobspec.WORKLOADS)}; repeatable or comma-separated (default cnn)")
    ap.add_argument("--schemes", default="topk", help=f"comma-separated, the first is the default; of {','.join(SCHEMES)}, each optionally "
                         "/lsH (train.local_steps H, Nesterov outer step) or /lsHavg (plain averaging), then optionally keep "
                         "(train.inner_state keep: the inner optimizer's state kept across rounds)")
    ap.add_argument("--mode", default="ps", help="sketchps modes, comma-separated: ps, decentralized")
    ap.add_argument("--ddp", default="dense,fp16,powersgd-r2,powersgd-r4",
                    help="DDP variants, comma-separated: dense, fp16, powersgd-rR (PowerSGD of rank R), postlocalH "
                         "(post-local SGD, models averaged every H steps), dilocoH (DiLoCo, H inner steps; dilocoHavg: "
                         "plain averaging as the outer step; dilocoHavgreset or dilocoHreset: the inner optimizer's "
                         "state zeroed at every outer step, as sketchps' local steps do) (none: no DDP)")
    ap.add_argument("--bandwidth", action="append", metavar="RATE",
                    help="link cap, tc syntax (100mbit) or none; repeatable (default 100mbit)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="job override of every workload (sketchps and DDP)")
    ap.add_argument("--timeout", type=float, default=1800, help="limit per system run, seconds")
    ap.add_argument("--server-exit-wait", type=float, default=30,
                    help="seconds the shards get to exit by themselves after the last worker (else the run fails)")
    ap.add_argument("--progress-every", type=float, default=5, help="seconds between progress lines")
    ap.add_argument("--out", default=str(REPO / "runs" / time.strftime("e2e-%Y%m%d-%H%M%S")), help="output folder")
    ap.add_argument("--write-doc", metavar="FILE.md", help="write the results into this Markdown file's generated block")
    ap.add_argument("--dry-run", action="store_true",
                    help="run nothing: check the options (not root), then print every run the command would make, "
                         "one line each (workload, bandwidth, system, rounds and steps, its job overrides or DDP "
                         "arguments)")
    ap.add_argument("--from-results", metavar="results.json", action="append",
                    help="run nothing: redo the table, plots, targets and --write-doc from an earlier run's results; "
                         "repeated: the runs of several invocations merged (outputs in the first one's folder)")
    return ap.parse_args(argv)


def binaries(args, needed: list[str] | None = None) -> dict[str, str]:
    """The daemons (or the `needed` ones), and `sketchps` (the daemons' command lines through
    `sketchps launch argv`, and the certificates unless --insecure)."""
    needed = list(needed or BINARIES)
    if "sketchps" not in needed:
        needed.append("sketchps")
    paths = {}
    for name in needed:  # the build layout, else every binary in the folder itself
        layout, flat = Path(args.bin_dir) / BINARIES[name], Path(args.bin_dir) / name
        paths[name] = flat if not layout.exists() and flat.exists() else layout
    for spec in args.bin:
        name, eq, path = spec.partition("=")
        if not eq or name not in BINARIES:
            raise UsageError(f"--bin {spec!r}: expected sketchps-server=PATH, sketchps-worker=PATH or sketchps=PATH")
        if name in needed:
            paths[name] = Path(path)
    for name, path in paths.items():
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"{name}: no executable at {path} (--bin-dir / --bin; build: bash scripts/build.sh ci)")
    return {name: str(path.absolute()) for name, path in paths.items()}


def scheme_system(spec: str, mode: str) -> System:
    """The sketchps system of a --schemes entry: a scheme, or SCHEME/lsH[avg][keep] (train.local_steps H,
    the Nesterov outer step with the job's defaults, or plain averaging with avg; keep: train.inner_state
    keep, the inner optimizer's state carried across rounds instead of reset)."""
    m = LOCAL_STEPS.match(spec)
    scheme = m.group(1) if m else spec
    if scheme not in SCHEMES:
        raise UsageError(f"--schemes: unknown scheme {scheme!r}; valid: {', '.join(SCHEMES)} "
                         "(optionally /lsH or /lsHavg: H local steps, Nesterov or averaging outer step; then keep: inner state kept)")
    name, overrides = f"sketchps {scheme}", ()
    if m:
        outer = "average" if m.group(3) else "nesterov"
        name += f" H{m.group(2)} {outer}"
        overrides = (f"train.local_steps={m.group(2)}", f"train.outer_optimizer.name={outer}")
        if m.group(4):
            name += " kept state"
            overrides += ("train.inner_state=keep",)
    return System(name + ("" if mode == "ps" else " decentralized"), "sketchps", scheme, mode, overrides=overrides,
                  local_steps=int(m.group(2)) if m else 0)


def ddp_system(variant: str) -> System:
    """The DDP system of a --ddp entry (UsageError if it is none of the variants)."""
    m = DDP_VARIANTS.match(variant)
    if not m:
        raise UsageError(f"--ddp: {variant!r} is not dense, fp16, powersgd-rR (e.g. powersgd-r2), postlocalH "
                         "(post-local SGD, models averaged every H steps), dilocoH (DiLoCo, H inner steps) or none")
    if m.group(2):
        return System(f"DDP PowerSGD r{m.group(2)}", "ddp", "powersgd", powersgd_rank=int(m.group(2)))
    if m.group(3):
        return System(f"DDP post-local SGD {m.group(3)}", "ddp", "postlocal", period=int(m.group(3)))
    if m.group(4):
        avg, reset = bool(m.group(5)), bool(m.group(6))
        name = f"DDP DiLoCo H{m.group(4)}" + (" average" if avg else "") + (" inner reset" if reset else "")
        rival_args = (("--outer-lr", "1", "--outer-momentum", "0") if avg else ()) + (("--inner-reset",) if reset else ())
        return System(name, "ddp", "diloco", period=int(m.group(4)), rival_args=rival_args)
    return System(f"DDP {variant}", "ddp", "none" if variant == "dense" else "fp16")


def plan_systems(args) -> list[System]:
    schemes, modes, ddp = comma_list(args.schemes), comma_list(args.mode), comma_list(args.ddp)
    for m in modes:
        if m not in ("ps", "decentralized"):
            raise UsageError(f"--mode: {m!r} is not ps or decentralized")
    if ddp == ["none"]:
        ddp = []
    systems = [scheme_system(s, m) for m in modes for s in schemes]
    for s in comma_list(getattr(args, "hook", "") or ""):
        if s not in SCHEMES:
            raise UsageError(f"--hook: unknown scheme {s!r}; valid: {', '.join(SCHEMES)}")
        systems += [System(f"DDP + sketchps hook {s}" + ("" if m == "ps" else " decentralized"), "sketchps", s, m,
                           worker="hook") for m in modes]
    if getattr(args, "cpp_worker", False):
        for s in schemes:
            base = scheme_system(s, "ps")
            systems.append(System(f"{base.name} C++ worker", "sketchps", base.scheme, "ps", worker="cpp",
                                  overrides=base.overrides, local_steps=base.local_steps))
    systems += [ddp_system(d) for d in ddp]
    if not systems:
        raise UsageError("nothing to run: --schemes and --ddp are both empty")
    return systems


def workloads_of(args) -> list[str]:
    names = list(dict.fromkeys(w for value in (args.workload or ["cnn"]) for w in comma_list(value)))
    for w in names:
        if w not in jobspec.WORKLOADS:
            raise UsageError(f"--workload {w!r}: expected one of {', '.join(jobspec.WORKLOADS)}")
    return names


def python_path(args) -> str:
    """The sketchps package's folder (PYTHONPATH of the workload scripts' sketchps workers)."""
    path = Path(args.python_path or Path(args.bin_dir) / "python")
    if not (path / "sketchps" / "torch.py").is_file() or not list((path / "sketchps").glob("_core*.so")):
        raise UsageError(f"--python-path: no sketchps package (sketchps/torch.py and _core*.so) in {path} "
                         "(build: cmake --build --preset ci)")
    return str(path.absolute())


def check_args(args):
    """Everything that can be checked before a namespace exists; raises UsageError (JobError)."""
    bandwidths = args.bandwidth or ["100mbit"]
    for bw in bandwidths:
        if bw != "none" and not BANDWIDTH.match(bw):
            raise UsageError(f"--bandwidth {bw!r}: expected a tc rate such as 100mbit, or none")
    for kv in args.set:
        if kv.split("=", 1)[0] in ("scheme.name", "mode"):
            raise UsageError(f"--set {kv}: choose schemes and modes with --schemes and --mode")
    workloads = workloads_of(args)
    if os.geteuid() != 0 and not getattr(args, "dry_run", False):
        raise UsageError("must run as root (network namespaces); not skipping")
    systems = plan_systems(args)
    check_local_steps(args, systems, workloads)
    jobs = {w: jobspec.make_job(args.set, w) for w in workloads}
    ddp_args = jobspec.ddp_args(jobs["cnn"]) if "cnn" in jobs and any(s.kind == "ddp" for s in systems) else []
    bins, package = {}, ""
    if any(s.kind == "sketchps" for s in systems):
        cpp = "cnn" in jobs or (args.cpp_worker and "vgg" in jobs)
        bins = binaries(args, ["sketchps-server", *(["sketchps-worker"] if cpp else [])])
        if any(w != "cnn" for w in workloads):
            package = python_path(args)
    return bandwidths, workloads, systems, jobs, ddp_args, bins, package


def check_local_steps(args, systems: list[System], workloads: list[str]) -> None:
    """sketchps' local steps (SCHEME/lsH) run in sketchps-worker (cnn; vgg with --cpp-worker, ps mode
    only there) and in the workload scripts' DistributedOptimizer (vgg, vit; both modes); UsageError,
    naming the flag, for the C++ worker's decentralized mode."""
    specs = [s for s in comma_list(args.schemes) if LOCAL_STEPS.match(s)]
    if not specs or not getattr(args, "cpp_worker", False) or "vgg" not in workloads:
        return
    if "decentralized" in comma_list(args.mode):
        raise UsageError(f"--schemes {','.join(specs)}: on the vgg workload --cpp-worker runs sketchps' local steps in "
                         "ps mode only, not --mode decentralized")


def prepare_jobs(out: Path, jobs: dict, systems: list[System], package: str) -> dict[str, dict[str, Path]]:
    """Writes <workload>/job.yaml; for the workloads' sketchps systems also their job with the
    script's keys (describe mode). Returns {workload: {system name: job file}}."""
    files = {}
    for workload, job in jobs.items():
        folder = out / workload
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.yaml").write_text(jobspec.dump(job, workload))
        files[workload] = {}
        mine = [s for s in systems if s.kind == "sketchps" and s.worker != "cpp" and runs_on(s, workload)]
        if workload == "cnn" or not mine:
            continue
        keys = {}
        for worker, backend in (("script", ("--backend", "sketchps")),
                                ("hook", ("--backend", "ddp", "--job", str(folder / "job.yaml"), "--hook", "sketchps"))):
            if any(s.worker == worker for s in mine):
                say(f"{workload}: describing {jobspec.script(workload)} {' '.join(backend[:2])} (its model's layout "
                    "for the sketchps job)")
                keys[worker] = describe_script(jobspec.script(workload), package, folder / "job.yaml",
                                               int(job["workers"]), folder / f"describe-{worker}.log", backend)
        for s in mine:
            path = folder / f"job-{s.name.replace(' ', '-').replace('+', 'and')}.yaml"
            path.write_text(jobspec.dump(system_job(job, s, keys[s.worker]), workload))
            files[workload][s.name] = path
    return files


def make_certs(bins: dict[str, str], out: Path, workers: int, servers: int) -> Path:
    """A new CA and the certificates of every worker and shard, in out/certs; RunFailure if it fails."""
    certs = out / "certs"
    argv = [bins["sketchps"], "certs", "--out", str(certs), "--workers", str(workers), "--servers", str(servers), "--new-ca"]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RunFailure(f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stdout + proc.stderr).strip()}")
    say(f"certificates of {workers} worker(s) and {servers} shard(s) in {certs}")
    return certs


def run_bandwidth(i: int, bw: str, systems: list[System], ctx_args: dict, out: Path, rows: list[dict]) -> None:
    """Every workload's systems, one after another, on one network capped at `bw`."""
    workloads = ctx_args["workloads"]
    servers = max(int(w["job"]["servers"]) for w in workloads.values())
    workers = max(int(w["job"]["workers"]) for w in workloads.values())
    hosts = [f"server-{s}" for s in range(servers)] + [f"worker-{w}" for w in range(workers)]
    net = Network(f"{os.getpid()}.{i}", hosts, None if bw == "none" else bw)
    common = {k: v for k, v in ctx_args.items() if k != "workloads"}
    try:
        net.create()
        runs = 0
        for workload, w in workloads.items():
            job = w["job"]
            ctx = Context(net=net, bandwidth=bw, workers=int(job["workers"]), servers=int(job["servers"]),
                          rounds=jobspec.total_rounds(job), job_path=w["job_path"], workload=workload,
                          script=jobspec.script(workload), job_files=w["job_files"], runs=runs, job=job, **common)
            for system in systems:
                if not runs_on(system, workload):
                    continue
                ctx.rounds = system_rounds(job, system)
                say(f"[{workload} {bw}] {system.name}: starting ({ctx.rounds} rounds, timeout {ctx.timeout:.0f} s)")
                load = os.getloadavg()[0]
                record = run_system(system, ctx, out / workload / bw / system.name.replace(" ", "-"))
                row = {**record, "loadavg_before": load, "figures": figures.derive(record)}
                rows.append(row)
                f = row["figures"]
                say(f"[{workload} {bw}] {system.name}: done: start-up {f['startup_s']:.1f} s, train loop "
                    f"{f['train_loop_s']:.1f} s, final eval {f['final_eval_s']:.1f} s, CPU {f['cpu_s']:.0f} s, "
                    f"accuracy {report.fmt(f['accuracy'], '.4f')}")
            runs = ctx.runs
    except RunError as e:
        raise RunFailure(str(e))
    finally:
        net.remove()


def system_rounds(job: dict, system: System) -> int:
    """The rounds of a system's job: its own overrides (local steps: exchanges of H steps) applied."""
    own = copy.deepcopy(job)
    for kv in own_overrides(system, job):
        jobspec.apply_override(own, kv)
    return jobspec.total_rounds(own)


def dry_run(systems: list[System], jobs: dict, bandwidths: list[str]) -> list[str]:
    """One line per run the command would make, in its order: workload, bandwidth, system, rounds
    (local steps: exchanges, and the steps they take), and the job overrides (sketchps) or the
    script's arguments (DDP) that make the system."""
    lines = []
    for bw in bandwidths:
        for workload, job in jobs.items():
            for s in systems:
                if not runs_on(s, workload):
                    continue
                rounds = system_rounds(job, s)
                steps = f" ({rounds} exchanges x {s.local_steps} steps)" if s.local_steps > 1 else ""
                if s.kind == "ddp":
                    flag = "--compression" if workload == "cnn" else "--hook"
                    how = " ".join([flag, s.scheme, *ddp_system_args(s)])
                else:
                    worker = {"cpp": "sketchps-worker", "hook": "DDP + comm hook"}.get(
                        s.worker, "sketchps-worker" if workload == "cnn" else "script")
                    model = [f"model={workload}"] if s.worker == "cpp" else []
                    how = f"{worker}: " + " ".join([f"scheme.name={s.scheme}", f"mode={s.mode}", *model,
                                                    *own_overrides(s, job)])
                lines.append(f"{workload} {bw} | {s.name} | {rounds} rounds{steps} | {how}")
    return lines


def upfront_targets(workloads) -> dict[str, float]:
    """Each workload's stated target (expected DDP dense accuracy - 1 point)."""
    return {w: CNN_EXPECTED_ACCURACY - 0.01 if w == "cnn" else jobspec.workload_module(w).WORKLOAD.target_accuracy
            for w in workloads}


def finish(args, results: dict, rows: list[dict], out: Path, default: str) -> None:
    results.update(runs=rows, default_system=default)
    figures.add_time_to_accuracy(rows, results.get("upfront_targets", {}))
    results["targets"] = targets.evaluate(rows, default)
    (out / "table.md").write_text(report.table(rows))
    plots = {}
    for key in dict.fromkeys((r.get("workload", "cnn"), r["bandwidth"]) for r in rows):
        title = describe.plot_title(results, *key)
        plots[key] = [str(p) for p in report.plot(rows, *key, title, out / f"accuracy-{key[0]}-{key[1]}")]
        report.plot_bytes(rows, *key, describe.plot_title(results, *key, against="the busiest link's bytes"),
                          out / f"accuracy-bytes-{key[0]}-{key[1]}")  # beside it, not in the doc
    results["plots"] = {f"{w} {bw}": paths for (w, bw), paths in plots.items()}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(report.table(rows))
    print("targets (reported, not enforced):")
    for check in results["targets"]:
        print("  " + targets.describe(check))
    if args.write_doc:
        doc = Path(args.write_doc)
        img = doc.parent / "img"
        img.mkdir(parents=True, exist_ok=True)
        links = {key: [shutil.copy(p, img / f"performance-{Path(p).name}") for p in paths] for key, paths in plots.items()}
        report.write_doc(doc, describe.doc_block(results, {key: [os.path.relpath(p, doc.parent) for p in ps]
                                                           for key, ps in links.items()}))
        say(f"wrote {doc} and its plots in {img}")
    say(f"results in {out}")


def on_signal(signum, _frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise RunFailure(f"interrupted by signal {signum}")


def rerender(args) -> int:
    """--from-results: the outputs of an earlier run again (in its folder), e.g. for --write-doc;
    the figures are derived again from the run's metrics files and process records."""
    merged = None
    for path in map(Path, args.from_results):
        try:
            results = json.loads(path.read_text())
            for row in results["runs"]:  # from the metrics files again: the definitions may have changed since
                row["figures"] = figures.derive(row)
            results.setdefault("upfront_targets", upfront_targets(describe.jobs(results)))
        except (OSError, ValueError, KeyError, figures.MetricsError, jobspec.JobError) as e:
            print(f"e2e: --from-results {path}: not the results.json of a run with its metrics files ({e})",
                  file=sys.stderr)
            return 2
        merged = results if merged is None else merge(merged, results)
    systems = merged.get("systems", [])
    default = merged.get("default_system", systems[0] if systems and systems[0].startswith("sketchps") else "")
    finish(args, merged, merged["runs"], Path(args.from_results[0]).parent.absolute(), default)
    return 0


def merge(into: dict, more: dict) -> dict:
    """The runs of two invocations as one: rows, workloads, systems and bandwidths appended (first
    seen first); a later row replaces an earlier one of the same workload, system and bandwidth (a
    rerun); the machine is the first's, with the other command and commit added to it."""
    def key(row):
        return row.get("workload", "cnn"), row["system"], row["bandwidth"]
    rerun = {key(r) for r in more["runs"]}
    into["runs"] = [r for r in into["runs"] if key(r) not in rerun] + more["runs"]
    into["jobs"] = {**describe.jobs(more), **describe.jobs(into)}
    for key in ("workloads", "systems", "bandwidths"):
        into[key] = list(dict.fromkeys(into.get(key, []) + more.get(key, [])))
    into["upfront_targets"] = {**more.get("upfront_targets", {}), **into.get("upfront_targets", {})}
    m, other = into["machine"], more["machine"]
    m["command"] += f"\n{other['command']}"
    if other["commit"] != m["commit"]:
        m["commit"] += f" (and {other['commit']})"
    return into


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_results:
        return rerender(args)
    try:
        bandwidths, workloads, systems, jobs, ddp_args, bins, package = check_args(args)
        upfront = upfront_targets(workloads)
    except (UsageError, jobspec.JobError) as e:
        print(f"e2e: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        lines = dry_run(systems, jobs, bandwidths)
        print("\n".join(lines))
        say(f"dry run: {len(lines)} runs, one after another (targets: {', '.join(f'{w} {t:.2%}' for w, t in upfront.items())})")
        return 0
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    results = {"machine": describe.machine(argv if argv is not None else sys.argv[1:]), "jobs": jobs,
               "job": next(iter(jobs.values())), "workloads": workloads, "systems": [s.name for s in systems],
               "bandwidths": bandwidths, "upfront_targets": upfront}
    results["transport"] = "plaintext (--insecure)" if args.insecure else "mutual TLS"
    ctx_args = dict(server_bin=bins.get("sketchps-server", ""), worker_bin=bins.get("sketchps-worker", ""),
                    sketchps_bin=bins.get("sketchps", ""),
                    ddp_script=str(HERE / "ddp_train.py"), overrides=args.set, ddp_args=ddp_args,
                    timeout=args.timeout, progress_every=args.progress_every, tls_args=["--insecure"],
                    server_exit_wait=args.server_exit_wait, python_path=package)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rows: list[dict] = []
    try:
        files = prepare_jobs(out, jobs, systems, package)
        ctx_args["workloads"] = {w: {"job": job, "job_path": out / w / "job.yaml", "job_files": files[w]}
                                 for w, job in jobs.items()}
        if bins and not args.insecure:
            workers = max(int(j["workers"]) for j in jobs.values())
            servers = max(int(j["servers"]) for j in jobs.values())
            ctx_args["tls_args"] = ["--tls-dir", str(make_certs(bins, out, workers, servers))]
        for i, bw in enumerate(bandwidths):
            run_bandwidth(i, bw, systems, ctx_args, out, rows)
    except (RunFailure, figures.MetricsError) as e:
        print(f"e2e: FAILED: {e}", file=sys.stderr, flush=True)
        results.update(runs=rows, error=str(e))
        (out / "results.json").write_text(json.dumps(results, indent=1))
        print(f"e2e: logs and partial results in {out}", file=sys.stderr)
        return 1
    finish(args, results, rows, out, systems[0].name if systems[0].kind == "sketchps" else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
