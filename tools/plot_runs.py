#!/usr/bin/python3
"""Draws test accuracy against wall time, rounds and cumulative megabytes, and the training loss
against rounds, one line per run.

Called by `sketchps report --plot` and `sketchps run` (tools/plot.h), which embed this file and
prepare its input, so every quantity is defined in C++ once:

    plot_runs.py DATA.json PREFIX      writes PREFIX.png and PREFIX.svg

DATA.json: {"runs": [{"label": str, "seconds": [..], "rounds": [..], "bytes": [..],
"accuracy": [..], "loss": {"rounds": [..], "loss": [..]}, "recovery": {...}}, ...],
"recovery_prefix": str} with one entry per evaluation, accuracy in [0, 1], bytes in bytes; "loss"
(optional) has one entry per round that recorded a loss. "recovery" (optional) holds per compressed round "rounds" and the figures of
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
    ("bytes", "MB one worker sent and received (cumulative)", "log"),
]
KEYS = ["label", "seconds", "rounds", "bytes", "accuracy"]
LOSS_SMOOTH = 20  # rounds per point of the loss panel: one batch's loss is noisy


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


def accuracy_limits(runs: list) -> tuple:
    """A y range (%) that shows every point, at least 10 points tall, never above 100 or below 0
    (a single evaluation would otherwise get an axis such as 93-102%)."""
    values = [100 * a for run in runs for a in run["accuracy"]]
    lo, hi = max(0.0, min(values) - 3), min(100.0, max(values) + 2)
    if hi - lo < 10:
        lo = max(0.0, hi - 10)
        hi = min(100.0, lo + 10)
    return lo, hi


def draw(runs: list, prefix: str) -> None:
    fig, axes = plt.subplots(1, len(PANELS) + 1, figsize=(19, 4.6))
    evaluated = any(run["accuracy"] for run in runs)
    for ax, (key, xlabel, scale) in zip(axes, PANELS):
        for run in runs:
            xs = [x / 1e6 for x in run[key]] if key == "bytes" else run[key]
            ax.plot(xs, [100 * a for a in run["accuracy"]], marker="o", markersize=3, label=run["label"])
        if scale == "log" and any(x > 0 for run in runs for x in run[key]):
            ax.set_xscale("log")
        elif scale == "linear":
            ax.set_xlim(left=0)  # from the start of training, also for a single evaluation at the end
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        if evaluated:
            ax.set_ylim(*accuracy_limits(runs))
        else:
            ax.text(0.5, 0.5, "no evaluation", ha="center", va="center", transform=ax.transAxes, color="gray")
    axes[0].set_ylabel("test accuracy (%)")
    loss = axes[-1]
    for i, run in enumerate(runs):
        x, y = points(run.get("loss", {}), "loss", smooth=LOSS_SMOOTH)
        if x:
            loss.plot(x, y, color=f"C{i}", label=run["label"])
    loss.set_xlabel("rounds")
    loss.set_ylabel(f"training loss (mean of {LOSS_SMOOTH} rounds)")
    loss.grid(alpha=0.3)
    (axes[0] if evaluated else loss).legend(fontsize="small", loc="lower right" if evaluated else "upper right")
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
