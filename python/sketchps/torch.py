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
"""
import atexit
import contextlib
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import yaml  # python3-yaml: a dependency of Debian's python3-torch

from sketchps import _batch_check, _core, _flat, _resume
from sketchps.errors import ConfigError, OrderError

_context = None


class Context:
    """What init() found: the job (sketchps._core.Job), this rank and how to reach the others."""

    def __init__(self, job, config, describe):
        self.job = job
        self.config = config
        self.describe = describe  # SKETCHPS_DESCRIBE: write the model's job keys there and exit
        self.optimizer = None  # the DistributedOptimizer, once made (DistributedSampler draws from it)
        self.position = None  # the DistributedOptimizer or sketchps.ddp.CommHookState: left at exit if not finished
        self.train_samples = None  # describe pass: len(dataset) of a DistributedSampler made before it
        self.sampler_made = False  # a sketchps.torch.DistributedSampler was made

    @property
    def rank(self):
        return self.config.rank

    @property
    def world_size(self):
        return self.job.workers


def _env(name, default=""):
    return os.environ.get(name, default)


def _rank():
    for name in ("RANK", "JOB_COMPLETION_INDEX"):
        value = _core.env_uint32(name)
        if value is not None:
            return value
    raise ConfigError("RANK: not set (torchrun and `sketchps run --script` set RANK and WORLD_SIZE; "
                      "a Kubernetes Indexed Job sets JOB_COMPLETION_INDEX)")


def _config(job, rank):
    c = _core.WorkerConfig()
    c.rank = rank
    c.tls_dir = _env("SKETCHPS_TLS_DIR")
    c.insecure = _env("SKETCHPS_INSECURE") == "1"
    c.metrics_out = _env("SKETCHPS_METRICS_OUT").replace("{rank}", str(rank))  # one file per rank
    c.state_dir = _env("SKETCHPS_STATE_DIR")  # ps: the schemes' state across restarts (files named by rank)
    every = _env("SKETCHPS_STATE_EVERY_ROUNDS", "1")
    if not every.isdigit() or int(every) < 1:
        raise ConfigError(f"SKETCHPS_STATE_EVERY_ROUNDS: '{every}' is not a whole number >= 1")
    c.state_every_rounds = int(every)
    # ps: the state files' integrity key (--checkpoint-key-file of sketchps-worker; `sketchps run` sets it)
    c.checkpoint_key_file = _env("SKETCHPS_CHECKPOINT_KEY_FILE")
    if job.mode == "ps":
        c.servers = _env("SKETCHPS_SERVERS")
        if not c.servers:
            raise ConfigError(f"SKETCHPS_SERVERS: not set (job mode ps: the {job.servers} servers' addresses, "
                              "comma-separated in shard order)")
    else:
        c.listen = _env("SKETCHPS_LISTEN", "0.0.0.0:7080")
        c.peers = _env("SKETCHPS_PEERS")
        c.peers_file = _env("SKETCHPS_PEERS_FILE")
        c.port_file = _env("SKETCHPS_PORT_FILE")
        if bool(c.peers) == bool(c.peers_file):
            raise ConfigError("SKETCHPS_PEERS / SKETCHPS_PEERS_FILE: set exactly one (job mode decentralized: every "
                              "rank's Peer address, comma-separated in rank order)")
    timeout = _env("SKETCHPS_PEER_TIMEOUT_SECONDS")
    if timeout:
        c.peer_timeout_seconds = float(timeout)
    return c


_status_path = None  # this rank's SKETCHPS_STATUS_FILE, once init() wrote it


def _status_open():
    """SKETCHPS_STATUS_FILE ({rank}: RANK; `sketchps run --servers-only` sets it in workers.env): this
    process's pid and host, written first thing in init(), then a "left=" line once it leaves the job
    or a "failed=" line with the reason it stopped. The launcher watches these files (a process gone
    without "left=" failed; tools/worker_watch.h), so a rank that torchrun started, which is not the
    launcher's child, cannot fail unnoticed."""
    global _status_path
    path = _env("SKETCHPS_STATUS_FILE")
    rank = _env("RANK", _env("JOB_COMPLETION_INDEX"))
    if not path or not rank.isdigit() or _env("SKETCHPS_DESCRIBE"):
        return
    _status_path = path.replace("{rank}", rank)
    with open(_status_path + ".tmp", "w") as f:
        f.write(f"pid={os.getpid()}\nhost={socket.gethostname()}\n")
    os.replace(_status_path + ".tmp", _status_path)  # whole: the launcher reads it at any time


