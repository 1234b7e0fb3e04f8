#!/usr/bin/env python3
"""Which compression methods keep accuracy under a workload's optimizer: one `sketchps run --script`
per (scheme, variant) of a bench/e2e workload on this machine (loopback, plaintext: accuracy is
the question here, not time), then a Markdown table of final test accuracy and uplink compression
against the dense run (docs/methods.md "Under Adam(W)").

    python3 bench/e2e/methods_under.py --workload vit --schemes dense,topk,gs_sgd,dgc,sdagc,sidco \\
        --variants plain,freeze --set scheme.density=0.01 --out runs/adam-methods

Variants: plain (the job as it is); freeze (optimizer.freeze_variance: the second moment held after
the learning-rate warm-up, as 1-bit Adam does); warmup (scheme.dense_warmup over the same span).
Resumable: a run whose summary.json exists is not run again. Progress on stderr; the table on stdout
and in <out>/table.md. Exit 1 when a run fails (its log tail is printed), 2 for bad options.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import job as jobspec  # noqa: E402

VARIANTS = {"plain": [], "freeze": ["optimizer.freeze_variance=10%"], "warmup": ["scheme.dense_warmup=10%"]}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="vit", choices=["vgg", "vit"])
    ap.add_argument("--schemes", default="dense,topk,gs_sgd,dgc,sdagc")
    ap.add_argument("--variants", default="plain,freeze")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="job override for every run")
    ap.add_argument("--bin-dir", default=str(REPO / "build/ci"))
    ap.add_argument("--out", default=str(REPO / "runs/methods-under"))
    args = ap.parse_args(argv)
    for v in args.variants.split(","):
        if v not in VARIANTS:
            ap.error(f"--variants: '{v}' is not one of {', '.join(VARIANTS)}")
    return args


def run_one(args, out: Path, job_file: Path, scheme: str, variant: str) -> dict:
    run_dir = out / f"{scheme}-{variant}"
    summary = run_dir / "summary.json"
    if not summary.exists():
        overrides = [f"scheme.name={scheme}", *args.set, *VARIANTS[variant]]
        argv = [str(Path(args.bin_dir) / "tools/sketchps"), "run", "--job", str(job_file), "--insecure",
                "--no-progress", "--no-plot", "--out", str(run_dir)]
        for kv in overrides:
            argv += ["--set", kv]
        argv += ["--script", str(HERE / f"workload_{args.workload}.py"), "--", "--backend", "sketchps"]
        print(f"methods: {scheme} {variant}: {' '.join(overrides)}", file=sys.stderr, flush=True)
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"methods: {scheme} {variant} failed (exit {done.returncode}):\n{done.stderr[-3000:]}",
                  file=sys.stderr)
            raise SystemExit(1)
    s = json.loads(summary.read_text())
    return {"scheme": scheme, "variant": variant, "accuracy": s.get("final_test_accuracy"),
            "up": s.get("compression_ratio_up"), "up_steady": s.get("compression_ratio_up_second_half")}


def table(rows: list[dict]) -> str:
    dense = next((r["accuracy"] for r in rows if r["scheme"] == "dense" and r["variant"] == "plain"), None)
    lines = ["| scheme | variant | final accuracy % | vs dense (points) | uplink compression |",
             "|---|---|---|---|---|"]
    for r in rows:
        acc = r["accuracy"]
        gap = f"{100 * (acc - dense):+.2f}" if acc is not None and dense is not None else "-"
        up = r["up_steady"] or r["up"]
        lines.append(f"| {r['scheme']} | {r['variant']} | {100 * acc:.2f} | {gap} | "
                     f"{up:.1f}x |" if acc is not None and up else f"| {r['scheme']} | {r['variant']} | - | - | - |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    job_file = out / "job.yaml"
    job_file.write_text(jobspec.base_job(args.workload))
    rows = []
    for scheme in args.schemes.split(","):
        for variant in args.variants.split(","):
            if scheme == "dense" and variant != "plain":
                continue
            rows.append(run_one(args, out, job_file, scheme, variant))
    text = table(rows)
    (out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
