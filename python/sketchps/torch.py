"""sketchps.torch: compressed data-parallel training of your own torch.nn.Module (docs/pytorch.md).

PUBLIC SURFACE: init(), DistributedOptimizer and DistributedSampler and their methods and
properties below, and the exceptions of sketchps.errors are the package's API
(docs/design-notes.md "Public surfaces"); names starting with _ and sketchps._core are not.

    import sketchps.torch as sps
    sps.init()                                  # RANK, WORLD_SIZE, SKETCHPS_* (or arguments)
    model = Net()                               # built after init(): the same weights on every rank
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
                                   scheme="gs_sgd", density=0.01)
    while not opt.done:
        idx = opt.batch_indices()               # this rank's samples of the round (the job's data order)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        stats = opt.step(loss=loss)             # the round: compress, exchange, apply; its statistics
    opt.finish()

or, keeping a torch DataLoader loop (DistributedSampler: its batches are the rounds):

    sampler = sps.DistributedSampler(dataset)   # before DistributedOptimizer: data.train_samples = len(dataset)
    loader = DataLoader(dataset, batch_size=ctx.job.batch_size, sampler=sampler)
    ...
    for epoch in range(opt.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step(loss=loss)
    opt.finish()

The round itself (schemes, parameter-server client, peer collectives, the replicated SGD, Adam or
AdamW with the job's learning-rate schedule) is the C++ core's, on views of the model's own tensors: the model's
trainable parameters and their .grad are re-pointed into two flat buffers once, and nothing is copied
per round. The torch optimizer only declares the hyperparameters; they must equal the job's.

This module is the facade (init() and the exit handling); the rest lives in private modules, each
with its contract: _job_context (what init() found), _optimizer (DistributedOptimizer), _sampler
(DistributedSampler), _settings (the torch optimizer against the job), _buffers (broadcast_buffers),
_position (round, finish, the describe pass, the failure report), _resume (the script's state for
--resume), _batch_check (accumulation against data.batch_size), _status (the status file).
"""
import atexit
import sys

import torch

from sketchps import _core, _job_context
from sketchps._job_context import Context, _config, _env, _rank
from sketchps._optimizer import DistributedOptimizer
from sketchps._position import _report_failure
from sketchps._sampler import DistributedSampler
from sketchps._status import _status_open, _status_write
from sketchps.errors import ConfigError, OrderError

__all__ = ["init", "Context", "DistributedOptimizer", "DistributedSampler"]


_at_exit_registered = False


def _register_at_exit():
    global _at_exit_registered
    if not _at_exit_registered:
        _at_exit_registered = True
        atexit.register(_at_exit)


def _at_exit():
    """At interpreter exit: a job position the script did not leave is left here, finish() when
    every round ran (a forgotten finish()), else a failure report naming why (an uncaught exception,
    or the script ended early without finish()), so that neither the servers nor the launcher wait
    for this rank; an uncaught exception is written to the status file."""
    exc = getattr(sys, "last_value", None)
    ctx = _job_context.current
    position = ctx.position if ctx is not None else None
    if position is not None and not position._worker.finished:
        if exc is None and position.done:
            print(f"sketchps: rank {ctx.rank}: the script ended without finish() (or `with opt:`/`with state:`); "
                  "leaving the job at exit", file=sys.stderr, flush=True)
            position.finish()
            return
        if exc is None:
            exc = OrderError(f"the script ended after round {position.round} of the job's {position.rounds} "
                             "rounds without finish() (or `with opt:`/`with state:`)")
        print(f"sketchps: rank {ctx.rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        position._before_failure_report()
        _report_failure(position._worker, type(exc), exc)
    elif exc is not None:
        _status_write("failed", f"{type(exc).__name__}: {exc}")


def init(job=None, overrides=()):
    """Reads the job and this process's place in it; seeds torch with the job's train.seed, so a
    model built afterwards starts with the same weights on every rank.

    job: a job spec file (default: $SKETCHPS_JOB); overrides: "key=value" strings as --set takes.
    Environment: RANK (or JOB_COMPLETION_INDEX), WORLD_SIZE (must equal the job's workers);
    ps mode SKETCHPS_SERVERS; decentralized mode SKETCHPS_LISTEN and SKETCHPS_PEERS (or
    SKETCHPS_PEERS_FILE); SKETCHPS_TLS_DIR or SKETCHPS_INSECURE=1; optional SKETCHPS_METRICS_OUT
    ({rank}: the rank) and SKETCHPS_SET (overrides, ";"-separated).
    Raises ConfigError naming the variable or key."""
    _status_open()
    if not _env("SKETCHPS_DESCRIBE"):
        _register_at_exit()
    path = job if job is not None else _env("SKETCHPS_JOB")
    if not path:
        raise ConfigError("SKETCHPS_JOB: no job spec (pass init(job=...) or set SKETCHPS_JOB)")
    # SKETCHPS_SET: "key=value" overrides separated by ';', applied before `overrides` (a launcher's
    # --set for scripts, e.g. the Kubernetes overlay's workers/servers from sketchps-scale).
    from_env = [kv.strip() for kv in _env("SKETCHPS_SET").split(";") if kv.strip()]
    spec = _core.load_job(path, from_env + list(overrides))
    describe = _env("SKETCHPS_DESCRIBE")
    rank = _rank() if not describe else 0
    world = _core.env_uint32("WORLD_SIZE")
    if world is not None and world != spec.workers and not describe:  # the describe pass runs as a world of one
        raise ConfigError(f"WORLD_SIZE: {world} disagrees with the job's workers: {spec.workers}")
    if rank >= spec.workers:
        raise ConfigError(f"RANK: {rank} is not in [0, workers = {spec.workers})")
    config = _config(spec, rank) if not describe else _core.WorkerConfig()
    torch.manual_seed(spec.seed)
    _job_context.current = Context(spec, config, describe)
    return _job_context.current
