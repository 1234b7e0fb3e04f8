#!/usr/bin/env python3
"""Smoke test of the end-to-end benchmark with the real daemons, one workload per invocation.

  cnn (default): bench/e2e/run.sh runs a 12-round default job (evaluations every 6 rounds) for
      sketchps gs_sgd (the C++ daemons) and DDP dense (ddp_train.py) on 100mbit links;
  vgg, vit: the workload's script under both backends, sketchps gs_sgd (sketchps-server hosts and
      the script with --backend sketchps, the package from --python-path) and DDP dense, 8 rounds
      (evaluations every 4 on 200 images) on a cut of Fashion-MNIST made in --out/data (2,000
      training and 400 test images: the final evaluation is on all of them), 100mbit links.
The daemons and the Python workers run with mutual TLS (certificates from `sketchps certs`). Then
this checks that results.json, table.md and the accuracy plot (PNG and SVG) exist, that each system
completed its rounds with every process exiting 0 (the shards by themselves, at the end of the job),
that the sketchps processes ran with --tls-dir (or SKETCHPS_TLS_DIR), an accuracy in [0, 1], CPU > 0, a
positive train loop, the busiest link's bytes measured, a time-to-accuracy target, and that no
namespace is left behind; for vgg and vit also that both backends started from the same initial
weights (the "weights <hex>" rank 0 logs).

  e2e_smoke.py --server PATH --worker PATH --sketchps PATH --out DIR [--workload vgg --python-path DIR]
Exit 0 when all holds, 1 otherwise (what failed is printed). Needs root.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from netns_leftovers import namespaces, new_namespaces

RUN = Path(__file__).resolve().parents[2] / "bench/e2e/run.sh"
DATA = Path("/usr/share/datasets/fashion-mnist")
SYSTEMS = ["sketchps gs_sgd", "DDP dense"]
ROUNDS = {"cnn": 12, "vgg": 8, "vit": 8}
CUT = {"train": 2000, "t10k": 400}
WEIGHTS = re.compile(r"weights ([0-9a-f]{16})")


def cut_fashion_mnist(folder: Path) -> None:
    """The first CUT images and labels of each split, as IDX files (gzip)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in CUT.items():
        for kind, dims, item in (("images", 3, 28 * 28), ("labels", 1, 1)):
            raw = gzip.decompress((DATA / f"{split}-{kind}-idx{dims}-ubyte.gz").read_bytes())
            header = bytearray(raw[:4 + 4 * dims])
            header[4:8] = n.to_bytes(4, "big")
            body = raw[4 + 4 * dims:4 + 4 * dims + n * item]
            (folder / f"{split}-{kind}-idx{dims}-ubyte.gz").write_bytes(gzip.compress(bytes(header) + body))


def run_harness(args) -> list[str]:
    rounds, out = ROUNDS[args.workload], Path(args.out)
    argv = ["bash", str(RUN), "--bin", f"sketchps-server={args.server}", "--bin", f"sketchps-worker={args.worker}",
            "--bin", f"sketchps={args.sketchps}", "--workload", args.workload, "--schemes", "gs_sgd", "--ddp", "dense",
            "--bandwidth", "100mbit", "--set", f"train.rounds={rounds}", "--timeout", "200", "--out", args.out]
    if args.workload == "cnn":
        argv += ["--set", "train.eval_every_rounds=6"]
    else:
        cut_fashion_mnist(out / "data")
        argv += ["--python-path", args.python_path, "--set", f"data.path={out / 'data'}",
                 "--set", f"data.train_samples={CUT['train']}", "--set", "train.eval_every_rounds=4",
                 "--set", "train.eval_samples=200"]
    print("e2e_smoke: " + " ".join(argv), flush=True)
    try:
        proc = subprocess.run(argv, timeout=500)
    except subprocess.TimeoutExpired:
        return ["the harness did not finish within 500 s"]
    return [] if proc.returncode == 0 else [f"the harness exited {proc.returncode}"]


