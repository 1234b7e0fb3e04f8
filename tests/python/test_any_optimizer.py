"""Any torch optimizer and LR scheduler, Horovod-style (DistributedOptimizer(..., apply="torch"),
docs/pytorch.md): the round writes the aggregated gradient into .grad and the user's optimizer
steps. 2 workers over real servers with the dense scheme train FrozenStem with torch's AdamW and
CosineAnnealingLR; every rank's weights are bitwise equal after every round, and they equal one
process's AdamW with the same scheduler on the union of the workers' batches (same data order and
initial weights) to float tolerance, with the same test accuracy within 0.5 points. An optimizer
sketchps cannot apply (RMSprop) is given to torch by apply="auto"."""
import torch
import torch.nn.functional as F

import tiny_models
from conftest import SCRIPT, records, run, summary
from sketchps import _core, data

JOB = """job_id: python-any-optimizer
mode: ps
workers: 2
servers: 2
model: mlp
data: {batch_size: 32, train_samples: 6400}
train: {rounds: 40, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: dense, density: 0.02}
checkpoint: {every_rounds: 10}
"""


def single_process(job):
    """Torch's AdamW and CosineAnnealingLR on the union of the workers' batches."""
    torch.manual_seed(job.seed)
    model = tiny_models.FrozenStem()
    opt, scheduler = tiny_models.adamw_cosine(model, job.total_rounds)
    x, y = data.fashion_mnist("train", job.data_path)
    for r in range(job.total_rounds):
        idx = data.global_batch_indices(job, r)
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
        scheduler.step()
    return model


def accuracy(model, job):
    x, y = data.fashion_mnist("test", job.data_path)
    correct, samples, _ = data.count_correct(model, x, y, batch_size=500)
    return correct / samples


def test_a_torch_optimizer_and_scheduler_train_identical_replicas_equal_to_one_process(tmp_path):
    saved = tmp_path / "model.pt"
    out, _ = run(tmp_path, "torch", "--script", SCRIPT, "--", "--model", "frozen_stem", "--optimizer",
                 "torch-adamw-cosine", "--save", str(saved), job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert job.optimizer == "external"
    mine, theirs = records(out, 0), records(out, 1)
    assert len(mine) == 40
    assert [r["checksum"] for r in mine] == [r["checksum"] for r in theirs]  # the weights after each round
    assert [r["aggregate_checksum"] for r in mine] == [r["aggregate_checksum"] for r in theirs]
    assert len({r["checksum"] for r in mine}) == 40  # the weights moved every round
    trained = tiny_models.FrozenStem()
    trained.load_state_dict(torch.load(saved))
    reference = single_process(job)
    start = tiny_models.FrozenStem()  # a fresh model: the test must be able to tell trained from not
    for (name, tensor), want in zip(trained.state_dict().items(), reference.state_dict().values()):
        diff = (tensor - want).norm() / want.norm()
        assert diff < 1e-4, f"{name}: relative difference {diff:.3g}"
        if not name.startswith("stem"):
            moved = (want - start.state_dict()[name]).norm() / want.norm()
            assert moved > 1e-3, f"{name} did not train"
    assert abs(accuracy(trained, job) - accuracy(reference, job)) < 0.005
    assert summary(out)["rounds"] == 40


def test_an_optimizer_sketchps_cannot_apply_goes_to_torch(tmp_path):
    out, _ = run(tmp_path, "rmsprop", "--script", SCRIPT, "--", "--model", "mlp", "--optimizer", "rmsprop", job=JOB)
    assert _core.load_job(str(out / "job.yaml")).optimizer == "external"
    mine, theirs = records(out, 0), records(out, 1)
    assert [r["checksum"] for r in mine] == [r["checksum"] for r in theirs]
    assert mine[-1]["loss"] < mine[0]["loss"]
