"""Buffers (BatchNorm's running statistics) with DistributedOptimizer (docs/pytorch.md): as DDP's
broadcast_buffers, rank 0's buffers are broadcast over a torch.distributed gloo process group once
when the optimizer is made and after every step().

Under `sketchps run --script` with 2 workers over 2 servers (tests/python/scripts/batchnorm.py:
BatchNormMlp, the job's SGD, the opt.batch_indices() loop): every rank's state_dict (parameters and
buffers) is bitwise equal to rank 0's, even when rank 1's buffers start different; with the dense
scheme rank 0's equals one process that runs two replicas with DDP's semantics (each replica's
forward on its own batch, the mean of their gradients, rank 0's buffers copied to rank 1 after each
step) to 1e-5, and it learns (loss falls, test accuracy > 0.8). A script that makes the default
gloo group itself (topk) keeps the replicas equal the same way, as does decentralized mode with
peer.on_failure stop; with regroup (the default) the describe pass refuses and nothing starts. broadcast_buffers=False keeps the
parameters equal and leaves each rank its own statistics (each equal to that replica's in the
one-process reference without the copy).

In-process: without MASTER_ADDR (and no process group) the ConfigError names MASTER_ADDR /
MASTER_PORT and who sets them, before the describe pass writes anything; decentralized mode with
peer.on_failure regroup is refused naming it; a default group of another size is refused; a worker
that would rejoin a running job (first round > 0) without its script's state of that round is refused
and reported to the job as failed; a buffer the forward re-assigns is broadcast as its new tensor, and
one registered, removed or reshaped after the optimizer was made is refused naming it (test_script_resume.py resumes a whole job with buffers); a
single decentralized peer (peer.on_failure stop) makes its own group of one, trains and destroys
the group in finish(), while a group the script made is left to it."""
import copy
import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import sketchps.torch as sps
import tiny_models
from conftest import HERE, clean_env, free_port, records, run, summary
from sketchps import _buffers, _core, data
from sketchps.errors import ConfigError

SCRIPT = os.path.join(HERE, "scripts", "batchnorm.py")

# 2 workers, 2 servers; centres_data's 1024 training points: 16 rounds of 2 x 32 per epoch, 3 epochs.
JOB = """job_id: python-buffers
mode: ps
workers: 2
servers: 2
data: {batch_size: 32, train_samples: 1024}
train: {rounds: 48, eval_every_rounds: 0, seed: 3}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: dense}
checkpoint: {every_rounds: 16}
"""


def reference(job, broadcast):
    """One process, two replicas with DDP's semantics: each replica's forward (train mode) on its
    rank's batch of the round, SGD on the mean of their gradients, the parameters copied to replica 1
    and, with broadcast, replica 0's buffers too. Returns both replicas' state_dicts."""
    torch.manual_seed(job.seed)
    replicas = [tiny_models.BatchNormMlp()]
    replicas.append(copy.deepcopy(replicas[0]))
    opt = torch.optim.SGD(replicas[0].parameters(), lr=job.lr, momentum=job.momentum)
    x, y, _, _ = tiny_models.centres_data()
    b = job.batch_size
    for r in range(job.total_rounds):
        idx = data.global_batch_indices(job, r)
        for k, m in enumerate(replicas):
            m.zero_grad()
            F.cross_entropy(m(x[idx[k * b:(k + 1) * b]]), y[idx[k * b:(k + 1) * b]]).backward()
        for p, q in zip(replicas[0].parameters(), replicas[1].parameters()):
            p.grad = (p.grad + q.grad) / 2
        opt.step()
        with torch.no_grad():
            for p, q in zip(replicas[0].parameters(), replicas[1].parameters()):
                q.copy_(p)
            if broadcast:
                for p, q in zip(replicas[0].buffers(), replicas[1].buffers()):
                    q.copy_(p)
    return [m.state_dict() for m in replicas]


def train(tmp_path, name, *args, job=JOB):
    saved = tmp_path / f"{name}-models"
    saved.mkdir()
    out, _ = run(tmp_path, name, "--script", SCRIPT, "--", "--save-dir", str(saved), *args, job=job)
    return out, [torch.load(saved / f"rank{r}.pt") for r in range(2)]


