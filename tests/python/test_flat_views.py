"""The flat buffers made in Python (python/sketchps/_flat.py, the contract of worker/flat_model.h):
the trainable parameters and their .grad are views into two flat buffers, which survive
zero_grad(set_to_none=True) or are refused naming the parameter; the gradient accumulators' hooks
report every parameter once per backward, last layer first. In-process; the rounds use one worker in
decentralized mode (its own Peer service on loopback, plaintext)."""
import pytest
import torch
from torch import nn

import sketchps.torch as sps
import tiny_models
from conftest import clean_env, free_port
from sketchps import _flat
from sketchps.errors import ConfigError, OrderError

JOB = """job_id: flat-views
mode: decentralized
workers: 1
servers: 1
model: mlp
data: {batch_size: 8, train_samples: 64}
train: {rounds: 4, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: topk, density: 0.05}
"""
MLP_DIM = 235146


@pytest.fixture
def live(monkeypatch, tmp_path):
    """An Mlp, its torch SGD and a DistributedOptimizer joined to a one-rank job."""
    clean_env(monkeypatch)
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    port = free_port()
    monkeypatch.setenv("SKETCHPS_JOB", str(job))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    monkeypatch.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    sps.init()
    model = tiny_models.Mlp()
    torch_opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = sps.DistributedOptimizer(torch_opt, model)
    yield model, torch_opt, opt
    if not opt._worker.finished:
        opt.finish()


def backward(model, seed=0):
    torch.manual_seed(seed)
    model(torch.randn(4, 1, 28, 28)).sum().backward()


def aliases(model, opt):
    """Whether every parameter and .grad is its slice of the flat buffers, in layer order."""
    offset = 0
    for p in model.parameters():
        if p.data_ptr() != opt.flat_parameters.data_ptr() + 4 * offset or p.grad is None:
            return False
        if p.grad.data_ptr() != opt.flat_gradients.data_ptr() + 4 * offset:
            return False
        offset += p.numel()
    return offset == MLP_DIM


def test_the_parameters_keep_their_values_as_views(monkeypatch):
    torch.manual_seed(1)
    model = tiny_models.Mlp()
    before = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    flat = _flat.FlatModel(list(model.named_parameters()))
    assert torch.equal(flat.params, before)
    assert torch.count_nonzero(flat.grads) == 0
    assert flat.layout == [("fc1.weight", [256, 784]), ("fc1.bias", [256]), ("fc2.weight", [128, 256]),
                           ("fc2.bias", [128]), ("fc3.weight", [10, 128]), ("fc3.bias", [10])]
    with torch.no_grad():
        flat.params.zero_()
    assert float(model.fc2.bias.abs().sum()) == 0.0  # writes through the buffer are the model's
    backward(model)
    assert torch.equal(flat.grads[-10:], model.fc3.bias.grad)  # backward accumulates into the buffer
    assert flat.worker_buffers() == {"params": flat.params.data_ptr(), "grads": flat.grads.data_ptr(),
                                     "dim": MLP_DIM, "device": "cpu"}


def test_views_survive_zero_grad_set_to_none(live):
    model, torch_opt, opt = live
    opt.zero_grad(set_to_none=True)
    assert aliases(model, opt)
    # The model's or the torch optimizer's zero_grad(set_to_none=True) (torch 2's default) drops the
    # views; the DistributedOptimizer's zero_grad restores them, and the round trains.
    model.zero_grad(set_to_none=True)
    torch_opt.zero_grad(set_to_none=True)
    assert model.fc1.weight.grad is None
    opt.zero_grad()
    assert aliases(model, opt)
    # Before backward: with overlap a shard's update may land while backward is still running, or
    # after it and before step() (a loaded host let the test copy the weights only after that).
    before = opt.flat_parameters.clone()
    backward(model)
    assert float(opt.flat_gradients.abs().sum()) > 0
    opt.step()
    assert not torch.equal(before, opt.flat_parameters)
    assert aliases(model, opt)


def nothing(*_):
    pass


