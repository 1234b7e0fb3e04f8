"""sketchps._position: where the job stands and leaving it, shared by DistributedOptimizer and
sketchps.ddp.CommHookState (_JobPosition: round, rounds, done, epoch, checkpoint(), finish()'s
early-end message, `with` leaving or reporting a failure), the describe pass of `sketchps run
--script` (_describe: writes the script's job keys and exits 0), the script's state of a resumed
job (_join_script_state: sketchps/_resume.py) and the failure report to the servers
(_report_failure, best effort within seconds).
"""
import sys

from sketchps import _core, _job_context, _resume
from sketchps._settings import _settings_overrides
from sketchps._status import _status_write
from sketchps.errors import ConfigError


def _describe(ctx, named, settings, scheme, density):
    """Writes the job keys this script defines (sketchps run --script reads them), then exits."""
    lines = [f"layers={_core.layout_text([(n, list(p.shape)) for n, p in named])}"]
    mine = [(n, list(p.shape)) for n, p in named]
    if ctx.job.model != "custom" and mine != [(n, list(s)) for n, s in ctx.job.layout]:
        lines.insert(0, "model=custom")
    elif ctx.job.model != "custom":
        lines = []
    lines += _settings_overrides(settings)
    if scheme is not None:
        lines.append(f"scheme.name={scheme}")
    if density is not None:
        lines.append(f"scheme.density={density!r}")
    if ctx.train_samples is not None:
        lines.append(f"data.train_samples={ctx.train_samples}")  # a DistributedSampler's len(dataset)
    with open(ctx.describe, "w") as out:
        out.write("\n".join(lines) + "\n")
    raise SystemExit(0)


def _join_script_state(worker, job, rank, module, restore):
    """The position's ScriptState (sketchps/_resume.py); a refused resume leaves the job first."""
    try:
        return _resume.ScriptState(job, rank, module, worker.first_round, restore)
    except ConfigError as e:
        worker.abandon(str(e)[:1000])
        raise


def _report_failure(worker, exc_type, exc):
    """Tells every server that this rank failed with `exc` (instead of finish()), best effort within
    seconds; says so on stderr when some server could not be told."""
    reason = f"{exc_type.__name__}: {exc}" if str(exc) else exc_type.__name__
    _status_write("failed", reason)
    note = worker.abandon(reason[:1000])
    if note:
        print(f"sketchps: could not tell every server that this rank failed: {note}", file=sys.stderr)


class _JobPosition:
    """Where the job stands, and leaving it, for the objects that hold a _core.Worker as
    self._worker and have finish() (DistributedOptimizer, sketchps.ddp.CommHookState)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._worker.finished:
            return False
        if exc_type is None or (exc_type is SystemExit and exc.code in (None, 0)):
            self.finish()
        else:
            # The script failed: not finish() (the servers would log this worker as having finished
            # the job) but a failure report, best effort within seconds; the exception propagates.
            self._before_failure_report()
            _report_failure(self._worker, exc_type, exc)
        return False

    def _before_failure_report(self):
        """What a subclass undoes before the failure report (nothing here)."""

    def checkpoint(self, *objects):
        """Saves these objects' state with the job (state_dict(), at every checkpoint.every_rounds
        round), so that `sketchps run --resume` restores them: your torch optimizer (the comm hook),
        LR schedulers, a GradScaler. On a resume each is loaded when passed here: pass them right after
        making them, in the same order in every run. The model's weights and buffers and the
        DistributedOptimizer's torch optimizer are saved without asking (sketchps/_resume.py)."""
        self._script.register(*objects)

    def _leave(self):
        """finish()'s leaving: a stop before the job's last round is named on stderr with its likely
        cause (`sketchps run` then fails the run: tools/run.cc), then the worker leaves the job and
        the status file says so."""
        if self.round < self.rounds:
            print(f"sketchps: rank {self._worker_rank()}: {self._early_end()}", file=sys.stderr, flush=True)
        if self._skipped:
            print(f"sketchps: rank {self._worker_rank()}: {self._skipped} round(s) sat out for a non-finite "
                  f"gradient, the first round {self._first_skipped}", file=sys.stderr, flush=True)
        self._worker.finish()
        _status_write("left", f"round {self.round} of {self.rounds}")

    def _note_round(self, stats):
        """Names, on stderr, the first round this rank sat out because its gradient was not finite
        (stats "skipped": the NaN/Inf guard, engine/scheme.h); the rounds after it are in their
        statistics, and finish() gives the count."""
        if not stats.get("skipped"):
            return
        self._skipped += 1
        if self._skipped > 1:
            return
        self._first_skipped = stats.get("round")
        print(f"sketchps: rank {self._worker_rank()}: round {stats.get('round')}: this rank's gradient was not "
              "finite (NaN or Inf), so it sat the round out and the other ranks' aggregate was applied; later such "
              "rounds are in each round's statistics (skipped) and counted at finish(). Under fp16 autocast with a "
              "GradScaler, pass it to sketchps.ddp.CommHookState(grad_scaler=...) so that every rank's scaler sees "
              "the overflow, or train in bf16 (docs/pytorch.md \"Autocast and bf16 values on the wire\")",
              file=sys.stderr, flush=True)

    _skipped = 0  # how many rounds this rank sat out for a non-finite gradient
    _first_skipped = None

    def _worker_rank(self):
        ctx = _job_context.current
        return ctx.rank if ctx is not None else "?"

    def _early_end(self):
        """Why a loop may have stopped at self.round of self.rounds (the job's plan)."""
        ran, planned, first = self.round, self.rounds, self._worker.first_round
        job = self.job
        per_epoch = int(job.rounds_per_epoch)
        causes = []
        if ran > first and (planned - first) % (ran - first) == 0 and (planned - first) // (ran - first) >= 2:
            k = (planned - first) // (ran - first)
            causes.append(f"the plan is {k}x the loop's rounds: under gradient accumulation over {k} micro-batches "
                          f"(no_sync()) one step is one round, so data.batch_size ({job.batch_size}) must be the "
                          f"samples of one step per rank: the DataLoader's batch_size x {k}")
        if first > 0:
            causes.append(f"the job was resumed at round {first}: a loop capped by len(loader) or a step count "
                          "counts from round 0; loop over the job's rounds instead")
        if self._loop_hint:
            causes.append(self._loop_hint)
        causes.append(f"data.batch_size ({job.batch_size}) other than the samples one rank uses per round, or "
                      f"data.train_samples ({job.train_samples}) other than the dataset's: the plan is "
                      f"{per_epoch} rounds per epoch")
        return (f"left the job after round {ran} of the job's {planned} planned rounds, so `sketchps run` reports "
                f"the run as failed. Likely cause: {'; or '.join(causes)}. Set train.rounds or train.epochs to "
                f"what the loop runs, or run the loop until {self._done_name}")

    _loop_hint = ""  # a cause of an early end particular to the subclass
    _done_name = "done"

    @property
    def round(self):
        """The next round to run."""
        return self._worker.next_round

    @property
    def rounds(self):
        """One past the job's last round."""
        return self._worker.last_round

    @property
    def done(self):
        return self._worker.next_round >= self._worker.last_round

    @property
    def epoch(self):
        """The fractional epoch of the next round (the learning-rate schedule's)."""
        return self._worker.epoch_of(min(self.round, self.rounds - 1))
