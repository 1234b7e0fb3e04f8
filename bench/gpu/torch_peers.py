#!/usr/bin/env python3
"""The GPU yardsticks of docs/gpu.md: PyTorch's own operations on the same card and the same d as
`sketchps-bench bench`, timed with CUDA events (median of --repeats after one warm-up call).

Rows (each as JSON: {"method", "d", "seconds", "note"}):
  torch_sum         g.sum(): a read pass
  torch_copy        a device-to-device copy of g (bytes read + written / time is the copy bandwidth)
  torch_topk_k      torch.topk(g.abs(), k) at k = density * d
  torch_topk_10k    the same at ten times k
  csvec_accumulate  a Count Sketch as CSVec stores it (bucket and sign tables of rows x d, built once),
                    one torch.bincount per row (rows x cols as sketchps-bench's --sketch-cols)
  csvec_recover     CSVec's unSketch: every coordinate's median over rows, then torch.topk of |median|

Usage: torch_peers.py --d 25600000 --density 0.001 --rows 5 --cols 256000 [--repeats 5] [--out FILE]
Exit 2 when torch has no CUDA device.
"""
import argparse
import json
import sys

import torch


def timed(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, default=25_600_000)
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--cols", type=int, nargs="+", default=[256_000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_peers.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(1)
    # Student-t3 entries at gradient scale, as sketchps-bench draws them (not the same values).
    g = (1e-3 * torch.distributions.StudentT(3.0).sample((a.d,))).to(dev)
    k = max(1, int(a.density * a.d))
    rows = []

    def row(method, seconds, note=""):
        rows.append({"method": method, "d": a.d, "seconds": seconds, "note": note})
        print(f"{method:18s} {seconds * 1e3:9.3f} ms  {note}", file=sys.stderr, flush=True)

    s = timed(lambda: g.sum(), a.repeats)
    row("torch_sum", s, f"{a.d * 4 / s / 1e9:.0f} GB/s read")
    out = torch.empty_like(g)
    s = timed(lambda: out.copy_(g), a.repeats)
    row("torch_copy", s, f"{2 * a.d * 4 / s / 1e9:.0f} GB/s read+write")
    s = timed(lambda: torch.topk(g.abs(), k), a.repeats)
    row("torch_topk_k", s, f"k = {k}")
    s = timed(lambda: torch.topk(g.abs(), 10 * k), a.repeats)
    row("torch_topk_10k", s, f"k = {10 * k}")
    for cols in a.cols:
        h = torch.Generator(device="cpu").manual_seed(7)
        buckets = torch.randint(0, cols, (a.rows, a.d), generator=h).to(dev)
        signs = (torch.randint(0, 2, (a.rows, a.d), generator=h).float() * 2 - 1).to(dev)
        table = torch.zeros(a.rows, cols, device=dev)

        def accumulate():
            for r in range(a.rows):
                table[r] += torch.bincount(buckets[r], weights=signs[r] * g, minlength=cols)

        s = timed(accumulate, a.repeats)
        row("csvec_accumulate", s, f"{a.rows} x {cols}")

        def recover():
            vals = torch.stack([table[r][buckets[r]] * signs[r] for r in range(a.rows)])
            est = vals.median(dim=0).values
            return torch.topk(est.abs(), k)

        s = timed(recover, a.repeats)
        row("csvec_recover", s, f"{a.rows} x {cols}, k = {k}")
        del buckets, signs, table
    info = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}
    text = json.dumps(info, indent=1)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
