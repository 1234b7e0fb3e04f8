"""docs/pytorch.md "Migrating a DDP script" is a working diff: applied to a DDP script
(tests/python/scripts/ddp_before.py, which runs under torch.distributed as it is), the result trains
under `sketchps run --script` with a DataLoader over sps.DistributedSampler: 2 workers over real
servers, the job's rounds, finite losses, data.train_samples taken from len(dataset). The same
script with BatchNorm trains too, its buffers broadcast from rank 0 every round (DDP's
broadcast_buffers) over the gloo group `sketchps run` makes possible, with equal replicas."""
import math
import os
import re
import socket
import subprocess
import sys

import pytest

from conftest import HERE, records, run
from sketchps import _core

DOC = os.path.join(HERE, "..", "..", "docs", "pytorch.md")
BEFORE = os.path.join(HERE, "scripts", "ddp_before.py")

# 2 workers, 2 servers, 24 rounds of 2 x 32 samples; no data.train_samples: the script's dataset
# (1024 samples: 16 rounds per epoch, so the loop runs 2 epochs, the second one cut at round 24).
JOB = """job_id: python-migrate
mode: ps
workers: 2
servers: 2
data: {batch_size: 32}
train: {rounds: 24, eval_every_rounds: 0, seed: 3}
optimizer: {lr: 0.05, momentum: 0.9}
checkpoint: {every_rounds: 8}
"""


def doc_diff():
    """The ```diff block under the heading "Migrating a DDP script", as lines."""
    with open(DOC) as f:
        text = f.read()
    section = text[text.index("## Migrating a DDP script"):]
    match = re.search(r"```diff\n(.*?)```", section, re.S)
    assert match, "docs/pytorch.md: no ```diff block under 'Migrating a DDP script'"
    return match.group(1).splitlines()


def apply_diff(diff, source):
    """Applies a diff of lines ' ' (context), '-' (removed), '+' (added); '@@ ... @@' lines separate
    hunks (the lines between them are left as they are). Each hunk's old lines must occur, in
    order, exactly as written."""
    hunks, hunk = [], []
    for line in diff:
        if line.startswith("@@"):
            hunks.append(hunk)
            hunk = []
        else:
            hunk.append(line if line else " ")
    hunks.append(hunk)
    lines = [line.rstrip() for line in source.splitlines()]
    out, at = [], 0
    for n, hunk in enumerate(hunks):
        assert all(line[0] in " -+" for line in hunk), f"hunk {n}: a line is not ' ', '-' or '+'"
        old = [line[1:].rstrip() for line in hunk if line[0] in " -"]
        new = [line[1:].rstrip() for line in hunk if line[0] in " +"]
        starts = [i for i in range(at, len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
        assert len(starts) == 1, f"hunk {n} ({old[0]!r} ...) matches the script {len(starts)} times"
        out += lines[at:starts[0]] + new
        at = starts[0] + len(old)
    return "\n".join(out + lines[at:]) + "\n"


def after_script():
    with open(BEFORE) as f:
        return apply_diff(doc_diff(), f.read())


def test_the_diff_applies_to_the_ddp_script():
    after = after_script()
    compile(after, "after.py", "exec")
    assert "import torch.distributed" not in after and "DDP(" not in after and "dist." not in after
    for line in ("sampler = sps.DistributedSampler(dataset)", "for epoch in range(opt.epochs):", "opt.finish()"):
        assert line in after


def test_the_before_script_runs_under_torch_distributed(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    done = subprocess.run([sys.executable, BEFORE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    loss = float(re.search(r"final loss (\S+)", done.stdout).group(1))
    assert loss < 1.0  # 4 classes: it learns (ln 4 = 1.39 at the start)


def test_the_migrated_script_trains_under_sketchps_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(after_script())
    out, _ = run(tmp_path, "after", "--script", str(script), job=JOB)
    job = _core.load_job(str(out / "job.yaml"))
    assert job.train_samples == 1024  # len(dataset), from the describe pass
    assert job.model == "custom" and [n for n, _ in job.layout][:2] == ["fc1.weight", "fc1.bias"]
    assert (job.scheme, job.density) == ("topk", 0.01)
    a, b = records(out, 0), records(out, 1)
    assert [r["round"] for r in a] == [r["round"] for r in b] == list(range(24))
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
    for r in a + b:
        assert math.isfinite(r["loss"]), r
    assert a[-1]["epoch"] == pytest.approx(23 / 16)


def test_the_migrated_script_with_batchnorm_trains_with_equal_replicas(tmp_path):
    after = after_script()
    assert "self.norm = nn.LayerNorm(64)" in after
    script = tmp_path / "train.py"
    script.write_text(after.replace("self.norm = nn.LayerNorm(64)", "self.norm = nn.BatchNorm1d(64)"))
    out, done = run(tmp_path, "batchnorm", "--script", str(script), job=JOB, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    a, b = records(out, 0), records(out, 1)
    assert len(a) == len(b) > 0
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
