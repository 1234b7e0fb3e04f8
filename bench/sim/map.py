#!/usr/bin/python3
"""The simulator's map (issue 36): every method's final test accuracy and bytes across (P, alpha, f).

Usage:
  map.py run [--csv FILE] [--runs DIR] [--methods M,...] [--workers 4,16,64] [--alphas inf,0.1]
             [--fractions 1,0.25] [--seeds 1] [--rounds N] [--target X] [--budget-min M] [--sim PATH]
             [--dry-run]
      Runs `sketchps-sim` once per (method, P, alpha, f, seed) of the panel (--target, --rounds) not
      yet in the CSV, each under
      `nice -n 10`, one at a time, and appends a row per run as soon as it ends (so an interrupted
      map resumes where it stopped). A progress line per run on stderr: what runs, its result, the
      time spent and left of the budget. Stops starting runs once --budget-min minutes are spent.
  map.py deciding [--csv FILE]
      Prints the cells (P, alpha, f) that decide a verdict: some sketch method within 1 point of
      dense (seed means) where top-k or gTop-k is not; rerun those with --seeds 1,2,3.

A panel is (uplink compression target, rounds): --target 50 --rounds 100 unless given (rows written
before the CSV had a target column are 50x). An alpha is a Dirichlet concentration (0.1, 0.5, inf) or
classes:K (K labels per worker). table, plot and deciding cover every panel of the CSV; plots of
other panels than 50x/100 rounds carry -xT-rN in their names.
  map.py plot [--csv FILE] [--plot-dir DIR]
      Writes one SVG per cell (P, alpha, f): final test accuracy against the bytes on the busiest link
      per round, a point per method (seed means), dense included; prints the files it wrote.
  map.py table [--csv FILE]
      Prints the map as Markdown: a row per cell, the gap to dense of each method in points (seed
      means, with the number of seeds and, for more than one, the standard deviation: of dense's
      accuracies, and of each method's gap to dense seed by seed), the measured uplink compression per
      method, and the verdict.

The job of every run: model mlp, servers 1, data.batch_size 32, train.rounds --rounds (default 100),
the default optimizer (SGD, lr 0.05, momentum 0.9), evaluation only after the last round on the
whole test set, the partition dirichlet:ALPHA and participation f, train.seed = the seed = the
simulator's --seed. Each method is set to about 50x uplink compression (METHODS below; the CSV has the
compression each run measured).

Exit codes: 0 done (or budget spent), 1 a run failed (its row says so; the map goes on), 2 bad usage.
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Each method's scheme.density for ~50x uplink compression on the MLP (235,146 parameters, one shard):
# measured with map.py's own runs (the CSV's uplink_compression column), see docs/reports/sim-map.md.
# Every method's bytes grow linearly with its density (k entries, or a table of k columns' worth), so
# a target T scales the density by 50 / T; the CSV records the compression each run measured.
DENSITY_AT_50X = {"dense": None, "topk": 0.016, "gtopk": 0.016, "dgc": 0.016, "sketched_sgd": 0.0017,
                  "gs_sgd": 0.0011, "fetchsgd": 0.002}
# DGC's sparsity warm-up (4 epochs by default) would send denser rounds for most of a short run.
EXTRA = {"dgc": ["scheme.dgc.warmup=0"]}
METHODS = list(DENSITY_AT_50X)
SKETCHES = ("sketched_sgd", "gs_sgd", "fetchsgd")
SPARSE = ("topk", "gtopk")

FIELDS = ["method", "workers", "alpha", "fraction", "seed", "rounds", "participants", "uplink_compression",
          "bytes_up_mean", "busiest_link_mean", "final_test_accuracy", "loss_mean", "wall_s", "status",
          "settings", "target"]
DEFAULT_TARGET, DEFAULT_ROUNDS = 50, 100


def settings(method, target):
    """The --set overrides of `method` at about `target`x uplink compression."""
    d = DENSITY_AT_50X[method]
    out = [] if d is None else [f"scheme.density={d * 50 / target:.6g}"]
    return out + EXTRA.get(method, [])


def partition(alpha):
    """The simulator's --partition for a map's "alpha": a Dirichlet concentration, or classes:K as is."""
    return alpha if alpha.startswith("classes:") else f"dirichlet:{alpha}"


def panel_of(row):
    """(compression target, rounds) of a CSV row; rows written before the target column are 50x."""
    return (int(float(row.get("target") or DEFAULT_TARGET)), int(row["rounds"]))


def parse_list(text, kind):
    return [kind(x) for x in text.split(",") if x]


def key_of(row):
    return (row["method"], int(row["workers"]), str(row["alpha"]), float(row["fraction"]), int(row["seed"]),
            panel_of(row))


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append_row(path, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def command(sim, method, workers, alpha, fraction, seed, rounds, target, out):
    sets = ["model=mlp", f"workers={workers}", "servers=1", "data.batch_size=32", f"train.rounds={rounds}",
            "train.eval_every_rounds=0", f"train.seed={seed}", f"scheme.name={method}",
            f"job_id=map-{method}"] + settings(method, target)
    cmd = ["nice", "-n", "10", sim]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--partition", partition(alpha), "--participation", str(fraction), "--seed", str(seed),
            "--progress-every", "0", "--log-level", "warn", "--out", out]
    return cmd


def run_one(args, method, workers, alpha, fraction, seed):
    out = os.path.join(args.runs, f"{method}-p{workers}-a{alpha.replace(':', '')}-f{fraction}-s{seed}"
                                  f"-x{args.target}-r{args.rounds}")
    cmd = command(args.sim, method, workers, alpha, fraction, seed, args.rounds, args.target, out)
    row = {"method": method, "workers": workers, "alpha": alpha, "fraction": fraction, "seed": seed,
           "rounds": args.rounds, "settings": " ".join(settings(method, args.target)), "target": args.target}
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    row["wall_s"] = round(time.time() - start, 1)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else ""
        row["status"] = f"exit {proc.returncode}: {last}"
        return row
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    row.update(status="ok", participants=s["config"]["participants_per_round"],
               uplink_compression=round(s["uplink_compression"], 2), bytes_up_mean=round(s["bytes_up_mean"]),
               busiest_link_mean=round(s["busiest_link_mean"]), final_test_accuracy=s["final_test_accuracy"],
               loss_mean=s.get("loss_mean"))
    return row


def cmd_run(args):
    done = {key_of(r) for r in read_rows(args.csv)}
    # Cell by cell (every method of a cell together, so that a cut-short map still has whole cells), the
    # cheapest cells (fewest participants per round) first.
    grid = [(m, p, a, f, s) for s in args.seeds for p, f in sorted(
        ((p, f) for p in args.workers for f in args.fractions), key=lambda pf: (pf[0] * pf[1], pf[0]))
            for a in args.alphas for m in args.methods]
    panel = (args.target, args.rounds)
    todo = [g for g in grid if (g[0], g[1], str(g[2]), float(g[3]), g[4], panel) not in done]
    print(f"map: {len(grid)} runs, {len(grid) - len(todo)} already in {args.csv}, {len(todo)} to run; "
          f"budget {args.budget_min} min", file=sys.stderr)
    if args.dry_run:
        for g in todo:
            print(" ".join(command(args.sim, *g, args.rounds, args.target, "OUT")))
        return 0
    os.makedirs(args.runs, exist_ok=True)
    # The runs use a copy of the simulator, so that a rebuild while the map runs cannot break them.
    copy = os.path.join(args.runs, "sketchps-sim")
    shutil.copy2(args.sim, copy)
    args.sim = copy
    start, failed = time.time(), False
    for i, (m, p, a, f, s) in enumerate(todo):
        spent = (time.time() - start) / 60
        if spent >= args.budget_min:
            print(f"map: budget of {args.budget_min} min spent; {len(todo) - i} runs left (run again to go on)",
                  file=sys.stderr)
            break
        row = run_one(args, m, p, a, f, s)
        append_row(args.csv, row)
        failed |= row["status"] != "ok"
        acc = row.get("final_test_accuracy")
        acc_text = f"{100 * acc:.2f}%" if isinstance(acc, (int, float)) else "n/a"
        print(f"map: [{i + 1}/{len(todo)}] {m} P={p} alpha={a} f={f} seed={s}: {row['status']}, accuracy {acc_text}, "
              f"{row.get('uplink_compression', '?')}x up, {row['wall_s']} s (spent {(time.time() - start) / 60:.1f} "
              f"of {args.budget_min} min)", file=sys.stderr, flush=True)
    return 1 if failed else 0


def panels(rows):
    """The (compression target, rounds) of the rows, the default panel first."""
    return sorted({panel_of(r) for r in rows}, key=lambda x: (x != (DEFAULT_TARGET, DEFAULT_ROUNDS), x))


def panel_text(panel):
    return f"{panel[0]}x uplink, {panel[1]} rounds"


def cells(rows, panel=(DEFAULT_TARGET, DEFAULT_ROUNDS)):
    """{(P, alpha, f): {method: [accuracy of each seed]}} over the rows of `panel` that finished."""
    out = {}
    for r in rows:
        if r["status"] != "ok" or r["final_test_accuracy"] in ("", "None") or panel_of(r) != panel:
            continue
        cell = (int(r["workers"]), r["alpha"], float(r["fraction"]))
        out.setdefault(cell, {}).setdefault(r["method"], []).append(float(r["final_test_accuracy"]))
    return out


def mean(xs):
    return sum(xs) / len(xs)


def seeds_text(xs):
    """"(n)" for one value; "(n, ±sd)" for more: their sample standard deviation, in points."""
    if len(xs) < 2:
        return f"({len(xs)})"
    m = mean(xs)
    sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    return f"({len(xs)}, ±{100 * sd:.2f})"


def paired_gaps(rows, panel, cell, method):
    """The method's accuracy minus dense's, seed by seed (the seed draws the partition and the
    participants, so a seed's runs share them), over the seeds both finished."""
    acc = {}
    for r in rows:
        if (r["status"] == "ok" and r["final_test_accuracy"] not in ("", "None") and panel_of(r) == panel
                and (int(r["workers"]), r["alpha"], float(r["fraction"])) == cell):
            acc.setdefault(r["method"], {})[int(r["seed"])] = float(r["final_test_accuracy"])
    dense, mine = acc.get("dense", {}), acc.get(method, {})
    return [mine[s] - dense[s] for s in sorted(mine) if s in dense]


def gaps(by_method):
    """Each method's gap to dense in points (seed means); None without a dense run."""
    if "dense" not in by_method:
        return {}
    dense = mean(by_method["dense"])
    return {m: 100 * (mean(a) - dense) for m, a in by_method.items()}


def verdict(g):
    """The sketches within 1 point of dense where neither top-k nor gTop-k is (the issue's target)."""
    if not g or any(m not in g for m in SPARSE):
        return []
    if any(g[m] >= -1 for m in SPARSE):
        return []
    return [m for m in SKETCHES if m in g and g[m] >= -1]


def cmd_deciding(args):
    rows = read_rows(args.csv)
    for panel in panels(rows):
        suffix = "" if panel == (DEFAULT_TARGET, DEFAULT_ROUNDS) else f" ({panel_text(panel)})"
        for cell, by_method in sorted(cells(rows, panel).items()):
            g = gaps(by_method)
            sketch_close = [m for m in SKETCHES if m in g and g[m] >= -1]
            sparse_far = [m for m in SPARSE if m in g and g[m] < -1]
            if sketch_close and sparse_far:
                p, a, f = cell
                print(f"P={p} alpha={a} f={f}{suffix}: {', '.join(sketch_close)} within 1 point; "
                      f"{', '.join(sparse_far)} not")
    return 0


def cell_order(item):
    p, a, f = item[0]
    return (p, a != "inf", a, -f)


def cmd_table(args):
    rows = read_rows(args.csv)
    for panel in panels(rows):
        if len(panels(rows)) > 1:
            print(f"#### {panel_text(panel)}\n")
        print_panel(rows, panel)
    print_compression(rows)
    return 0


def print_panel(rows, panel):
    by_cell = cells(rows, panel)
    methods = [m for m in METHODS if any(m in c for c in by_cell.values())]
    print("| P | α | f | dense | " + " | ".join(m for m in methods if m != "dense") + " | verdict |")
    print("|---|---|---|---|" + "---|" * (len(methods) - 1) + "---|")
    for (p, a, f), by_method in sorted(by_cell.items(), key=cell_order):
        g = gaps(by_method)
        dense = by_method.get("dense")
        line = [str(p), "∞" if a == "inf" else a, f"{f:g}",
                f"{100 * mean(dense):.2f} {seeds_text(dense)}" if dense else "–"]
        for m in methods:
            if m == "dense":
                continue
            if m not in by_method:
                line.append("–")
            elif m in g:
                paired = paired_gaps(rows, panel, (p, a, f), m)
                line.append(f"{g[m]:+.2f} {seeds_text(paired) if len(paired) > 1 else seeds_text(by_method[m])}")
            else:
                line.append(f"{100 * mean(by_method[m]):.2f}% ({len(by_method[m])})")
        v = verdict(g)
        line.append(("**" + ", ".join(v) + "**") if v else "no")
        print("| " + " | ".join(line) + " |")
    print()
    print("Bytes on the busiest link (MB per round, the shard's ingress or egress, whichever is larger; mean over "
          "the rounds and the seeds):")
    print()
    print("| P | α | f | " + " | ".join(methods) + " |")
    print("|---|---|---|" + "---|" * len(methods))
    for (p, a, f), by_method in sorted(link_bytes(rows, panel).items(), key=cell_order):
        line = [str(p), "∞" if a == "inf" else a, f"{f:g}"]
        line += [f"{mean(by_method[m]) / 1e6:.2f}" if m in by_method else "–" for m in methods]
        print("| " + " | ".join(line) + " |")
    print()


def print_compression(rows):
    comp = {}
    for r in rows:
        if r["status"] == "ok" and r["uplink_compression"]:
            comp.setdefault((panel_of(r)[0], r["method"]), []).append(float(r["uplink_compression"]))
    print("Uplink compression measured (dense bytes / mean bytes a participant pushed; min–max over the runs): " +
          "; ".join(f"{m} at {t}x {min(c):.1f}–{max(c):.1f}×" for (t, m), c in sorted(comp.items())
                    if m != "dense") + ".")
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        print(f"\n{len(bad)} run(s) failed: " + "; ".join(f"{r['method']} P={r['workers']} α={r['alpha']} "
                                                          f"f={r['fraction']} seed {r['seed']}: {r['status']}"
                                                          for r in bad))


def link_bytes(rows, panel=(DEFAULT_TARGET, DEFAULT_ROUNDS)):
    """{(P, alpha, f): {method: [busiest-link bytes per round of each seed]}} over the rows of `panel` that
    finished."""
    out = {}
    for r in rows:
        if r["status"] == "ok" and r["busiest_link_mean"] and panel_of(r) == panel:
            cell = (int(r["workers"]), r["alpha"], float(r["fraction"]))
            out.setdefault(cell, {}).setdefault(r["method"], []).append(float(r["busiest_link_mean"]))
    return out


def plot_name(cell, panel=(DEFAULT_TARGET, DEFAULT_ROUNDS)):
    p, a, f = cell
    extra = "" if panel == (DEFAULT_TARGET, DEFAULT_ROUNDS) else f"-x{panel[0]}-r{panel[1]}"
    return f"sim-map-P{p}-alpha{a.replace(':', '')}-f{f:g}{extra}.svg"


def cmd_plot(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = read_rows(args.csv)
    os.makedirs(args.plot_dir, exist_ok=True)
    for panel in panels(rows):
        plot_panel(plt, rows, panel, args.plot_dir)
    return 0


def plot_panel(plt, rows, panel, plot_dir):
    acc, link = cells(rows, panel), link_bytes(rows, panel)
    for cell, by_method in sorted(acc.items()):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for m, accs in by_method.items():
            if m not in link.get(cell, {}):
                continue
            x, y = mean(link[cell][m]) / 1e6, 100 * mean(accs)
            ax.scatter([x], [y], marker="s" if m == "dense" else ("^" if m in SKETCHES else "o"))
            ax.annotate(f"{m} ({len(accs)})", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
        p, a, f = cell
        ax.set_xscale("log")
        ax.set_xlabel("busiest link, MB per round (log)")
        ax.set_ylabel("final test accuracy, %")
        ax.set_title(f"P = {p}, alpha = {a}, f = {f:g}, {panel_text(panel)} (seeds in brackets)", fontsize=8)
        fig.tight_layout()
        path = os.path.join(plot_dir, plot_name(cell, panel))
        fig.savefig(path)
        plt.close(fig)
        print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["run", "deciding", "table", "plot"])
    ap.add_argument("--csv", default=os.path.join(ROOT, "bench", "sim", "map.csv"))
    ap.add_argument("--runs", default=os.path.join(ROOT, "runs", "sim-map"))
    ap.add_argument("--plot-dir", default=os.path.join(ROOT, "docs", "reports", "img"))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--workers", default="4,16,64")
    ap.add_argument("--alphas", default="inf,0.1")
    ap.add_argument("--fractions", default="1,0.25")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    ap.add_argument("--target", type=int, default=DEFAULT_TARGET,
                    help="uplink compression target (the densities of 50x scaled by 50/target)")
    ap.add_argument("--budget-min", type=float, default=45)
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "ci", "sim", "sketchps-sim"))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    try:
        args.methods = parse_list(args.methods, str)
        args.workers = parse_list(args.workers, int)
        args.alphas = parse_list(args.alphas, str)
        args.fractions = parse_list(args.fractions, float)
        args.seeds = parse_list(args.seeds, int)
    except ValueError as e:
        print(f"map: {e}", file=sys.stderr)
        return 2
    if args.target <= 0 or args.rounds <= 0:
        print(f"map: --target {args.target} and --rounds {args.rounds} must be > 0", file=sys.stderr)
        return 2
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        print(f"map: unknown method(s) {unknown}; known: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    if args.action == "run" and not args.dry_run and not os.access(args.sim, os.X_OK):
        print(f"map: no simulator at {args.sim} (build it: cmake --build --preset ci)", file=sys.stderr)
        return 2
    return {"run": cmd_run, "deciding": cmd_deciding, "table": cmd_table, "plot": cmd_plot}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
