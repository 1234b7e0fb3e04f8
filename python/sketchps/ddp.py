"""sketchps.ddp: a torch DistributedDataParallel model's gradient exchange through sketchps, as a DDP
communication hook (docs/pytorch.md "DDP's comm hook").

PUBLIC SURFACE: CommHookState and comm_hook, and the state's methods and properties below.

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import sketchps.ddp
    import sketchps.torch as sps

    dist.init_process_group("gloo")          # `sketchps run --script` sets MASTER_ADDR and MASTER_PORT
    sps.init()                               # the job: RANK, WORLD_SIZE, SKETCHPS_JOB, SKETCHPS_SERVERS ...
    model = DDP(Net())
    state = sketchps.ddp.CommHookState(model, scheme="topk", density=0.01)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    with state:                              # leaves the job (or reports the failure) at the end
        ...                                  # the DDP loop as it was: DataLoader, optimizer, scheduler

Design. DDP hands the hook its gradient buckets in bucket order (index 0, 1, ..., the last one
with is_last()) while backward runs, and at the end of backward waits on every bucket's future and
copies each result into the parameters' .grad, without dividing it by the world size (a hook's
result is the gradient). The state holds a sketchps._core.Worker over SHADOW tensors: detached
clones of the module's trainable parameters, their .grad views into the worker's flat gradient
buffer (the DDP model's own parameters are never re-pointed: DDP's buckets view them). The job's
optimizer.name is external, so the round writes the aggregate G_t (the workers' mean for the dense
scheme) into that gradient buffer instead of updating weights.

With overlap (the default), the first bucket of a backward copies the model's weights into the
shadows (the weights the round starts from: the records' checksums) and starts the round in flight
(Worker.start_round); each bucket's gradients are copied into the shadows' .grad and marked complete
(Worker.ready), so every shard whose gradients are then all in starts its exchange while backward
goes on with earlier layers, as DDP's own all-reduce of a bucket does. The last bucket lands the
round (Worker.step) and completes every pending future with G_t laid out as that bucket's buffer.
Without overlap the last bucket runs the whole round. Either way the script's optimizer then steps on
G_t, the same on every rank, so the replicas stay bitwise equal, and the result is the same bitwise
(tests/python). A backward that stops before DDP's last bucket (an exception in it) leaves its
exchange half sent: the state refuses further rounds. Buffers (BatchNorm's running statistics) are
DDP's: broadcast_buffers (the default) broadcasts rank 0's over the process group at the start of
every forward.
"""
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from sketchps import _batch_check, _core, _flat, _job_context
from sketchps._position import _describe, _join_script_state, _JobPosition
from sketchps._settings import _check_equal, _check_no_schedule, _check_whole_replica
from sketchps.errors import ConfigError, OrderError

__all__ = ["CommHookState", "comm_hook"]


class _Pending:
    """A bucket of the running backward: its future, buffer, gradient views and their shadows."""

    __slots__ = ("index", "future", "buffer", "grads", "slots")

    def __init__(self, index, future, buffer, grads, slots):
        self.index, self.future, self.buffer, self.grads, self.slots = index, future, buffer, grads, slots


