"""The performance targets, checked on the rows of a benchmark (reported, never enforced).

A row is {"system", "kind", "scheme", "workload" (cnn when absent), "bandwidth", "figures":
figures.derive(...) with figures.add_time_to_accuracy's tta_s}. `default` is the default sketchps
system (the first of --schemes in the first --mode); the "best scheme" of a workload is its sketchps
system with the shortest time to accuracy (TTA) at 100mbit; "the better PowerSGD" is the DDP
PowerSGD system with the shorter TTA. At 100mbit unless said otherwise:
  cnn  T1  default train loop <= 0.5 x DDP dense's
       T2  default train loop <= 0.8 x DDP fp16's
       T3  default accuracy >= DDP dense's - 1 point (being better is no miss)
       T4  every compressing sketchps system (scheme != dense) has a train loop < DDP dense's
       T5  uncapped (bandwidth none): default train loop <= 1.5 x DDP dense's
       T6  at every bandwidth: default whole-job CPU seconds <= 1.3 x DDP dense's
       T7  default train loop < the better PowerSGD's (by train loop)
  vgg  V1  best scheme TTA <= 0.2 x DDP dense's
       V2  best scheme TTA <= 0.8 x the better PowerSGD's
       V3  default TTA <= 0.3 x DDP dense's
  vit  X1  best scheme TTA <= 0.3 x DDP dense's
       X2  best scheme TTA <= 0.9 x the better PowerSGD's
       X3  best scheme's final accuracy >= DDP dense's - 1 point
  all  B1  best scheme's TTA at 100mbit <= 1.5 x its own TTA at 1gbit (else at none)
Each check is {"id", "workload", "bandwidth", "text", "status": PASS | MISS | N/A, "measured",
"limit", "unit": ratio | points}. A system that never reaches the target has an infinite TTA: a
ratio with it above is a MISS, below (a rival that never gets there) a PASS. N/A when a system the
check needs was not run (the text says which).
"""
from __future__ import annotations

import math

CAPPED = "100mbit"
UNCAPPED = "none"
FAST = ("1gbit", UNCAPPED)  # B1's reference bandwidth, the first present


def find(rows: list[dict], bandwidth: str, system: str, workload: str = "cnn") -> dict | None:
    return next((r for r in rows if r.get("workload", "cnn") == workload and r["bandwidth"] == bandwidth
                 and r["system"] == system), None)


def figure(row: dict, key: str) -> float:
    """A row's figure; a time to accuracy never reached is infinite."""
    value = row["figures"].get(key)
    return math.inf if value is None else value


def check(tid, workload, bw, text, limit, unit="ratio") -> dict:
    return {"id": tid, "workload": workload, "bandwidth": bw, "text": text, "limit": limit, "unit": unit,
            "status": "N/A", "measured": None}


def compare(c: dict, a: dict | None, b: dict | None, key: str, strict=False, names=("", "")) -> dict:
    """c with the ratio a/b of `key` (a, b rows) judged against its limit."""
    if a is None or b is None:
        return {**c, "text": f"{c['text']} (not run: {names[0] if a is None else names[1]})"}
    x, y = figure(a, key), figure(b, key)
    if math.isinf(x) and math.isinf(y):
        return {**c, "text": f"{c['text']} (neither reached the target)"}
    ratio = math.inf if math.isinf(x) or y == 0 else (0.0 if math.isinf(y) else x / y)
    ok = ratio < c["limit"] if strict else ratio <= c["limit"]
    return {**c, "status": "PASS" if ok else "MISS", "measured": ratio}


def accuracy(c: dict, a: dict | None, ref: dict | None) -> dict:
    if a is None or ref is None or a["figures"]["accuracy"] is None or ref["figures"]["accuracy"] is None:
        return {**c, "text": f"{c['text']} (missing a run or an accuracy)"}
    diff = 100.0 * (a["figures"]["accuracy"] - ref["figures"]["accuracy"])
    return {**c, "status": "PASS" if diff >= c["limit"] else "MISS", "measured": diff}


def best(rows: list[dict], workload: str, bw: str, kind: str, prefix: str = "") -> dict | None:
    """The row of `kind` (and name prefix) with the shortest time to accuracy; None if none ran."""
    mine = [r for r in rows if r.get("workload", "cnn") == workload and r["bandwidth"] == bw and r["kind"] == kind
            and r["system"].startswith(prefix)]
    return min(mine, key=lambda r: figure(r, "tta_s"), default=None)


