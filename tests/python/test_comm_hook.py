"""DDP's comm hook (sketchps.ddp, docs/pytorch.md "DDP's comm hook"): a DDP script
(tests/python/scripts/ddp_hook.py: a BatchNorm1d model, a TensorDataset, a DataLoader with torch's
DistributedSampler, torch's AdamW and CosineAnnealingLR) trains under `sketchps run --script` with
2 workers over 2 servers and only the hook's two lines added. With the dense scheme the hook's
aggregate is the mean of the workers' gradients (the same as DDP's allreduce), every rank's
state_dict is bitwise equal (after the final evaluation through DDP, whose forward broadcasts rank 0's
BatchNorm buffers), and the model equals the same script's under plain DDP (gloo allreduce, 2 local
processes) to 1e-6 (measured: bitwise equal). With topk it trains in both modes. docs/pytorch.md's
diff under "DDP's comm hook" applies to the DDP script of "Migrating a DDP script"
(tests/python/scripts/ddp_before.py) and the result, with BatchNorm, trains under `sketchps run`. A rank
that raises inside `with state:` is logged by the servers as failed, and the run ends at once. With a
model DDP splits into two buckets, the hook's overlap (each shard's exchange starts once its
buckets are in, during backward) ends bitwise where the round at the last bucket ends."""
import json
import os
import re
import time

import pytest
import torch

from conftest import HERE, local_ranks, records, run, summary
from sketchps import _core
from test_migrate_ddp import BEFORE, DOC, apply_diff

SCRIPT = os.path.join(HERE, "scripts", "ddp_hook.py")

# 2 workers, 2 servers; the script's dataset has 1024 samples, 16 batches of 32 per rank and epoch,
# and it runs 3 epochs: 48 rounds (data.train_samples 1024 makes the job's epochs the loop's).
JOB = """job_id: python-ddp-hook
mode: ps
workers: 2
servers: 2
data: {batch_size: 32, train_samples: 1024}
train: {rounds: 48, eval_every_rounds: 0, seed: 3}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: dense}
checkpoint: {every_rounds: 16}
"""


def plain_ddp(save_dir):
    """The script without sketchps: DDP's own allreduce over gloo, 2 local processes."""
    local_ranks(SCRIPT, "--plain", "--save-dir", str(save_dir))


def test_a_ddp_script_with_the_hook_equals_plain_ddp_and_keeps_replicas_bitwise_equal(tmp_path):
    saved, plain = tmp_path / "hook", tmp_path / "plain"
    saved.mkdir()
    plain.mkdir()
    out, _ = run(tmp_path, "dense", "--script", SCRIPT, "--", "--save-dir", str(saved), "--check-mean", job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert job.optimizer == "external" and job.model == "custom"
    assert [n for n, _ in job.layout] == ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.weight",
                                          "fc2.bias"]  # trainable parameters only: the buffers are DDP's
    for rank in range(2):
        log = (out / f"worker-{rank}.log").read_text()
        for r in range(3):  # the aggregate is the workers' mean, and DDP does not divide it again
            assert f"rank {rank}: round {r} aggregate - mean of local gradients: 0\n" in log, log[-2000:]
    a, b = records(out, 0), records(out, 1)
    assert [r["round"] for r in a] == [r["round"] for r in b] == list(range(48))
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]  # the weights after each update
    assert [r["aggregate_checksum"] for r in a] == [r["aggregate_checksum"] for r in b]
    assert len({r["checksum"] for r in a}) == 48
    assert all(r["dense_bytes"] == 4 * 1732 and r["workers"] == 2 for r in a)
    assert sum(r["loss"] for r in a[-8:]) < 0.8 * sum(r["loss"] for r in a[:8])  # record_loss: it learns
    assert summary(out)["rounds"] == 48

    plain_ddp(plain)
    mine = [torch.load(saved / f"rank{r}.pt") for r in range(2)]
    theirs = torch.load(plain / "rank0.pt")
    for name, want in theirs.items():
        assert torch.equal(mine[0][name], mine[1][name]), f"{name}: the replicas differ"
        got, want = mine[0][name].double(), want.double()
        diff = (got - want).norm() / max(want.norm(), 1e-12)
        assert diff <= 1e-6, f"{name}: relative difference {diff:.3g} from plain DDP"


