"""Gradient clipping and the learning rate under DistributedOptimizer and the DDP comm hook
(docs/pytorch.md "Clipping" and "Who applies the update"), in-process with one worker in
decentralized mode and the dense scheme, where the round's aggregate is this rank's gradient, so
DDP with the same clip is one process clipping its own gradient:

- DistributedOptimizer(clip_grad_norm=c) clips the aggregated gradient before the torch optimizer
  steps, as DDP + torch.nn.utils.clip_grad_norm_ does: the weights equal a plain torch replica that
  clips; with apply="auto" it picks "torch", with apply="sketchps" it is refused naming it;
- clip_grad_norm_ (or any in-place change of .grad) between backward and step() under overlap, which
  the exchange never sees, is refused naming clip_grad_norm_, in both apply modes;
- a job learning-rate schedule where torch's optimizer applies the update (apply="torch", the comm
  hook) is refused, not ignored; opt.learning_rate is then the torch optimizer's."""
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import sketchps.ddp
import sketchps.torch as sps
from conftest import clean_env, free_port
from sketchps.errors import ConfigError, OrderError

LAYERS = '[["0.weight", [16, 12]], ["0.bias", [16]], ["2.weight", [3, 16]], ["2.bias", [3]]]'
JOB = f"""job_id: clipping
mode: decentralized
workers: 1
model: custom
layers: {LAYERS}
data: {{batch_size: 8, train_samples: 64}}
train: {{rounds: 6, eval_every_rounds: 0, seed: 5}}
optimizer: {{name: external, lr: 0.05}}
peer: {{on_failure: stop}}
scheme: {{name: dense}}
"""
SGD_JOB = JOB.replace("{name: external, lr: 0.05}", "{lr: 0.05, momentum: 0.9}")


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 3))


def batch(r):
    g = torch.Generator().manual_seed(100 + r)
    return torch.randn(8, 12, generator=g) * 4, torch.randint(0, 3, (8,), generator=g)


def step(opt, model, r):
    """One round: the batch of round r, backward, opt.step()."""
    x, y = batch(r)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def steps_under_a_halving_scheduler(opt, model, scheduler, rounds, lr0):
    """`rounds` rounds, each checking that opt.learning_rate follows StepLR(gamma 0.5) from lr0."""
    for r in range(rounds):
        assert opt.learning_rate == pytest.approx(lr0 * 0.5 ** r)
        step(opt, model, r)
        scheduler.step()


@pytest.fixture
def env(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    return monkeypatch


def init(env, tmp_path, text=JOB):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    env.setenv("SKETCHPS_JOB", str(path))
    port = free_port()
    env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    return sps.init()


@pytest.mark.parametrize("apply", ["torch", "auto"])
def test_clip_grad_norm_clips_the_aggregate_as_ddp_does(env, tmp_path, apply):
    init(env, tmp_path)  # optimizer.name external: "auto" with a clip is "torch" even for torch's SGD
    model, reference = net(), net()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
                                   apply=apply, clip_grad_norm=0.05, broadcast_buffers=False)
    assert opt._apply == "torch"
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    with opt:
        for r in range(6):
            x, y = batch(r)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            ref_opt.zero_grad()
            F.cross_entropy(reference(x), y).backward()
            norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05)
            assert norm > 0.05  # the clip acts
            ref_opt.step()
            grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            assert grad.norm().item() == pytest.approx(0.05, rel=1e-5)
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=1e-6), (p - q).abs().max()


@pytest.mark.parametrize("apply", ["torch", "sketchps"])
def test_clip_grad_norm_between_backward_and_step_is_refused_naming_it(env, tmp_path, apply):
    init(env, tmp_path, JOB if apply == "torch" else SGD_JOB)
    model = net()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model, apply=apply,
                                   broadcast_buffers=False)
    x, y = batch(0)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()  # no change after backward: the round runs
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-10)
    with pytest.raises(OrderError, match=r"changed in place after backward \(torch.nn.utils.clip_grad_norm_.*"
                                         r"pass clip_grad_norm=max_norm"):
        opt.step()
    opt._worker.abandon("test")


