#!/usr/bin/env python3
"""The tables of docs/reports/reproduction.md from the sweep's JSON files (bench/reproduction/sweep.sh).

    /usr/bin/python3 bench/reproduction/table.py bench/reproduction/*.json > table.md

Per file (one loadgen invocation = one network and one d), mode and P: the median round time of
each scheme, the throughput ratios of gs-SGD (throughput = 1 / round time: the same batch per worker
in every scheme) against gTop-k on the PS, gTop-k's tree merge (decentralized) and Sketched-SGD, and
the wire bytes per worker per round (up + down). The seed's claim: gs-SGD >= 1.3x gTop-k and >= 1.1x
Sketched-SGD (it quotes 1.3-3.1x and 1.1-1.2x).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

CLAIM_GTOPK = 1.3
CLAIM_SKETCHED = 1.1


def network_of(name: str) -> str:
    """'latency-5ms-resnet' -> '5 ms'; 'bandwidth-1gbit-5ms-resnet' -> '1 Gbit/s, 5 ms'."""
    parts = []
    m = re.search(r"(\d+)(g|m)bit", name)
    if m:
        parts.append(f"{m.group(1)} {'Gbit/s' if m.group(2) == 'g' else 'Mbit/s'}")
    m = re.search(r"-(\d+)ms-", name)
    if m:
        parts.append(f"{m.group(1)} ms")
    return ", ".join(parts) if parts else "loopback"


def fmt_bytes(b: float) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def ratio(a: float | None, b: float | None) -> float | None:
    """Throughput of the scheme with round time a over the one with round time b."""
    if not a or not b:
        return None
    return b / a


def fmt_ratio(r: float | None, claim: float) -> str:
    if r is None:
        return "–"
    return f"**{r:.2f}**" if r >= claim else f"{r:.2f}"


def rows(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    by = {}
    for r in data["results"]:
        by[(r["mode"], r["workers"], r["scheme"])] = r
    out = []
    for mode in ("ps", "decentralized"):
        for p in sorted({k[1] for k in by if k[0] == mode}):
            get = lambda s: by.get((mode, p, s))
            t = {s: (get(s) or {}).get("round_seconds_median") for s in ("gs_sgd", "gtopk", "gtopk_tree", "sketched_sgd")}
            b = {s: (get(s) or {}).get("per_worker_per_round", {}).get("wire_total")
                 for s in ("gs_sgd", "gtopk", "gtopk_tree", "sketched_sgd")}
            b_up = {s: (get(s) or {}).get("per_worker_per_round", {}).get("wire_up")
                    for s in ("gs_sgd", "gtopk", "gtopk_tree", "sketched_sgd")}
            any_r = next(r for r in (get(s) for s in t) if r)
            # a row is marked noisy when some scheme's slowest timed round took > 2x its fastest
            noisy = any(r and max(r["round_seconds"]) > 2 * min(r["round_seconds"]) for r in (get(s) for s in t))
            out.append({"file": path.name, "network": network_of(path.stem), "d": any_r["dim"], "mode": mode, "P": p,
                        "t": t, "bytes": b, "bytes_up": b_up, "noisy": noisy, "gs_vs_gtopk": ratio(t["gs_sgd"], t["gtopk"]),
                        "gs_vs_tree": ratio(t["gs_sgd"], t["gtopk_tree"]),
                        "gs_vs_sketched": ratio(t["gs_sgd"], t["sketched_sgd"]),
                        "load": (data.get("load_average_start"), data.get("load_average_end")),
                        "date": data.get("date"), "failures": data.get("failures", [])})
    return out


def ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1000:.0f}"


def network_key(network: str) -> tuple:
    """loopback, then delays ascending, then rates descending."""
    if network == "loopback":
        return (0, 0.0)
    m = re.fullmatch(r"(\d+) ms", network)
    if m:
        return (1, float(m.group(1)))
    m = re.match(r"(\d+) (Gbit|Mbit)/s", network)
    rate = float(m.group(1)) * (1000 if m and m.group(2) == "Gbit" else 1) if m else 0
    return (2, -rate, network)


def delay_of(network: str) -> float | None:
    if network == "loopback":
        return 0.0
    m = re.fullmatch(r"(\d+) ms", network)
    return float(m.group(1)) if m else None


def latency_slopes(all_rows: list[dict]) -> None:
    """Least-squares slope of the median round time against the added one-way delay D, in units of D:
    how many one-way delays a round waits for in sequence (loopback counts as D = 0)."""
    groups: dict = {}
    for r in all_rows:
        D = delay_of(r["network"])
        if D is None:
            continue
        for s, t in r["t"].items():
            if t:
                groups.setdefault((r["mode"], r["d"], r["P"], s), []).append((D, t))
    rows_out = []
    for (mode, d, p, s), pts in sorted(groups.items()):
        if len({D for D, _ in pts}) < 3:
            continue
        n = len(pts)
        mx = sum(D for D, _ in pts) / n
        my = sum(t for _, t in pts) / n
        sxx = sum((D - mx) ** 2 for D, _ in pts)
        slope = sum((D - mx) * (t - my) for D, t in pts) / sxx * 1000  # seconds per ms -> delays
        rows_out.append((mode, d, p, s, slope, sorted(pts)))
    if not rows_out:
        return
    print("\n**Latency**: slope of the median round time against the added one-way delay D, in units of D "
          "(least squares over the loopback and delayed runs of one d), with the points (D ms: median ms)\n")
    print("| mode | d | P | scheme | one-way delays per round | points |")
    print("|---|---|---|---|---|---|")
    for mode, d, p, s, slope, pts in rows_out:
        pts_s = ", ".join(f"{D:g}: {t * 1000:.0f}" for D, t in pts)
        print(f"| {mode} | {d / 1e6:.2f}M | {p} | {s} | {slope:.1f} | {pts_s} |")


def bandwidth_floors(all_rows: list[dict]) -> None:
    """For capped runs: the time the shared link needs for one round's bytes, against the measured
    median. ps: every worker's uplink and downlink cross the link (P x (up + down)); decentralized:
    a byte one worker sends is the byte another receives, so it crosses once (P x up)."""
    out = []
    for r in all_rows:
        m = re.match(r"(\d+) (Gbit|Mbit)/s", r["network"])
        if not m:
            continue
        rate = float(m.group(1)) * (1e9 if m.group(2) == "Gbit" else 1e6) / 8  # bytes per second
        for s, t in r["t"].items():
            b = r["bytes"][s] if r["mode"] == "ps" else r["bytes_up"][s]
            if t and b:
                out.append((r["network"], r["mode"], r["d"], r["P"], s, r["P"] * b / rate, t))
    if not out:
        return
    print("\n**Bandwidth**: the shared link's floor for one round (ps: P x wire bytes per worker up + down; "
          "decentralized: P x wire bytes sent; over the rate) against the measured median\n")
    print("| network | mode | d | P | scheme | link floor ms | measured ms |")
    print("|---|---|---|---|---|---|---|")
    for net, mode, d, p, s, floor, t in out:
        print(f"| {net} | {mode} | {d / 1e6:.2f}M | {p} | {s} | {floor * 1000:.0f} | {t * 1000:.0f} |")


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv]
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    all_rows = sorted((r for f in files for r in rows(f)), key=lambda r: (r["d"], network_key(r["network"]), r["P"]))
    for mode in ("ps", "decentralized"):
        sel = [r for r in all_rows if r["mode"] == mode]
        if not sel:
            continue
        print(f"\n**{mode}**: median ms per round (wire bytes per worker per round, up + down); throughput ratio "
              "gs-SGD / other (bold where the seed's claim holds: >= 1.3 against gTop-k, >= 1.1 against Sketched-SGD)\n")
        tree = mode == "decentralized"
        head = ["network", "d", "P", "gs-SGD", "gTop-k" + (" (all-gather)" if tree else " (PS)")]
        if tree:
            head.append("gTop-k tree")
        head += ["Sketched-SGD", "gs / gTop-k"]
        if tree:
            head.append("gs / tree")
        head.append("gs / Sketched")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in sel:
            cell = lambda s: f"{ms(r['t'][s])} ({fmt_bytes(r['bytes'][s]) if r['bytes'][s] else '–'})"
            line = [r["network"], f"{r['d'] / 1e6:.2f}M", str(r["P"]) + (" †" if r["noisy"] else ""), cell("gs_sgd"),
                    cell("gtopk")]
            if tree:
                line.append(cell("gtopk_tree"))
            line += [cell("sketched_sgd"), fmt_ratio(r["gs_vs_gtopk"], CLAIM_GTOPK)]
            if tree:
                line.append(fmt_ratio(r["gs_vs_tree"], CLAIM_GTOPK))
            line.append(fmt_ratio(r["gs_vs_sketched"], CLAIM_SKETCHED))
            print("| " + " | ".join(line) + " |")
    print("\n† some scheme's slowest timed round took more than twice its fastest (stalls on the loaded machine).")
    latency_slopes(all_rows)
    bandwidth_floors(all_rows)
    print("\nSources (one loadgen invocation each; load average at start / end):\n")
    for f in files:
        d = json.loads(f.read_text())
        fails = d.get("failures") or []
        print(f"- `{f.name}`: {d.get('date')}, {d.get('job')}; load {d.get('load_average_start')} / "
              f"{d.get('load_average_end')}; {d.get('sweep_seconds', 0):.0f} s"
              + (f"; **{len(fails)} failed configurations**" if fails else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