@pytest.mark.parametrize("mode", ["ps", "decentralized"])
def test_topk_trains_through_the_hook(tmp_path, mode):
    extra = ["--mode", "decentralized", "--set", "peer.on_failure=stop"] if mode == "decentralized" else []
    out, _ = run(tmp_path, mode, *extra, "--script", SCRIPT, "--", "--scheme", "topk", "--density", "0.1", job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert (job.mode, job.scheme, job.density, job.optimizer) == (mode, "topk", 0.1, "external")
    a, b = records(out, 0), records(out, 1)
    assert len(a) == len(b) == 48
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
    assert all(r["bytes_up"] < r["dense_bytes"] / 4 for r in a)  # compressed: 10% of the values and their indices
    first, last = sum(r["loss"] for r in a[:8]) / 8, sum(r["loss"] for r in a[-8:]) / 8
    assert last < 0.8 * first, (first, last)


def test_the_overlapped_exchange_ends_bitwise_where_the_round_at_the_last_bucket_ends(tmp_path):
    # 16 rounds (1 epoch of 16 batches per rank) of a 324k-parameter model that DDP hands over in
    # two buckets; 2 shards, so the buckets complete the shards at different times.
    job = JOB.replace("rounds: 48", "rounds: 16")
    runs = {}
    for name, extra in (("overlap", []), ("at-last-bucket", ["--no-overlap"])):
        out, _ = run(tmp_path, name, "--script", SCRIPT, "--", "--scheme", "topk", "--density", "0.05", "--epochs",
                     "1", "--middle", "2500", *extra, job=job)
        for rank in range(2):
            log = (out / f"worker-{rank}.log").read_text()
            assert f"rank {rank}: most buckets in one backward: 2\n" in log, log[-2000:]
        a, b = records(out, 0), records(out, 1)
        assert len(a) == len(b) == 16 and [r["checksum"] for r in a] == [r["checksum"] for r in b]
        runs[name] = a
    for mine, theirs in zip(runs["overlap"], runs["at-last-bucket"]):
        assert (mine["round"], mine["aggregate_checksum"], mine["checksum"]) == \
            (theirs["round"], theirs["aggregate_checksum"], theirs["checksum"])
    assert len({r["checksum"] for r in runs["overlap"]}) == 16  # it trains: the weights move every round


def hook_diff():
    """The ```diff block under the heading "DDP's comm hook", as lines."""
    with open(DOC) as f:
        text = f.read()
    section = text[text.index("## DDP's comm hook"):]
    match = re.search(r"```diff\n(.*?)```", section, re.S)
    assert match, "docs/pytorch.md: no ```diff block under \"DDP's comm hook\""
    return match.group(1).splitlines()


def test_the_docs_diff_makes_a_ddp_script_with_batchnorm_train_through_the_hook(tmp_path):
    with open(BEFORE) as f:
        after = apply_diff(hook_diff(), f.read())
    assert "self.norm = nn.LayerNorm(64)" in after
    script = tmp_path / "train.py"
    script.write_text(after.replace("self.norm = nn.LayerNorm(64)", "self.norm = nn.BatchNorm1d(64)"))
    # The script's 10 epochs of 16 batches per rank: 160 rounds.
    job = JOB.replace("rounds: 48", "rounds: 160")
    out, _ = run(tmp_path, "docs", "--script", str(script), job=job)
    described = _core.load_job(str(out / "job.yaml"))
    assert (described.scheme, described.density, described.optimizer) == ("topk", 0.01, "external")
    assert [n for n, _ in described.layout][2:4] == ["norm.weight", "norm.bias"]
    a, b = records(out, 0), records(out, 1)
    assert len(a) == len(b) == 160 and [r["checksum"] for r in a] == [r["checksum"] for r in b]
    for rank in range(2):
        log = (out / f"worker-{rank}.log").read_text()
        loss = float(re.search(r"final loss (\S+)", log).group(1))
        assert loss < 1.0, log[-2000:]  # 4 classes: it learns (ln 4 = 1.39 at the start)


def test_a_rank_that_raises_inside_with_state_is_logged_as_failed(tmp_path):
    """Leaving `with state:` on an exception tells the servers this rank failed (not finished), and
    `sketchps run` ends the run at once."""
    out, done = run(tmp_path, "fail", "--script", SCRIPT, "--", "--fail-rank", "1", "--fail-at-round", "5",
                    job=JOB, check=False)
    ended = time.time()
    assert done.returncode == 1, done.stderr[-4000:]
    assert "worker 1 exited with code 1" in done.stderr
    assert "RuntimeError: rank 1 fails on purpose at round 5" in (out / "worker-1.log").read_text()
    faults = json.loads((out / "faults.json").read_text())
    assert faults["first_failure"]["process"] == "worker 1"
    assert ended - faults["first_failure"]["at"] < 20
    for shard in (0, 1):
        log = (out / f"server-{shard}.log").read_text()
        assert "worker 1 finished the job" not in log
        assert "worker 1 failed at round 5: RuntimeError: rank 1 fails on purpose at round 5" in log
