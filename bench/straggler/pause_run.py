#!/usr/bin/env python3
"""A compute straggler with and without the round deadline (docs/reliability.md "Stragglers").

Runs `sketchps run` on the embedded default job three times, in one invocation:
  fault-free, no deadline;
  worker R paused (SIGSTOP for --pause-ms out of every --period-ms, as a preempted VM or a long GC
  pause would), no deadline;
  the same pauses, ps.round_deadline_seconds = --deadline (once per --deadline given).
and prints a Markdown table: wall time of the train loop, median and 90th-percentile round time
(rank 0), final test accuracy, and how many rounds each worker was left out of or caught up on.

  python3 bench/straggler/pause_run.py --sketchps build/ci/tools/sketchps --out runs/straggler \
      [--rounds 300] [--rank 1] [--pause-ms 300] [--period-ms 600] [--deadline 0.05]... [--set k=v]...
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path


def worker_pid(out: Path, rank: int, timeout: float = 120.0):
    """The pid of the worker of `rank` that `sketchps run` started for `out` (from /proc)."""
    needle = f"--rank {rank} "
    end = time.time() + timeout
    while time.time() < end:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "sketchps-worker" in cmd and str(out) in cmd and needle in cmd:
                return int(entry.name)
        time.sleep(0.2)
    return None


def pauser(pid: int, pause_s: float, period_s: float, stop: threading.Event, counts: dict):
    while not stop.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            counts["pauses"] += 1
            time.sleep(pause_s)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        stop.wait(period_s - pause_s)


def run(args, name: str, pause: bool, deadline: float):
    out = Path(args.out) / name
    subprocess.run(["rm", "-rf", str(out)], check=True)
    cmd = [args.sketchps, "run", "--out", str(out), "--no-plot", "--no-progress",
           "--set", f"train.rounds={args.rounds}", "--set", f"ps.round_deadline_seconds={deadline}"]
    for kv in args.set:
        cmd += ["--set", kv]
    print(f"straggler: {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop, counts, thread = threading.Event(), {"pauses": 0}, None
    if pause:
        pid = worker_pid(out, args.rank)
        if pid is None:
            proc.kill()
            sys.exit(f"straggler: {name}: worker {args.rank} not found")
        thread = threading.Thread(target=pauser, args=(pid, args.pause_ms / 1000, args.period_ms / 1000, stop, counts))
        thread.start()
    log, _ = proc.communicate()
    stop.set()
    if thread:
        thread.join()
    wall = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"straggler: {name} failed ({proc.returncode}):\n{log[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    ranks = {}
    for path in sorted(out.glob("worker-*.jsonl")):
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        ranks[path.stem] = recs
    r0 = ranks["worker-0"]
    rounds = [r["time"] - r["round_start"] for r in r0]
    loop = r0[-1]["time"] - r0[0]["round_start"]
    left = {k: sum(1 for r in v if r.get("left_out", 0) > 0) for k, v in ranks.items()}
    caught = {k: sum(1 for r in v if r.get("caught_up")) for k, v in ranks.items()}
    acc = summary.get("final_test_accuracy", summary.get("test_accuracy"))
    print(f"straggler: {name}: done in {wall:.1f} s, accuracy {acc}", file=sys.stderr, flush=True)
    return {"name": name, "loop": loop, "median": statistics.median(rounds),
            "p90": sorted(rounds)[int(0.9 * (len(rounds) - 1))], "accuracy": acc, "left": left, "caught": caught,
            "pauses": counts["pauses"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sketchps", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--rank", type=int, default=1)
    p.add_argument("--pause-ms", type=int, default=300)
    p.add_argument("--period-ms", type=int, default=600)
    p.add_argument("--deadline", type=float, action="append",
                   help="ps.round_deadline_seconds of a paused run (repeatable; default 0.05)")
    p.add_argument("--set", action="append", default=[])
    args = p.parse_args()
    if not 0 < args.pause_ms < args.period_ms:
        sys.exit("--pause-ms must be in (0, --period-ms)")
    deadlines = args.deadline or [0.05]
    rows = [run(args, "fault-free", False, 0), run(args, "paused", True, 0)]
    rows += [run(args, f"paused-deadline-{d:g}", True, d) for d in deadlines]
    base = rows[0]["loop"]
    print("| run | train loop | vs fault-free | median round | p90 round | accuracy | rounds left out (per worker) "
          "| rounds caught up | pauses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        left = ", ".join(f"{v}" for v in r["left"].values())
        caught = ", ".join(f"{v}" for v in r["caught"].values())
        print(f"| {r['name']} | {r['loop']:.1f} s | {r['loop'] / base:.2f} | {1000 * r['median']:.0f} ms | "
              f"{1000 * r['p90']:.0f} ms | {r['accuracy']:.4f} | {left} | {caught} | {r['pauses']} |")


if __name__ == "__main__":
    main()
