#!/usr/bin/env python3
"""The tables of docs/gpu.md from scripts/gpu-check.sh output folders.

Reads results.jsonl (the checks, the training jobs of train-check.sh), bench.json (sketchps-bench
bench --json), torch_peers.json (bench/gpu/torch_peers.py), loadgen-<mode>.json and repro.md (the
d = 25M sweep's tables, bench/reproduction/table.py) where present, and prints Markdown: the checks,
the training jobs, the primitives next to PyTorch on the same card with the targets of docs/gpu.md,
the seed's claim and the loadgen rows. Missing files leave their table out (and say so). Standard
library only.

Several folders (the calls of one session on a GPU, the later ones run with --skip for the stages
the first one ran) make one report: their checks in order, a stage's "not run" left out where
another folder ran it, and each other file from the last folder that has it.

Usage: gpu_report.py OUT_DIR [OUT_DIR ...] > gpu.md
"""
import json
import os
import sys

# Targets (docs/gpu.md): yardstick at >= 80 % of the card's bandwidth (torch's device copy at the
# same size, bytes read + written per second, stands for it), top-k no slower than torch.topk,
# accumulate <= 3 read passes, recover <= 10 read passes.
TARGETS = {
    "stream_pass": ("torch_copy", ">= 80 % of the copy's bytes/s"),
    "stream_pass_device": ("torch_copy", ">= 80 % of the copy's bytes/s"),
    "topk": ("torch_topk_k", "no slower than torch.topk"),
    "sketch_accumulate": ("csvec_accumulate", "<= 3 read passes"),
    "sketch_recover": ("csvec_recover", "<= 10 read passes"),
}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def find(outs, name):
    """NAME in the last of the folders that has it, else in the first (which then does not exist)."""
    for out in reversed(outs):
        if os.path.exists(os.path.join(out, name)):
            return os.path.join(out, name)
    return os.path.join(outs[0], name)


def parse_record(line, where):
    """One line of results.jsonl; a line a cut run left half-written (or a bad value) is named, not fatal."""
    try:
        return json.loads(line)
    except ValueError:
        return {"check": "unreadable", "where": where, "exit": 1, "text": line.strip()[:120].replace("|", "/")}


def records(outs):
    paths = [p for p in (os.path.join(out, "results.jsonl") for out in outs) if os.path.exists(p)]
    if not paths:
        return None
    found = []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    found.append(parse_record(line, f"{os.path.basename(path)} line {n}"))
    ran = {r["check"] for r in found if "not_run" not in r}
    kept, machines = [], set()
    for i, r in enumerate(found):
        if "not_run" in r and (r["check"] in ran or any(later["check"] == r["check"] for later in found[i + 1:])):
            continue  # another call ran it, or a later one says it too
        if r["check"] == "machine":
            key = (r.get("gpu"), r.get("driver"))
            if key in machines:
                continue
            machines.add(key)
        kept.append(r)
    return kept


def checks(outs):
    lines = ["| check | result |", "|---|---|"]
    found = records(outs)
    if found is None:
        return ["(no results.jsonl)"]
    for r in found:
        kind = r.pop("check")
        if "not_run" in r:
            lines.append(f"| {kind} | not run: the time budget was spent |")
            continue
        if kind in ("train", "train_compare"):
            continue  # training() below
        if kind == "suite":
            result = f"exit {r['exit']} in {r['seconds']} s: {r['summary']}"
            kind = f"unit suite {r['suite']}"
        elif kind == "machine":
            result = f"{r['gpu']}, driver {r['driver']}"
        else:
            result = ", ".join(f"{k} {v}" for k, v in r.items())
        lines.append(f"| {kind} | {result} |")
    return lines


