"""test_script_resume.py's done-when script in the long lane: with the dense scheme, through the
DDP comm hook and through DistributedOptimizer(apply="torch"), it ends bitwise equal to the same
script under plain DDP (gloo, no sketchps), and the records' compute_s counts the forward passes;
interrupted with Ctrl-C and resumed it ends bitwise equal to its uninterrupted run, the wrapper with 2
ranks, both with 4. A DistributedOptimizer script with the job's SGD and BatchNorm (broadcast
buffers) resumes bitwise too."""
import pytest

from conftest import local_ranks, records, run
from test_buffers import JOB as BATCHNORM_JOB
from test_buffers import SCRIPT as BATCHNORM
from test_script_resume import SCRIPT, assert_bitwise, interrupt_and_resume, resume_bitwise, saved, script_run

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


def test_batchnorm_under_the_jobs_sgd_resumes_bitwise(tmp_path):
    """apply="sketchps" with broadcast buffers (scripts/batchnorm.py): the servers resume the weights
    and the optimizer, the script's state the buffers."""
    job = BATCHNORM_JOB.replace("every_rounds: 16", "every_rounds: 4").replace("name: dense",
                                                                               "name: topk, density: 0.1")
    reference, resumed = tmp_path / "reference-weights", tmp_path / "interrupted-weights"
    reference.mkdir()
    resumed.mkdir()
    run(tmp_path, "reference", "--script", BATCHNORM, "--", "--save-dir", str(reference), job=job)
    interrupt_and_resume(tmp_path, job, [BATCHNORM, "--save-dir", str(resumed)], 48, 2)
    assert_bitwise(saved(resumed, 2), saved(reference, 2), "batchnorm: resumed against uninterrupted")
