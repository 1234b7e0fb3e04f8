"""sketchps._resume.ScriptState in-process: the script state file of one rank is written at a
checkpoint round and read back by a resumed ScriptState exactly, on the torch a user has.

- torch >= 2.6 loads with weights_only=True unless told otherwise; here torch.load is replaced by
  one with that default, and a registered object whose state holds a NumPy random state must still
  come back (the file is the job's own).
- The CUDA RNG states are saved once the script has used CUDA and restored at the first training
  forward; a process that sees another number of devices gets a ConfigError naming both counts.
  torch.cuda is replaced by a fake with one or two devices (this machine has no GPU)."""
import types

import numpy as np
import pytest
import torch

from sketchps import _resume
from sketchps.errors import ConfigError

JOB = types.SimpleNamespace(checkpoint_every=2, total_rounds=10)


class NumpyRandom:
    """A script's own object with a NumPy random state (a sampler, an augmentation)."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def state_dict(self):
        return {"rng": self.rng.get_state()}

    def load_state_dict(self, state):
        self.rng.set_state(state["rng"])


class FakeCuda:
    """torch.cuda as the resume code uses it, with `devices` devices whose RNG states are tensors."""

    def __init__(self, devices):
        self.states = [torch.tensor([7 + d, 1, 2], dtype=torch.uint8) for d in range(devices)]
        self.restored = None

    def is_available(self):
        return bool(self.states)

    def is_initialized(self):
        return bool(self.states)

    def device_count(self):
        return len(self.states)

    def get_rng_state_all(self):
        return [s.clone() for s in self.states]

    def set_rng_state_all(self, states):
        self.restored = [s.clone() for s in states]


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SKETCHPS_STATE_DIR", str(tmp_path))
    return tmp_path


def save_at_round_two(module, *objects):
    """A first run: registers the objects and passes the forward of round 2 (a checkpoint round)."""
    first = _resume.ScriptState(JOB, 0, module, 0, "model")
    first.register(*objects)
    first.at_forward(1)
    first.at_forward(2)


def weights_only_by_default(monkeypatch):
    real = torch.load

    def load(path, *args, weights_only=True, **kwargs):
        return real(path, *args, weights_only=weights_only, **kwargs)

    monkeypatch.setattr(torch, "load", load)


def test_a_registered_numpy_state_comes_back_where_torch_loads_weights_only(state_dir, monkeypatch):
    weights_only_by_default(monkeypatch)
    module = torch.nn.Linear(3, 2)
    sampler = NumpyRandom(5)
    save_at_round_two(module, sampler)
    expected = sampler.rng.randint(0, 1 << 30, size=4)  # what the uninterrupted run draws next

    resumed_module = torch.nn.Linear(3, 2)
    resumed_sampler = NumpyRandom(99)
    resumed = _resume.ScriptState(JOB, 0, resumed_module, 2, "model")
    resumed.register(resumed_sampler)
    resumed.at_forward(3)
    assert torch.equal(resumed_module.weight, module.weight)
    assert (resumed_sampler.rng.randint(0, 1 << 30, size=4) == expected).all()


def test_the_cuda_rng_states_are_saved_and_restored(state_dir, monkeypatch):
    fake = FakeCuda(2)
    monkeypatch.setattr(torch, "cuda", fake)
    save_at_round_two(torch.nn.Linear(3, 2))

    fake.states = [torch.zeros(3, dtype=torch.uint8) for _ in range(2)]  # the resumed process's own
    resumed = _resume.ScriptState(JOB, 0, torch.nn.Linear(3, 2), 2, "model")
    assert fake.restored is None  # not before the first training forward
    resumed.at_forward(3)
    assert [s.tolist() for s in fake.restored] == [[7, 1, 2], [8, 1, 2]]


def test_a_resume_that_sees_another_number_of_devices_is_refused(state_dir, monkeypatch):
    monkeypatch.setattr(torch, "cuda", FakeCuda(2))
    save_at_round_two(torch.nn.Linear(3, 2))

    monkeypatch.setattr(torch, "cuda", FakeCuda(1))
    resumed = _resume.ScriptState(JOB, 0, torch.nn.Linear(3, 2), 2, "model")
    with pytest.raises(ConfigError, match=r"CUDA RNG state of 2 device\(s\) but this process sees 1"):
        resumed.at_forward(3)


def test_a_run_without_cuda_saves_no_cuda_state(state_dir, monkeypatch):
    monkeypatch.setattr(torch, "cuda", FakeCuda(0))
    save_at_round_two(torch.nn.Linear(3, 2))
    saved = torch.load(state_dir / _resume.file_name(0, 2))
    assert saved["cuda_rng"] is None
    assert torch.equal(saved["rng"], torch.get_rng_state())