def assert_bitwise_equal(a, b, keys=None):
    for k in keys or a:
        assert torch.equal(a[k], b[k]), k


def assert_close(a, b, tol=1e-5):
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert (a[k].double() - b[k].double()).abs().max().item() <= tol, k


def assert_it_learned(out):
    a = records(out, 0)
    assert [r["checksum"] for r in a] == [r["checksum"] for r in records(out, 1)]
    assert sum(r["loss"] for r in a[-8:]) < 0.5 * sum(r["loss"] for r in a[:8])
    assert summary(out)["rounds"] == 48
    assert summary(out)["final_test_accuracy"] > 0.8


def test_rank_0s_buffers_reach_every_rank_as_under_ddp(tmp_path):
    out, (rank0, rank1) = train(tmp_path, "dense", "--perturb-buffers-rank", "1")
    assert list(rank0) == ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "norm.running_mean",
                           "norm.running_var", "norm.num_batches_tracked", "fc2.weight", "fc2.bias"]
    assert_bitwise_equal(rank0, rank1)  # the buffers too: rank 1's perturbed start was replaced
    assert int(rank0["norm.num_batches_tracked"]) == 48
    job = _core.load_job(str(out / "job.yaml"))
    assert_close(rank0, reference(job, broadcast=True)[0])
    assert_it_learned(out)
    for rank in range(2):
        assert "final test accuracy" in (out / f"worker-{rank}.log").read_text()


def test_a_process_group_the_script_made_is_used(tmp_path):
    out, (rank0, rank1) = train(tmp_path, "topk", "--init-group", "--perturb-buffers-rank", "1",
                                job=JOB.replace("{name: dense}", "{name: topk, density: 0.1}"))
    assert_bitwise_equal(rank0, rank1)
    assert int(rank1["norm.num_batches_tracked"]) == 48
    assert_it_learned(out)


def test_a_buffer_the_forward_reassigns_is_broadcast_as_its_new_tensor(tmp_path):
    """BatchNormMlp(ema=True): each training forward replaces the `ema` buffer by a new tensor from
    its rank's batch; the broadcast looks buffers up by name, as DDP does, so rank 1 ends with rank
    0's (before 2026-11-30 it wrote into the first tensor, which the module no longer held)."""
    out, (rank0, rank1) = train(tmp_path, "ema", "--ema-buffer")
    assert rank0["ema"].abs().sum() > 0
    assert_bitwise_equal(rank0, rank1)
    assert_it_learned(out)


def test_without_broadcast_each_rank_keeps_its_own_statistics(tmp_path):
    out, (rank0, rank1) = train(tmp_path, "local", "--no-broadcast")
    params = [k for k in rank0 if "running" not in k and "num_batches" not in k]
    assert_bitwise_equal(rank0, rank1, params)  # the parameters are the job's
    assert not torch.equal(rank0["norm.running_mean"], rank1["norm.running_mean"])
    assert not torch.equal(rank0["norm.running_var"], rank1["norm.running_var"])
    job = _core.load_job(str(out / "job.yaml"))
    ref = reference(job, broadcast=False)
    assert_close(rank0, ref[0])
    assert_close(rank1, ref[1])
    assert_it_learned(out)


PEERS = JOB.replace("mode: ps", "mode: decentralized").replace("servers: 2\n", "").replace(
    "checkpoint: {every_rounds: 16}\n", "")


def test_decentralized_mode_with_peer_on_failure_stop(tmp_path):
    out, (rank0, rank1) = train(tmp_path, "peers", "--perturb-buffers-rank", "1",
                                job=PEERS + "peer: {on_failure: stop}\n")
    assert_bitwise_equal(rank0, rank1)
    assert_it_learned(out)


