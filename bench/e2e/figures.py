"""The figures of one run, derived from its record (systems.run_system) and its metrics files.

The definitions of every figure are DEFINITIONS below (Markdown, also printed in the generated
docs/performance.md). MetricsError names the file and line of a broken record.
"""
from __future__ import annotations

import json
from pathlib import Path


DEFINITIONS = """\
All times are unix seconds on the one machine clock (every host is a namespace of it).
- **launch**: the harness launches the run's first process (a server for sketchps in ps mode,
  else a worker).
- **start-up**: launch → rank 0's first `round_start` (the forward pass of round 0 begins):
  process start, data loading, model set-up, joining the servers / the process group.
- **train loop**: rank 0's first `round_start` → rank 0's last round `time` (the end of its last
  exchange / optimizer step). Both systems evaluate between rounds, sharded over the ranks, so the
  intermediate evaluations are in the train loop (their total is **evals in loop**, the sum of
  rank 0's `eval_s`).
- **final eval**: rank 0's last round `time` → the last worker's exit (the final evaluation on all
  10,000 test images, then exit).
- **wall**: launch → the last process's exit, servers included (they exit by themselves once every
  worker has left).
- **CPU s**: user + system CPU seconds of every process of the run (servers included), from the
  rusage of `os.wait4`.
- **accuracy**: `test_accuracy` of a `{"event": "final_eval"}` record (rank 0's, else any rank's),
  else of the last record carrying one (rank 0's, else the highest `test_round` of any rank).
- **up / down B/worker/round**: mean `wire_up` / `wire_down` (serialized gRPC messages) over every
  worker's round records; "x less" is `dense_bytes` (4·d, what dense SGD sends each way) divided
  by it. Not measured for DDP (gloo's traffic is not counted).
- **ratios**: a row's figure divided by the DDP dense (or DDP fp16) row's of the same bandwidth;
  **acc − DDP dense** is in percentage points.
- A sketchps round record without `round_start` gets `time − compute_s − compress_s −
  communicate_s`.
- The plot: one point per evaluation at the evaluated round's `time` minus launch (x) and its
  `test_accuracy` (y); the "x" marks the final accuracy at the job's end (last worker exit).
"""


class MetricsError(Exception):
    """A metrics file that cannot be read or lacks what the figures need."""


def read_jsonl(path: str | Path) -> list[dict]:
    records = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise MetricsError(f"{path}: cannot read ({e.strerror})")
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError as e:
                raise MetricsError(f"{path}:{n}: not JSON ({e})")
    return records


def rounds_of(records: list[dict]) -> list[dict]:
    return [r for r in records if "event" not in r and "round" in r]


def round_start(rec: dict) -> float:
    if "round_start" in rec:
        return float(rec["round_start"])
    return float(rec["time"]) - sum(float(rec.get(k, 0.0)) for k in ("compute_s", "compress_s", "communicate_s"))


def final_accuracy(by_rank: dict[int, list[dict]]) -> tuple[float | None, str]:
    """(accuracy, where it came from) by the rule in the module doc."""
    ranks = sorted(by_rank)
    for r in ranks:
        finals = [e for e in by_rank[r] if e.get("event") == "final_eval" and "test_accuracy" in e]
        if finals:
            return float(finals[-1]["test_accuracy"]), f"final_eval record of rank {r}"
    if 0 in by_rank:
        tested = [x for x in rounds_of(by_rank[0]) if "test_accuracy" in x]
        if tested:
            return float(tested[-1]["test_accuracy"]), "last test_accuracy of rank 0"
    tested = [x for r in ranks for x in rounds_of(by_rank[r]) if "test_accuracy" in x]
    if tested:
        best = max(tested, key=lambda x: x.get("test_round", x["round"]))
        return float(best["test_accuracy"]), "last test_accuracy of any rank"
    return None, "no test_accuracy in any metrics file"


def accuracy_curve(rank0: list[dict], launch: float) -> list[dict]:
    """[{t, accuracy, round}] by evaluated round; from rank 0's rounds and final_eval events."""
    times = {int(x["round"]): float(x["time"]) for x in rounds_of(rank0)}
    last = max(times, default=-1)
    points = {}
    for x in rank0:
        if "test_accuracy" not in x:
            continue
        evaluated = int(x.get("test_round", x.get("round", last)))  # a final_eval may name no round
        if evaluated in times:
            points[evaluated] = {"t": times[evaluated] - launch, "accuracy": float(x["test_accuracy"]),
                                 "round": evaluated}
    return [points[k] for k in sorted(points)]


def traffic(by_rank: dict[int, list[dict]]) -> dict:
    recs = [x for r in by_rank.values() for x in rounds_of(r)]
    if not recs or "wire_up" not in recs[0]:
        return {}
    up = sum(float(x["wire_up"]) for x in recs) / len(recs)
    down = sum(float(x["wire_down"]) for x in recs) / len(recs)
    dense = float(recs[0].get("dense_bytes", 0))
    return {"wire_up": up, "wire_down": down, "dense_bytes": dense,
            "ratio_up": dense / up if up else None, "ratio_down": dense / down if down else None}


def derive(run: dict) -> dict:
    by_rank = {int(r): read_jsonl(p) for r, p in run["metrics"].items()}
    rank0 = rounds_of(by_rank.get(0, []))
    if not rank0:
        raise MetricsError(f"{run['metrics'].get('0', 'rank 0')}: no round records")
    launch = float(run["launch"])
    procs = run["procs"]
    first, last = round_start(rank0[0]), float(rank0[-1]["time"])
    worker_exit = max(p["end"] for p in procs if p["role"] == "worker")
    accuracy, source = final_accuracy(by_rank)
    cpu = {role: sum(p["cpu_s"] for p in procs if p["role"] == role) for role in ("server", "worker")}
    return {"startup_s": first - launch, "train_loop_s": last - first, "final_eval_s": worker_exit - last,
            "wall_s": max(p["end"] for p in procs) - launch, "cpu_s": cpu["server"] + cpu["worker"],
            "cpu_by_role_s": cpu, "accuracy": accuracy, "accuracy_source": source,
            "rounds": len({int(x["round"]) for x in rank0}), "expected_rounds": run.get("expected_rounds"),
            "eval_in_loop_s": sum(float(x.get("eval_s", 0.0)) for x in rank0),
            "job_end_s": worker_exit - launch, "curve": accuracy_curve(by_rank.get(0, []), launch),
            **traffic(by_rank)}
