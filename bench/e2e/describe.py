"""What a benchmark run was: machine facts, the reproducing command, plot titles, the doc block.

Contract:
  - machine(argv) returns nproc, CPU model, kernel, load average, date, the exact command line to
    reproduce the run (as `sudo bash bench/e2e/run.sh ARGS`), the git commit of the checkout and
    the python/torch versions.
  - plot_title(results, workload, bandwidth) names the workload's job, the machine and the date.
  - doc_block(results, images) is the generated Markdown of docs/reports/performance.md: command, machine,
    each workload's job, table, plots (`images`: (workload, bandwidth) -> [png, svg] paths
    relative to the doc), targets and the definition of each figure.
  - jobs(results): {workload: job} of a results.json (one written before --workload: {"cnn": job}).
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time
from pathlib import Path

import figures
import job as jobspec
import report
import targets

REPO = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + (" (with local changes)" if dirty else "")


def machine(argv: list[str]) -> dict:
    import torch  # only for its version; ddp_train.py runs in processes of its own
    return {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "kernel": platform.release(),
            "loadavg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "command": "sudo bash bench/e2e/run.sh " + shlex.join(argv), "commit": git_commit(),
            "python": platform.python_version(), "torch": torch.__version__}


def jobs(results: dict) -> dict[str, dict]:
    return results.get("jobs") or {"cnn": results["job"]}


def job_line(job: dict, workload: str = "cnn") -> str:
    data, train = job.get("data", {}), job.get("train", {})
    rounds = f"{jobspec.total_rounds(job)} rounds"
    if not train.get("rounds"):
        rounds = f"{train.get('epochs', 1)} epoch ({rounds})"
    model = job.get("model", "cnn") if workload == "cnn" else f"workload {workload}"
    opt = job.get("optimizer", {})
    return (f"Fashion-MNIST {model}, P={job['workers']} workers x b={data.get('batch_size', 32)}, "
            f"{rounds}, {opt.get('name', 'sgd')} lr {opt.get('lr', 0.05)}, S={job['servers']} servers (sketchps)")


def plot_title(results: dict, workload: str, bandwidth: str, against: str = "training time (evaluations excluded)") -> str:
    m = results["machine"]
    links = "uncapped links" if bandwidth == "none" else f"links capped at {bandwidth}"
    return (f"Test accuracy against {against}, {links}\n"
            f"{job_line(jobs(results)[workload], workload)}\n{m['nproc']} cores {m['cpu_model']}, {m['date']}")


def doc_block(results: dict, images: dict[str, list[str]]) -> str:
    m = results["machine"]
    out = ["## What was run", "", "```bash", m["command"], "```", "",
           f"- date: {m['date']}; commit {m['commit']}",
           f"- machine: {m['nproc']} cores, {m['cpu_model']}, kernel {m['kernel']}, load average "
           f"{m['loadavg'][0]:.2f} at the start (the machine is shared: expect noise)",
           f"- transport: {results.get('transport', 'mutual TLS')}; every process in its own network namespace "
           f"(one host each); python {m['python']}, torch {m['torch']}", ""]
    for workload, job in jobs(results).items():
        runner = ("the daemons read (DDP runs the same job through `bench/e2e/ddp_train.py`)" if workload == "cnn" else
                  f"of `bench/e2e/workload_{workload}.py` (both backends; sketchps adds the model's layout)")
        out += [f"Workload {workload}: {job_line(job, workload)}. The job file {runner}:", "",
                "```yaml", jobspec.dump(job, workload).rstrip(), "```", ""]
    out += ["## Results", "", report.table(results["runs"]), "", cpu_table(results["runs"]), ""]
    for (workload, bw), (png, svg) in images.items():
        out += [f"### Test accuracy against training time, {workload}, {bw}", "",
                f"![accuracy against time, {workload}, {bw}]({png})", "", f"([SVG]({svg}))", ""]
    out += ["## Targets", "", "Reported, not enforced (the harness never fails on a MISS).", "", "```"]
    out += [targets.describe(c) for c in results["targets"]] + ["```", "", "## How each figure is defined", "",
                                                                 figures.DEFINITIONS]
    return "\n".join(out)


def cpu_table(rows: list[dict]) -> str:
    lines = ["CPU seconds by process (user + system), and the machine's load average when the run began:", "",
             "| workload | system | bandwidth | load | servers | workers | per process |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        per = ", ".join(f"{p['name']} {p['cpu_s']:.1f}" for p in r["procs"])
        c, load = r["figures"]["cpu_by_role_s"], r.get("loadavg_before")
        lines.append(f"| {r.get('workload', 'cnn')} | {r['system']} | {r['bandwidth']} | {report.fmt(load)} | "
                     f"{c['server']:.1f} | {c['worker']:.1f} | {per} |")
    return "\n".join(lines) + "\n"
