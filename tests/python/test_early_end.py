"""An early end is never a success (docs/pytorch.md "When the loop and the job disagree"): a DDP
script with the comm hook (tests/python/scripts/ddp_hook.py) under `sketchps run --script`, whose loop
runs fewer rounds than the job planned, fails the run (exit 1) naming the planned and the run rounds,
and its ranks name the likely cause. Gradient accumulation over a job batch of one micro-batch is
refused at round 0 naming data.batch_size (the samples of one step), and runs with the step's
batch. A script that never calls finish() still leaves the job: at exit, with every round run, it
finishes (the last round's record is written and the run succeeds); before its last round it
reports a failure naming the missing finish(). The summary of a hook run says the
script's optimizer applied the update (learning_rate and momentum "external"), not the job's, and
its job.yaml states no learning rate or momentum (the script owns them)."""
import os

import yaml

from conftest import HERE, records, run, summary
from test_comm_hook import JOB

SCRIPT = os.path.join(HERE, "scripts", "ddp_hook.py")


def test_a_loop_that_runs_half_the_planned_rounds_fails_the_run_naming_the_cause(tmp_path):
    out, done = run(tmp_path, "short", "--script", SCRIPT, job=JOB.replace("rounds: 48", "rounds: 96"), check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "the workers left the job after round 48 of its 96 planned rounds" in done.stderr
    assert "run: done" not in done.stderr
    log = (out / "worker-0.log").read_text()
    assert "left the job after round 48 of the job's 96 planned rounds" in log
    assert "the plan is 2x the loop's rounds" in log
    assert summary(out)["planned_rounds"] == 96 and summary(out)["rounds"] == 48


def test_accumulation_over_a_job_batch_of_one_micro_batch_is_refused_at_round_0(tmp_path):
    out, done = run(tmp_path, "accumulate", "--script", SCRIPT, "--", "--accumulate", "2", job=JOB, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    log = (out / "worker-0.log").read_text()
    assert ("data.batch_size: the job has 32, but this rank's first round accumulated 2 forward passes (no_sync()) "
            "over 64 samples") in log and "set data.batch_size: 64" in log, log[-3000:]
    assert records(out, 0) == []  # refused before round 0's exchange landed


def test_accumulation_with_the_batch_of_one_step_runs_every_planned_round(tmp_path):
    job = JOB.replace("batch_size: 32", "batch_size: 64").replace("rounds: 48", "rounds: 24")
    out, _ = run(tmp_path, "accumulate", "--script", SCRIPT, "--", "--accumulate", "2", job=job)
    assert [r["round"] for r in records(out, 0)] == list(range(24))


def test_a_script_without_finish_leaves_the_job_at_exit(tmp_path):
    out, done = run(tmp_path, "whole", "--script", SCRIPT, "--", "--no-finish", job=JOB)
    assert [r["round"] for r in records(out, 0)] == list(range(48))  # the last round's record too
    assert "the script ended without finish()" in (out / "worker-1.log").read_text()
    s = summary(out)
    assert (s["optimizer"], s["learning_rate"], s["momentum"]) == ("external", "external", "external")
    ran = yaml.safe_load((out / "job.yaml").read_text())["optimizer"]  # no lr the script did not run
    assert ran["name"] == "external" and ran.get("lr") is None and ran.get("momentum") is None

    out, done = run(tmp_path, "short", "--script", SCRIPT, "--", "--no-finish", "--epochs", "1", job=JOB, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "after round 16 of its 48 planned rounds" in done.stderr
    assert "the script ended after round 16 of the job's 48 rounds without finish()" in (
        out / "worker-0.log").read_text()
