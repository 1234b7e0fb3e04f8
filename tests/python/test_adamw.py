"""AdamW through the Python package equals single-process PyTorch AdamW: 2 workers over real servers
with the dense scheme train tests/python/scripts/train.py's FrozenStem (a frozen layer, LayerNorm)
with torch.optim.AdamW in two param groups (no weight decay for biases and the norm) and the job's
warm-up plus cosine schedule; one process with batch 2*b, the same data order, initial weights,
groups and schedule, running torch's own AdamW, ends with the same weights to float tolerance."""
import torch
import torch.nn.functional as F

import tiny_models
from conftest import SCRIPT, records, run
from sketchps import _core, data
from sketchps.export import state_dict_from_checkpoints

JOB = """job_id: python-adamw
mode: ps
workers: 2
servers: 2
model: mlp
data: {batch_size: 32, train_samples: 6400}
train: {rounds: 40, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.05, momentum: 0.9, schedule: cosine, warmup: 6 rounds, warmup_start_factor: 0.1}
scheme: {name: dense, density: 0.02}
checkpoint: {every_rounds: 10}
"""


def single_process(job):
    """Torch's AdamW on the union of the workers' batches, with the job's learning rate each round."""
    torch.manual_seed(job.seed)
    model = tiny_models.FrozenStem()
    opt = torch.optim.AdamW(tiny_models.adamw_groups(model, 0.05), lr=2e-3, betas=(0.9, 0.98), eps=1e-7)
    x, y = data.fashion_mnist("train", job.data_path)
    for r in range(job.total_rounds):
        for g in opt.param_groups:
            g["lr"] = _core.learning_rate(job, r)
        idx = data.global_batch_indices(job, r)
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return model.state_dict()


def test_adamw_through_the_package_equals_single_process_torch_adamw(tmp_path):
    out, _ = run(tmp_path, "adamw", "--script", SCRIPT, "--", "--model", "frozen_stem", "--optimizer", "adamw",
                 job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert job.optimizer == "adamw"
    assert sorted(job.no_decay) == ["head.bias", "hidden.bias", "norm.bias", "norm.weight"]
    assert [r["checksum"] for r in records(out, 0)] == [r["checksum"] for r in records(out, 1)]
    rounds, trained = state_dict_from_checkpoints(str(out / "job.yaml"), str(out / "checkpoints"))
    assert rounds == 40
    reference = single_process(job)
    start = tiny_models.FrozenStem()  # a fresh model: the test must be able to tell trained from not
    for name, tensor in trained.items():
        want = reference[name]
        diff = (tensor - want).norm() / want.norm()
        assert diff < 1e-5, f"{name}: relative difference {diff:.3g}"
        moved = (want - start.state_dict()[name]).norm() / want.norm()
        assert moved > 1e-3, f"{name} did not train"
    # The schedule applied: the learning rate ramps up, then decays to 0 at the job's end.
    assert _core.learning_rate(job, 0) < _core.learning_rate(job, 6) and _core.learning_rate(job, 39) < 1e-4
