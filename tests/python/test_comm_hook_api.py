"""sketchps.ddp in-process, with a gloo process group of one and, where a live job is needed, one
worker in decentralized mode (its own Peer service on loopback). Misuse gets a precise error: a state
before init(), a hook without its state, a model that is not DDP, a model sharded across ranks (also
for DistributedOptimizer, which refuses a DDP model too), a job the hook cannot train (an
optimizer other than external, another scheme, a scheme with its own momentum, another world size),
a backward past the job's last round, use after finish or after a failure inside `with state:`. An
error raised inside DDP's backward reaches the script as torch's RuntimeError carrying ours. Also:
the aggregate replaces .grad and the recorded loss is the script's; DDP's no_sync() accumulates into
one round (also with gradient_as_bucket_view); the describe pass writes the hook's job keys."""
import os
import re

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import sketchps.ddp
import sketchps.torch as sps
import tiny_models
from conftest import HERE, clean_env, free_port, run
from sketchps import _core
from sketchps.errors import ConfigError, OrderError


LAYERS = ('[["fc1.weight", [64, 20]], ["fc1.bias", [64]], ["norm.weight", [64]], ["norm.bias", [64]], '
          '["fc2.weight", [4, 64]], ["fc2.bias", [4]]]')

# One worker of its own in decentralized mode: the hook's job (optimizer external, no momentum keys).
ONE = f"""job_id: hook-misuse
mode: decentralized
workers: 1
model: custom
layers: {LAYERS}
data: {{batch_size: 8, train_samples: 64}}
train: {{rounds: 2, eval_every_rounds: 0, seed: 5}}
optimizer: {{name: external, lr: 0.05}}
peer: {{on_failure: stop}}
scheme: {{name: topk, density: 0.05}}
"""



@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean environment, no sketchps context, and a gloo process group of one."""
    clean_env(monkeypatch)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield monkeypatch
    dist.destroy_process_group()


def job(env, tmp_path, text=ONE):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    env.setenv("SKETCHPS_JOB", str(path))
    if "mode: decentralized" in text:
        port = free_port()
        env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
        env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    else:
        env.setenv("SKETCHPS_SERVERS", "127.0.0.1:1")  # never reached: every check below comes first
    return sps.init()


def ddp_model():
    torch.manual_seed(0)
    return DDP(tiny_models.BatchNormMlp())


def backward(model):
    x = torch.randn(8, 20)
    model(x).pow(2).mean().backward()


def test_a_state_before_init(env):
    with pytest.raises(OrderError, match=r"CommHookState: call sketchps.torch.init\(\) first"):
        sketchps.ddp.CommHookState(ddp_model())


def test_a_hook_without_its_state(env):
    model = ddp_model()
    model.register_comm_hook(None, sketchps.ddp.comm_hook)
    with pytest.raises(RuntimeError, match="comm_hook: the state is NoneType, not a sketchps.ddp.CommHookState"):
        backward(model)


def test_a_model_that_is_not_ddp(env, tmp_path):
    job(env, tmp_path)
    with pytest.raises(ConfigError, match="ddp_model is a BatchNormMlp, not a torch DistributedDataParallel"):
        sketchps.ddp.CommHookState(tiny_models.BatchNormMlp())


class FullyShardedDataParallel(torch.nn.Module):
    """Stands for torch's FSDP wrapper (torch 1.13's does not import on Python 3.11): what is checked
    is where the class comes from."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


FullyShardedDataParallel.__module__ = "torch.distributed.fsdp.fully_sharded_data_parallel"


class DTensor(torch.nn.Parameter):
    """Stands for a tensor-parallel or fully_shard parameter (torch.distributed's DTensor)."""


def sharded(who, what):
    return re.escape(f"{who}: the model is sharded across ranks ({what}); sketchps exchanges the gradient of the "
                     "whole model, which every rank holds")


