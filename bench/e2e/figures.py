"""The figures of one run, derived from its record (systems.run_system) and its metrics files.

The definitions of every figure are DEFINITIONS below (Markdown, also printed in the generated
docs/reports/performance.md). MetricsError names the file and line of a broken record.
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
  rank 0's `eval_s` but the final evaluation's).
- **time to accuracy** (the headline): rank 0's first `round_start` → the end (`time`) of the first
  round whose evaluation reaches the target accuracy, minus the evaluation time spent before that
  point (rank 0's `eval_s` of the earlier rounds); "not reached" when no evaluation reaches it.
  Every system of a workload evaluates after the same rounds (every `train.eval_every_rounds`, on the first
  `train.eval_samples` test images) and after the last round on all 10,000. **target**: DDP dense's
  final accuracy − 1 point, from the 100mbit DDP dense run of the workload when there is one, else
  the same bandwidth's, else the workload's stated expectation − 1 point.
- **final eval**: rank 0's last round `time` → the last worker's exit (the final evaluation on all
  10,000 test images, then exit).
- **wall**: launch → the last process's exit, servers included (they exit by themselves once every
  worker has left).
- **CPU s**: user + system CPU seconds of every process of the run (servers included), from the
  rusage of `os.wait4`.
- **accuracy**: `test_accuracy` of a `{"event": "final_eval"}` record (rank 0's, else any rank's),
  else of the last record carrying one (rank 0's, else the highest `test_round` of any rank).
- **up / down B/worker/round**: mean `bytes_up` / `bytes_down` (serialized gRPC messages) over every
  worker's round records; "x less" is `dense_bytes` (4·d, what dense SGD sends each way) divided
  by it. Not measured for DDP (gloo's traffic is not counted).
- **busiest link B/round**: the bytes the busiest host link carried in its busier direction
  during the train loop (the `eth0` counters of every host's namespace, sampled every second and
  interpolated at the loop's start and end), divided by rank 0's rounds. Measured for both
  systems; the intermediate evaluations' few bytes are in it.
- **ratios**: a row's figure divided by the DDP dense (or DDP fp16) row's of the same bandwidth;
  **acc − DDP dense** is in percentage points.
- A sketchps round record without `round_start` gets `time − compute_s − compress_s −
  communicate_s`.
- The plot (one per workload and bandwidth): one point per evaluation at the evaluated round's
  training time (x: as time to accuracy, evaluations excluded) and its `test_accuracy` (y); the
  dashed line is the target, a star marks where each system first reaches it.
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
    """[{t, t_train, accuracy, round}] by evaluated round, from rank 0's rounds and final_eval
    events: t is the round's end since launch, t_train since the first round_start with the
    evaluations of earlier rounds taken out (the time to accuracy's clock)."""
    recs = rounds_of(rank0)
    times = {int(x["round"]): float(x["time"]) for x in recs}
    first = round_start(recs[0]) if recs else 0.0
    last = max(times, default=-1)
    points = {}
    for x in rank0:
        if "test_accuracy" not in x:
            continue
        evaluated = int(x.get("test_round", x.get("round", last)))  # a final_eval may name no round
        if evaluated in times:
            before = sum(float(y.get("eval_s", 0.0)) for y in recs if int(y["round"]) < evaluated)
            points[evaluated] = {"t": times[evaluated] - launch, "t_train": times[evaluated] - first - before,
                                 "accuracy": float(x["test_accuracy"]), "round": evaluated}
    return [points[k] for k in sorted(points)]


def time_to_accuracy(curve: list[dict], target: float | None) -> tuple[float | None, int | None]:
    """(t_train, round) of the first evaluation reaching `target`; (None, None) if none does."""
    if target is None:
        return None, None
    for p in curve:
        if p["accuracy"] >= target - 1e-12:
            return p["t_train"], p["round"]
    return None, None


def accuracy_target(rows: list[dict], workload: str, bandwidth: str, upfront: float | None) -> tuple[float | None, str]:
    """The workload's target at `bandwidth` (DEFINITIONS) and where it came from."""
    def dense(bw):
        return next((r for r in rows if r.get("workload", "cnn") == workload and r["bandwidth"] == bw
                     and r["system"] == "DDP dense" and r["figures"]["accuracy"] is not None), None)
    for bw in ("100mbit", bandwidth):
        ref = dense(bw)
        if ref is not None:
            return ref["figures"]["accuracy"] - 0.01, f"DDP dense {bw} final accuracy - 1 point"
    if upfront is None:
        return None, "no DDP dense run and no stated target"
    return upfront, "the workload's stated target (no DDP dense run)"


def add_time_to_accuracy(rows: list[dict], upfront: dict[str, float]) -> None:
    """Sets target_accuracy, target_source, tta_s and tta_round in every row's figures."""
    for row in rows:
        f, workload = row["figures"], row.get("workload", "cnn")
        f["target_accuracy"], f["target_source"] = accuracy_target(rows, workload, row["bandwidth"], upfront.get(workload))
        f["tta_s"], f["tta_round"] = time_to_accuracy(f["curve"], f["target_accuracy"])


def counter_at(samples: list, host: str, i: int, t: float) -> float:
    """Counter i (0 rx, 1 tx) of `host` at time t, linear between the samples around it."""
    points = [(ts, c[host][i]) for ts, c in samples if host in c]
    before = max((p for p in points if p[0] <= t), default=points[0])
    after = min((p for p in points if p[0] >= t), default=points[-1])
    if after[0] == before[0]:
        return float(before[1])
    return before[1] + (after[1] - before[1]) * (t - before[0]) / (after[0] - before[0])


def busiest_link(samples: list | None, start: float, end: float, rounds: int) -> dict:
    """{busiest_link_bytes, busiest_link_host, busiest_link_per_round}: the host link and direction
    that carried the most bytes between `start` and `end`, from the run's link samples."""
    hosts = sorted({h for _, c in samples or [] for h in c})
    if not hosts or rounds <= 0:
        return {}
    carried = {(h, i): counter_at(samples, h, i, end) - counter_at(samples, h, i, start) for h in hosts for i in (0, 1)}
    (host, i), total = max(carried.items(), key=lambda kv: kv[1])
    return {"busiest_link_bytes": total, "busiest_link_host": f"{host} {'rx' if i == 0 else 'tx'}",
            "busiest_link_per_round": total / rounds}


def traffic(by_rank: dict[int, list[dict]]) -> dict:
    recs = [x for r in by_rank.values() for x in rounds_of(r)]
    # Records name the serialized bytes bytes_up (runs before round 3's rename: wire_up).
    key = "wire_up" if recs and "wire_up" in recs[0] else "bytes_up"
    if not recs or key not in recs[0]:
        return {}
    up = sum(float(x[key]) for x in recs) / len(recs)
    down = sum(float(x[key.replace("up", "down")]) for x in recs) / len(recs)
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
    rounds = len({int(x["round"]) for x in rank0})
    return {"startup_s": first - launch, "train_loop_s": last - first, "final_eval_s": worker_exit - last,
            "wall_s": max(p["end"] for p in procs) - launch, "cpu_s": cpu["server"] + cpu["worker"],
            "cpu_by_role_s": cpu, "accuracy": accuracy, "accuracy_source": source,
            "rounds": rounds, "expected_rounds": run.get("expected_rounds"),
            "eval_in_loop_s": sum(float(x.get("eval_s", 0.0)) for x in rank0 if not x.get("final")),
            "job_end_s": worker_exit - launch, "curve": accuracy_curve(by_rank.get(0, []), launch),
            **traffic(by_rank), **busiest_link(run.get("link_samples"), first, last, rounds)}