def test_clip_grad_norm_is_refused_where_it_cannot_apply(env, tmp_path):
    init(env, tmp_path, SGD_JOB)
    model = net()
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with pytest.raises(ConfigError, match=r"clip_grad_norm: not with apply=\"sketchps\".*pass apply=\"torch\""):
        sps.DistributedOptimizer(sgd, model, apply="sketchps", clip_grad_norm=1.0)
    for bad in (0, -1.0, float("inf"), "1", True):
        with pytest.raises(ConfigError, match="clip_grad_norm: .* is not a number > 0"):
            sps.DistributedOptimizer(sgd, model, clip_grad_norm=bad)


def test_a_job_schedule_is_refused_where_torch_applies_the_update(env, tmp_path):
    init(env, tmp_path, JOB.replace("lr: 0.05}", "lr: 0.05, schedule: cosine}"))
    model = net()
    with pytest.raises(ConfigError, match=r"optimizer.schedule: cosine is a schedule sketchps applies, but with "
                                          r"DistributedOptimizer\(apply=\"torch\"\) your torch optimizer"):
        sps.DistributedOptimizer(torch.optim.RMSprop(model.parameters(), lr=1e-3), model)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        with pytest.raises(ConfigError, match="optimizer.schedule: cosine .* with the DDP comm hook"):
            sketchps.ddp.CommHookState(DDP(net()))
    finally:
        dist.destroy_process_group()


def test_learning_rate_is_the_torch_optimizers_where_it_applies_the_update(env, tmp_path):
    init(env, tmp_path)
    model = net()
    rms = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(rms, step_size=1, gamma=0.5)
    with sps.DistributedOptimizer(rms, model, broadcast_buffers=False) as opt:
        steps_under_a_halving_scheduler(opt, model, scheduler, 3, 1e-2)


def test_the_wrapper_saves_and_loads_its_torch_optimizers_state(env, tmp_path):
    """torch.save(opt.state_dict()) at an epoch's end, and load_state_dict into a new optimizer:
    apply="torch" keeps the torch optimizer's whole state (Adam's moments), which a step then uses."""
    init(env, tmp_path)
    model = net()
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt = sps.DistributedOptimizer(adam, model, apply="torch", broadcast_buffers=False)
    with opt:
        for r in range(2):
            step(opt, model, r)
        torch.save(opt.state_dict(), tmp_path / "opt.pt")
        saved = torch.load(tmp_path / "opt.pt")
        assert saved["round"] == 2 and saved["apply"] == "torch"
        fresh = torch.optim.Adam(model.parameters(), lr=1e-3)
        opt.optimizer = fresh  # what a restarted script's new optimizer would be
        opt.load_state_dict(saved)
        for p in model.parameters():
            assert torch.equal(fresh.state[p]["exp_avg"], adam.state[p]["exp_avg"])
        with pytest.raises(ConfigError, match="saved with apply=\"sketchps\""):
            opt.load_state_dict({**saved, "apply": "sketchps"})


def test_lr_schedulers_take_the_wrapper(env, tmp_path):
    """torch.optim.lr_scheduler accepts the wrapper (a torch.optim.Optimizer): with apply="torch" it
    sets the torch optimizer's lr; with apply="sketchps" the next step() refuses the changed lr."""
    init(env, tmp_path)
    model = net()
    opt = sps.DistributedOptimizer(torch.optim.RMSprop(model.parameters(), lr=1e-2), model, broadcast_buffers=False)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    with opt:
        steps_under_a_halving_scheduler(opt, model, scheduler, 2, 1e-2)
    init(env, tmp_path, SGD_JOB)
    model = net()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
                                   broadcast_buffers=False)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x, y = batch(0)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    scheduler.step()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    with pytest.raises(ConfigError, match="optimizer.lr: 0.025 after DistributedOptimizer was made, the job has 0.05"):
        opt.step()
    opt._worker.abandon("test")
