"""sketchps.torch.DistributedSampler: a torch DataLoader over it yields, batch after batch, the
samples opt.batch_indices() gives for each round; data.train_samples comes from len(dataset) in the
describe pass; the misuses (batch_size other than the job's, a forgotten set_epoch, stepping past
the last round, a dataset smaller than the job's, a model with buffers) are named. opt.no_sync().
In-process; a live job is one worker in decentralized mode (its own Peer service on loopback)."""
import socket

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import sketchps.torch as sps
import tiny_models
from sketchps import _job_context, data
from sketchps.errors import ConfigError, OrderError
from conftest import clean_env


# 100 samples, batch 8, one worker: 12 rounds per epoch (4 samples dropped each epoch), 2 epochs.
JOB = """job_id: sampler
mode: decentralized
workers: 1
model: mlp
data: {batch_size: 8, train_samples: 100}
train: {epochs: 2, eval_every_rounds: 0, seed: 11}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: topk, density: 0.05}
"""


def indexed_dataset(n):
    """(x, i): the sample's own index as the target, so a batch shows which samples it holds."""
    return TensorDataset(torch.randn(n, 784, generator=torch.Generator().manual_seed(0)), torch.arange(n))


@pytest.fixture
def env(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    monkeypatch.setenv("RANK", "0")
    return monkeypatch


def job_file(env, tmp_path, text=JOB):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    env.setenv("SKETCHPS_JOB", str(path))


def live(env, tmp_path, text=JOB, overlap=True):
    """init(), the sampler over 100 samples and a DataLoader of the job's batch size, the optimizer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job_file(env, tmp_path, text)
    env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    ctx = sps.init()
    sampler = sps.DistributedSampler(indexed_dataset(100))
    model = tiny_models.Mlp()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
                                   overlap=overlap)
    return ctx, sampler, model, opt


def train_round(model, opt, x, i):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), i % 10)
    loss.backward()
    return opt.step(loss=loss)


def test_torch_2_10s_sampler_that_takes_no_dataset(env, tmp_path, monkeypatch):
    """From torch 2.10, Sampler.__init__ takes no argument (pytorch/pytorch#163134); 1.13's takes the
    dataset. DistributedSampler calls neither, so it works under both."""
    def no_argument(self):
        pass
    monkeypatch.setattr(torch.utils.data.Sampler, "__init__", no_argument)
    ctx, sampler, model, opt = live(env, tmp_path)
    assert len(list(sampler)) == 12 * 8
    opt.finish()


def test_the_loaders_batches_are_the_rounds_of_two_epochs(env, tmp_path):
    ctx, sampler, model, opt = live(env, tmp_path)
    loader = DataLoader(sampler.dataset, batch_size=sampler.batch_size, sampler=sampler)
    assert ctx.job.rounds_per_epoch == 12 and opt.epochs == 2 and opt.rounds == 24
    epochs = []
    with opt:
        for epoch in range(opt.epochs):
            sampler.set_epoch(epoch)
            assert len(loader) == 12
            seen = []
            for x, i in loader:
                r = opt.round
                assert torch.equal(i, opt.batch_indices()), f"round {r}"
                # The single-process reference of the data order (sketchps._core.global_batch): one worker.
                assert torch.equal(i, data.global_batch_indices(ctx.job, r)), f"round {r}"
                stats = train_round(model, opt, x, i)
                assert stats["round"] == r and stats["epoch"] == pytest.approx(r / 12)
                seen.append(i)
            epochs.append(torch.cat(seen))
        assert opt.done
        sampler.set_epoch(opt.epochs)  # a loop that goes on gets empty epochs, not an error
        assert len(loader) == 0 and list(loader) == []
        with pytest.raises(OrderError, match="the job's 24 rounds are done"):
            opt.step()
    for e in epochs:  # 96 distinct samples of the first 100 (4 dropped), in a new order each epoch
        assert len(e) == 96 and len(set(e.tolist())) == 96 and int(e.max()) < 100
    assert not torch.equal(epochs[0], epochs[1])


def test_a_job_that_ends_inside_an_epoch(env, tmp_path):
    _, sampler, model, opt = live(env, tmp_path, JOB.replace("epochs: 2", "rounds: 15"))
    loader = DataLoader(sampler.dataset, batch_size=8, sampler=sampler)
    assert opt.epochs == 2
    counts = []
    with opt:
        for epoch in range(opt.epochs):
            sampler.set_epoch(epoch)
            counts.append(len(loader))
            for x, i in loader:
                assert torch.equal(i, opt.batch_indices())
                train_round(model, opt, x, i)
        assert opt.done
    assert counts == [12, 3]


def test_a_batch_size_other_than_the_jobs_is_named(env, tmp_path):
    _, sampler, model, opt = live(env, tmp_path)
    loader = DataLoader(sampler.dataset, batch_size=16, sampler=sampler)  # the job's is 8
    with opt:
        sampler.set_epoch(0)
        for x, i in loader:  # 6 batches for the epoch's 12 rounds
            train_round(model, opt, x, i)
        sampler.set_epoch(1)
        with pytest.raises(OrderError, match=r"ended at round 12, but the job is at round 6: .*"
                                             r"batch_size must be data.batch_size \(8\)"):
            next(iter(loader))


def test_a_forgotten_set_epoch_is_named(env, tmp_path):
    _, sampler, model, opt = live(env, tmp_path)
    loader = DataLoader(sampler.dataset, batch_size=8, sampler=sampler)
    with opt:
        for x, i in loader:
            train_round(model, opt, x, i)
        with pytest.raises(OrderError, match="epoch 0 was already iterated .*call sampler.set_epoch"):
            next(iter(loader))


def test_iterating_needs_the_optimizer_and_init(env, tmp_path):
    dataset = indexed_dataset(100)
    with pytest.raises(OrderError, match="init"):
        sps.DistributedSampler(dataset)
    job_file(env, tmp_path)
    env.setenv("SKETCHPS_LISTEN", "127.0.0.1:1")
    env.setenv("SKETCHPS_PEERS", "127.0.0.1:1")
    sps.init()
    sampler = sps.DistributedSampler(dataset)
    assert len(sampler) == 12 * 8  # from the job alone
    with pytest.raises(OrderError, match="before the DistributedOptimizer"):
        iter(sampler)


def test_no_sync_accumulates_without_overlap(env, tmp_path):
    _, sampler, model, opt = live(env, tmp_path, overlap=False)
    x, i = next(iter(DataLoader(sampler.dataset, batch_size=8, sampler=sampler)))
    with opt:
        opt.zero_grad()
        with opt.no_sync():
            F.cross_entropy(model(x[:4]), i[:4] % 10).backward()
        first = opt.flat_gradients.clone()
        F.cross_entropy(model(x[4:]), i[4:] % 10).backward()
        second = opt.flat_gradients - first
        assert first.abs().sum() > 0 and second.abs().sum() > 0  # the second pass added to the first
        assert opt.step()["round"] == 0


def accumulated_step(env, tmp_path, overlap):
    """One round of two micro-batches accumulated with no_sync(); the parameters after it."""
    env.setattr(_job_context, "current", None)
    tmp_path.mkdir()
    _, sampler, model, opt = live(env, tmp_path, overlap=overlap)
    x, i = next(iter(DataLoader(sampler.dataset, batch_size=8, sampler=sampler)))
    with opt:
        opt.zero_grad()
        with opt.no_sync():
            F.cross_entropy(model(x[:4]), i[:4] % 10).backward()
            with pytest.raises(OrderError, match="inside no_sync"):
                opt.step()
        F.cross_entropy(model(x[4:]), i[4:] % 10).backward()
        assert opt.step()["round"] == 0
        return opt.flat_parameters.clone()


def test_no_sync_with_overlap_sends_the_summed_gradients(env, tmp_path):
    """With overlap, the exchange starts during the last backward, outside no_sync(), with the sum of
    both passes: the same update as without overlap (bitwise), not the first pass alone."""
    overlapped = accumulated_step(env, tmp_path / "a", overlap=True)
    plain = accumulated_step(env, tmp_path / "b", overlap=False)
    assert torch.equal(overlapped, plain)


# --- data.train_samples from the dataset; buffers; the describe pass ---------------------------

def describe(env, tmp_path, text, model=None, samples=100):
    """The describe pass of `sketchps run --script` in-process: the keys the script writes (None: none)."""
    job_file(env, tmp_path, text)
    keys = tmp_path / "keys.txt"
    env.setenv("SKETCHPS_DESCRIBE", str(keys))
    sps.init()
    sps.DistributedSampler(indexed_dataset(samples))
    model = model or tiny_models.Mlp()
    with pytest.raises(SystemExit) as done:
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
    assert done.value.code == 0
    return keys.read_text().splitlines()


def test_describe_takes_train_samples_from_the_dataset(env, tmp_path):
    keys = describe(env, tmp_path, JOB.replace(", train_samples: 100", ""), samples=300)
    assert "data.train_samples=300" in keys


def test_describe_keeps_the_jobs_smaller_train_samples(env, tmp_path):
    keys = describe(env, tmp_path, JOB.replace("train_samples: 100", "train_samples: 64"), samples=300)
    assert not [k for k in keys if k.startswith("data.")]


def test_a_job_larger_than_the_dataset_names_both(env, tmp_path):
    job_file(env, tmp_path, JOB.replace("train_samples: 100", "train_samples: 200"))
    env.setenv("SKETCHPS_DESCRIBE", str(tmp_path / "keys.txt"))
    sps.init()
    with pytest.raises(ConfigError, match=r"data.train_samples: the job has 200, the dataset \(len\(dataset\)\) 100"):
        sps.DistributedSampler(indexed_dataset(100))


def test_a_worker_whose_job_left_train_samples_unset(env, tmp_path):
    job_file(env, tmp_path, JOB.replace(", train_samples: 100", ""))
    env.setenv("SKETCHPS_LISTEN", "127.0.0.1:1")
    env.setenv("SKETCHPS_PEERS", "127.0.0.1:1")
    sps.init()
    with pytest.raises(ConfigError, match=r"the job has 60000 \(the default\), the dataset \(len\(dataset\)\) 100"):
        sps.DistributedSampler(indexed_dataset(100))


def test_a_dataset_smaller_than_a_global_batch(env, tmp_path):
    job_file(env, tmp_path, JOB.replace(", train_samples: 100", ""))
    env.setenv("SKETCHPS_DESCRIBE", str(tmp_path / "keys.txt"))
    sps.init()
    with pytest.raises(ConfigError, match=r"dataset's 5 samples are fewer than one global batch"):
        sps.DistributedSampler(indexed_dataset(5))


def test_buffers_are_refused_before_the_describe_pass_writes(env, tmp_path):
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.BatchNorm1d(10))
    job_file(env, tmp_path)
    keys = tmp_path / "keys.txt"
    env.setenv("SKETCHPS_DESCRIBE", str(keys))
    sps.init()
    with pytest.raises(ConfigError, match=r"model: has buffer '2.running_mean' .*use GroupNorm or LayerNorm"):
        sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
    assert not keys.exists()
