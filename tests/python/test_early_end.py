"""An early end is never a success (docs/pytorch.md "When the loop and the job disagree"): a DDP
script with the comm hook (tests/python/scripts/ddp_hook.py) under `sketchps run --script`, whose loop
runs fewer rounds than the job planned, fails the run (exit 1) naming the planned and the run rounds,
and its ranks name the likely cause (gradient accumulation counted in micro-batches: data.batch_size
is the samples of one step). A script that never calls finish() still leaves the job: at exit, with
every round run, it finishes (the last round's record is written and the run succeeds); before
its last round it reports a failure naming the missing finish(). The summary of a hook run says the
script's optimizer applied the update (learning_rate and momentum "external"), not the job's."""
import os

from conftest import HERE, records, run, summary
from test_comm_hook import JOB

SCRIPT = os.path.join(HERE, "scripts", "ddp_hook.py")


def test_accumulation_that_runs_half_the_planned_rounds_fails_the_run_naming_the_cause(tmp_path):
    out, done = run(tmp_path, "accumulate", "--script", SCRIPT, "--", "--accumulate", "2", job=JOB, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "the workers left the job after round 24 of its 48 planned rounds" in done.stderr
    assert "run: done" not in done.stderr
    log = (out / "worker-0.log").read_text()
    assert "left the job after round 24 of the job's 48 planned rounds" in log
    assert "gradient accumulation over 2 micro-batches" in log
    assert summary(out)["planned_rounds"] == 48 and summary(out)["rounds"] == 24


def test_a_script_without_finish_leaves_the_job_at_exit(tmp_path):
    out, done = run(tmp_path, "whole", "--script", SCRIPT, "--", "--no-finish", job=JOB)
    assert [r["round"] for r in records(out, 0)] == list(range(48))  # the last round's record too
    assert "the script ended without finish()" in (out / "worker-1.log").read_text()
    s = summary(out)
    assert (s["optimizer"], s["learning_rate"], s["momentum"]) == ("external", "external", "external")

    out, done = run(tmp_path, "short", "--script", SCRIPT, "--", "--no-finish", "--epochs", "1", job=JOB, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "after round 16 of its 48 planned rounds" in done.stderr
    assert "the script ended after round 16 of the job's 48 rounds without finish()" in (
        out / "worker-0.log").read_text()