def check_outputs(out: Path, workload: str) -> list[str]:
    problems = []
    plot = f"accuracy-{workload}-100mbit"
    for name in ("results.json", "table.md", f"{plot}.png", f"{plot}.svg"):
        if not (out / name).is_file() or (out / name).stat().st_size == 0:
            problems.append(f"{out / name} missing or empty")
    png = out / f"{plot}.png"
    if png.is_file() and not png.read_bytes().startswith(b"\x89PNG"):
        problems.append(f"{png} is not a PNG")
    if problems:
        return problems
    results = json.loads((out / "results.json").read_text())
    table = (out / "table.md").read_text()
    weights = {}
    for system in SYSTEMS:
        row = next((r for r in results["runs"] if r["system"] == system and r["bandwidth"] == "100mbit"
                    and r.get("workload") == workload), None)
        if row is None:
            problems.append(f"results.json has no run of {system!r} at 100mbit")
            continue
        problems += check_row(row, ROUNDS[workload])
        if f"| {workload} | {system} | 100mbit |" not in table:
            problems.append(f"table.md has no row for {system}")
        log = Path(next(p["log"] for p in row["procs"] if p["name"] == "worker-0")).read_text(errors="replace")
        weights[system] = WEIGHTS.search(log)
    if not results.get("targets"):
        problems.append("results.json has no target checks")
    if workload != "cnn" and not problems:
        found = {s: m.group(1) if m else None for s, m in weights.items()}
        if None in found.values() or len(set(found.values())) != 1:
            problems.append(f"the initial weights differ between the backends (rank 0 logs: {found})")
    return problems


def check_row(row: dict, rounds: int) -> list[str]:
    f, name, problems = row["figures"], row["system"], []
    if f["rounds"] != rounds:
        problems.append(f"{name}: {f['rounds']} rounds, expected {rounds}")
    if f["accuracy"] is None or not 0 <= f["accuracy"] <= 1:
        problems.append(f"{name}: accuracy {f['accuracy']} not in [0, 1]")
    if not f["cpu_s"] > 0 or not f["train_loop_s"] > 0:
        problems.append(f"{name}: CPU {f['cpu_s']} s, train loop {f['train_loop_s']} s (both must be > 0)")
    if not (f.get("busiest_link_per_round") or 0) > 0:
        problems.append(f"{name}: no busiest-link bytes measured")
    if f.get("target_accuracy") is None:
        problems.append(f"{name}: no time-to-accuracy target")
    bad = [f"{p['name']} exit {p['exit']}" for p in row["procs"] if p["exit"] != 0]
    if bad:
        problems.append(f"{name}: {', '.join(bad)}")
    if row["kind"] == "sketchps":
        plain = [p["name"] for p in row["procs"] if "--tls-dir" not in p["argv"] and "SKETCHPS_TLS_DIR" not in p.get("env", {})]
        if plain:
            problems.append(f"{name}: {', '.join(plain)} ran without --tls-dir or SKETCHPS_TLS_DIR (mutual TLS)")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description="smoke test of bench/e2e (see the module doc)")
    ap.add_argument("--server", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--sketchps", required=True, help="the front end, for `sketchps certs`")
    ap.add_argument("--workload", choices=sorted(ROUNDS), default="cnn")
    ap.add_argument("--python-path", help="vgg, vit: the sketchps package (default: beside --server's build: ../python)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.workload != "cnn" and not args.python_path:
        args.python_path = str(Path(args.server).resolve().parents[1] / "python")
    before = namespaces()
    problems = run_harness(args) or check_outputs(Path(args.out), args.workload)
    left = new_namespaces(before)
    if left:
        problems.append(f"namespaces left behind: {left}")
    for p in problems:
        print(f"e2e_smoke: FAILED: {p}")
    if not problems:
        print(f"e2e_smoke: passed ({args.workload}: {', '.join(SYSTEMS)}: {ROUNDS[args.workload]} rounds each; "
              f"outputs in {args.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
