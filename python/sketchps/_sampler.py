"""sketchps._sampler: DistributedSampler, this rank's sample indices in the job's data order for a
torch DataLoader (its contract: the class docstring below; docs/pytorch.md). Public through
sketchps.torch.
"""
import torch

from sketchps import _job_context
from sketchps.errors import ConfigError, OrderError


class DistributedSampler(torch.utils.data.Sampler):
    """This rank's sample indices in the job's data order, for a torch DataLoader whose batches are
    then the job's rounds:

        ctx = sps.init()
        sampler = sps.DistributedSampler(dataset)   # before DistributedOptimizer (data.train_samples)
        loader = DataLoader(dataset, batch_size=ctx.job.batch_size, sampler=sampler)
        opt = sps.DistributedOptimizer(...)
        for epoch in range(opt.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:                      # one batch per round: zero_grad, backward, step

    Design: the indices are the DistributedOptimizer's own. Epoch e yields, round after round,
    opt.batch_indices(r) for the job's rounds r of data epoch e: e*S <= r < (e+1)*S with
    S = rounds_per_epoch = floor(train_samples / (batch_size * workers)), cut at the job's last
    round, without the rounds already run (a --resume'd job starts later). Each round gives
    data.batch_size indices, so a DataLoader with batch_size = data.batch_size makes one batch per
    round, and every batch holds exactly the samples opt.batch_indices gives for it (the C++ data
    order rule, worker/fashion_mnist.h: a new permutation of train.seed each epoch, the last
    train_samples mod (batch_size * workers) positions dropped). The sampler draws them from the
    optimizer lazily: DistributedOptimizer registers itself with init()'s context, and iterating
    before it exists is an OrderError.

    data.train_samples is the script's: in the describe pass of `sketchps run --script`, a sampler
    made before DistributedOptimizer sets data.train_samples = len(dataset) unless the job sets it.
    A job value larger than len(dataset) is a ConfigError naming both; a smaller one trains on the
    first data.train_samples samples of the dataset. Outside the describe pass, a job that leaves
    the key at its default must have exactly len(dataset) samples.

    The loop must step once per batch: iterating again checks that the previous epoch ran one
    round per batch (an OrderError names a DataLoader batch_size other than data.batch_size or a
    forgotten set_epoch). A decentralized regroup moves the rounds back (step() returns
    redo_from), which a DataLoader epoch cannot follow: with peer.on_failure regroup, use the
    opt.batch_indices() loop. For evaluation, split the test set with sketchps.data.share. With
    train.local_steps H a round is H batches, one per step() (each inner step's).
    """

    def __init__(self, dataset):
        ctx = _job_context.current
        if ctx is None:
            raise OrderError("DistributedSampler: call sketchps.torch.init() first")
        # No super().__init__: torch's Sampler.__init__ did nothing and took the dataset until 2.9;
        # from 2.10 on it takes no argument (pytorch/pytorch#163134), so neither call fits both.
        n = len(dataset)
        job = ctx.job
        sets = job.train_samples_set
        if ctx.describe and not sets:
            if ctx.train_samples is not None and ctx.train_samples != n:
                raise ConfigError(f"DistributedSampler: made for datasets of {ctx.train_samples} and {n} samples "
                                  "(one, for the training set; evaluate with sketchps.data.share)")
            if n < job.workers * job.batch_size:
                raise ConfigError(f"data.train_samples: the dataset's {n} samples are fewer than one global batch "
                                  f"(workers {job.workers} * data.batch_size {job.batch_size})")
            ctx.train_samples = n  # the describe pass writes data.train_samples=n
        elif job.train_samples > n:
            raise ConfigError(f"data.train_samples: the job has {job.train_samples}"
                              f"{'' if sets else ' (the default)'}, the dataset (len(dataset)) {n} samples; set it "
                              "to at most len(dataset), or leave it out and `sketchps run --script` takes "
                              "len(dataset)")
        elif not sets and job.train_samples != n:
            raise ConfigError(f"data.train_samples: not set by the job (default {job.train_samples}), the dataset "
                              f"has {n} samples; set it (`sketchps run --script` sets it from a DistributedSampler "
                              "made before DistributedOptimizer)")
        ctx.sampler_made = True
        self._ctx = ctx
        self.dataset = dataset
        self.epoch = 0
        self._next = None  # the round the previous iteration's batches end at
        self._last_epoch = None  # the last epoch whose iteration yielded rounds

    @property
    def batch_size(self):
        """The job's data.batch_size: the DataLoader's batch_size."""
        return self._ctx.job.batch_size

    def set_epoch(self, epoch):
        """Which data epoch the next iteration yields (call it before each epoch, as with torch's)."""
        self.epoch = int(epoch)

    def _rounds(self, opt):
        job = self._ctx.job
        per = int(job.rounds_per_epoch)
        first, last = self.epoch * per, job.total_rounds
        if opt is not None:  # from the next round on (rounds run before, e.g. of a resumed job, are skipped)
            first, last = max(first, opt.round), opt.rounds
        return range(first, min((self.epoch + 1) * per, last))

    def __len__(self):
        job = self._ctx.job
        return len(self._rounds(self._ctx.optimizer)) * job.batch_size * job.local_steps

    def __iter__(self):
        opt = self._ctx.optimizer
        if opt is None:
            raise OrderError("DistributedSampler: iterated before the DistributedOptimizer was made (the sampler "
                             "yields its batch_indices; make the optimizer before the training loop)")
        rounds = self._rounds(opt)
        if self._next is not None and opt.round != self._next:
            why = ("the job regrouped (step() returned redo_from), which a DataLoader epoch cannot follow: use "
                   "the opt.batch_indices() loop with peer.on_failure regroup" if opt._regroups else
                   f"one opt.step() per batch, and the DataLoader's batch_size must be data.batch_size "
                   f"({self.batch_size})")
            raise OrderError(f"DistributedSampler: the previous epoch's batches ended at round {self._next}, but the "
                             f"job is at round {opt.round}: {why}")
        if not rounds and self._last_epoch is not None and self.epoch <= self._last_epoch and not opt.done:
            raise OrderError(f"DistributedSampler: epoch {self.epoch} was already iterated (the job is at round "
                             f"{opt.round}); call sampler.set_epoch(epoch) before each epoch")
        self._next = rounds.stop if rounds else opt.round
        if rounds:
            self._last_epoch = self.epoch
        return self._indices(opt, rounds)

    @staticmethod
    def _indices(opt, rounds):
        for r in rounds:
            for step in range(opt.job.local_steps):  # train.local_steps: a batch per inner step
                yield from opt._worker.batch_indices(r, step)