def test_decentralized_regroup_stops_before_anything_starts(tmp_path):
    out, done = run(tmp_path, "regroup", "--script", SCRIPT, job=PEERS, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ConfigError: peer.on_failure: regroup" in done.stderr
    assert not out.exists()  # the describe pass refused: no run directory


# --- in-process: what is refused, and the group's life ----------------------------------------


LAYERS = _core.layout_text([(n, list(p.shape)) for n, p in tiny_models.BatchNormMlp().named_parameters()])
SMALL = f"""job_id: buffers
workers: 2
servers: 1
model: custom
layers: {LAYERS}
data: {{batch_size: 8, train_samples: 64}}
train: {{rounds: 2, eval_every_rounds: 0, seed: 5}}
optimizer: {{lr: 0.05, momentum: 0.9}}
scheme: {{name: topk, density: 0.05}}
"""



@pytest.fixture
def env(monkeypatch, tmp_path):
    clean_env(monkeypatch)
    monkeypatch.setenv("RANK", "0")
    yield monkeypatch
    if dist.is_initialized():
        dist.destroy_process_group()


def job_file(env, tmp_path, text=SMALL):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    env.setenv("SKETCHPS_JOB", str(path))


def ps_worker(env, tmp_path):
    job_file(env, tmp_path)
    env.setenv("WORLD_SIZE", "2")
    env.setenv("SKETCHPS_SERVERS", "127.0.0.1:1")  # never reached: the checks below come first
    return sps.init()


def optimizer(model=None, **kwargs):
    model = model or tiny_models.BatchNormMlp()
    return sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model, **kwargs)


def test_without_master_addr_the_error_names_it(env, tmp_path):
    ps_worker(env, tmp_path)
    env.setenv("MASTER_PORT", "29500")
    with pytest.raises(ConfigError, match=r"^MASTER_ADDR / MASTER_PORT: MASTER_ADDR is not set \(model: has buffer "
                                          r"'norm.running_mean' .*`sketchps run --script` and torchrun set them.*"
                                          r"broadcast_buffers=False"):
        optimizer()


def test_the_describe_pass_refuses_before_writing(env, tmp_path):
    job_file(env, tmp_path)
    keys = tmp_path / "keys.txt"
    env.setenv("SKETCHPS_DESCRIBE", str(keys))
    env.setenv("MASTER_ADDR", "127.0.0.1")
    sps.init()
    with pytest.raises(ConfigError, match=r"MASTER_PORT is not set"):
        optimizer()
    assert not keys.exists()
    env.setenv("MASTER_PORT", str(free_port()))  # the describe pass makes no group: it exits at once
    with pytest.raises(SystemExit) as done:
        optimizer()
    assert done.value.code == 0 and keys.exists() and not dist.is_initialized()


def test_local_buffers_need_no_process_group(env, tmp_path):
    job_file(env, tmp_path)
    keys = tmp_path / "keys.txt"
    env.setenv("SKETCHPS_DESCRIBE", str(keys))
    sps.init()
    with pytest.raises(SystemExit):
        optimizer(broadcast_buffers=False)
    assert keys.exists()


def test_decentralized_regroup_is_refused(env, tmp_path):
    job_file(env, tmp_path, SMALL.replace("servers: 1", "mode: decentralized"))
    env.setenv("SKETCHPS_LISTEN", "127.0.0.1:1")
    env.setenv("SKETCHPS_PEERS", "127.0.0.1:1,127.0.0.1:2")
    env.setenv("MASTER_ADDR", "127.0.0.1")
    env.setenv("MASTER_PORT", "29500")
    sps.init()
    with pytest.raises(ConfigError, match=r"^peer.on_failure: regroup .*cannot follow; set peer.on_failure: stop"):
        optimizer()


def test_a_default_group_of_another_size_is_refused(env, tmp_path):
    ps_worker(env, tmp_path)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    with pytest.raises(ConfigError, match=r"the default process group is rank 0 of 1, the job's worker is rank 0 "
                                          r"of 2"):
        optimizer()


class _Rejoining:
    """A stand-in for sketchps._core.Worker that joins a running job at round 5."""
    reasons = []

    def __init__(self, job, config, layout, **buffers):
        self.first_round = 5

    def abandon(self, reason):
        self.reasons.append(reason)
        return ""


