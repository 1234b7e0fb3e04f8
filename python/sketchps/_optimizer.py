"""sketchps._optimizer: DistributedOptimizer, the user's torch optimizer turned into compressed
data-parallel training over the job (its contract: the class docstring below; docs/pytorch.md
"The API"). Public through sketchps.torch.
"""
import contextlib
import json
import math
import time

import torch
import torch.distributed as dist

from sketchps import _batch_check, _core, _flat, _job_context
from sketchps._buffers import _BufferBroadcast, _buffer_group, _check_buffers
from sketchps._position import _describe, _join_script_state, _JobPosition
from sketchps._settings import (_applies, _check_equal, _check_no_schedule, _check_optimizer, _check_same_parameters,
                                _check_same_settings, _check_unwrapped, _external_settings, _optimizer_settings,
                                _trainable)
from sketchps.errors import ConfigError, OrderError


class DistributedOptimizer(_JobPosition, torch.optim.Optimizer):
    """The user's torch optimizer turned into compressed data-parallel training over the job.

    scheme / density: the method (scheme.name) and its density; None takes the job's.

    apply: who applies the update to the round's aggregated gradient G_t.
      "sketchps": the replicated SGD, Adam or AdamW in C++ on every worker and on the servers'
        master copy (so a worker or shard that restarts rejoins with the weights and the optimizer
        state). The optimizer's settings must equal the job's optimizer section: name, lr, momentum
        and nesterov (SGD) or betas and eps (Adam, AdamW), weight_decay, and no_decay (the
        parameters of param groups whose weight_decay is 0, e.g. biases and norms); the job's
        learning-rate schedule applies and changing a group's lr is an error.
      "torch": Horovod-style: step() writes G_t into every .grad and calls your optimizer's step(),
        so any torch.optim.Optimizer and any LR scheduler work, and every rank applies the same
        update to the same gradient (the job's optimizer.name is external; the servers hold G_t, not
        weights, and a worker restarted alone cannot rejoin a running job, while a whole job
        resumes from the script's state: sketchps/_resume.py; schemes with their own momentum, DGC,
        SDAGC and Sketched-SGD, are refused, as is peer.on_failure regroup).
      "auto" (default): "sketchps" for torch's SGD, Adam and AdamW, "torch" for any other.

    Creating it joins the job: afterwards the model's trainable parameters hold the servers' weights
    (parameter-server mode) and are views into one flat buffer, as is each .grad; frozen parameters
    (requires_grad False) are left out.

    broadcast_buffers (default True, as DDP's): the model's buffers (BatchNorm's running statistics)
    are not in the job; rank 0's are broadcast to every rank over a torch.distributed gloo process
    group once when the optimizer is made and at the end of every step(), so every rank's next
    forward starts from rank 0's buffers, as it does under DDP (which broadcasts at the start of
    the forward that follows a synchronized one). The group is the default one when the script made
    it (its size and rank must be the job's), else DistributedOptimizer makes it with
    init_process_group("gloo") from MASTER_ADDR and MASTER_PORT (`sketchps run --script` and
    torchrun set them) and destroys it in finish(). Refused (ConfigError, before the describe pass
    writes anything): no MASTER_ADDR/MASTER_PORT and no group; decentralized mode with
    peer.on_failure regroup (the group cannot follow a regroup). A --resume'd job restores every
    rank's buffers from its script state (sketchps/_resume.py) before the first broadcast; a worker
    restarted alone into a running job has no script state of its round: ConfigError naming the
    file, after telling the job it failed. broadcast_buffers=False:
    each rank keeps its own buffers (its own statistics), so the replicas' buffers differ; evaluate
    with rank 0's (or save rank 0's model).

    overlap (default True): zero_grad() starts the round, and during backward each shard's exchange
    starts as soon as its gradients are complete (as DDP's buckets do); step() waits for them.
    Gradient accumulation: the backward passes inside no_sync() only accumulate (or, without
    no_sync(), pass overlap=False); data.batch_size is then one step's samples per rank, which the
    first round checks (sketchps/_batch_check.py). checkpoint(*objects): your LR schedulers (the
    torch optimizer is saved already) are saved with the job and restored on --resume.
    clip_grad_norm (default None): clips the round's aggregated gradient to this L2 norm before the
    torch optimizer steps, as DDP with torch.nn.utils.clip_grad_norm_ between backward and step does
    (the same on every rank). Needs apply="torch" ("auto" picks it; "sketchps" is a ConfigError).
    Calling clip_grad_norm_ (or changing .grad in place) between backward and step() with overlap is
    an OrderError at step(): the exchange started during backward and would not see it.
    Local steps (train.local_steps: H, train.outer_optimizer; docs/methods.md "Local steps"): each
    step() is one inner step and every H-th ends the round. With apply="sketchps" the job's optimizer
    takes the inner steps (its state afresh every round), as sketchps-worker does, bit for bit; with
    apply="torch" your torch optimizer takes them on your gradients (its state kept across rounds,
    DiLoCo's recipe; clip_grad_norm clips each inner step's gradient). The H-th step then exchanges
    the pseudo-gradient w0 - w_H through the scheme, and every replica applies the round's aggregate
    to the round's start w0 with the outer optimizer (sketchps's, also under apply="torch"). Inner
    steps return {"round", "local_step", "local_steps", "loss"}; the H-th the round's statistics
    (loss: the inner steps' mean). overlap does nothing (the exchange follows the last inner step);
    batch_indices() and DistributedSampler give each inner step's batch.
    Decentralized mode with peer.on_failure regroup: when a peer is lost, step() returns
    {"regroup": ..., "redo_from": round}: the survivors rolled the model back to that round and the
    loop goes on from it (opt.round and opt.batch_indices() follow).
    """

    _own_group = False  # whether finish() destroys a process group made for the buffers
    _flat = None  # the flat buffers (sketchps/_flat.py), once made
    _done_name = "opt.done"

    @property
    def _loop_hint(self):
        ctx = _job_context.current
        if ctx is not None and ctx.sampler_made:
            return ""
        return ("a DataLoader over torch's DistributedSampler, whose batches are not the job's rounds (it gives "
                "each rank ceil(len(dataset) / workers) samples): use sketchps.torch.DistributedSampler")

    def __init__(self, optimizer, model, scheme=None, density=None, overlap=True, apply="auto",
                 broadcast_buffers=True, clip_grad_norm=None):
        ctx = _job_context.current
        if ctx is None:
            raise OrderError("DistributedOptimizer: call sketchps.torch.init() first")
        _check_unwrapped(model)
        self._apply = _applies(optimizer, apply, clip_grad_norm)
        self._clip = float(clip_grad_norm) if clip_grad_norm is not None else None
        settings = _optimizer_settings(optimizer, model) if self._apply == "sketchps" else _external_settings(optimizer)
        if self._apply == "torch":
            _check_no_schedule(ctx.job, "DistributedOptimizer(apply=\"torch\")")
        named = _trainable(model, optimizer)
        buffers = _check_buffers(ctx, model, broadcast_buffers)
        if ctx.describe:  # no process group: a world of one has nothing to broadcast
            _describe(ctx, named, settings, scheme, density)
        job = ctx.job
        _check_equal("scheme.name", job.scheme, scheme if scheme is not None else job.scheme, "DistributedOptimizer")
        _check_equal("scheme.density", job.density, float(density) if density is not None else job.density,
                     "DistributedOptimizer")
        _check_optimizer(job, settings)
        self.optimizer = optimizer
        self.model = model
        self.job = job
        self._settings = settings
        self._group_ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        self._local = bool(job.has_local_steps)  # each step() an inner step (class docstring)
        overlap = overlap and not self._local  # the exchange starts after the last inner step
        self._overlap = overlap
        # The trainable parameters and their .grad become views into two flat buffers on the model's
        # device; the core gets their addresses. The buffers are not the core's (it would refuse
        # them): broadcast below, or left local.
        self._named = named
        self._flat = _flat.FlatModel(named)
        self._worker = _core.Worker(job, ctx.config, self._flat.layout, **self._flat.worker_buffers(), buffers=[],
                                    overlap=overlap)
        self._hooks = _flat.GradientHooks(self._flat, self._worker) if overlap else None
        self._broadcast = None
        self._own_group = False
        # The script's state (sketchps/_resume.py): with apply="torch" the weights and the torch
        # optimizer are the script's; the buffers are in no checkpoint of the servers.
        # broadcast_buffers=False: a worker restarted alone rejoins without them, as before. Without
        # buffers the file still holds the RNG states and the checkpoint()ed objects: read when saved.
        restore = "model" if self._apply == "torch" else "buffers" if buffers else "buffers-if-saved"
        self._script = _join_script_state(self._worker, job, ctx.rank, model, restore)
        self._script.register(optimizer)
        if buffers:
            group, self._own_group = _buffer_group(ctx)
            self._broadcast = _BufferBroadcast(model, buffers, group, ctx.rank)
            self._broadcast()  # rank 0's initial buffers, as DDP's constructor broadcasts them
        self._compute_start = None
        self._batches = _batch_check.FirstRound(job.batch_size)  # accumulation against data.batch_size
        self._forward_hook = model.register_forward_pre_hook(self._forward_starts)
        self._regroups = 0
        self.last_stats = None
        ctx.optimizer = self  # a DistributedSampler's batches are this optimizer's batch_indices
        ctx.position = self

    # --- the round ---------------------------------------------------------------------------
    def _forward_starts(self, module, inputs):
        if module.training and torch.is_grad_enabled():
            self._batches.forward(inputs)
            self._script.at_forward(self.round)  # the script's state of a checkpoint round, or a resume's RNG

    def zero_grad(self, set_to_none=False):
        """Zeroes every .grad in place (they stay views into the gradient buffer; set_to_none is
        ignored: a None .grad would leave the buffer, and a .grad the model's or the torch optimizer's
        zero_grad(set_to_none=True) set to None is a view again). Starts the round's compute clock."""
        self._compute_start = time.monotonic()
        self._worker.start_round()
        self._flat.zero_grad()

    # torch's GradScaler hands itself to step() (grad_scaler=) instead of stepping this optimizer on
    # its own terms, so that loss scaling is refused by name (step()).
    _step_supports_amp_scaling = True

    def step(self, closure=None, loss=None, grad_scaler=None):
        """Runs one round with the gradients in the .grad tensors: compression, exchange, the
        replicated SGD update written into the parameters. Returns the round's statistics (a dict:
        round, epoch, loss, bytes_up, bytes_down (the serialized messages, as summary.json counts them;
        the payload arrays inside them: payload_up, payload_down), dense_bytes, selected, compute_s, exchange_s,
        compress_s, communicate_s, checksum, ...). loss (a number or tensor) is recorded. With
        broadcast_buffers, rank 0's buffers are then broadcast to every rank (one call).

        grad_scaler is set only by an enabled torch GradScaler's step(): a ConfigError, since the
        gradients leave for the exchange scaled, during backward, before the scaler could unscale
        them or skip an overflowing step (docs/pytorch.md "Autocast and bf16 values on the wire")."""
        if grad_scaler is not None or getattr(self, "grad_scale", None) is not None:  # torch's two ways
            raise ConfigError("GradScaler: loss scaling does not work with DistributedOptimizer: the gradients are "
                              "exchanged as backward produces them, still multiplied by the scale, and a rank whose "
                              "scaled gradient overflows sits the round out instead of making every rank skip it; "
                              "use torch.autocast with dtype=torch.bfloat16 and no GradScaler, or DDP with "
                              "sketchps.ddp.comm_hook and CommHookState(grad_scaler=scaler)")
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _check_same_parameters(self.model, self.optimizer, self._named, self._group_ids)
        if self._apply == "sketchps":
            _check_same_settings(self.optimizer, self.model, self._settings, "after DistributedOptimizer was made")
        if self.done and not self._worker.finished:
            raise OrderError(f"step: the job's {self.rounds} rounds are done (check DistributedOptimizer.done before "
                             "stepping; a DataLoader loop runs `for epoch in range(opt.epochs)` over a "
                             "sketchps.torch.DistributedSampler, one batch per step)")
        self._batches.check(require_no_sync=self._overlap)
        value = float(loss) if loss is not None else float("nan")
        compute = time.monotonic() - self._compute_start if self._compute_start is not None else 0.0
        self._compute_start = None
        self._flat.verify()
        _flat.torch_work_done(self._flat.device)
        if self._hooks is not None:
            self._hooks.check_unchanged()  # before the round lands: a change after backward was never sent
        if self._local and self._apply == "torch":
            self._torch_inner_step()
        self.last_stats = json.loads(self._worker.step(value, compute))
        self._note_round(self.last_stats)
        if "redo_from" in self.last_stats:
            self._regroups += 1
        elif self._apply == "torch" and not self._local:  # with local steps the outer optimizer applied it
            self._clip_gradients()  # the aggregate, the same on every rank: as DDP's clip_grad_norm_
            self.optimizer.step()  # .grad holds the round's aggregate G_t, the same on every rank
        if self._broadcast is not None:
            self._broadcast()  # the next forward starts from rank 0's buffers, as under DDP
        return self.last_stats

    def _torch_inner_step(self):
        """Local steps under apply="torch": the torch optimizer's inner step on this rank's gradient,
        from the round's start the core keeps first."""
        self._worker.keep_round_start()
        self._clip_gradients()  # this rank's own gradient
        self.optimizer.step()
        _flat.torch_work_done(self._flat.device)  # the core reads the parameters next

    def _clip_gradients(self):
        """clip_grad_norm=: clips the .grad the torch optimizer steps on next (no-op without it)."""
        if self._clip is not None:
            torch.nn.utils.clip_grad_norm_([p for _, p in self._named], self._clip)

    @contextlib.contextmanager
    def no_sync(self):
        """DDP's no_sync() for gradient accumulation: the backward passes inside only add their
        gradients to .grad; the next backward, outside, is the step's last, and the exchange takes
        the sum. With overlap (the default) the exchange of each shard starts during that last
        backward, as DDP's does; step() inside no_sync() is an OrderError.

            opt.zero_grad()
            with opt.no_sync():
                for x, y in micro_batches[:-1]:
                    loss_fn(model(x), y).backward()
            loss_fn(model(x_last), y_last).backward()
            opt.step()
        """
        self._batches.entered_no_sync()
        self._worker.no_sync(True)
        try:
            yield
        finally:
            self._worker.no_sync(False)

    def _before_failure_report(self):
        self._torch_work_done()

    def _torch_work_done(self):
        """Before the core's last record, which checksums the weights as torch left them."""
        if self._flat is not None:
            _flat.torch_work_done(self._flat.device)

    def evaluate(self, correct, samples, loss_sum, final=False, seconds=0.0):
        """Sums this rank's evaluation counts over every worker (each evaluates its share) and records
        them with the last round (test_accuracy; final=True marks the job's final evaluation).
        Returns {"accuracy", "loss", "samples"} of the whole evaluation. Raises ConfigError naming the
        value when this rank's counts are not finite (a diverged model: a nan or inf loss_sum)."""
        return json.loads(self._worker.evaluate(float(correct), float(samples), float(loss_sum), float(seconds),
                                                bool(final)))

    def finish(self):
        """Writes the last record and leaves the job (the servers exit once every worker has); destroys
        the process group DistributedOptimizer made for the buffers."""
        self._torch_work_done()
        if not self._worker.finished:
            self._leave()
        if self._own_group:
            self._own_group = False
            dist.destroy_process_group()

    @property
    def epochs(self):
        """How many data epochs the job's rounds reach: ceil(total rounds / rounds_per_epoch), the last
        one partial when train.rounds or train.epochs ends inside it. A DataLoader loop over a
        DistributedSampler runs `for epoch in range(opt.epochs)`."""
        return math.ceil(self.job.total_rounds / self.job.rounds_per_epoch)

    @property
    def learning_rate(self):
        """The learning rate of the next round: the job's schedule's (apply="sketchps"), or the torch
        optimizer's param_groups[0]["lr"] as your schedulers left it (apply="torch")."""
        if self._apply == "torch":
            return float(self.optimizer.param_groups[0]["lr"])
        return self._worker.learning_rate(min(self.round, self.rounds - 1), self._worker.local_step)

    # A torch.optim.Optimizer (its __init__ is not called: the torch optimizer's param_groups, defaults
    # and state are the wrapper's), so torch.optim.lr_scheduler schedulers accept it: with
    # apply="torch" they set the torch optimizer's lr; with apply="sketchps" the next step() refuses a
    # changed lr (the job's schedule sets it; _check_same_settings).
    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def defaults(self):
        return self.optimizer.defaults

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        """For torch.save checkpoints: {"optimizer": the torch optimizer's state_dict(), "round": the
        next round, "apply"}. With apply="torch" that is your optimizer's whole state (momentum, Adam's
        moments); with apply="sketchps" its settings only: the state is sketchps's, sharded with the
        parameters and checkpointed by the servers (`sketchps run --resume` restores it)."""
        return {"optimizer": self.optimizer.state_dict(), "round": self.round, "apply": self._apply}

    def load_state_dict(self, state):
        """Loads what state_dict() returned into the torch optimizer. ConfigError when it was saved
        under another apply mode; with apply="sketchps" the learning rates must stay the job's."""
        if not isinstance(state, dict) or "optimizer" not in state:
            raise ConfigError("load_state_dict: not a DistributedOptimizer.state_dict() (no 'optimizer' entry)")
        if state.get("apply", self._apply) != self._apply:
            raise ConfigError(f"load_state_dict: saved with apply=\"{state['apply']}\", this optimizer has "
                              f"apply=\"{self._apply}\"")
        self.optimizer.load_state_dict(state["optimizer"])
        if self._apply == "sketchps":
            _check_same_settings(self.optimizer, self.model, self._settings, "in the state loaded")

    def batch_indices(self, round=None, step=None):
        """This rank's sample indices (int64 tensor) of a round (default: the next one) by the job's
        data order: data.train_samples samples, data.batch_size per worker, reshuffled every epoch
        with train.seed. The same indices the C++ worker would use. With local steps, of inner step
        `step` of the round (default: the next inner step of the next round, else 0)."""
        r = self.round if round is None else round
        if step is None:
            step = self._worker.local_step if r == self.round else 0
        return torch.tensor(self._worker.batch_indices(r, int(step)), dtype=torch.int64)

    @property
    def flat_parameters(self):
        """The flat parameter buffer (a 1-D tensor on the model's device: every trainable parameter is a
        view into it)."""
        return self._flat.params

    @property
    def flat_gradients(self):
        """The flat gradient buffer (every trainable parameter's .grad is a view into it)."""
        return self._flat.grads
