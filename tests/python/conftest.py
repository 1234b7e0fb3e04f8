"""Helpers of the Python package's tests (run by ctest with PYTHONPATH=<build>/python and
SKETCHPS_BUILD_DIR=<build>; see tests/CMakeLists.txt)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "train.py")
sys.path.insert(0, os.path.join(HERE, "scripts"))

# A short job: 2 workers, 2 servers, the first 6400 Fashion-MNIST images, 24 rounds.
JOB = """job_id: python-test
mode: ps
workers: 2
servers: 2
model: mlp
data: {batch_size: 32, train_samples: 6400}
train: {rounds: 24, eval_every_rounds: 0, seed: 3}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: gs_sgd, density: 0.02}
checkpoint: {every_rounds: 8}
"""


def build_dir():
    path = os.environ.get("SKETCHPS_BUILD_DIR")
    if not path:
        pytest.fail("SKETCHPS_BUILD_DIR is not set (run these tests through ctest)")
    return path


def sketchps(*args, check=True):
    """Runs build/.../tools/sketchps with the arguments; returns the CompletedProcess."""
    cmd = [os.path.join(build_dir(), "tools", "sketchps"), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done


def run(tmp_path, name, *args, job=JOB, check=True):
    """`sketchps run` of `job` into tmp_path/name (plaintext, no progress line); the run directory."""
    job_file = tmp_path / f"{name}.yaml"
    job_file.write_text(job)
    out = tmp_path / name
    done = sketchps("run", "--job", str(job_file), "--insecure", "--no-progress", "--out", str(out), *args, check=check)
    return out, done


def records(run_dir, rank):
    with open(run_dir / f"worker-{rank}.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def summary(run_dir):
    with open(run_dir / "summary.json") as f:
        return json.load(f)
