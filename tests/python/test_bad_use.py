"""Bad use of sketchps.torch gets a precise exception: a wrong environment, a model or optimizer the
job cannot train, calls out of order. In-process; the calls that need a live job use one worker in
decentralized mode (its own Peer service on loopback, plaintext)."""
import inspect
import socket

import pytest
import torch
from torch import nn

import sketchps.torch as sps
import tiny_models
from sketchps import _job_context
from sketchps.errors import ConfigError, ModelMismatchError, OrderError
from conftest import clean_env


PS_JOB = """job_id: bad-use
workers: 2
servers: 1
model: mlp
data: {batch_size: 8, train_samples: 64}
train: {rounds: 2, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: topk, density: 0.05}
"""


@pytest.fixture
def env(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    job = tmp_path / "job.yaml"
    job.write_text(PS_JOB)
    monkeypatch.setenv("SKETCHPS_JOB", str(job))
    return monkeypatch


def ps_worker(env, rank="0"):
    env.setenv("RANK", rank)
    env.setenv("WORLD_SIZE", "2")
    env.setenv("SKETCHPS_SERVERS", "127.0.0.1:1")  # never reached: every check below comes first
    return sps.init()


def single_peer(env, tmp_path, rounds=2):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = tmp_path / "one.yaml"
    job.write_text(PS_JOB.replace("workers: 2", "workers: 1\nmode: decentralized").replace("rounds: 2", f"rounds: {rounds}"))
    env.setenv("SKETCHPS_JOB", str(job))
    env.setenv("RANK", "0")
    env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    sps.init()
    model = tiny_models.Mlp()
    return model, sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)


def sgd(model, **kw):
    return torch.optim.SGD(model.parameters(), **{"lr": 0.05, "momentum": 0.9, **kw})


def test_init_without_rank_names_the_variable(env):
    with pytest.raises(ConfigError, match="RANK: not set"):
        sps.init()


def test_init_with_a_rank_that_is_not_a_number(env):
    env.setenv("RANK", "one")
    with pytest.raises(ConfigError, match="RANK: 'one' is not a non-negative integer"):
        sps.init()


def test_world_size_must_equal_the_jobs_workers(env):
    env.setenv("RANK", "0")
    env.setenv("WORLD_SIZE", "3")
    with pytest.raises(ConfigError, match="WORLD_SIZE: 3 disagrees with the job's workers: 2"):
        sps.init()


def test_ps_mode_needs_the_servers(env):
    env.setenv("RANK", "1")
    with pytest.raises(ConfigError, match="SKETCHPS_SERVERS: not set"):
        sps.init()


def test_a_bad_job_key_is_named(env, tmp_path):
    env.setenv("RANK", "0")
    with pytest.raises(ConfigError, match="scheme.density"):
        sps.init(overrides=["scheme.density=2"])


def test_optimizer_before_init(env):
    model = tiny_models.Mlp()
    with pytest.raises(OrderError, match="init"):
        sps.DistributedOptimizer(sgd(model), model)


def test_other_optimizers_go_to_torch_and_cannot_be_applied_by_sketchps(env):
    ps_worker(env)
    model = tiny_models.Mlp()
    # apply="auto" gives RMSprop to torch: the job (sgd) must then say external.
    with pytest.raises(ConfigError, match="optimizer.name: the job has sgd, the torch optimizer external"):
        sps.DistributedOptimizer(torch.optim.RMSprop(model.parameters()), model)
    with pytest.raises(ConfigError, match="RMSprop cannot be applied by sketchps.*apply=\"torch\""):
        sps.DistributedOptimizer(torch.optim.RMSprop(model.parameters()), model, apply="sketchps")
    with pytest.raises(ConfigError, match="apply: 'server' is not auto, sketchps or torch"):
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model, apply="server")
    # Adam is supported, but the job says SGD: the disagreement is named.
    with pytest.raises(ConfigError, match="optimizer.name: the job has sgd, the torch optimizer adam"):
        sps.DistributedOptimizer(torch.optim.Adam(model.parameters()), model)


def test_param_groups_may_differ_only_in_weight_decay(env):
    ps_worker(env)
    model = tiny_models.Mlp()
    params = list(model.parameters())
    groups = [{"params": params[:2], "lr": 0.1}, {"params": params[2:]}]
    with pytest.raises(ConfigError, match=r"param_groups\[1\] has lr 0.05, param_groups\[0\] 0.1"):
        sps.DistributedOptimizer(torch.optim.SGD(groups, lr=0.05, momentum=0.9), model)
    groups = [{"params": params[:2], "weight_decay": 0.1}, {"params": params[2:], "weight_decay": 0.2}]
    with pytest.raises(ConfigError, match="one value, and 0 for the groups without decay"):
        sps.DistributedOptimizer(torch.optim.AdamW(groups), model)
    with pytest.raises(ConfigError, match="amsgrad=True is not supported"):
        sps.DistributedOptimizer(torch.optim.AdamW(params, amsgrad=True), model, apply="sketchps")