_at_exit_registered = False


def _register_at_exit():
    global _at_exit_registered
    if not _at_exit_registered:
        _at_exit_registered = True
        atexit.register(_at_exit)


def _status_write(key, text):
    if _status_path is None:
        return
    try:
        with open(_status_path, "a") as f:
            f.write(f"{key}={' '.join(str(text).split())[:1000]}\n")
    except OSError:
        pass  # best effort: the launcher then names the rank without the reason


def _at_exit():
    """At interpreter exit: a job position the script did not leave is left here, finish() when
    every round ran (a forgotten finish()), else a failure report naming why (an uncaught exception,
    or the script ended early without finish()), so that neither the servers nor the launcher wait
    for this rank; an uncaught exception is written to the status file."""
    exc = getattr(sys, "last_value", None)
    ctx = _context
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
    SKETCHPS_PEERS_FILE); SKETCHPS_TLS_DIR or SKETCHPS_INSECURE=1; optional SKETCHPS_METRICS_OUT ({rank}: the rank) and SKETCHPS_SET (overrides, ";"-separated).
    Raises ConfigError naming the variable or key."""
    global _context
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
    _context = Context(spec, config, describe)
    return _context


_SUPPORTED = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adamw"}
_OFF = ("amsgrad", "maximize", "capturable", "differentiable", "fused")  # options that must be off


def _external_settings(optimizer):
    """optimizer.name external: any torch optimizer applies the update to the aggregated gradient."""
    return {"name": "external", "lr": float(optimizer.param_groups[0]["lr"]), "weight_decay": 0.0, "no_decay": []}


def _applies(optimizer, apply, clip=None):
    """Who applies the update: "sketchps" (the replicated SGD, Adam or AdamW in C++, on the workers and
    the servers' master copy) or "torch" (the user's optimizer, on the aggregated gradient). Clipping
    (clip_grad_norm) needs "torch": "auto" picks it, "sketchps" is refused."""
    if apply not in ("auto", "sketchps", "torch"):
        raise ConfigError(f"apply: '{apply}' is not auto, sketchps or torch")
    if clip is not None:
        if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip > 0 or math.isinf(clip):
            raise ConfigError(f"clip_grad_norm: {clip!r} is not a number > 0 (the largest L2 norm of the aggregated "
                              "gradient, as torch.nn.utils.clip_grad_norm_'s max_norm)")
        if apply == "sketchps":
            raise ConfigError("clip_grad_norm: not with apply=\"sketchps\": its optimizer applies the aggregated "
                              "gradient on every worker and on the servers' shards as soon as it lands, and no shard "
                              "holds the norm of the whole gradient; pass apply=\"torch\" (or \"auto\"), which "
                              "clips the aggregate before your optimizer steps, as DDP with clip_grad_norm_ does")
        return "torch"
    if apply != "auto":
        return apply
    supported = type(optimizer) in _SUPPORTED and not any(g.get(k) for g in optimizer.param_groups for k in _OFF)
    return "sketchps" if supported else "torch"


def _optimizer_settings(optimizer, model):
    """The job's optimizer keys that `optimizer` (torch's SGD, Adam or AdamW) stands for: name, lr,
    momentum/nesterov or betas/eps, weight_decay and no_decay (the parameters of param groups with
    weight decay 0 while others have it). Param groups may differ only in weight_decay (wd or 0)."""
    name = _SUPPORTED.get(type(optimizer))
    if name is None:
        raise ConfigError(f"optimizer: {type(optimizer).__name__} cannot be applied by sketchps (it applies SGD, "
                          "Adam and AdamW itself); pass apply=\"torch\" (or \"auto\") to let the torch optimizer "
                          "apply the aggregated gradient")
    groups = optimizer.param_groups
    keys = ("lr", "momentum", "nesterov", "dampening") if name == "sgd" else ("lr", "betas", "eps")
    first = {k: groups[0][k] for k in keys}
    for i, g in enumerate(groups[1:], 1):
        for k in keys:
            if g[k] != first[k]:
                raise ConfigError(f"optimizer: param_groups[{i}] has {k} {g[k]}, param_groups[0] {first[k]} "
                                  "(groups may differ only in weight_decay)")
    for g in groups:
        for k in _OFF:
            if g.get(k):
                raise ConfigError(f"optimizer: {k}=True is not supported")
    if name == "sgd" and first["dampening"] != 0:
        raise ConfigError(f"optimizer: dampening {first['dampening']} is not supported (0 only)")
    decays = sorted({float(g["weight_decay"]) for g in groups} - {0.0})
    if len(decays) > 1:
        raise ConfigError(f"optimizer: param groups with weight_decay {decays}: one value, and 0 for the groups "
                          "without decay (biases, norms)")
    names = {id(p): n for n, p in model.named_parameters()}
    no_decay = [names[id(p)] for g in groups if decays and float(g["weight_decay"]) == 0.0
                for p in g["params"] if id(p) in names and p.requires_grad]
    settings = {"name": name, "lr": float(first["lr"]), "weight_decay": decays[0] if decays else 0.0,
                "no_decay": sorted(no_decay)}
    if name == "sgd":
        settings.update(momentum=float(first["momentum"]), nesterov=bool(first["nesterov"]))
    else:
        settings.update(betas=[float(b) for b in first["betas"]], eps=float(first["eps"]))
    return settings


def _settings_overrides(settings):
    """The settings as `key=value` job overrides (sketchps run --script, SKETCHPS_DESCRIBE)."""
    out = [f"optimizer.name={settings['name']}", f"optimizer.lr={settings['lr']!r}",
           f"optimizer.weight_decay={settings['weight_decay']!r}",
           f"optimizer.no_decay={json.dumps(settings['no_decay'])}"]
    # The other optimizer's keys are cleared (null): a job file written for SGD may hold momentum.
    if settings["name"] == "external":
        out += ["optimizer.momentum=null", "optimizer.nesterov=null", "optimizer.betas=null", "optimizer.eps=null",
                "optimizer.freeze_variance=null"]
    elif settings["name"] == "sgd":
        out += [f"optimizer.momentum={settings['momentum']!r}",
                f"optimizer.nesterov={str(settings['nesterov']).lower()}", "optimizer.betas=null",
                "optimizer.eps=null"]
    else:
        out += [f"optimizer.betas={json.dumps(settings['betas'])}", f"optimizer.eps={settings['eps']!r}",
                "optimizer.momentum=null", "optimizer.nesterov=null"]
    return out


def _check_optimizer(job, settings):
    """The job's optimizer section must be the one the script's optimizer stands for."""
    _check_equal("optimizer.name", job.optimizer, settings["name"], "the torch optimizer")
    if settings["name"] == "external":
        return  # the torch optimizer holds its own settings
    for key in ("lr", "weight_decay"):
        _check_equal(f"optimizer.{key}", getattr(job, key), settings[key], "the torch optimizer")
    _check_equal("optimizer.no_decay", sorted(job.no_decay), settings["no_decay"], "the param groups")
    if settings["name"] == "sgd":
        _check_equal("optimizer.momentum", job.momentum, settings["momentum"], "the torch optimizer")
        _check_equal("optimizer.nesterov", job.nesterov, settings["nesterov"], "the torch optimizer")
    else:
        for i, (j, m) in enumerate(zip(job.betas, settings["betas"])):
            _check_equal(f"optimizer.betas[{i}]", j, m, "the torch optimizer")
        _check_equal("optimizer.eps", job.eps, settings["eps"], "the torch optimizer")


_SCHEDULE_KEYS = ("schedule", "warmup", "warmup_epochs", "milestones", "min_lr")


def _check_no_schedule(job, who):
    """A job whose optimizer.name is external (a torch optimizer applies the update) cannot have a
    learning-rate schedule: sketchps would not apply it, so it is refused rather than ignored."""
    root = yaml.safe_load(job.effective_yaml) or {}
    section = root.get("optimizer") if isinstance(root, dict) else None
    if not isinstance(section, dict):
        return
    for key in _SCHEDULE_KEYS:
        value = section.get(key)
        if value is None or (key == "schedule" and value == "constant") or (key != "schedule" and not value):
            continue
        raise ConfigError(f"optimizer.{key}: {value} is a schedule sketchps applies, but with {who} your torch "
                          "optimizer applies the update with its own learning rate, so the job's schedule would be "
                          "ignored; remove it from the job and use a torch.optim.lr_scheduler in the script")


def _check_equal(key, job_value, mine, what):
    same = math.isclose(job_value, mine, rel_tol=1e-12) if isinstance(mine, float) else job_value == mine
    if not same:
        raise ConfigError(f"{key}: the job has {job_value}, {what} {mine} (they must agree; "
                          "`sketchps run --script` takes them from the script)")


def _trainable(model, optimizer):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ConfigError("model: no trainable parameter (every parameter has requires_grad == False)")
    mine = {id(p) for _, p in named}
    frozen = {id(p) for p in model.parameters() if not p.requires_grad}
    theirs = [p for g in optimizer.param_groups for p in g["params"] if id(p) not in frozen]  # frozen: no update
    for p in theirs:
        if id(p) not in mine:
            raise ConfigError("optimizer: holds a tensor that is not a parameter of the model")
    missing = [n for n, p in named if id(p) not in {id(q) for q in theirs}]
    if missing:
        raise ConfigError(f"optimizer: does not hold the model's trainable parameter '{missing[0]}' "
                          "(freeze it with requires_grad_(False) to leave it out)")
    return named


def _on_failure(job):
    """The job's peer.on_failure (decentralized mode; default regroup)."""
    root = yaml.safe_load(job.effective_yaml) or {}
    peer = root.get("peer") if isinstance(root, dict) else None
    value = peer.get("on_failure") if isinstance(peer, dict) else None
    return value or "regroup"