def test_a_sharded_model_is_refused_by_name(env, tmp_path):
    job(env, tmp_path)
    with pytest.raises(ConfigError, match=sharded("CommHookState", "FullyShardedDataParallel")):
        sketchps.ddp.CommHookState(FullyShardedDataParallel(tiny_models.BatchNormMlp()))
    with pytest.raises(ConfigError, match=sharded("CommHookState", "FullyShardedDataParallel")):
        sketchps.ddp.CommHookState(DDP(FullyShardedDataParallel(tiny_models.BatchNormMlp())))
    model = FullyShardedDataParallel(tiny_models.BatchNormMlp())
    with pytest.raises(ConfigError, match=sharded("DistributedOptimizer", "FullyShardedDataParallel")):
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    model = tiny_models.BatchNormMlp()
    model.fc1.weight = DTensor(model.fc1.weight.detach())
    with pytest.raises(ConfigError, match=sharded("DistributedOptimizer", "DTensor")):
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)


def test_a_ddp_model_given_to_distributed_optimizer(env, tmp_path):
    job(env, tmp_path)
    model = ddp_model()
    with pytest.raises(ConfigError, match=r"DistributedOptimizer: the model is a DistributedDataParallel, which would "
                                          r"all-reduce every gradient densely.*ddp_model.module"):
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    plain = model.module  # the advice works: the same job takes the module itself
    sps.DistributedOptimizer(torch.optim.SGD(plain.parameters(), lr=0.05), plain, apply="torch").finish()


def test_a_job_the_hook_cannot_train(env, tmp_path):
    job(env, tmp_path, ONE.replace("{name: external, lr: 0.05}", "{lr: 0.05, momentum: 0.9}"))
    with pytest.raises(ConfigError, match="optimizer.name: the job has sgd; the DDP comm hook needs external"):
        sketchps.ddp.CommHookState(ddp_model())
    job(env, tmp_path)
    with pytest.raises(ConfigError, match="scheme.name: the job has topk, CommHookState gs_sgd"):
        sketchps.ddp.CommHookState(ddp_model(), scheme="gs_sgd")
    with pytest.raises(ConfigError, match="dgc keeps its own momentum, which a torch optimizer would apply again"):
        job(env, tmp_path, ONE.replace("name: topk", "name: dgc"))
    env.setenv("WORLD_SIZE", "2")
    job(env, tmp_path, ONE.replace("workers: 1", "workers: 2"))
    with pytest.raises(ConfigError, match="process group is rank 0 of 1, the job's worker is rank 0 of 2"):
        sketchps.ddp.CommHookState(ddp_model())


def test_a_grad_scaler_that_is_not_one(env, tmp_path):
    job(env, tmp_path)
    with pytest.raises(ConfigError, match=r"grad_scaler is a float, not a torch GradScaler \(it has no is_enabled"):
        sketchps.ddp.CommHookState(ddp_model(), grad_scaler=2.0**16)


