#!/usr/bin/env python3
"""The sizing rule of the workloads, measured (bench/e2e/README.md "Sizing").

    python3 bench/e2e/sizing.py --workload vgg --results runs/sizing/results.json

1. compute per round: P processes of the workload (P = the job's workers, one thread each, all at
   once on this machine, as the benchmark's workers share it) each train --rounds rounds of their
   own batches without any communication (forward, backward, optimizer step); the median round of
   each, and their mean.
2. from a harness run of DDP dense (results.json of bench/e2e/run.sh --workload W --ddp dense, a few
   rounds at each bandwidth): the median DDP dense round (time - round_start of rank 0's rounds
   without an evaluation, the first two left out), the share of it not spent computing
   (1 - compute / round: communicating, at least 80% at 100mbit by the rule), the cost of an
   intermediate and of the final evaluation, and the projected length of the workload's whole DDP
   dense run: start-up + rounds x round + evaluations + final evaluation (at most 15 minutes).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import figures  # noqa: E402
import job as jobspec  # noqa: E402


def child(workload: str, rank: int, rounds: int, ready: Path) -> None:
    """One compute-only worker: prints its median round (seconds) after `rounds` timed rounds."""
    import torch
    import torch.nn.functional as F
    import workload_common as wc
    torch.set_num_threads(1)
    w = jobspec.workload_module(workload).WORKLOAD
    job = yaml.safe_load(w.job)
    data, train = job["data"], job["train"]
    model = wc.build_model(w, int(train["seed"]))
    opt = wc.make_optimizer(model, job["optimizer"], w)
    batches = wc.Batches(*wc.load_split(data["path"], "train"), int(data["train_samples"]), int(train["seed"]),
                         int(data["batch_size"]), rank, int(job["workers"]))
    (ready / f"{rank}").touch()
    while len(list(ready.iterdir())) < int(job["workers"]):
        time.sleep(0.05)
    times = []
    for r in range(rounds + 2):
        t0 = time.perf_counter()
        x, y = batches(r)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    print(statistics.median(times[2:]), flush=True)


def compute_per_round(workload: str, rounds: int) -> float:
    import tempfile
    workers = int(jobspec.make_job([], workload)["workers"])
    with tempfile.TemporaryDirectory() as ready:
        procs = [subprocess.Popen([sys.executable, __file__, "--workload", workload, "--child", str(r),
                                   "--rounds", str(rounds), "--ready", ready], stdout=subprocess.PIPE, text=True)
                 for r in range(workers)]
        medians = [float(p.communicate()[0].strip()) for p in procs]
    return statistics.mean(medians)


def ddp_rounds(row: dict) -> dict:
    rank0 = figures.rounds_of(figures.read_jsonl(row["metrics"]["0"]))
    plain = [x["time"] - x["round_start"] for x in rank0[2:] if "eval_s" not in x]
    evals = [x["eval_s"] for x in rank0 if "eval_s" in x]
    f = figures.derive(row)
    return {"round_s": statistics.median(plain), "eval_s": statistics.mean(evals) if evals else 0.0,
            "final_eval_s": f["final_eval_s"], "startup_s": f["startup_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description="the workloads' sizing rule, measured (see the module doc)")
    ap.add_argument("--workload", required=True, choices=[w for w in jobspec.WORKLOADS if w != "cnn"])
    ap.add_argument("--results", help="results.json of a DDP dense run of the workload (a few rounds per bandwidth)")
    ap.add_argument("--rounds", type=int, default=10, help="timed compute rounds per process")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.workload, args.child, args.rounds, Path(args.ready))
        return 0
    job = jobspec.make_job([], args.workload)
    rounds, every = jobspec.total_rounds(job), int(job["train"]["eval_every_rounds"])
    evals = (rounds - 1) // every if every else 0
    compute = compute_per_round(args.workload, args.rounds)
    print(f"{args.workload}: compute per round {compute:.3f} s ({job['workers']} processes at once, 1 thread each); "
          f"the job: {rounds} rounds, {evals} intermediate evaluations")
    if args.results:
        for row in json.loads(Path(args.results).read_text())["runs"]:
            if row.get("workload") != args.workload or row["system"] != "DDP dense":
                continue
            d = ddp_rounds(row)
            total = d["startup_s"] + rounds * d["round_s"] + evals * d["eval_s"] + d["final_eval_s"]
            print(f"  DDP dense {row['bandwidth']}: round {d['round_s']:.3f} s, not computing "
                  f"{100 * (1 - compute / d['round_s']):.0f}%; evaluation {d['eval_s']:.1f} s, final {d['final_eval_s']:.1f} s, "
                  f"start-up {d['startup_s']:.1f} s; projected whole run {total:.0f} s ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
