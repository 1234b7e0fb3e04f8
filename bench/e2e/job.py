"""The benchmark's job: the sketchps default job with --set overrides, and its DDP equivalent.

Contract:
  - DEFAULT_JOB is the text of DefaultJobSpecYaml() in schemes/job_spec.cc (gs-SGD, CNN,
    Fashion-MNIST, 4 workers, 2 servers, one epoch); make_job() parses it and applies "a.b=value"
    overrides with the semantics of ApplyOverride there (the value is parsed as YAML, mappings
    are created on the way). The daemons get the same overrides again with --set, so their own
    validation still names a bad key.
  - total_rounds(job) is JobSpec::total_rounds(): train.rounds, else
    ceil(epochs * max(1, floor(train_samples / (workers * batch_size)))).
  - ddp_args(job) gives the options of ddp_train.py that run the same job; JobError (naming the
    key) when the job uses something ddp_train.py does not mirror (another model, an LR schedule,
    Nesterov, weight decay).
"""
from __future__ import annotations

import math

import yaml

DEFAULT_JOB = """\
job_id: sketchps-default
mode: ps
workers: 4
servers: 2
model: cnn
data: {path: /usr/share/datasets/fashion-mnist, batch_size: 32, train_samples: 60000}
train: {epochs: 1, eval_every_rounds: 100, seed: 1}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: gs_sgd, density: 0.01}
"""
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


def make_job(overrides: list[str]) -> dict:
    job = yaml.safe_load(DEFAULT_JOB)
    for o in overrides:
        apply_override(job, o)
    return job


def total_rounds(job: dict) -> int:
    data, train = job.get("data", {}), job.get("train", {})
    if int(train.get("rounds", 0) or 0) > 0:
        return int(train["rounds"])
    per_epoch = max(1, int(data.get("train_samples", 60000)) // (int(job["workers"]) * int(data.get("batch_size", 32))))
    return math.ceil(float(train.get("epochs", 1)) * per_epoch)


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
    if "eval_samples" in train:
        args += ["--eval-samples", str(train["eval_samples"])]
    return args


def dump(job: dict) -> str:
    """The job as the YAML file the daemons read (--job)."""
    return "# written by bench/e2e/run.py: the default job with its --set overrides\n" + \
        yaml.safe_dump(job, sort_keys=False, default_flow_style=None)