def test_adam_with_decoupled_weight_decay_is_adamw(env):
    """Newer torch's Adam takes decoupled_weight_decay=True and is then AdamW (its AdamW subclasses
    Adam with the flag set): the flag in the param groups decides, as torch 2.x sets it."""
    ps_worker(env)
    model = tiny_models.Mlp()
    adam = torch.optim.Adam(model.parameters(), weight_decay=0.01)
    for g in adam.param_groups:
        g["decoupled_weight_decay"] = True
    with pytest.raises(ConfigError, match="optimizer.name: the job has sgd, the torch optimizer adamw"):
        sps.DistributedOptimizer(adam, model)
    adamw = torch.optim.AdamW(model.parameters())
    for g in adamw.param_groups:
        g["decoupled_weight_decay"] = False
    with pytest.raises(ConfigError, match="optimizer.name: the job has sgd, the torch optimizer adam "):
        sps.DistributedOptimizer(adamw, model)
    params = list(model.parameters())
    mixed = torch.optim.Adam([{"params": params[:2]}, {"params": params[2:]}])
    mixed.param_groups[0]["decoupled_weight_decay"] = True
    mixed.param_groups[1]["decoupled_weight_decay"] = False
    with pytest.raises(ConfigError, match=r"param_groups\[1\] has decoupled_weight_decay False"):
        sps.DistributedOptimizer(mixed, model)
    del mixed.param_groups[1]["decoupled_weight_decay"]  # a group without the key: named, not a KeyError
    with pytest.raises(ConfigError, match=r"param_groups\[1\] has decoupled_weight_decay None"):
        sps.DistributedOptimizer(mixed, model)


def test_hyperparameters_must_equal_the_jobs(env):
    ps_worker(env)
    model = tiny_models.Mlp()
    with pytest.raises(ConfigError, match="optimizer.lr: the job has 0.05, the torch optimizer 0.1"):
        sps.DistributedOptimizer(sgd(model, lr=0.1), model)
    with pytest.raises(ConfigError, match="scheme.name: the job has topk"):
        sps.DistributedOptimizer(sgd(model), model, scheme="gs_sgd")


def test_the_optimizer_must_hold_every_trainable_parameter(env):
    ps_worker(env)
    model = tiny_models.Mlp()
    with pytest.raises(ConfigError, match="fc3.weight"):
        sps.DistributedOptimizer(torch.optim.SGD(list(model.parameters())[:4], lr=0.05, momentum=0.9), model)


def test_a_model_with_buffers_is_refused(env):
    ps_worker(env)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.BatchNorm1d(10))
    with pytest.raises(ConfigError, match="buffer '2.running_mean'"):
        sps.DistributedOptimizer(sgd(model), model)


def test_a_model_other_than_the_jobs(env):
    ps_worker(env)
    model = tiny_models.FrozenStem()
    with pytest.raises(ModelMismatchError, match="parameter 0: the model has 'hidden.weight' \\[48, 64\\], "
                                                 "the job 'fc1.weight' \\[256, 784\\]"):
        sps.DistributedOptimizer(sgd(model), model)


def test_calls_out_of_order(env, tmp_path):
    model, opt = single_peer(env, tmp_path, rounds=2)
    with pytest.raises(OrderError, match="evaluate: no round has run yet"):
        opt.evaluate(1, 2, 0.5)
    for _ in range(2):
        opt.zero_grad()
        model(torch.zeros(4, 1, 28, 28)).sum().backward()
        stats = opt.step()
        assert stats["workers"] == 1 and stats["dense_bytes"] == 4 * 235146
        assert "loss" not in stats  # none given
    assert opt.done
    with pytest.raises(OrderError, match="the job's 2 rounds are done"):
        opt.step()
    opt.finish()
    with pytest.raises(OrderError, match="after finish"):
        opt.evaluate(1, 2, 0.5)


def test_a_gradient_set_to_none_and_a_changed_learning_rate(env, tmp_path):
    model, opt = single_peer(env, tmp_path)
    model.fc2.bias.grad = None
    with pytest.raises(OrderError, match="'fc2.bias' .grad is undefined"):
        opt.step()
    opt.zero_grad()
    opt.param_groups[0]["lr"] = 0.01
    with pytest.raises(ConfigError, match="optimizer.lr: 0.01 after DistributedOptimizer was made, the job has 0.05"):
        opt.step()