def training(outs):
    found = [r for r in records(outs) or [] if r.get("check") in ("train", "train_compare") and "not_run" not in r]
    if not found:
        return ["(no training job ran)"]
    lines = ["| kernels | exit | seconds | ranks on that device | training images x epochs | final test accuracy |",
             "|---|---|---|---|---|---|"]
    for r in found:
        if r["check"] == "train":
            acc = "" if r.get("accuracy") is None else f"{100 * r['accuracy']:.2f} %"
            lines.append(f"| {r['kernels']} | {r['exit']} | {r['seconds']} | {r['ranks_on_device']} of 4 "
                         f"| {r['samples']:,} x {r['epochs']} | {acc} |")
    names = {"cuda": "CUDA", "mixed": "Ranks 0-1 on CUDA and 2-3 on the CPU"}
    for r in found:
        if r["check"] == "train_compare":
            who = names.get(r.get("kernels", "cuda"), r.get("kernels"))
            lines += ["", f"{who} against CPU kernels: {r['points_apart']} points apart (tolerance {r['tolerance']}): "
                          + ("within" if r["within"] else "**outside**")]
    return lines


def seed_claim(outs):
    path = find(outs, "repro.md")
    if not os.path.exists(path):
        return ["(no repro.md: the d = 25M sweep did not run or did not finish)"]
    with open(path) as f:
        return f.read().rstrip("\n").split("\n")


def met(method, ours, peer, passes):
    if method.startswith("stream_pass"):  # ours reads 4d bytes, the copy moves 8d
        return "yes" if 0.5 * peer / ours >= 0.8 else "no (%.0f %%)" % (50 * peer / ours)
    if method == "topk":
        return "yes" if ours <= peer else "no"
    if method == "sketch_accumulate":
        return "yes" if passes <= 3 else "no"
    if method == "sketch_recover":
        return "yes" if passes <= 10 else "no"
    return ""


def primitives(outs):
    bench = load(find(outs, "bench.json"))
    peers = load(find(outs, "torch_peers.json"))
    if bench is None:
        return ["(no bench.json)"]
    torch_rows = {}
    for r in (peers or {}).get("rows", []):
        torch_rows.setdefault(r["method"], r)  # the first of a name: the bench's shape
    lines = [
        "| operation (d = %d) | sketchps | read passes | PyTorch on the same card | ratio | target | met |"
        % bench[0]["d"],
        "|---|---|---|---|---|---|---|",
    ]
    for r in bench:
        m = r["method"]
        ms = r["seconds"] * 1e3
        passes = r["ratio_to_stream_pass"]
        peer_name, target = TARGETS.get(m, (None, ""))
        peer = torch_rows.get(peer_name)
        peer_text = f"{peer['seconds'] * 1e3:.3f} ms ({peer_name}{', ' + peer['note'] if peer['note'] else ''})" if peer else ""
        ratio = f"{r['seconds'] / peer['seconds']:.2f}" if peer else ""
        ok = met(m, r["seconds"], peer["seconds"], passes) if peer else ""
        lines.append(f"| {m} | {ms:.3f} ms | {passes:.1f} | {peer_text} | {ratio} | {target} | {ok} |")
    if peers:
        lines.append("")
        lines.append(f"PyTorch {peers['torch']} on {peers['device']}; CUDA-event times (GPU time only), while "
                     "sketchps's are wall times around a synchronized call (launches and copies included), "
                     "except stream_pass_device: the yardstick's kernels between CUDA events, as torch's.")
    return lines


def loadgen(outs):
    lines = []
    for mode in ("ps", "decentralized"):
        data = load(find(outs, f"loadgen-{mode}.json"))
        if not data:
            continue
        if not lines:
            lines = ["| mode | scheme | P | rounds/s | wire up B/worker/round | busiest link B/round |",
                     "|---|---|---|---|---|---|"]
        for r in data.get("results", []):
            per = r.get("per_worker_per_round", {})
            lines.append("| {} | {} | {} | {:.1f} | {:.0f} | {:.0f} |".format(
                r.get("mode", mode), r.get("scheme"), r.get("workers"), r.get("rounds_per_second", 0.0),
                per.get("wire_up", 0.0), r.get("busiest_server_link_bytes_per_round", 0.0)))
    return lines or ["(no loadgen results)"]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    outs = sys.argv[1:]
    parts = [("Checks", checks(outs)), ("Training job, 4 worker processes", training(outs)),
             ("Primitives", primitives(outs)), ("The seed's claim at d = 25M, GPU kernels", seed_claim(outs)),
             ("loadgen", loadgen(outs))]
    text = "".join(f"#### {title}\n\n" + "\n".join(lines) + "\n\n" for title, lines in parts)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
