"""train.local_steps with a torch optimizer taking the inner steps (DistributedOptimizer(...,
apply="torch"), DiLoCo's recipe: AdamW inside, Nesterov outside): 2 workers over real servers with
the dense scheme end, after 2 rounds of 3 inner steps, at plain torch arithmetic written out here
(each rank's AdamW keeps its state across rounds; the outer step applies the mean pseudo-gradient to
the round's start), with bitwise equal replicas. The DDP comm hook refuses local steps, naming
train.local_steps and pointing at DistributedOptimizer, before anything starts."""
import os

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import sketchps.ddp
import sketchps.torch as sps
import tiny_models
from conftest import HERE, SCRIPT, clean_env, free_port, records, run
from sketchps import _core
from sketchps.errors import ConfigError
from test_local_steps import JOB, check_close, local_steps_reference


def test_torch_adamw_inner_steps_and_outer_nesterov_equal_torch_arithmetic(tmp_path):
    saved = tmp_path / "model.pt"
    out, _ = run(tmp_path, "torch", "--script", SCRIPT, "--", "--model", "mlp", "--optimizer", "torch-adamw",
                 "--save", str(saved), job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert (job.local_steps, job.outer_optimizer, job.optimizer) == (3, "nesterov", "external")
    mine, theirs = records(out, 0), records(out, 1)
    assert len(mine) == 2 and [r["checksum"] for r in mine] == [r["checksum"] for r in theirs]
    assert "aggregate_checksum" not in mine[0]  # the servers hold weights: the outer optimizer is theirs
    want, start = local_steps_reference(job, tiny_models.torch_adamw, fresh_inner=False)
    check_close(saved, want, start)


HOOK_JOB = """job_id: hook-local
mode: decentralized
workers: 1
model: custom
layers: [["fc1.weight", [64, 20]], ["fc1.bias", [64]], ["norm.weight", [64]], ["norm.bias", [64]],
         ["fc2.weight", [4, 64]], ["fc2.bias", [4]]]
data: {batch_size: 8, train_samples: 64}
train: {rounds: 2, eval_every_rounds: 0, seed: 5, local_steps: 2}
optimizer: {name: external, lr: 0.05}
peer: {on_failure: stop}
scheme: {name: topk, density: 0.05}
"""


def test_the_comm_hook_refuses_local_steps(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("SKETCHPS_JOB", str(tmp_path / "job.yaml")),
                        ("SKETCHPS_LISTEN", "127.0.0.1:1"), ("SKETCHPS_PEERS", "127.0.0.1:1")):
        monkeypatch.setenv(name, value)
    (tmp_path / "job.yaml").write_text(HOOK_JOB)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        sps.init()
        with pytest.raises(ConfigError, match=r"train.local_steps: the job has 2 .* use "
                                              r"sketchps.torch.DistributedOptimizer"):
            sketchps.ddp.CommHookState(DDP(tiny_models.BatchNormMlp()))
    finally:
        dist.destroy_process_group()


def test_sketchps_run_stops_a_comm_hook_script_with_local_steps_before_anything_starts(tmp_path):
    job = HOOK_JOB.replace("workers: 1", "workers: 2").replace("mode: decentralized", "mode: ps\nservers: 1")
    out, done = run(tmp_path, "hook", "--script", os.path.join(HERE, "scripts", "ddp_hook.py"), job=job, check=False)
    assert done.returncode != 0
    assert "train.local_steps: the job has 2" in done.stderr, done.stderr[-2000:]
    assert not (out / "checkpoints").exists()
