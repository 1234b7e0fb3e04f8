"""fp16 loss scaling through the DDP comm hook (sketchps.ddp.CommHookState(grad_scaler=...)): 2
workers, 2 servers, `sketchps run --script` of tests/python/scripts/ddp_hook.py with top-k. Rank 1's
batch of round 3 holds an Inf, so its gradient is not finite and it sits the round out.

- With an enabled scaler (torch's CPU GradScaler where this torch has one, else a stand-in), every
  rank gets a gradient of Inf for round 3: every scaler would skip that step and back off, as under
  DDP's all-reduce of an Inf. The script then skips the step on both ranks.
- Without one, only rank 1 sat out. Both ranks get the finite aggregate of rank 0 and step with it,
  and rank 1 names the round on stderr.

Either way the replicas stay bitwise equal (the records' checksums). DistributedOptimizer's refusal
of a scaler is in test_bad_use.py."""
import pytest

from conftest import records, run
from test_comm_hook import JOB as HOOK_JOB, SCRIPT

JOB = HOOK_JOB.replace("rounds: 48", "rounds: 16")  # one epoch of 16 batches per rank


@pytest.mark.parametrize("scaler", [True, False], ids=["with-scaler", "without"])
def test_an_overflow_on_one_rank_reaches_every_rank_only_with_the_scaler(tmp_path, scaler):
    extra = ["--scaler"] if scaler else []
    out, _ = run(tmp_path, "run", "--script", SCRIPT, "--", "--scheme", "topk", "--density", "0.1", "--epochs", "1",
                 "--overflow-rank", "1", "--overflow-at-round", "3", *extra, job=JOB)
    logs = [(out / f"worker-{r}.log").read_text() for r in range(2)]
    for r in range(2):
        assert f"rank {r}: round 3: gradient finite {not scaler}\n" in logs[r], logs[r][-2000:]
        assert f"rank {r}: 16 steps" in logs[r], logs[r][-2000:]
    a, b = records(out, 0), records(out, 1)
    assert len(a) == len(b) == 16
    assert [r["round"] for r in b if r["skipped"]] == [3] and not any(r["skipped"] for r in a)
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
    assert ("rank 1: round 3: this rank's gradient was not finite" in logs[1]) == (not scaler)
    assert "gradient was not finite" not in logs[0]
