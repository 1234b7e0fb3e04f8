"""A script that raises on one rank: `sketchps run --script` ends the whole run at once with a
non-zero exit naming the rank and its exit code, in both modes. In parameter-server mode the
servers log that rank as failed, not as having finished the job (leaving `with opt:` on an
exception does not call finish()), drain and exit by themselves."""
import json
import time

import pytest

from conftest import SCRIPT, run


@pytest.mark.parametrize("mode", ["ps", "decentralized"])
def test_a_rank_that_raises_ends_the_run_and_is_logged_as_failed(tmp_path, mode):
    out, done = run(tmp_path, mode, "--mode", mode, "--script", SCRIPT, "--", "--model", "mlp", "--fail-rank", "1",
                    "--fail-at-round", "5", check=False)
    ended = time.time()
    assert done.returncode == 1, done.stderr[-4000:]
    assert "worker 1 exited with code 1" in done.stderr
    assert "RuntimeError: rank 1 fails on purpose at round 5" in (out / "worker-1.log").read_text()
    faults = json.loads((out / "faults.json").read_text())
    assert faults["first_failure"]["process"] == "worker 1"
    assert faults["first_failure"]["code"] == 1
    # The others are stopped together at once (this took 25-33 s when they were stopped one after
    # another): a generous bound, far below rank 0's patience (120 s) and peer timeout.
    assert ended - faults["first_failure"]["at"] < 20
    if mode == "ps":
        for shard in (0, 1):
            log = (out / f"server-{shard}.log").read_text()
            assert "worker 1 finished the job" not in log
            assert "worker 1 failed at round 5: RuntimeError: rank 1 fails on purpose at round 5" in log
            assert "stopped after" in log  # drained, wrote its final checkpoint and exited by itself


def test_leaving_with_opt_on_an_exception_does_not_finish():
    """The with-statement's exit on an exception reports a failure instead of finish()."""
    from sketchps.torch import DistributedOptimizer

    class FakeWorker:
        finished = False
        next_round = last_round = 4  # finish() compares them: every round ran

        def __init__(self):
            self.calls = []

        def finish(self):
            self.calls.append("finish")
            self.finished = True

        def abandon(self, reason):
            self.calls.append(("abandon", reason))
            self.finished = True
            return ""

    for raised, want in [(None, ["finish"]), (SystemExit(0), ["finish"]),
                         (RuntimeError("boom"), [("abandon", "RuntimeError: boom")]),
                         (KeyboardInterrupt(), [("abandon", "KeyboardInterrupt")])]:
        opt = DistributedOptimizer.__new__(DistributedOptimizer)
        opt._worker = FakeWorker()
        try:
            with opt:
                if raised is not None:
                    raise raised
        except BaseException as e:  # noqa: B036 - what was raised comes out unchanged
            assert e is raised
        assert opt._worker.calls == want, raised
