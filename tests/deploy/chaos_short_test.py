#!/usr/bin/env python3
"""Runs the chaos suite's --short subset for real (deploy/chaos/run.sh --short): the fault-free ps job
and three cases (1% loss with worker-1 killed at round 50 and restarted on its topk state: two faults
at once; a 5 s partition of worker-1; a shard killed at round 50 with checkpoints every 20 rounds) on
emulated hosts with the real daemons. Passes when the suite exits 0 with every
case PASS in its results.json, the table names every case, and nothing is left behind: no network
namespace of the run (named after the runner's pid; other runs' namespaces are left alone), no tmpfs mount, no delay relay or daemon of the binaries given. Needs root;
fails (never skips) without it. About 2 minutes on 2 cores.

  chaos_short_test.py --bin-dir DIR     (a build folder with server/, worker/, tools/, or a flat one)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "deploy/chaos"))
import cases as C  # noqa: E402
from netns_leftovers import namespaces, new_namespaces  # noqa: E402


def processes_with(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append(f"{pid}: {cmd.strip()[:160]}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--keep", help="write the run here instead of a temporary folder")
    args = ap.parse_args()
    before = namespaces()
    expected = [c.name for c in C.select(C.CASES, None, True)]
    with tempfile.TemporaryDirectory(prefix="sketchps-chaos-short-") as tmp:
        out = Path(args.keep or tmp)
        t0 = time.monotonic()
        # run.sh execs the runner, so this pid names the run's namespaces (sps<pid>-...); namespaces of
        # other runs on the host (CI in parallel) are none of this test's business and are never touched.
        proc = subprocess.Popen(["bash", str(REPO / "deploy/chaos/run.sh"), "--bin-dir", args.bin_dir, "--short",
                                 "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            output, _ = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            proc.terminate()
            output, _ = proc.communicate()
        took = time.monotonic() - t0
        print(output)
        mine = f"sps{proc.pid}-"
        problems = []
        if proc.returncode != 0:
            problems.append(f"run.sh --short exited {proc.returncode}")
        results = out / "results.json"
        if not results.exists():
            problems.append("no results.json")
        else:
            outcomes = json.loads(results.read_text())["outcomes"]
            for name in expected:
                o = outcomes.get(name)
                if o is None:
                    problems.append(f"{name} did not run")
                    continue
                case = next(c for c in C.CASES if c.name == name)
                verdict, unmet = C.judge(case, o, outcomes.get(case.baseline))
                if verdict != "PASS":
                    problems.append(f"{name}: {verdict}: {'; '.join(unmet)}")
            table = (out / "table.md").read_text() if (out / "table.md").exists() else ""
            problems += [f"table lacks {n}" for n in expected + ["ps-baseline"] if f"| {n} |" not in table]
        left = [ns for ns in new_namespaces(before) if ns.startswith(mine)]
        if left:
            problems.append(f"namespaces left behind: {left}")
            for ns in left:   # this run's own, so removing them is ours to do
                subprocess.run(["ip", "netns", "del", ns])
        mounts = [l for l in Path("/proc/self/mounts").read_text().splitlines() if l.startswith("chaos-full ")]
        if mounts:
            problems.append(f"tmpfs mounts left behind: {mounts}")
        # The daemons' command lines name this run's folder (checkpoints, records); other tests may be
        # running binaries of the same build meanwhile, so the build folder alone would blame them.
        stray = processes_with("delay_relay.py") + processes_with(str(out.absolute()))
        if stray:
            problems.append(f"processes left behind: {stray}")
    print(f"chaos --short took {took:.0f} s")
    for p in problems:
        print(f"FAIL {p}")
    print("PASSED" if not problems else "FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