# What a script does between opt.zero_grad() and its backward, and after it, and the refusal at step.
LEFT_BEHIND = {
    # the torch optimizer's zero_grad after ours: backward then makes .grad tensors of its own
    "grad detached": (lambda model, torch_opt: torch_opt.zero_grad(set_to_none=True), nothing,
                      "parameter 'fc1.weight' .grad no longer aliases the flat gradient buffer"),
    "grad set to None": (nothing, lambda model: setattr(model.fc3.weight, "grad", None),
                         "parameter 'fc3.weight' .grad is undefined"),
    "parameter re-assigned": (nothing, lambda model: setattr(model.fc2.bias, "data", torch.zeros(128)),
                              "parameter 'fc2.bias' no longer aliases the flat parameter buffer"),
}


@pytest.mark.parametrize("case", sorted(LEFT_BEHIND))
def test_views_left_behind_are_refused_naming_the_parameter(live, case):
    before, after, refusal = LEFT_BEHIND[case]
    model, torch_opt, opt = live
    opt.zero_grad()
    before(model, torch_opt)
    backward(model)
    after(model)
    with pytest.raises(OrderError, match=refusal):
        opt.step()


def test_models_that_cannot_be_flattened_are_named():
    lin = nn.Linear(3, 2)
    with pytest.raises(ConfigError, match="parameter 'w' has dtype float64, expected float32"):
        _flat.FlatModel([("w", nn.Parameter(torch.zeros(2, dtype=torch.float64)))])
    with pytest.raises(ConfigError, match="parameter 'b' is registered twice"):
        _flat.FlatModel([("w", lin.weight), ("b", lin.weight)])
    with pytest.raises(ConfigError, match="parameter 'w' is empty"):
        _flat.FlatModel([("w", nn.Parameter(torch.zeros(0)))])
    with pytest.raises(ConfigError, match="parameter 'w' has requires_grad == false"):
        _flat.FlatModel([("w", nn.Parameter(torch.zeros(2), requires_grad=False))])
    with pytest.raises(ConfigError, match="parameter 's' is not a dense tensor"):
        _flat.FlatModel([("s", nn.Parameter(torch.zeros(2, 2).to_sparse()))])
    with pytest.raises(ConfigError, match="parameter 'm' is on meta, the model's first parameter on cpu"):
        _flat.FlatModel([("w", nn.Parameter(torch.zeros(2))), ("m", nn.Parameter(torch.zeros(2, device="meta")))])
    with pytest.raises(ConfigError, match="on meta; sketchps runs on cpu or cuda"):
        _flat.FlatModel([("m", nn.Parameter(torch.zeros(2, device="meta")))])
    with pytest.raises(ConfigError, match="model: has buffer 'bn.running_mean'"):
        _flat.FlatModel([("w", lin.weight)], ["bn.running_mean"])
    with pytest.raises(ConfigError, match="model: no parameters"):
        _flat.FlatModel([])


def test_a_model_off_the_loaded_kernels_device_is_refused_naming_both(monkeypatch):
    class CudaKernels:  # what _core answers when the CUDA kernels were loaded
        @staticmethod
        def kernels_backend():
            return "cuda"

        @staticmethod
        def kernels_description():
            return "cuda (H200) from /x/lib/cuda/libsketchps_kernels.so"

    monkeypatch.setattr(_flat, "_core", CudaKernels)
    with pytest.raises(ConfigError, match="parameters are on cpu, but sketchps loaded the cuda kernels .*"
                                          "/x/lib/cuda/libsketchps_kernels.so.*set SKETCHPS_KERNELS=cpu"):
        _flat.FlatModel([("w", nn.Parameter(torch.zeros(2)))])


class Recorder:
    """Stands in for sketchps._core.Worker: the hooks' calls."""

    def __init__(self):
        self.calls = []

    def gradient_accumulated(self, index):
        self.calls.append(index)


def test_the_accumulator_hooks_report_each_parameter_once_per_backward():
    model = tiny_models.Mlp()
    flat = _flat.FlatModel(list(model.named_parameters()))
    worker = Recorder()
    hooks = _flat.GradientHooks(flat, worker)
    backward(model)
    assert sorted(worker.calls) == list(range(6))
    assert worker.calls.index(4) < worker.calls.index(0)  # the last layer's gradient is complete first
    backward(model, seed=1)
    assert len(worker.calls) == 12  # a second backward reports again (the core refuses such a round)
    del hooks
