"""train.local_steps with DistributedOptimizer (docs/methods.md "Local steps", docs/pytorch.md): each
step() is one inner step of the job's optimizer, every H-th exchanges the pseudo-gradient w0 - w_H and
the replicas apply the round's aggregate to w0 with the outer optimizer. 2 workers over real servers:
with the dense scheme, H = 3 inner momentum-SGD steps and an outer Nesterov step, the weights after
2 rounds equal plain torch arithmetic written out here. In process (one decentralized worker):
H = 1 with the average outer optimizer is the job without the keys, bit for bit, while H = 2 moves
elsewhere; a bad inner step's batch is named. Bit for bit against sketchps-worker:
test_local_steps_cpp.py; a torch optimizer's inner steps and the DDP comm hook:
test_local_steps_torch.py; interrupted and resumed: test_local_steps_resume.py."""
import copy

import pytest

import torch
import torch.nn.functional as F

import tiny_models
import sketchps.torch as sps
from conftest import SCRIPT, clean_env, free_port, records, run, train_one_peer
from sketchps import _core, data
from sketchps.errors import ConfigError

JOB = """job_id: python-local-steps
mode: ps
workers: 2
servers: 2
model: mlp
data: {batch_size: 16, train_samples: 6400}
train: {rounds: 2, eval_every_rounds: 0, seed: 3, local_steps: 3, outer_optimizer: {name: nesterov}}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: dense, density: 0.02}
checkpoint: {every_rounds: 1}
"""


def local_steps_reference(job, make_inner, fresh_inner):
    """Each worker's H inner steps from w0 on its batches (its optimizer made afresh every round, or
    kept: fresh_inner), the mean pseudo-gradient G and the outer Nesterov step
    u <- m u + G, w <- w0 - lr (G + m u), in torch, one process."""
    torch.manual_seed(job.seed)
    start = tiny_models.Mlp()
    x, y = data.fashion_mnist("train", job.data_path)
    w0 = [p.detach().clone() for p in start.parameters()]
    models = [copy.deepcopy(start) for _ in range(job.workers)]
    inner = [make_inner(m) for m in models]
    momentum, b, steps = None, job.batch_size, job.local_steps
    for r in range(job.total_rounds):
        deltas = []
        for k, model in enumerate(models):
            with torch.no_grad():
                for p, w in zip(model.parameters(), w0):
                    p.copy_(w)
            opt = make_inner(model) if fresh_inner else inner[k]
            for h in range(steps):  # the batch of step r*H + h of the job without local steps
                idx = data.global_batch_indices(job, r * steps + h)[k * b:(k + 1) * b]
                opt.zero_grad()
                F.cross_entropy(model(x[idx]), y[idx]).backward()
                opt.step()
            deltas.append([w - p.detach() for w, p in zip(w0, model.parameters())])
        g = [sum(d[i] for d in deltas) / job.workers for i in range(len(w0))]
        momentum = g if momentum is None else [job.outer_momentum * u + gi for u, gi in zip(momentum, g)]
        w0 = [w - job.outer_lr * (gi + job.outer_momentum * u) for w, gi, u in zip(w0, g, momentum)]
    return w0, [p.detach() for p in start.parameters()]


def check_close(saved, want, start):
    got = list(torch.load(saved).values())
    assert len(got) == len(want)
    for name, g, w, s in zip(["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"], got,
                             want, start):
        diff = (g - w).norm() / w.norm()
        assert diff < 1e-6, f"{name}: relative difference {diff:.3g}"
        assert (w - s).norm() / w.norm() > 1e-4, f"{name} did not train"


def test_inner_sgd_and_outer_nesterov_equal_torch_arithmetic(tmp_path):
    saved = tmp_path / "model.pt"
    out, _ = run(tmp_path, "py", "--script", SCRIPT, "--", "--model", "mlp", "--save", str(saved), job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert (job.local_steps, job.outer_optimizer, job.optimizer) == (3, "nesterov", "sgd")
    mine, theirs = records(out, 0), records(out, 1)
    assert len(mine) == 2 and [r["checksum"] for r in mine] == [r["checksum"] for r in theirs]
    make = lambda m: torch.optim.SGD(m.parameters(), lr=job.lr, momentum=job.momentum)  # noqa: E731
    want, start = local_steps_reference(job, make, fresh_inner=True)
    check_close(saved, want, start)


ONE = """job_id: local-one
mode: decentralized
workers: 1
model: custom
layers: [["fc1.weight", [16, 20]], ["fc1.bias", [16]], ["fc2.weight", [4, 16]], ["fc2.bias", [4]]]
data: {batch_size: 8, train_samples: 64}
train: {rounds: 4, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.1, momentum: 0.9}
peer: {on_failure: stop}
scheme: {name: topk, density: 0.25}
"""


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(20, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def train_in_process(monkeypatch, tmp_path, text):
    """The job `text` with one in-process worker; its weights after every round."""
    x, y = torch.randn(64, 20, generator=torch.Generator().manual_seed(1)), torch.arange(64) % 4
    weights = []

    def keep_round(stats, opt):
        if "local_step" not in stats:
            weights.append(opt.flat_parameters.clone())

    ctx, opt = train_one_peer(monkeypatch, tmp_path, text, Two, x, y, 0.1, keep_round)
    assert ctx.job.total_rounds == len(weights)
    return weights, opt


def test_one_step_with_the_average_is_the_job_without_local_steps(monkeypatch, tmp_path):
    plain, _ = train_in_process(monkeypatch, tmp_path, ONE)
    keys = ONE.replace("seed: 5", "seed: 5, local_steps: 1, outer_optimizer: {name: average}")
    same, _ = train_in_process(monkeypatch, tmp_path, keys)
    assert len(plain) == 4 and all(torch.equal(a, b) for a, b in zip(plain, same))
    assert not torch.equal(plain[0], plain[1])
    two, opt = train_in_process(monkeypatch, tmp_path, ONE.replace("seed: 5", "seed: 5, local_steps: 2"))
    assert len(two) == 4 and not torch.equal(two[0], plain[0])  # the test can tell local steps apart
    with pytest.raises(ConfigError, match=r"step 2 is not in \[0, 2\) \(train.local_steps\)"):
        opt.batch_indices(0, step=2)
