"""The benchmark's jobs: per workload its job with --set overrides, and what the DDP side needs of it.

Contract:
  - WORKLOADS: cnn (the default job, trained by the C++ daemons and ddp_train.py), vgg and vit
    (bench/e2e/workload_<name>.py, one Python script for both backends; its JOB is the base job).
  - DEFAULT_JOB is job/default_job.yaml, the file DefaultJobSpecYaml() embeds (top-k, CNN,
    Fashion-MNIST, 4 workers, 2 servers, one epoch); make_job(overrides, workload) parses the
    workload's base job and applies "a.b=value" overrides with the semantics of ApplyOverride there
    (the value is parsed as YAML, mappings are created on the way). The cnn daemons get the same
    overrides again with --set, so their own validation still names a bad key.
  - total_rounds(job) is JobSpec::total_rounds(): train.rounds, else
    ceil(epochs * max(1, floor(train_samples / (workers * batch_size)))); clock(job) adds
    rounds_per_epoch; span_rounds() resolves a span of common/config/job_span.h against it.
  - powersgd_start(job): PowerSGD's start_powerSGD_iter for the job: the sketchps scheme's dense
    warm-up rounds (scheme.dense_warmup, or scheme.warmup_rounds), or 10 without one; at least 2
    (torch's minimum with error feedback).
  - local_step_overrides(job, H): the overrides that keep a job with train.local_steps H (a round
    is then an exchange of H steps, job/job_spec.h) on the job's own steps: the keys counted in
    rounds that the job sets, train.rounds (ceil of rounds / H), train.eval_every_rounds (rounded,
    at least 1) and the round terms of the spans optimizer.warmup and scheme.dense_warmup (divided
    by H; epochs and percentages already follow the job), so a local-step system trains as many
    steps as the others, evaluates after about the same steps and warms up as long.
  - ddp_args(job) gives the options of ddp_train.py that run the cnn job; JobError (naming the
    key) when the job uses something ddp_train.py does not mirror (another model, an LR schedule,
    Nesterov, weight decay). The workload scripts read the job file themselves.
"""
from __future__ import annotations

import importlib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

WORKLOADS = ("cnn", "vgg", "vit")

DEFAULT_JOB = (Path(__file__).resolve().parents[2] / "job" / "default_job.yaml").read_text()
# optimizer keys ddp_train.py mirrors, with the values that mean "off" for the others
DDP_OPTIMIZER_NEUTRAL = {"nesterov": False, "weight_decay": 0, "schedule": "constant", "warmup_epochs": 0}


class JobError(Exception):
    """A job the benchmark cannot run (bad override, or not expressible under DDP)."""


def apply_override(job: dict, assignment: str) -> None:
    key, eq, value = assignment.partition("=")
    if not eq or not key:
        raise JobError(f"--set {assignment!r}: expected key.path=value")
    keys = key.split(".")
    node = job
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        elif not isinstance(nxt, dict):
            raise JobError(f"--set {assignment!r}: '{k}' is not a mapping")
        node = nxt
    try:
        node[keys[-1]] = yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise JobError(f"--set {assignment!r}: the value is not valid YAML ({e})")


