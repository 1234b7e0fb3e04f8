"""Helpers of the Python package's tests (run by ctest with PYTHONPATH=<build>/python and
SKETCHPS_BUILD_DIR=<build>; see tests/CMakeLists.txt)."""
import json
import os
import socket
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


# Every variable sketchps.torch.init() (and a gloo group) reads: clean_env clears them, so that an
# in-process test sees only what it sets.
INIT_ENV = ("RANK", "WORLD_SIZE", "JOB_COMPLETION_INDEX", "MASTER_ADDR", "MASTER_PORT", "SKETCHPS_JOB",
            "SKETCHPS_SERVERS", "SKETCHPS_PEERS", "SKETCHPS_PEERS_FILE", "SKETCHPS_PORT_FILE", "SKETCHPS_LISTEN",
            "SKETCHPS_TLS_DIR", "SKETCHPS_INSECURE", "SKETCHPS_DESCRIBE", "SKETCHPS_METRICS_OUT", "SKETCHPS_SET")


def clean_env(monkeypatch):
    """In-process tests of sketchps.torch: none of INIT_ENV, no init() context, plaintext."""
    from sketchps import _job_context
    for name in INIT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_job_context, "current", None)
    monkeypatch.setenv("SKETCHPS_INSECURE", "1")
    return monkeypatch


def train_one_peer(monkeypatch, tmp_path, text, make_model, x, y, lr, after_step):
    """The job `text` (decentralized, one worker) trained in-process by one peer with its own Peer
    service on loopback: torch's SGD (lr, momentum 0.9) over make_model() (made after init(), which
    seeds torch with train.seed), the job's batches of (x, y) with
    cross-entropy, after_step(step()'s statistics, the optimizer) after every step. Returns (ctx, opt)."""
    import torch
    import torch.nn.functional as F
    import sketchps.torch as sps
    clean_env(monkeypatch)
    port = free_port()
    (tmp_path / "job.yaml").write_text(text)
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("SKETCHPS_JOB", str(tmp_path / "job.yaml")),
                        ("SKETCHPS_LISTEN", f"127.0.0.1:{port}"), ("SKETCHPS_PEERS", f"127.0.0.1:{port}")):
        monkeypatch.setenv(name, value)
    ctx = sps.init()
    model = make_model()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9), model)
    with opt:
        while not opt.done:
            idx = opt.batch_indices()
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            after_step(opt.step(), opt)
    return ctx, opt


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def local_ranks(script, *args, world=2, timeout=180):
    """Runs `script args` as `world` local processes with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    (a plain torch.distributed job: DDP over gloo, no sketchps); fails the test when one fails."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, script, *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        if p.returncode != 0:
            pytest.fail(f"{script} {' '.join(args)} exited {p.returncode}:\n{out[-2000:]}")