def cnn_checks(rows: list[dict], default: str, bandwidths: list[str]) -> list[dict]:
    out, w = [], "cnn"
    if CAPPED in bandwidths:
        dense, fp16 = find(rows, CAPPED, "DDP dense"), find(rows, CAPPED, "DDP fp16")
        mine = find(rows, CAPPED, default)
        out.append(compare(check("T1", w, CAPPED, f"{default} train loop <= 0.5 x DDP dense", 0.5), mine, dense,
                           "train_loop_s", names=(default, "DDP dense")))
        out.append(compare(check("T2", w, CAPPED, f"{default} train loop <= 0.8 x DDP fp16", 0.8), mine, fp16,
                           "train_loop_s", names=(default, "DDP fp16")))
        out.append(accuracy(check("T3", w, CAPPED, f"{default} accuracy >= DDP dense accuracy - 1 point", -1.0,
                                  "points"), mine, dense))
        for r in rows:
            if r.get("workload", "cnn") == w and r["bandwidth"] == CAPPED and r["kind"] == "sketchps" \
                    and r["scheme"] != "dense":
                out.append(compare(check("T4", w, CAPPED, f"{r['system']} train loop < DDP dense", 1.0), r, dense,
                                   "train_loop_s", strict=True, names=(r["system"], "DDP dense")))
        powersgd = [r for r in rows if r.get("workload", "cnn") == w and r["bandwidth"] == CAPPED
                    and r["system"].startswith("DDP PowerSGD")]
        better = min(powersgd, key=lambda r: r["figures"]["train_loop_s"], default=None)
        out.append(compare(check("T7", w, CAPPED, f"{default} train loop < the better DDP PowerSGD", 1.0), mine,
                           better, "train_loop_s", strict=True, names=(default, "DDP PowerSGD")))
    if UNCAPPED in bandwidths:
        out.append(compare(check("T5", w, UNCAPPED, f"{default} train loop <= 1.5 x DDP dense", 1.5),
                           find(rows, UNCAPPED, default), find(rows, UNCAPPED, "DDP dense"), "train_loop_s",
                           names=(default, "DDP dense")))
    for bw in bandwidths:
        out.append(compare(check("T6", w, bw, f"{default} whole-job CPU <= 1.3 x DDP dense", 1.3),
                           find(rows, bw, default), find(rows, bw, "DDP dense"), "cpu_s", names=(default, "DDP dense")))
    return out


# workload -> (best vs dense, best vs the better PowerSGD, default vs dense or None, accuracy check)
TTA_TARGETS = {"vgg": (("V1", 0.2), ("V2", 0.8), ("V3", 0.3), None),
               "vit": (("X1", 0.3), ("X2", 0.9), None, "X3")}


def tta_checks(rows: list[dict], workload: str, default: str) -> list[dict]:
    vs_dense, vs_powersgd, default_check, acc_id = TTA_TARGETS[workload]
    bw, out = CAPPED, []
    top, dense = best(rows, workload, bw, "sketchps"), find(rows, bw, "DDP dense", workload)
    powersgd = best(rows, workload, bw, "ddp", "DDP PowerSGD")
    name = f"best scheme ({top['system']})" if top else "best scheme"
    out.append(compare(check(vs_dense[0], workload, bw, f"{name} time to accuracy <= {vs_dense[1]} x DDP dense",
                             vs_dense[1]), top, dense, "tta_s", names=("sketchps", "DDP dense")))
    out.append(compare(check(vs_powersgd[0], workload, bw, f"{name} time to accuracy <= {vs_powersgd[1]} x the "
                             "better DDP PowerSGD", vs_powersgd[1]), top, powersgd, "tta_s",
                       names=("sketchps", "DDP PowerSGD")))
    if default_check:
        out.append(compare(check(default_check[0], workload, bw, f"{default} time to accuracy <= {default_check[1]} x "
                                 "DDP dense", default_check[1]), find(rows, bw, default, workload), dense, "tta_s",
                           names=(default, "DDP dense")))
    if acc_id:
        out.append(accuracy(check(acc_id, workload, bw, f"{name} final accuracy >= DDP dense accuracy - 1 point", -1.0,
                                  "points"), top, dense))
    return out


def bandwidth_check(rows: list[dict], workload: str, bandwidths: list[str]) -> list[dict]:
    fast = next((b for b in FAST if b in bandwidths), None)
    if CAPPED not in bandwidths or fast is None:
        return []
    top = best(rows, workload, CAPPED, "sketchps")
    name = top["system"] if top else "best scheme"
    c = check("B1", workload, CAPPED, f"{name} time to accuracy at 100mbit <= 1.5 x at {fast}", 1.5)
    return [compare(c, top, find(rows, fast, name, workload), "tta_s", names=("sketchps", f"{name} at {fast}"))]


def evaluate(rows: list[dict], default: str) -> list[dict]:
    checks = []
    for workload in dict.fromkeys(r.get("workload", "cnn") for r in rows):
        bandwidths = list(dict.fromkeys(r["bandwidth"] for r in rows if r.get("workload", "cnn") == workload))
        if workload == "cnn":
            checks += cnn_checks(rows, default, bandwidths)
        elif workload in TTA_TARGETS and CAPPED in bandwidths:
            checks += tta_checks(rows, workload, default)
        checks += bandwidth_check(rows, workload, bandwidths)
    return checks


def describe(check: dict) -> str:
    """One line: PASS/MISS/N/A, the measured value, the target."""
    m = check["measured"]
    if m is None:
        value = "-"
    elif check["unit"] == "points":
        value = f"{m:+.2f} points (limit {check['limit']:+.0f})"
    else:
        value = f"ratio {'never reached' if math.isinf(m) else f'{m:.2f}'} (limit {check['limit']:g})"
    return f"{check['status']:4}  [{check.get('workload', 'cnn')} {check['bandwidth']}] {check['id']} {check['text']}: {value}"