def test_a_model_or_optimizer_changed_after_distributed_optimizer_is_refused_and_spends_no_round(env, tmp_path):
    """Each change would leave a parameter untrained or a setting ignored: refused by step() (and a
    state loaded with other settings by load_state_dict), and once undone the round runs."""
    model, opt = single_peer(env, tmp_path, rounds=2)
    opt.zero_grad()
    model(torch.randn(4, 1, 28, 28)).sum().backward()
    head = model.fc3
    model.fc3 = nn.Linear(128, 10)  # a new head
    with pytest.raises(ConfigError, match=r"model: its trainable parameters changed after DistributedOptimizer was "
                                          r"made \('fc3.weight' is new or no longer frozen\)"):
        opt.step()
    model.fc3 = head
    model.fc1.requires_grad_(False)  # frozen mid-run
    with pytest.raises(ConfigError, match=r"\('fc1.weight' was removed or frozen\)"):
        opt.step()
    model.fc1.requires_grad_(True)
    opt.optimizer.add_param_group({"params": [nn.Parameter(torch.zeros(3))]})
    with pytest.raises(ConfigError, match="optimizer: its param_groups hold other tensors than when"):
        opt.step()
    opt.optimizer.param_groups.pop()
    for key, value, said in [("momentum", 0.0, "optimizer.momentum: 0.0 after DistributedOptimizer was made, the "
                                               "job has 0.9"),
                             ("weight_decay", 0.1, "optimizer.weight_decay: 0.1 after"),
                             ("nesterov", True, "optimizer.nesterov: True after")]:
        was = opt.param_groups[0][key]
        opt.param_groups[0][key] = value
        with pytest.raises(ConfigError, match=said):
            opt.step()
        opt.param_groups[0][key] = was
    saved = opt.state_dict()
    saved["optimizer"]["param_groups"][0]["momentum"] = 0.5
    with pytest.raises(ConfigError, match="optimizer.momentum: 0.5 in the state loaded, the job has 0.9"):
        opt.load_state_dict(saved)
    opt.param_groups[0]["momentum"] = 0.9
    assert opt.step()["round"] == 0  # the refusals spent nothing of the job


def test_a_grad_scaler_is_refused_by_name(env, tmp_path):
    """torch's GradScaler.step hands itself to an optimizer that sets _step_supports_amp_scaling
    (torch 1.13: as grad_scaler=; torch 2.x: so when step() takes grad_scaler, else as the attribute
    grad_scale). The real scaler on the CPU where this torch has one (2.3 and later), else its contract."""
    model, opt = single_peer(env, tmp_path)
    model(torch.zeros(4, 1, 28, 28)).sum().backward()
    assert opt._step_supports_amp_scaling
    assert "grad_scaler" in inspect.signature(opt.step).parameters
    scaler = getattr(torch.amp, "GradScaler", None)
    with pytest.raises(ConfigError, match="GradScaler: loss scaling does not work with DistributedOptimizer"):
        if scaler is not None:
            scaler("cpu").step(opt)
        else:
            opt.step(grad_scaler=object())
    opt.grad_scale = torch.ones(())
    with pytest.raises(ConfigError, match="GradScaler: loss scaling"):
        opt.step()
    del opt.grad_scale
    assert opt.step()["round"] == 0  # the first round, still: the refusals spent nothing of it


def test_a_round_sat_out_for_a_non_finite_gradient_is_named_once(env, tmp_path, capsys):
    model, opt = single_peer(env, tmp_path, rounds=3)
    for r in range(3):
        opt.zero_grad()
        x = torch.zeros(4, 1, 28, 28)
        x[0, 0, 0, 0] = float("inf") if r > 0 else 0.0  # an overflow in the forward: inf and NaN in .grad
        model(x).sum().backward()
        assert opt.step()["skipped"] == (r > 0)
    err = capsys.readouterr().err
    assert err.count("gradient was not finite") == 1
    assert "rank 0: round 1: this rank's gradient was not finite (NaN or Inf), so it sat the round out" in err
    assert "GradScaler" in err
    opt.finish()
    assert "rank 0: 2 round(s) sat out for a non-finite gradient, the first round 1" in capsys.readouterr().err


def test_parameters_become_views_of_the_flat_buffers(env, tmp_path):
    model, opt = single_peer(env, tmp_path)
    flat = opt.flat_parameters
    assert flat.numel() == 235146
    assert model.fc1.weight.data_ptr() == flat.data_ptr()
    assert model.fc3.bias.grad.data_ptr() == opt.flat_gradients.data_ptr() + 4 * (235146 - 10)


def test_sketchps_set_overrides_the_job_as_a_launcher_would(env):
    """SKETCHPS_SET (the Kubernetes overlay deploy/k8s/overlays/python-script sets it from
    sketchps-scale) applies ';'-separated overrides before init()'s own."""
    env.setenv("SKETCHPS_SET", "workers=3; servers=1")
    env.setenv("RANK", "2")
    env.setenv("SKETCHPS_SERVERS", "127.0.0.1:1")  # never reached
    ctx = sps.init()
    assert (ctx.job.workers, ctx.job.servers) == (3, 1)
    env.setattr(_job_context, "current", None)
    env.setenv("SKETCHPS_SET", "workerz=3")
    with pytest.raises(ConfigError, match="workerz"):
        sps.init()


def test_a_second_evaluation_of_a_round_is_refused(env, tmp_path):
    """The round's record holds one evaluation: a second would overwrite the first (a final one too)."""
    model, opt = single_peer(env, tmp_path, rounds=1)
    opt.zero_grad()
    model(torch.randn(4, 1, 28, 28)).sum().backward()
    opt.step()
    assert opt.evaluate(5, 10, 1.0, final=True)["accuracy"] == 0.5
    with pytest.raises(OrderError, match=r"evaluate: round 0 already has its evaluation \(test_accuracy 0.5, final\)"):
        opt.evaluate(3, 10, 1.0)
    opt.finish()