def workload_module(workload: str):
    """bench/e2e/workload_<name>.py (imports torch); JobError for an unknown workload."""
    if workload not in WORKLOADS or workload == "cnn":
        raise JobError(f"workload {workload!r}: the workload scripts are " + ", ".join(WORKLOADS[1:]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return importlib.import_module(f"workload_{workload}")


def script(workload: str) -> str:
    """The training script of a workload (both backends); '' for cnn (the daemons, ddp_train.py)."""
    return "" if workload == "cnn" else str(Path(__file__).resolve().parent / f"workload_{workload}.py")


def base_job(workload: str) -> str:
    if workload == "cnn":
        return DEFAULT_JOB
    return workload_module(workload).JOB


def make_job(overrides: list[str], workload: str = "cnn") -> dict:
    if workload not in WORKLOADS:
        raise JobError(f"--workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    job = yaml.safe_load(base_job(workload))
    for o in overrides:
        apply_override(job, o)
    return job


def _per_epoch(job: dict) -> int:
    """JobSpec::rounds_per_epoch: a round takes train.local_steps batches per worker."""
    data, train = job.get("data", {}), job.get("train", {})
    per_round = int(job["workers"]) * int(data.get("batch_size", 32)) * int(train.get("local_steps", 1) or 1)
    return max(1, int(data.get("train_samples", 60000)) // per_round)


def total_rounds(job: dict) -> int:
    train = job.get("train", {})
    if int(train.get("rounds", 0) or 0) > 0:
        return int(train["rounds"])
    return math.ceil(float(train.get("epochs", 1)) * _per_epoch(job))


@dataclass(frozen=True)
class Clock:
    rounds_per_epoch: float     # max(1, floor(train_samples / (workers * batch_size * local_steps)))
    total_rounds: int           # train.rounds, else ceil(epochs * rounds_per_epoch)

    @property
    def total_epochs(self) -> float:
        return self.total_rounds / self.rounds_per_epoch


def clock(job: dict) -> Clock:
    return Clock(float(_per_epoch(job)), total_rounds(job))


SPAN_TERM = re.compile(r"^\s*([0-9.eE+]+)\s*(%|rounds?|epochs?)\s*$")


def span_rounds(value, clk: Clock, key: str) -> float:
    """A span ("200 rounds", "1.5 epochs", "10%", 0, or a list meaning the shortest) in fractional
    rounds, as JobSpan::Rounds."""
    rounds = []
    for term in (value if isinstance(value, list) and value else [value]):
        if isinstance(term, (int, float)) and not isinstance(term, bool) and term == 0:
            rounds.append(0.0)
            continue
        m = SPAN_TERM.match(str(term))
        if not m:
            raise JobError(f"{key}: {term!r} is not a span such as '200 rounds', '1.5 epochs', '10%' or 0")
        v, unit = float(m.group(1)), m.group(2)
        if unit == "%":
            rounds.append(v / 100.0 * clk.total_rounds)
        else:
            rounds.append(v * (clk.rounds_per_epoch if unit.startswith("epoch") else 1.0))
    return min(rounds)


def dense_warmup_rounds(job: dict) -> int:
    """The sketchps scheme's dense warm-up in rounds (scheme.dense_warmup, or scheme.warmup_rounds)."""
    scheme = job.get("scheme", {})
    if "warmup_rounds" in scheme:
        return int(scheme["warmup_rounds"])
    return math.ceil(span_rounds(scheme.get("dense_warmup", 0), clock(job), "scheme.dense_warmup"))


def powersgd_start(job: dict) -> int:
    return max(2, dense_warmup_rounds(job) or 10)


def _span_over(value, h: int):
    """A span with its round terms divided by h (epochs, percentages and 0 unchanged)."""
    if isinstance(value, list):
        return [_span_over(v, h) for v in value]
    m = SPAN_TERM.match(str(value))
    if not m or not m.group(2).startswith("round"):
        return value
    return f"{float(m.group(1)) / h:g} rounds"


def local_step_overrides(job: dict, h: int) -> list[str]:
    """The job's round-counted keys as exchanges of h steps (the module doc); [] for h <= 1."""
    if h <= 1:
        return []
    train, out = job.get("train", {}), []
    if int(train.get("rounds", 0) or 0) > 0:
        out.append(f"train.rounds={math.ceil(int(train['rounds']) / h)}")
    if int(train.get("eval_every_rounds", 0) or 0) > 0:
        out.append(f"train.eval_every_rounds={max(1, round(int(train['eval_every_rounds']) / h))}")
    for section, key in (("optimizer", "warmup"), ("scheme", "dense_warmup")):
        value = (job.get(section) or {}).get(key)
        if value is not None and _span_over(value, h) != value:
            span = _span_over(value, h)
            out.append(f"{section}.{key}={'[' + ', '.join(map(str, span)) + ']' if isinstance(span, list) else span}")
    return out


def ddp_args(job: dict) -> list[str]:
    if job.get("model", "cnn") != "cnn":
        raise JobError(f"model: {job['model']!r}: the DDP script trains the cnn only")
    opt = job.get("optimizer", {})
    for key, neutral in DDP_OPTIMIZER_NEUTRAL.items():
        if key in opt and opt[key] != neutral:
            raise JobError(f"optimizer.{key}: {opt[key]!r} is not mirrored by the DDP script (only lr and momentum)")
    data, train = job.get("data", {}), job.get("train", {})
    args = ["--rounds", str(total_rounds(job)),
            "--batch", str(data.get("batch_size", 32)),
            "--train-samples", str(data.get("train_samples", 60000)),
            "--data", str(data.get("path", "/usr/share/datasets/fashion-mnist")),
            "--lr", str(opt.get("lr", 0.05)),
            "--momentum", str(opt.get("momentum", 0.9)),
            "--seed", str(train.get("seed", 1)),
            "--eval-every", str(train.get("eval_every_rounds", 200))]
    if int(train.get("eval_samples", 0) or 0) > 0:
        args += ["--eval-samples", str(train["eval_samples"])]
    return args + ["--powersgd-start", str(powersgd_start(job))]


def dump(job: dict, workload: str = "cnn") -> str:
    """The job as the YAML file the daemons read (--job)."""
    what = "the default job" if workload == "cnn" else f"workload {workload} (bench/e2e/workload_{workload}.py)"
    return f"# written by bench/e2e/run.py: {what} with its --set overrides\n" + \
        yaml.safe_dump(job, sort_keys=False, default_flow_style=None)