def _check_buffers(ctx, model, broadcast):
    """Buffers (BatchNorm's running statistics) are not in the job: the replicas keep only the
    parameters equal. With broadcast_buffers (DDP's default) DistributedOptimizer broadcasts rank
    0's over a torch.distributed process group; what that needs is checked here, before the describe
    pass writes anything, so `sketchps run --script` fails before it starts a server. Returns the
    buffers to broadcast (named_buffers' order), [] without buffers or with broadcast_buffers False."""
    named = list(model.named_buffers())
    if not named or not broadcast:
        return []
    what = (f"model: has buffer '{named[0][0]}' (state outside the parameters, e.g. BatchNorm running statistics), "
            "which DistributedOptimizer broadcasts from rank 0 every round over a torch.distributed gloo process "
            "group (broadcast_buffers=True, as DDP)")
    instead = ("; or pass broadcast_buffers=False (each rank keeps its own statistics), or use GroupNorm or "
               "LayerNorm instead of BatchNorm (no buffers)")
    if ctx.job.mode == "decentralized" and _on_failure(ctx.job) == "regroup":
        raise ConfigError("peer.on_failure: regroup (the default in decentralized mode) goes on without a lost peer, "
                          f"which the process group cannot follow; set peer.on_failure: stop ({what}){instead}")
    if not dist.is_available():
        raise ConfigError(f"{what}: this torch has no torch.distributed{instead}")
    if dist.is_initialized():
        if not ctx.describe and (dist.get_world_size() != ctx.job.workers or dist.get_rank() != ctx.rank):
            raise ConfigError(f"{what}: the default process group is rank {dist.get_rank()} of "
                              f"{dist.get_world_size()}, the job's worker is rank {ctx.rank} of {ctx.job.workers} "
                              "(init_process_group and sketchps.torch.init must read the same RANK and WORLD_SIZE)")
    elif not _env("MASTER_ADDR") or not _env("MASTER_PORT"):
        missing = "MASTER_ADDR" if not _env("MASTER_ADDR") else "MASTER_PORT"
        raise ConfigError(f"MASTER_ADDR / MASTER_PORT: {missing} is not set ({what}, made from MASTER_ADDR, "
                          "MASTER_PORT, RANK and WORLD_SIZE: `sketchps run --script` and torchrun set them; "
                          "or call torch.distributed.init_process_group before DistributedOptimizer)" + instead)
    return [b for _, b in named]


