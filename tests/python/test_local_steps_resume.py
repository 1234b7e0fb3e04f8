"""train.local_steps with DistributedOptimizer, interrupted and resumed (docs/pytorch.md "Local steps"
and "Resume"): 2 workers over real servers, H = 3 inner steps, an outer Nesterov step, top-k with
error feedback on the pseudo-gradient, a checkpoint every 4 rounds. `sketchps run --script`
(scripts/train.py) is stopped with Ctrl-C after a third of its rounds and continued with --resume;
every rank's checksum and loss of every round, and rank 0's final weights, are bitwise those of the
uninterrupted run. Once with the job's SGD taking the inner steps (apply="sketchps": the servers
resume the weights and the outer optimizer's momentum, the workers their error feedback), once with
torch's AdamW taking them (apply="torch": the script's state brings the weights and AdamW's moments,
which carry over from round to round)."""
import re

import pytest
import torch

from conftest import SCRIPT, records, run
from test_local_steps import JOB as TWO_ROUNDS
from test_script_resume import interrupt_and_resume

ROUNDS = 24
JOB = (TWO_ROUNDS.replace("job_id: python-local-steps", "job_id: python-local-steps-resume")
       .replace("rounds: 2", f"rounds: {ROUNDS}").replace("every_rounds: 1", "every_rounds: 4")
       .replace("name: dense, density: 0.02", "name: topk, density: 0.1"))


def rounds_of(out, rank):
    """(round, checksum, loss) of every round, in the order recorded."""
    return [(r["round"], r["checksum"], r["loss"]) for r in records(out, rank)]


@pytest.mark.parametrize("optimizer", ["sgd", "torch-adamw"])
def test_an_interrupted_local_steps_job_resumes_bitwise(tmp_path, optimizer):
    assert all(key in JOB for key in ("local_steps: 3", "nesterov", "topk", "every_rounds: 4"))
    script = [SCRIPT, "--model", "mlp", "--optimizer", optimizer]
    reference_weights = tmp_path / "reference.pt"
    reference, _ = run(tmp_path, "reference", "--script", script[0], "--", *script[1:], "--save",
                       str(reference_weights), job=JOB)
    resumed_weights = tmp_path / "resumed.pt"
    stderr = interrupt_and_resume(tmp_path, JOB, script + ["--save", str(resumed_weights)], ROUNDS, 2)
    resumed_at = int(re.search(r"resuming from the checkpoints in \S+: round (\d+) of", stderr).group(1))
    assert 0 < resumed_at < ROUNDS and resumed_at % 4 == 0, stderr[-2000:]
    out = tmp_path / "interrupted"
    for rank in (0, 1):
        want, got = rounds_of(reference, rank), rounds_of(out, rank)
        assert len({checksum for _, checksum, _ in want}) == ROUNDS  # every round moves the weights
        for w, g in zip(want[resumed_at:], got[resumed_at:]):
            assert g == w, f"{optimizer}: rank {rank}'s round {w[0]} after the resume at round {resumed_at}"
        assert got == want
    a, b = torch.load(reference_weights), torch.load(resumed_weights)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{optimizer}: rank 0's final weights"
