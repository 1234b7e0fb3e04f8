"""test_script_resume.py's done-when script in the long lane: with the dense scheme, through the
DDP comm hook and through DistributedOptimizer(apply="torch"), it ends bitwise equal to the same
script under plain DDP (gloo, no sketchps), and the records' compute_s counts the forward passes;
interrupted with Ctrl-C and resumed it ends bitwise equal to its uninterrupted run, the wrapper with 2
ranks, both with 4."""
import pytest

from conftest import local_ranks, records
from test_script_resume import SCRIPT, assert_bitwise, resume_bitwise, saved, script_run

SLEEP = 0.02  # seconds every forward of the plain-DDP comparison sleeps


@pytest.mark.parametrize("via", ["hook", "wrapper"])
def test_the_whole_script_equals_plain_ddp_and_its_compute_time_counts_forward(tmp_path, via):
    plain = tmp_path / "plain"
    plain.mkdir()
    local_ranks(SCRIPT, "--via", "plain", "--save-dir", str(plain))
    reference = saved(plain, 2)
    mine, out = script_run(tmp_path, via, via, 2, "name: dense", "--sleep-forward", str(SLEEP))
    assert_bitwise(mine[:1], reference[:1], f"{via} against plain DDP")
    assert_bitwise(mine, reference, f"{via} against plain DDP", buffers=False)
    assert_bitwise(mine[1:], mine[:1], f"{via}: rank 1 against rank 0", buffers=False)
    # The time split counts the forward passes (2 a round, each sleeping SLEEP s) as compute
    for rank in range(2):
        assert min(r["compute_s"] for r in records(out, rank)) >= 2 * SLEEP


def test_the_wrappers_script_resumes_bitwise(tmp_path):
    resume_bitwise(tmp_path, "wrapper", 2)


@pytest.mark.parametrize("via", ["hook", "wrapper"])
def test_four_ranks_resume_bitwise_equal_to_the_uninterrupted_run(tmp_path, via):
    resume_bitwise(tmp_path, via, 4)