def test_a_worker_that_would_rejoin_is_refused(env, tmp_path):
    ps_worker(env, tmp_path)
    env.setenv("MASTER_ADDR", "127.0.0.1")
    env.setenv("MASTER_PORT", "29500")
    env.setattr(sps._core, "Worker", _Rejoining)
    with pytest.raises(ConfigError, match=r"rank 0 rejoins the job at round 5, but its script's state of that round "
                                          r".*is missing"):
        optimizer()
    assert _Rejoining.reasons and "round 5" in _Rejoining.reasons[0]
    assert not dist.is_initialized()


def single_peer(env, tmp_path):
    job_file(env, tmp_path, SMALL.replace("workers: 2", "workers: 1").replace("servers: 1", "mode: decentralized\n"
                                          "peer: {on_failure: stop}"))
    port = free_port()
    env.setenv("SKETCHPS_LISTEN", f"127.0.0.1:{port}")
    env.setenv("SKETCHPS_PEERS", f"127.0.0.1:{port}")
    env.setenv("MASTER_ADDR", "127.0.0.1")
    env.setenv("MASTER_PORT", str(free_port()))
    return sps.init()


def two_rounds(opt):
    x, y, _, _ = tiny_models.centres_data(train=64)
    while not opt.done:
        idx = opt.batch_indices()
        opt.zero_grad()
        F.cross_entropy(opt.model(x[idx]), y[idx]).backward()
        opt.step()
    opt.finish()


def test_its_own_group_lives_until_finish(env, tmp_path):
    single_peer(env, tmp_path)
    opt = optimizer()
    assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_backend() == "gloo"
    two_rounds(opt)
    assert int(opt.model.norm.num_batches_tracked) == 2
    assert not dist.is_initialized()  # made by DistributedOptimizer: destroyed in finish()


def test_the_scripts_group_is_left_to_it(env, tmp_path):
    single_peer(env, tmp_path)
    dist.init_process_group("gloo", rank=0, world_size=1)  # from MASTER_ADDR / MASTER_PORT
    two_rounds(optimizer())
    assert dist.is_initialized()


def test_a_buffer_registered_removed_or_reshaped_after_the_optimizer_is_refused(env, tmp_path):
    single_peer(env, tmp_path)
    model = tiny_models.BatchNormMlp(ema=True)
    opt = optimizer(model)
    x, y, _, _ = tiny_models.centres_data(train=64)
    idx = opt.batch_indices()
    opt.zero_grad()
    F.cross_entropy(model(x[idx]), y[idx]).backward()
    model.register_buffer("extra", torch.zeros(2))
    with pytest.raises(ConfigError, match=r"model: its buffers changed after DistributedOptimizer was made "
                                          r"\('extra' is new\)"):
        opt._broadcast()
    del model.extra
    model.ema = torch.zeros(3)
    with pytest.raises(ConfigError, match=r"model: buffer 'ema' is now torch.float32 \[3\], it was torch.float32 "
                                          r"\[64\] when DistributedOptimizer was made"):
        opt._broadcast()
    model.ema = torch.zeros(64)
    opt.step()  # and its broadcast
    del model.ema
    with pytest.raises(ConfigError, match=r"\('ema' is gone\)"):
        opt._broadcast()
    opt.finish()


def test_buffers_on_another_device_than_the_broadcast_tensor_are_packed():
    """Rank 0 packs its buffers' bytes into the host tensor gloo broadcasts; on a GPU the buffers are
    CUDA tensors, and torch.cat(..., out=) refuses an out tensor on another device. Here the meta
    device stands in for the host tensor's other device; the bytes themselves are checked on the CPU."""
    buffers = [torch.tensor([1.5, -2.0]), torch.tensor([7], dtype=torch.int64)]
    flat = torch.empty(16, dtype=torch.uint8)
    _buffers._pack(buffers, flat)
    assert flat[:8].view(torch.float32).tolist() == [1.5, -2.0]
    assert flat[8:].view(torch.int64).tolist() == [7]
    elsewhere = torch.empty(16, dtype=torch.uint8, device="meta")
    _buffers._pack(buffers, elsewhere)  # torch.cat(..., out=elsewhere) raised "Expected out tensor to have device"
