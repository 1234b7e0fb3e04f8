"""scheme.values: bf16 from Python (docs/pytorch.md "Autocast and bf16 values"): a user's forward under
torch.autocast("cpu", dtype=torch.bfloat16), the gradients pushed in bfloat16, the aggregate applied
by the user's optimizer (apply="torch"). One in-process decentralized rank: G_t is then exactly its
own gradient rounded to bfloat16 (torch's rounding is the independent reference), and training
still lowers the loss."""
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import sketchps.torch as sps
import tiny_models
from conftest import clean_env, free_port
from sketchps import _core


class AutocastMlp(nn.Module):
    """The hidden layer under bf16 autocast; the head in float32 (its gradients are not bf16-exact,
    so the rounding on the wire is visible)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.relu(self.fc1(x))
        return self.fc2(h.float())


def job_text(model):
    layers = _core.layout_text([(n, list(p.shape)) for n, p in model.named_parameters()])
    return f"""job_id: values-bf16
mode: decentralized
workers: 1
servers: 1
model: custom
layers: {layers}
data: {{batch_size: 16, train_samples: 256}}
train: {{rounds: 12, eval_every_rounds: 0, seed: 5}}
optimizer: {{name: external, lr: 0.2}}
scheme: {{name: dense}}
peer: {{on_failure: stop}}
"""


@pytest.fixture
def env(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    monkeypatch.setenv("RANK", "0")
    yield monkeypatch
    if dist.is_initialized():
        dist.destroy_process_group()


def test_autocast_bf16_values_push_bf16_rounded_gradients_and_train(env, tmp_path):
    torch.manual_seed(5)
    model = AutocastMlp()
    path = tmp_path / "job.yaml"
    path.write_text(job_text(model))
    env.setenv("SKETCHPS_JOB", str(path))
    env.setenv("SKETCHPS_SET", "scheme.values=bf16")  # what `sketchps run --set scheme.values=bf16` passes
    port = free_port()
    env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    env.setenv("MASTER_ADDR", "127.0.0.1")
    env.setenv("MASTER_PORT", str(free_port()))
    sps.init()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.2), model, apply="torch")
    x, y, _, _ = tiny_models.centres_data(train=256)

    def full_loss():
        with torch.no_grad():
            return F.cross_entropy(model(x), y).item()

    before = full_loss()
    rounded_somewhere = False
    rounds = 0
    while not opt.done:
        idx = opt.batch_indices()
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        local = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()  # .grad now holds G_t, what the exchange returned
        for p, g in zip(model.parameters(), local):
            want = g.to(torch.bfloat16).float()
            assert torch.equal(p.grad, want), "G_t is not the bf16-rounded gradient"
            rounded_somewhere |= not torch.equal(want, g)
        rounds += 1
    opt.finish()
    assert rounds == 12
    assert rounded_somewhere, "no gradient needed rounding: the test would not see bf16 on the wire"
    after = full_loss()
    assert after < 0.9 * before, f"loss {before:.4f} -> {after:.4f}"
