#!/usr/bin/python3
"""Draws test accuracy against wall time, rounds and cumulative bytes, one line per run.

Called by `sketchps report --plot` and `sketchps run` (tools/plot.h), which embed this file and
prepare its input, so every quantity is defined in C++ once:

    plot_runs.py DATA.json PREFIX      writes PREFIX.png and PREFIX.svg

DATA.json: {"runs": [{"label": str, "seconds": [..], "rounds": [..], "bytes": [..],
"accuracy": [..]}, ...]} with one entry per evaluation, accuracy in [0, 1].
Exit codes: 0 written, 2 bad usage or input, 3 matplotlib is missing.
"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    print(f"plot_runs.py: matplotlib is missing ({e}); install python3-matplotlib", file=sys.stderr)
    sys.exit(3)

PANELS = [
    ("seconds", "wall time since training began (s)", "linear"),
    ("rounds", "rounds", "linear"),
    ("bytes", "bytes one worker sent and received (cumulative)", "log"),
]
KEYS = ["label", "seconds", "rounds", "bytes", "accuracy"]


def load(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    for i, run in enumerate(runs):
        missing = [k for k in KEYS if k not in run]
        if missing:
            raise ValueError(f"{path}: run {i} lacks {', '.join(missing)}")
        if len({len(run[k]) for k in KEYS[1:]}) != 1:
            raise ValueError(f"{path}: run {i}: series of different lengths")
    return runs


def draw(runs: list, prefix: str) -> None:
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.6), sharey=True)
    for ax, (key, xlabel, scale) in zip(axes, PANELS):
        for run in runs:
            ax.plot(run[key], [100 * a for a in run["accuracy"]], marker="o", markersize=3, label=run["label"])
        if scale == "log" and any(x > 0 for run in runs for x in run[key]):
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    axes[0].legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)
    fig.savefig(prefix + ".svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: list) -> int:
    if len(argv) != 3:
        print("usage: plot_runs.py DATA.json PREFIX", file=sys.stderr)
        return 2
    try:
        runs = load(argv[1])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot_runs.py: {e}", file=sys.stderr)
        return 2
    plt.rcParams["svg.hashsalt"] = "sketchps"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    draw(runs, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