def _buffer_group(ctx):
    """The process group the buffers are broadcast over: the default one when the script made it (a
    gloo subgroup of it when its backend cannot broadcast CPU tensors, e.g. nccl), else a gloo group
    made from the environment (MASTER_ADDR, MASTER_PORT; rank and world size the job's). Returns
    (group, made): group None is the default group; made: DistributedOptimizer made the default
    group (finish() destroys it)."""
    if dist.is_initialized():
        if dist.get_backend() in ("gloo", "mpi"):
            return None, False
        return dist.new_group(backend="gloo"), False
    dist.init_process_group("gloo", init_method="env://", rank=ctx.rank, world_size=ctx.job.workers)
    return None, True


class _BufferBroadcast:
    """Broadcasts the buffers from rank 0 in one call: their bytes are packed into one uint8 tensor
    (largest element size first, so every buffer's slice stays aligned for its dtype), which keeps
    every dtype (float running statistics, int64 num_batches_tracked) bitwise."""

    def __init__(self, buffers, group, rank):
        self.buffers = sorted(buffers, key=lambda b: -b.element_size())
        self.sizes = [b.numel() * b.element_size() for b in self.buffers]
        self.flat = torch.empty(sum(self.sizes), dtype=torch.uint8)
        self.group = group
        self.rank = rank

    def __call__(self):
        with torch.no_grad():
            if self.rank == 0:
                torch.cat([b.detach().reshape(-1).view(torch.uint8) for b in self.buffers], out=self.flat)
            dist.broadcast(self.flat, 0, group=self.group)
            if self.rank != 0:
                offset = 0
                for b, n in zip(self.buffers, self.sizes):
                    b.copy_(self.flat[offset:offset + n].view(b.dtype).view(b.shape))
                    offset += n


