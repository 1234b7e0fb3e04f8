#!/usr/bin/python3
"""Draws test accuracy against wall time, rounds and cumulative bytes, one line per run.

Called by `sketchps report --plot` and `sketchps run` (tools/plot.h), which embed this file and
prepare its input, so every quantity is defined in C++ once:

    plot_runs.py DATA.json PREFIX      writes PREFIX.png and PREFIX.svg

DATA.json: {"runs": [{"label": str, "seconds": [..], "rounds": [..], "bytes": [..],
"accuracy": [..], "recovery": {...}}, ...], "recovery_prefix": str} with one entry per evaluation,
accuracy in [0, 1]. "recovery" (optional) holds per compressed round "rounds" and the figures of
metrics.jsonl (residual_norm, recovered_share, ...; null where absent); with "recovery_prefix" they
are drawn into RECOVERY_PREFIX.png and .svg: residual norm, and the shares and hit rates.
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


SMOOTH = 10  # rounds per point of the shares panel: single rounds are noisy
SHARES = [  # figure, line style, what it is (docs/methods.md "Recovery diagnostics")
    ("recovered_share", "-", "share of the exact sum's mass G_t returned"),
    ("best_share", "--", "share exact top-k returns"),
    ("hit_rate", ":", "top-k hit rate"),
    ("candidate_hit_rate", "-.", "candidates' top-k hit rate"),
    ("sent_share", (0, (1, 3)), "share of the input sent (no exact sum)"),
]


def points(rec: dict, key: str, smooth: int = 1) -> tuple[list, list]:
    """The rounds where `key` has a value, and the values (a trailing mean over `smooth` points)."""
    pairs = [(r, v) for r, v in zip(rec.get("rounds", []), rec.get(key, [])) if v is not None]
    values = [v for _, v in pairs]
    if smooth > 1:
        values = [sum(values[max(0, i - smooth + 1):i + 1]) / (i + 1 - max(0, i - smooth + 1)) for i in range(len(values))]
    return [r for r, _ in pairs], values


def draw_recovery(runs: list, prefix: str) -> bool:
    runs = [r for r in runs if r.get("recovery", {}).get("rounds")]
    if not runs:
        return False
    fig, (norms, shares) = plt.subplots(1, 2, figsize=(13, 4.6))
    for i, run in enumerate(runs):
        color = f"C{i}"
        rec = run["recovery"]
        x, y = points(rec, "residual_norm")
        if x:
            norms.plot(x, y, color=color, label=f"{run['label']}: residual")
        x, y = points(rec, "input_norm")
        norms.plot(x, y, color=color, alpha=0.4, linestyle="--", label=f"{run['label']}: input")
        exact = bool(points(rec, "recovered_share")[0])
        for key, style, what in SHARES:
            if key == "sent_share" and exact:
                continue
            x, y = points(rec, key, smooth=SMOOTH)
            if x:
                shares.plot(x, y, color=color, linestyle=style, label=f"{run['label']}: {what}")
    norms.set_yscale("log")
    norms.set_xlabel("round")
    norms.set_ylabel("L2 norm (one worker, all shards)")
    shares.set_xlabel("round")
    shares.set_ylabel(f"share / rate (mean of {SMOOTH} rounds)")
    shares.set_yscale("log")
    shares.set_ylim(1e-4, 1.5)
    for ax in (norms, shares):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="best")
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)
    fig.savefig(prefix + ".svg", metadata={"Date": None})
    plt.close(fig)
    return True


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
    with open(argv[1], encoding="utf-8") as f:
        recovery_prefix = json.load(f).get("recovery_prefix")
    if recovery_prefix:
        draw_recovery(runs, recovery_prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
