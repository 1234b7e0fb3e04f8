"""The performance targets, checked on the rows of a benchmark (reported, never enforced).

A row is {"system", "kind", "scheme", "bandwidth", "figures": figures.derive(...)}. `default` is the
name of the default sketchps system (the first of --schemes in the first --mode). Targets:
  T1  at 100mbit: default train loop <= 0.5 x DDP dense's
  T2  at 100mbit: default train loop <= 0.8 x DDP fp16's
  T3  at 100mbit: default accuracy >= DDP dense's - 1 point (being better is no miss)
  T4  at 100mbit: every compressing sketchps system (scheme != dense) has a train loop < DDP dense's
  T5  uncapped (bandwidth none): default train loop <= 1.5 x DDP dense's
  T6  at every bandwidth: default whole-job CPU seconds <= 1.3 x DDP dense's
Each check is {"id", "bandwidth", "text", "status": PASS | MISS | N/A, "measured", "limit"}; N/A
when a system it needs was not run (the text says which).
"""
from __future__ import annotations

CAPPED = "100mbit"
UNCAPPED = "none"


def find(rows: list[dict], bandwidth: str, system: str) -> dict | None:
    return next((r for r in rows if r["bandwidth"] == bandwidth and r["system"] == system), None)


def ratio_check(tid, bw, text, rows, a_name, b_name, key, limit, strict=False) -> dict:
    a, b = find(rows, bw, a_name), find(rows, bw, b_name)
    check = {"id": tid, "bandwidth": bw, "text": text, "limit": limit}
    if a is None or b is None:
        missing = a_name if a is None else b_name
        return {**check, "status": "N/A", "measured": None, "text": f"{text} (not run: {missing})"}
    ratio = a["figures"][key] / b["figures"][key] if b["figures"][key] else float("inf")
    ok = ratio < limit if strict else ratio <= limit
    return {**check, "status": "PASS" if ok else "MISS", "measured": ratio}


def accuracy_check(rows, bw, default) -> dict:
    a, d = find(rows, bw, default), find(rows, bw, "DDP dense")
    text = f"{default} accuracy >= DDP dense accuracy - 1 point"
    check = {"id": "T3", "bandwidth": bw, "text": text, "limit": -1.0}
    if a is None or d is None or a["figures"]["accuracy"] is None or d["figures"]["accuracy"] is None:
        return {**check, "status": "N/A", "measured": None, "text": f"{text} (missing a run or an accuracy)"}
    diff = 100.0 * (a["figures"]["accuracy"] - d["figures"]["accuracy"])
    return {**check, "status": "PASS" if diff >= -1.0 else "MISS", "measured": diff}


def evaluate(rows: list[dict], default: str) -> list[dict]:
    checks = []
    bandwidths = list(dict.fromkeys(r["bandwidth"] for r in rows))
    if CAPPED in bandwidths:
        checks.append(ratio_check("T1", CAPPED, f"{default} train loop <= 0.5 x DDP dense", rows, default,
                                  "DDP dense", "train_loop_s", 0.5))
        checks.append(ratio_check("T2", CAPPED, f"{default} train loop <= 0.8 x DDP fp16", rows, default,
                                  "DDP fp16", "train_loop_s", 0.8))
        checks.append(accuracy_check(rows, CAPPED, default))
        for r in rows:
            if r["bandwidth"] == CAPPED and r["kind"] == "sketchps" and r["scheme"] != "dense":
                checks.append(ratio_check("T4", CAPPED, f"{r['system']} train loop < DDP dense", rows, r["system"],
                                          "DDP dense", "train_loop_s", 1.0, strict=True))
    if UNCAPPED in bandwidths:
        checks.append(ratio_check("T5", UNCAPPED, f"{default} train loop <= 1.5 x DDP dense", rows, default,
                                  "DDP dense", "train_loop_s", 1.5))
    for bw in bandwidths:
        checks.append(ratio_check("T6", bw, f"{default} whole-job CPU <= 1.3 x DDP dense", rows, default,
                                  "DDP dense", "cpu_s", 1.3))
    return checks


def describe(check: dict) -> str:
    """One line: PASS/MISS/N/A, the measured value, the target."""
    m = check["measured"]
    if m is None:
        value = "-"
    elif check["id"] == "T3":
        value = f"{m:+.2f} points (limit {check['limit']:+.0f})"
    else:
        value = f"ratio {m:.2f} (limit {check['limit']:g})"
    return f"{check['status']:4}  [{check['bandwidth']}] {check['id']} {check['text']}: {value}"