def _job_sets(job, section, key):
    """Whether the job spec (its file and overrides, not the defaults) sets section.key."""
    root = yaml.safe_load(job.effective_yaml) or {}
    part = root.get(section) if isinstance(root, dict) else None
    return isinstance(part, dict) and part.get(key) is not None


def _describe(ctx, named, settings, scheme, density):
    """Writes the job keys this script defines (sketchps run --script reads them), then exits."""
    lines = [f"layers={_core.layout_text([(n, list(p.shape)) for n, p in named])}"]
    if ctx.job.model != "custom" and [(n, list(p.shape)) for n, p in named] != [(n, list(s)) for n, s in ctx.job.layout]:
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
        self._worker.finish()
        _status_write("left", f"round {self.round} of {self.rounds}")

    def _worker_rank(self):
        return _context.rank if _context is not None else "?"

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
        weights, and a worker cannot rejoin a running job; schemes with their own momentum, DGC,
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
    peer.on_failure regroup (the group cannot follow a regroup). A worker that would rejoin a
    running job (first round > 0: a restarted worker, or a --resume'd job) cannot rejoin the group,
    and the servers' checkpoints hold no buffers: refused at creation. broadcast_buffers=False:
    each rank keeps its own buffers (its own statistics), so the replicas' buffers differ; evaluate
    with rank 0's (or save rank 0's model).

    overlap (default True): zero_grad() starts the round, and during backward each shard's exchange
    starts as soon as its gradients are complete (as DDP's buckets do); step() waits for them. To
    accumulate gradients over several backward passes per step, pass overlap=False (no_sync() then
    marks the passes as DDP's does).
    clip_grad_norm (default None): clips the round's aggregated gradient to this L2 norm before the
    torch optimizer steps, as DDP with torch.nn.utils.clip_grad_norm_ between backward and step does
    (the same on every rank). Needs apply="torch" ("auto" picks it; "sketchps" is a ConfigError).
    Calling clip_grad_norm_ (or changing .grad in place) between backward and step() with overlap is
    an OrderError at step(): the exchange started during backward and would not see it.
    Decentralized mode with peer.on_failure regroup: when a peer is lost, step() returns
    {"regroup": ..., "redo_from": round}: the survivors rolled the model back to that round and the
    loop goes on from it (opt.round and opt.batch_indices() follow).
    """

    _own_group = False  # whether finish() destroys a process group made for the buffers
    _flat = None  # the flat buffers (sketchps/_flat.py), once made
    _done_name = "opt.done"

    @property
    def _loop_hint(self):
        if _context is not None and _context.sampler_made:
            return ""
        return ("a DataLoader over torch's DistributedSampler, whose batches are not the job's rounds (it gives "
                "each rank ceil(len(dataset) / workers) samples): use sketchps.torch.DistributedSampler")

    def __init__(self, optimizer, model, scheme=None, density=None, overlap=True, apply="auto",
                 broadcast_buffers=True, clip_grad_norm=None):
        ctx = _context
        if ctx is None:
            raise OrderError("DistributedOptimizer: call sketchps.torch.init() first")
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
        self._lr = [g["lr"] for g in optimizer.param_groups]
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
        restore = "model" if self._apply == "torch" else ("buffers" if list(model.buffers()) else None)
        self._script = _join_script_state(self._worker, job, ctx.rank, model, restore)
        self._script.register(optimizer)
        if buffers:
            group, self._own_group = _buffer_group(ctx)
            self._broadcast = _BufferBroadcast(buffers, group, ctx.rank)
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

    def step(self, closure=None, loss=None):
        """Runs one round with the gradients in the .grad tensors: compression, exchange, the
        replicated SGD update written into the parameters. Returns the round's statistics (a dict:
        round, epoch, loss, bytes_up, bytes_down (the serialized messages, as summary.json counts them;
        the payload arrays inside them: payload_up, payload_down), dense_bytes, selected, compute_s, exchange_s,
        compress_s, communicate_s, checksum, ...). loss (a number or tensor) is recorded. With
        broadcast_buffers, rank 0's buffers are then broadcast to every rank (one call)."""
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._apply == "sketchps" and [g["lr"] for g in self.optimizer.param_groups] != self._lr:
            raise ConfigError("optimizer.lr: changed after DistributedOptimizer was made; sketchps applies the update "
                              "with the job's optimizer.schedule (set it there), or pass apply=\"torch\" to keep "
                              "your LR scheduler and let the torch optimizer apply the aggregated gradient")
        if self.done and not self._worker.finished:
            raise OrderError(f"step: the job's {self.rounds} rounds are done (check DistributedOptimizer.done before "
                             "stepping; a DataLoader loop runs `for epoch in range(opt.epochs)` over a "
                             "sketchps.torch.DistributedSampler, one batch per step)")
        self._batches.check()
        value = float(loss) if loss is not None else float("nan")
        compute = time.monotonic() - self._compute_start if self._compute_start is not None else 0.0
        self._compute_start = None
        self._flat.verify()
        _flat.torch_work_done(self._flat.device)
        if self._hooks is not None:
            self._hooks.check_unchanged()  # before the round lands: a change after backward was never sent
        self.last_stats = json.loads(self._worker.step(value, compute))
        if "redo_from" in self.last_stats:
            self._regroups += 1
        elif self._apply == "torch":
            if self._clip is not None:  # the aggregate, the same on every rank: as DDP's clip_grad_norm_
                torch.nn.utils.clip_grad_norm_([p for _, p in self._named], self._clip)
            self.optimizer.step()  # .grad holds the round's aggregate G_t, the same on every rank
        if self._broadcast is not None:
            self._broadcast()  # the next forward starts from rank 0's buffers, as under DDP
        return self.last_stats

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
        Returns {"accuracy", "loss", "samples"} of the whole evaluation."""
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
        return self._worker.learning_rate(min(self.round, self.rounds - 1))

    # A torch.optim.Optimizer (its __init__ is not called: the torch optimizer's param_groups, defaults
    # and state are the wrapper's), so torch.optim.lr_scheduler schedulers accept it: with
    # apply="torch" they set the torch optimizer's lr; with apply="sketchps" the next step() refuses a
    # changed lr (the job's schedule sets it).
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
        if self._apply == "sketchps" and [g["lr"] for g in self.optimizer.param_groups] != self._lr:
            raise ConfigError("load_state_dict: the saved learning rates differ from the job's optimizer.lr "
                              "(with apply=\"sketchps\" the job's schedule sets them)")

    def batch_indices(self, round=None):
        """This rank's sample indices (int64 tensor) of a round (default: the next one) by the job's
        data order: data.train_samples samples, data.batch_size per worker, reshuffled every epoch
        with train.seed. The same indices the C++ worker would use."""
        r = self.round if round is None else round
        return torch.tensor(self._worker.batch_indices(r), dtype=torch.int64)

    @property
    def flat_parameters(self):
        """The flat parameter buffer (a 1-D tensor on the model's device: every trainable parameter is a
        view into it)."""
        return self._flat.params

    @property
    def flat_gradients(self):
        """The flat gradient buffer (every trainable parameter's .grad is a view into it)."""
        return self._flat.grads


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
    opt.batch_indices() loop. For evaluation, split the test set with sketchps.data.share.
    """

    def __init__(self, dataset):
        ctx = _context
        if ctx is None:
            raise OrderError("DistributedSampler: call sketchps.torch.init() first")
        super().__init__(dataset)
        n = len(dataset)
        job = ctx.job
        sets = _job_sets(job, "data", "train_samples")
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
        return len(self._rounds(self._ctx.optimizer)) * self._ctx.job.batch_size

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
            yield from opt._worker.batch_indices(r)