class CommHookState(_JobPosition):
    """The state of sketchps.ddp.comm_hook: this rank's place in the job, for one DDP model.

        state = sketchps.ddp.CommHookState(ddp_model, scheme=None, density=None)
        ddp_model.register_comm_hook(state, sketchps.ddp.comm_hook)

    Make it after sketchps.torch.init() and DDP(model). scheme / density: the method and its
    density (None: the job's); any scheme without momentum of its own (not DGC, SDAGC or
    Sketched-SGD: the script's optimizer applies momentum). overlap (default True): each shard's
    exchange starts as soon as DDP has handed over the buckets that complete it, during backward;
    False runs the round at the last bucket. The script's optimizer applies the update with its own
    learning rate: a job with a learning-rate schedule (optimizer.schedule, warmup, milestones,
    min_lr) is a ConfigError, as sketchps would not apply it, unless job_schedule=True says that the
    script sets its optimizer's lr from the job's schedule itself (bench/e2e's workloads do). Every
    backward that DDP synchronizes is one round of the job (train.rounds, or train.epochs of
    data.train_samples); one past the last is an OrderError. Under accumulation (no_sync())
    data.batch_size is one step's samples per rank, which the first round checks
    (sketchps/_batch_check.py).

    grad_scaler: the torch GradScaler of an fp16 script (scaler.scale(loss).backward(), then
    scaler.step(optimizer)). With an enabled one, a round in which any rank's gradient overflowed
    (was not finite, so that rank sat the round out) hands every rank a gradient of Inf. Every rank's
    scaler then skips the step and backs off, as under DDP's all-reduce of an Inf. This costs one
    all-reduce of a flag over the DDP process group per round. Without it, an overflowing rank's
    gradient is only left out, and the other ranks' scalers never see it.

    Local steps (train.local_steps, a nesterov train.outer_optimizer) are a ConfigError: the hook
    exchanges every synchronized backward; DistributedOptimizer runs them.

    Resume: state.checkpoint(optimizer, scheduler, ...) saves their state with the job, beside the
    module's parameters and buffers (sketchps/_resume.py); on a --resume'd job the state loads the
    module's at creation and each object when passed, and the loop starts at state.round.

    In the describe pass of `sketchps run --script` (SKETCHPS_DESCRIBE) it writes the job keys the
    script defines: the module's trainable layout (model: custom, layers), optimizer.name external
    (the other optimizer keys and optimizer.lr cleared, unless job_schedule) and the scheme and
    density given here, then exits 0.
    """

    def __init__(self, ddp_model, scheme=None, density=None, overlap=True, job_schedule=False, grad_scaler=None):
        ctx = _job_context.current
        if ctx is None:
            raise OrderError("CommHookState: call sketchps.torch.init() first")
        _check_whole_replica(ddp_model, "CommHookState")
        if not isinstance(ddp_model, DistributedDataParallel):
            raise ConfigError(f"CommHookState: ddp_model is a {type(ddp_model).__name__}, not a torch "
                              "DistributedDataParallel (make the state for DDP(model), then "
                              "ddp_model.register_comm_hook(state, sketchps.ddp.comm_hook))")
        module = ddp_model.module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ConfigError("model: no trainable parameter (every parameter has requires_grad == False)")
        job = ctx.job
        if job.has_local_steps:  # before the describe pass: `sketchps run` stops before starting anything
            raise ConfigError(f"train.local_steps: the job has {job.local_steps} (outer optimizer "
                              f"{job.outer_optimizer}), but the DDP comm hook exchanges each backward's gradient "
                              "bucket by bucket and cannot take inner steps between rounds: use "
                              "sketchps.torch.DistributedOptimizer, which runs local steps with your torch "
                              "optimizer (apply=\"torch\") or the job's, or set train.local_steps: 1 and "
                              "train.outer_optimizer.name: average")
        # optimizer.name external: the script's optimizer applies the aggregate (lr: the job's, unused).
        settings = {"name": "external", "lr": float(job.lr), "weight_decay": 0.0, "no_decay": [],
                    "job_schedule": bool(job_schedule)}
        if not job_schedule:
            _check_no_schedule(job, "the DDP comm hook")
        if ctx.describe:
            _describe(ctx, named, settings, scheme, density)  # writes the keys and exits 0
        if job.optimizer != "external":
            raise ConfigError(f"optimizer.name: the job has {job.optimizer}; the DDP comm hook needs external (the "
                              "script's torch optimizer applies the aggregated gradient; `sketchps run --script` "
                              "sets it)")
        _check_equal("scheme.name", job.scheme, scheme if scheme is not None else job.scheme, "CommHookState")
        _check_equal("scheme.density", job.density, float(density) if density is not None else job.density,
                          "CommHookState")
        group = ddp_model.process_group
        if group.size() != job.workers or group.rank() != ctx.rank:
            raise ConfigError(f"CommHookState: the DDP model's process group is rank {group.rank()} of "
                              f"{group.size()}, the job's worker is rank {ctx.rank} of {job.workers} "
                              "(init_process_group and sketchps.torch.init must read the same RANK and WORLD_SIZE)")
        if grad_scaler is not None and not callable(getattr(grad_scaler, "is_enabled", None)):
            raise ConfigError(f"CommHookState: grad_scaler is a {type(grad_scaler).__name__}, not a torch GradScaler "
                              "(it has no is_enabled())")
        self.model = ddp_model
        self.job = job
        self._scaler = grad_scaler
        self._group = group
        self._params = [p for _, p in named]
        self._names = [n for n, _ in named]
        self._slot = {id(p): i for i, p in enumerate(self._params)}
        with torch.no_grad():
            self._shadows = [p.detach().clone().requires_grad_(True) for p in self._params]
        self._overlap = bool(overlap)
        self._flat = _flat.FlatModel(list(zip(self._names, self._shadows)))  # the shadows and .grad: views
        self._worker = _core.Worker(job, ctx.config, self._flat.layout, **self._flat.worker_buffers(), buffers=[],
                                    overlap=self._overlap)
        # The script's weights, buffers, optimizer and schedulers (checkpoint()): sketchps/_resume.py.
        self._script = _join_script_state(self._worker, job, ctx.rank, module, "model")
        self._batches = _batch_check.FirstRound(job.batch_size)  # accumulation against data.batch_size
        self._pending = []
        self._loss = None
        self._compute_start = None
        self._failure = None  # why the last round failed: later backward passes refuse to go on
        self.last_stats = None
        self._forward_hook = ddp_model.register_forward_pre_hook(self._forward_starts)
        ctx.position = self  # left at exit when the script does not (sketchps.torch._at_exit)

    _done_name = "state.done"
    _loop_hint = ("every backward DDP synchronizes is one round, and the plan counts data.batch_size samples per "
                  "rank per round (torch's DistributedSampler pads each rank to ceil(len(dataset) / workers))")

    # --- the hook's work ------------------------------------------------------------------------
    def _forward_starts(self, module, inputs):
        """The round's compute clock starts at the first training forward after the previous round."""
        if torch.is_grad_enabled() and self._compute_start is None:
            self._compute_start = time.monotonic()
        if module.training and torch.is_grad_enabled():
            self._batches.forward(inputs)
            self._script.at_forward(self.round)  # the script's state of a checkpoint round, or a resume's RNG

    def _usable(self, call):
        if self._worker.finished:
            raise OrderError(f"{call}: called after the state left the job (finish() or the end of `with state:`)")
        if self._failure is not None:
            raise OrderError(f"{call}: an earlier round failed ({self._failure}); the job cannot go on")

    def _on_bucket(self, bucket):
        self._usable("comm_hook")
        if self.done:
            raise OrderError(f"comm_hook: the job's {self.rounds} rounds are done, and this backward would be one more "
                             "(every backward DDP synchronizes is a round: set train.rounds, or train.epochs, to the "
                             "loop's, or stop when state.done)")
        index = bucket.index()
        if self._pending and index <= self._pending[-1].index:
            self._incomplete_backward()
        if not self._pending:
            self._batches.check()
            self._round_starts()
        grads = bucket.gradients()
        slots = []
        for p, g in zip(bucket.parameters(), grads):
            i = self._slot.get(id(p))
            if i is None:
                raise ConfigError(f"comm_hook: bucket {index} holds a parameter of shape {list(p.shape)} that is not a "
                                  "trainable parameter of the state's model (register the hook on the DDP model the "
                                  "CommHookState was made for)")
            self._shadows[i].grad.copy_(g.view_as(self._shadows[i]))
            slots.append(i)
        future = torch.futures.Future()
        self._pending.append(_Pending(index, future, bucket.buffer(), grads, slots))
        if self._overlap:
            _flat.torch_work_done(self._flat.device)  # the copies above, before the core reads them
            self._worker.ready(slots)  # the shards these complete start their exchange now
        if bucket.is_last():
            self._round()
        return future

    def _round_starts(self):
        """The first bucket of a backward: the weights the round starts from (the previous round's
        record checksums them; backward does not change them), and with overlap the round in flight."""
        with torch.no_grad():
            for p, s in zip(self._params, self._shadows):
                s.copy_(p)
        if self._overlap:  # the record's compute_s counts from the round's first training forward
            started = self._compute_start
            self._worker.start_round(time.monotonic() - started if started is not None else 0.0)
            self._flat.zero_grad()

    def _incomplete_backward(self):
        why = "the previous backward did not reach DDP's last bucket"
        if self._overlap:  # its shards' exchange started with part of the gradients: no way back
            self._drop_pending(why)
            self._failure = f"{why}, and its exchange was already in flight"
            raise OrderError(f"comm_hook: {self._failure}; the job cannot go on")
        self._drop_pending(why)

    def _drop_pending(self, why):
        for p in self._pending:
            if not p.future.done():
                p.future.set_exception(OrderError(f"comm_hook: {why}"))
        self._pending = []

    def _round(self):
        pending, self._pending = self._pending, []
        covered = sorted(i for p in pending for i in p.slots)
        if covered != list(range(len(self._params))):
            missing = sorted(set(range(len(self._params))) - set(covered))
            error = ConfigError(f"comm_hook: DDP's buckets of this backward did not hold each trainable parameter once"
                                f"{' (missing ' + repr(self._names[missing[0]]) + ')' if missing else ''}; "
                                "parameters DDP ignores cannot be trained through the hook")
            for p in pending:
                p.future.set_exception(error)
            self._failure = str(error)
            raise error
        loss = float(self._loss) if self._loss is not None else float("nan")
        compute = time.monotonic() - self._compute_start if self._compute_start is not None else 0.0
        self._loss, self._compute_start = None, None
        try:
            _flat.torch_work_done(self._flat.device)
            self.last_stats = json.loads(self._worker.step(loss, compute))
            scaling = self._scaler is not None and self._scaler.is_enabled()
            overflow = scaling and self._any_rank_overflowed(pending[0].buffer.device)
            if not scaling:  # a scaler's overflows are routine: they are not named
                self._note_round(self.last_stats)
        except BaseException as e:
            self._failure = f"{type(e).__name__}: {e}"
            for p in pending:
                p.future.set_exception(e)
            raise
        for p in pending:  # the aggregate G_t, laid out as each bucket's buffer (Inf: an overflow, above)
            for i, g in zip(p.slots, p.grads):
                if overflow:
                    g.fill_(float("inf"))
                else:
                    g.copy_(self._shadows[i].grad.view_as(g))
            p.future.set_result(p.buffer)

    def _any_rank_overflowed(self, device):
        """Whether any rank sat this round out for a non-finite gradient: one all-reduce of a flag on
        the buckets' device, which DDP's group serves."""
        flag = torch.tensor([1.0 if self.last_stats.get("skipped") else 0.0], device=device)
        dist.all_reduce(flag, group=self._group)
        return flag.item() > 0

    # --- what the script may call --------------------------------------------------------------
    def record_loss(self, loss):
        """The loss of the next round (a number or tensor), recorded with its statistics (the "loss"
        of metrics.jsonl and of sketchps run's progress line). Optional; call it before backward."""
        self._loss = float(loss)

    def evaluate(self, correct, samples, loss_sum, final=False, seconds=0.0):
        """Sums this rank's evaluation counts over every worker and records them with the last round
        (as DistributedOptimizer.evaluate; every rank calls it after the same round). Returns
        {"accuracy", "loss", "samples"} of the whole evaluation. sketchps records nothing unless asked."""
        return json.loads(self._worker.evaluate(float(correct), float(samples), float(loss_sum), float(seconds),
                                                bool(final)))

    def finish(self):
        """Writes the last record and leaves the job (the servers exit once every worker has). A loop
        that stopped before the job's last round is named on stderr with its likely cause, and
        `sketchps run` fails such a run (the job planned more rounds than the loop ran)."""
        if self._worker.finished:
            return
        self._sync_shadows()
        self._forward_hook.remove()
        self._leave()

    def _sync_shadows(self):
        with torch.no_grad():
            for p, s in zip(self._params, self._shadows):
                s.copy_(p)  # the last record's checksum: the weights after the script's last update
        _flat.torch_work_done(self._flat.device)

    def _before_failure_report(self):
        # Leaving `with state:` on an exception (sketchps._position._JobPosition.__exit__).
        self._drop_pending("the script failed")
        self._sync_shadows()
        self._forward_hook.remove()

    # --- where the job stands (round, rounds, done, epoch: sketchps._position._JobPosition) --------
    @property
    def finished(self):
        return self._worker.finished


def comm_hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(state, sketchps.ddp.comm_hook) with a
    CommHookState. Returns a future of the bucket's aggregated gradient: with overlap the shards
    this bucket completes start their exchange now; the round lands when DDP hands over its last
    bucket, which completes every bucket's future."""
    if not isinstance(state, CommHookState):
        raise OrderError(f"comm_hook: the state is {type(state).__name__}, not a sketchps.ddp.CommHookState (after "
                         "sketchps.torch.init() and DDP(model): model.register_comm_hook("
                         "sketchps.ddp.CommHookState(model), sketchps.ddp.comm_hook))")
    return state._on_bucket(bucket)
