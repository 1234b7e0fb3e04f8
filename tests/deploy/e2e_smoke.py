#!/usr/bin/env python3
"""Smoke test of the end-to-end benchmark with the real daemons: bench/e2e/run.sh runs a 12-round
job (evaluations every 6 rounds) for sketchps gs_sgd and DDP dense on 100mbit links, the daemons
with mutual TLS (certificates from `sketchps certs`), then this checks that results.json, table.md
and the accuracy plot (PNG and SVG) exist, that each system completed its 12 rounds with every
process exiting 0 (the shards by themselves, at the end of the job), that the sketchps daemons ran
with --tls-dir, an accuracy in [0, 1], CPU > 0 and a positive train loop, and that no namespace is
left behind.

  e2e_smoke.py --server PATH --worker PATH --sketchps PATH --out DIR
Exit 0 when all holds, 1 otherwise (what failed is printed). Needs root.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "bench/e2e/run.sh"
SYSTEMS = ["sketchps gs_sgd", "DDP dense"]
ROUNDS = 12


def run_harness(args) -> list[str]:
    argv = ["bash", str(RUN), "--bin", f"sketchps-server={args.server}", "--bin", f"sketchps-worker={args.worker}",
            "--bin", f"sketchps={args.sketchps}", "--schemes", "gs_sgd", "--ddp", "dense", "--bandwidth", "100mbit", "--set", f"train.rounds={ROUNDS}",
            "--set", "train.eval_every_rounds=6", "--timeout", "200", "--out", args.out]
    print("e2e_smoke: " + " ".join(argv), flush=True)
    try:
        proc = subprocess.run(argv, timeout=500)
    except subprocess.TimeoutExpired:
        return ["the harness did not finish within 500 s"]
    return [] if proc.returncode == 0 else [f"the harness exited {proc.returncode}"]


def check_outputs(out: Path) -> list[str]:
    problems = []
    for name in ("results.json", "table.md", "accuracy-100mbit.png", "accuracy-100mbit.svg"):
        if not (out / name).is_file() or (out / name).stat().st_size == 0:
            problems.append(f"{out / name} missing or empty")
    png = out / "accuracy-100mbit.png"
    if png.is_file() and not png.read_bytes().startswith(b"\x89PNG"):
        problems.append(f"{png} is not a PNG")
    if problems:
        return problems
    results = json.loads((out / "results.json").read_text())
    table = (out / "table.md").read_text()
    for system in SYSTEMS:
        row = next((r for r in results["runs"] if r["system"] == system and r["bandwidth"] == "100mbit"), None)
        if row is None:
            problems.append(f"results.json has no run of {system!r} at 100mbit")
            continue
        problems += check_row(row)
        if f"| {system} | 100mbit |" not in table:
            problems.append(f"table.md has no row for {system}")
    if not results.get("targets"):
        problems.append("results.json has no target checks")
    return problems


def check_row(row: dict) -> list[str]:
    f, name, problems = row["figures"], row["system"], []
    if f["rounds"] != ROUNDS:
        problems.append(f"{name}: {f['rounds']} rounds, expected {ROUNDS}")
    if f["accuracy"] is None or not 0 <= f["accuracy"] <= 1:
        problems.append(f"{name}: accuracy {f['accuracy']} not in [0, 1]")
    if not f["cpu_s"] > 0 or not f["train_loop_s"] > 0:
        problems.append(f"{name}: CPU {f['cpu_s']} s, train loop {f['train_loop_s']} s (both must be > 0)")
    bad = [f"{p['name']} exit {p['exit']}" for p in row["procs"] if p["exit"] != 0]
    if bad:
        problems.append(f"{name}: {', '.join(bad)}")
    if row["kind"] == "sketchps":
        plain = [p["name"] for p in row["procs"] if "--tls-dir" not in p["argv"]]
        if plain:
            problems.append(f"{name}: {', '.join(plain)} ran without --tls-dir (mutual TLS)")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description="smoke test of bench/e2e (see the module doc)")
    ap.add_argument("--server", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--sketchps", required=True, help="the front end, for `sketchps certs`")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    problems = run_harness(args) or check_outputs(Path(args.out))
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
            if n.startswith("sps")]
    if left:
        problems.append(f"namespaces left behind: {left}")
    for p in problems:
        print(f"e2e_smoke: FAILED: {p}")
    if not problems:
        print(f"e2e_smoke: passed ({', '.join(SYSTEMS)}: {ROUNDS} rounds each; outputs in {args.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
