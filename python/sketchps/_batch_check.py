"""sketchps._batch_check: gradient accumulation against the job's data.batch_size, checked at the
position's first round, before its exchange lands (docs/pytorch.md "When the loop and the job
disagree").

A round is one step: one synchronized backward (the comm hook) or one opt.step()
(DistributedOptimizer), after any number of training forwards (grad enabled, module in training
mode), all but the last under no_sync(). data.batch_size is the samples one rank uses per round, so
under accumulation over k micro-batches it is the micro-batch times k. A job that gives the
micro-batch instead plans k times the loop's rounds (or rounds of the wrong size); the run would
only fail at its end. FirstRound counts the first round's training forwards and their samples (the
first dimension of the forward's first tensor argument) and refuses, at that round's step, more
than one forward whose samples differ from data.batch_size: ConfigError naming data.batch_size and
the value to set. Not checked: one forward per round (no accumulation: a batch other than the job's
shows as an early end), a forward without a tensor argument, and later rounds (an epoch's last
batch may be short). A model whose forward runs twice per micro-batch looks like accumulation:
forward it once per micro-batch, or set data.batch_size to the samples the step's forwards take.
With DistributedOptimizer's overlap the check needs no_sync() in the round (check(require_no_sync)):
there, accumulation without it is two backward passes in an overlapped round, which the worker
refuses by that name (the precise error, rather than a batch size that would not fix it).
"""
import torch

from sketchps.errors import ConfigError


class FirstRound:
    """The training forwards of the position's first round, checked at its step."""

    def __init__(self, batch_size):
        self.batch_size = int(batch_size)
        self.forwards = 0
        self.samples = 0
        self.open = True  # until the first round's step
        self.known = True  # every forward had a tensor argument
        self.no_sync = False  # the first round entered no_sync()

    def forward(self, inputs):
        if not self.open:
            return
        first = next((x for x in inputs if torch.is_tensor(x) and x.dim() > 0), None)
        if first is None:
            self.known = False
            return
        self.forwards += 1
        self.samples += int(first.shape[0])

    def entered_no_sync(self):
        if self.open:
            self.no_sync = True

    def check(self, require_no_sync=False):
        """At the first round's step (before its exchange lands): ConfigError when the round
        accumulated micro-batches that add up to other than data.batch_size (with require_no_sync,
        only when it entered no_sync())."""
        if not self.open:
            return
        self.open = False
        if require_no_sync and not self.no_sync:
            return
        if self.known and self.forwards > 1 and self.samples != self.batch_size:
            k, s = self.forwards, self.samples
            raise ConfigError(f"data.batch_size: the job has {self.batch_size}, but this rank's first round "
                              f"accumulated {k} forward passes (no_sync()) over {s} samples: under gradient "
                              f"accumulation one step is one round, so data.batch_size is the samples of one step "
                              f"per rank (the DataLoader's batch_size x {k}); set data.batch_size: {s}, or the "
                              "job plans rounds the loop does not run")