def test_a_scheme_with_its_own_momentum_stops_sketchps_run_before_anything_starts(tmp_path):
    out, done = run(tmp_path, "dgc", "--script", os.path.join(HERE, "scripts", "ddp_hook.py"), "--", "--scheme",
                    "dgc", job=ONE.replace("workers: 1", "workers: 2"), check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "scheme.name: dgc keeps its own momentum" in done.stderr
    assert not out.exists()  # no run directory: nothing was started


def test_rounds_past_the_job_and_use_after_finish(env, tmp_path):
    job(env, tmp_path)
    model = ddp_model()
    state = sketchps.ddp.CommHookState(model)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    with pytest.raises(OrderError, match="evaluate: no round has run yet"):
        state.evaluate(1, 2, 0.5)
    for r in range(2):
        assert (state.round, state.done) == (r, False)
        backward(model)
        assert state.last_stats["round"] == r and state.last_stats["workers"] == 1
        assert "loss" not in state.last_stats  # none recorded
    assert (state.done, state.rounds) == (True, 2)
    with pytest.raises(RuntimeError, match="OrderError: comm_hook: the job's 2 rounds are done"):
        backward(model)
    state.finish()
    assert state.finished
    with pytest.raises(OrderError, match="after finish"):
        state.evaluate(1, 2, 0.5)


def test_the_aggregate_replaces_the_gradient_and_the_loss_is_recorded(env, tmp_path):
    job(env, tmp_path, ONE.replace("name: topk, density: 0.05", "name: dense"))
    model = ddp_model()
    state = sketchps.ddp.CommHookState(model)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    x = torch.randn(8, 20)
    model.module.zero_grad()
    model.module(x).pow(2).mean().backward()  # the local gradient, without DDP
    local = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with state:
        loss = model(x).pow(2).mean()
        state.record_loss(loss)
        loss.backward()
        assert state.last_stats["loss"] == pytest.approx(loss.item())
        for p, g in zip(model.parameters(), local):  # one worker, dense: G_t is this rank's gradient
            assert torch.equal(p.grad, g)
    assert state.finished


def test_a_failure_inside_with_state_leaves_the_job(env, tmp_path):
    job(env, tmp_path)
    model = ddp_model()
    state = sketchps.ddp.CommHookState(model)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    with pytest.raises(ValueError, match="on purpose"):
        with state:
            backward(model)
            raise ValueError("on purpose")
    assert state.finished
    with pytest.raises(RuntimeError, match="comm_hook: called after the state left the job"):
        backward(model)


def test_the_describe_pass_writes_the_hooks_keys(env, tmp_path):
    keys = tmp_path / "keys.txt"
    env.setenv("SKETCHPS_DESCRIBE", str(keys))
    job(env, tmp_path, ONE.replace("name: external, lr: 0.05", "lr: 0.05, momentum: 0.9").replace(
        "model: custom\n", "model: mlp\n").replace(f"layers: {LAYERS}\n", ""))
    with pytest.raises(SystemExit) as done:
        sketchps.ddp.CommHookState(ddp_model(), scheme="topk", density=0.1)
    assert done.value.code == 0
    lines = keys.read_text().splitlines()
    assert lines[0] == "model=custom" and lines[1].startswith("layers=") and "running_mean" not in lines[1]
    for line in ("optimizer.name=external", "optimizer.lr=null", "optimizer.momentum=null", "scheme.name=topk",
                 "scheme.density=0.1"):
        assert line in lines
    described = _core.load_job(str(tmp_path / "job.yaml"), lines)  # the job `sketchps run` then trains
    assert (described.optimizer, described.model) == ("external", "custom")
    assert [n for n, _ in described.layout] == ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.weight",
                                                "fc2.bias"]


@pytest.mark.parametrize("as_view", [False, True])
def test_no_sync_accumulates_into_one_round(env, tmp_path, as_view):
    """DDP's no_sync(): the backward passes inside only accumulate .grad (the hook is not called);
    the next one's round sends the sum. Also with DDP's gradient_as_bucket_view."""
    job(env, tmp_path, ONE.replace("name: topk, density: 0.05", "name: dense"))
    torch.manual_seed(0)
    model = DDP(tiny_models.BatchNormMlp(), gradient_as_bucket_view=as_view)
    state = sketchps.ddp.CommHookState(model)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    xs = [torch.randn(4, 20), torch.randn(4, 20)]  # one step: the job's data.batch_size (8)
    reference = tiny_models.BatchNormMlp()
    reference.load_state_dict(model.module.state_dict())
    for x in xs:
        reference(x).pow(2).mean().backward()
    with state:
        with model.no_sync():
            model(xs[0]).pow(2).mean().backward()
        assert state.round == 0
        model(xs[1]).pow(2).mean().backward()
        assert state.round == 1
        for p, q in zip(model.parameters(), reference.parameters()):
            assert torch.allclose(p.grad, q.grad, rtol=1e-6, atol=1e-7)


def test_marking_gradients_ready_needs_an_overlapped_round_in_flight(env, tmp_path):
    """Worker.ready, what the hook calls per bucket with overlap: outside a round in flight (or
    without overlap) it is an OrderError; a parameter index out of range is a ConfigError."""
    job(env, tmp_path)
    quiet = sketchps.ddp.CommHookState(ddp_model(), overlap=False)
    with pytest.raises(OrderError, match="ready: no round in flight with overlap"):
        quiet._worker.ready([0])
    quiet.finish()
    job(env, tmp_path)
    state = sketchps.ddp.CommHookState(ddp_model())
    with pytest.raises(OrderError, match="ready: no round in flight"):
        state._worker.ready([0])  # before start_round (zero_grad) started the round
    state._worker.start_round()
    with pytest.raises(ConfigError, match=r"ready: parameter 6 is not in \[0, 6\)"):
        state._worker.ready([6])
    state._worker.ready(list(range(6)))
    state._worker.step(float("nan"), 0.0)  # the round the marks started lands
    assert state.round == 1
    state.finish()
