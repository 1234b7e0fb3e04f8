"""sketchps._settings: the torch optimizer and model against the job: who applies the update
(_applies), the job keys a torch optimizer stands for (_optimizer_settings, _external_settings,
_settings_overrides), the checks that they equal the job's (_check_optimizer, _check_equal), the
refusal of the job's schedule under a torch optimizer (_check_no_schedule), the refusal of models
whose parameters are sharded across ranks (_check_whole_replica), the trainable parameters
(_trainable) and, at every step, that they and the optimizer's settings are still those the job was
made with (_check_same_parameters, _check_same_settings). What the job sets comes from the core's typed Job fields (the job is parsed
once, in C++), never from its YAML text. Pure functions: each raises
ConfigError naming the key or argument, or returns a value; nothing is changed.
"""
import json
import math

import torch

from sketchps.errors import ConfigError


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


def _sketchps_name(optimizer):
    """The optimizer sketchps applies for torch's SGD, Adam or AdamW ("sgd", "adam", "adamw"), else None.
    Newer torch's Adam takes decoupled_weight_decay (its AdamW is Adam with it True): where param
    groups carry the flag, it decides between adam and adamw."""
    name = _SUPPORTED.get(type(optimizer))
    if name in ("adam", "adamw") and "decoupled_weight_decay" in optimizer.param_groups[0]:
        return "adamw" if optimizer.param_groups[0]["decoupled_weight_decay"] else "adam"
    return name


def _optimizer_settings(optimizer, model):
    """The job's optimizer keys that `optimizer` (torch's SGD, Adam or AdamW) stands for: name, lr,
    momentum/nesterov or betas/eps, weight_decay and no_decay (the parameters of param groups with
    weight decay 0 while others have it). Param groups may differ only in weight_decay (wd or 0)."""
    name = _sketchps_name(optimizer)
    if name is None:
        raise ConfigError(f"optimizer: {type(optimizer).__name__} cannot be applied by sketchps (it applies SGD, "
                          "Adam and AdamW itself); pass apply=\"torch\" (or \"auto\") to let the torch optimizer "
                          "apply the aggregated gradient")
    groups = optimizer.param_groups
    keys = ("lr", "momentum", "nesterov", "dampening") if name == "sgd" else ("lr", "betas", "eps")
    if name != "sgd":
        keys += ("decoupled_weight_decay",)
    first = {k: groups[0].get(k) for k in keys}
    for i, g in enumerate(groups[1:], 1):
        for k in keys:
            if g.get(k) != first[k]:
                raise ConfigError(f"optimizer: param_groups[{i}] has {k} {g.get(k)}, param_groups[0] {first[k]} "
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
    """The settings as `key=value` job overrides (sketchps run --script, SKETCHPS_DESCRIBE). With
    optimizer.name external the lr is cleared too (the script's optimizer and schedulers own it, so
    job.yaml states none; summary.json says "external"), unless settings["job_schedule"]: the script
    sets its lr from the job's schedule (CommHookState(job_schedule=True))."""
    owned = settings["name"] == "external" and not settings.get("job_schedule")
    lr = "null" if owned else repr(settings["lr"])
    out = [f"optimizer.name={settings['name']}", f"optimizer.lr={lr}",
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


def _check_no_schedule(job, who):
    """A job whose optimizer.name is external (a torch optimizer applies the update) cannot have a
    learning-rate schedule: sketchps would not apply it, so it is refused rather than ignored."""
    for key, value in job.schedule_settings:
        raise ConfigError(f"optimizer.{key}: {value} is a schedule sketchps applies, but with {who} your torch "
                          "optimizer applies the update with its own learning rate, so the job's schedule would be "
                          "ignored; remove it from the job and use a torch.optim.lr_scheduler in the script")


def _check_equal(key, job_value, mine, what):
    same = math.isclose(job_value, mine, rel_tol=1e-12) if isinstance(mine, float) else job_value == mine
    if not same:
        raise ConfigError(f"{key}: the job has {job_value}, {what} {mine} (they must agree; "
                          "`sketchps run --script` takes them from the script)")


# Where torch's sharding wrappers live: FSDP (FullyShardedDataParallel, and fully_shard's FSDPModule in
# torch >= 2.4) and its composable form; their parameters are FlatParameter or DTensor shards.
_SHARDING_MODULES = ("torch.distributed.fsdp", "torch.distributed._composable.fsdp")
_SHARDED_PARAMETERS = ("FlatParameter", "DTensor", "ShardedTensor")


def _sharding_of(model):
    """The name of the first sharding wrapper or sharded parameter type found in model, else None."""
    for module in model.modules():
        for cls in type(module).__mro__:
            if (cls.__module__ or "").startswith(_SHARDING_MODULES):
                return cls.__name__
    for p in model.parameters():
        if type(p).__name__ in _SHARDED_PARAMETERS:
            return type(p).__name__
    return None


def _check_whole_replica(model, who):
    """sketchps keeps the whole trainable model on every rank (each replica checked bitwise against the
    servers' master copy every round): a model sharded across ranks (FSDP, fully_shard, tensor
    parallel DTensors) is refused by name, never exchanged as if each rank's shard were the model."""
    sharded = _sharding_of(model)
    if sharded is not None:
        raise ConfigError(f"{who}: the model is sharded across ranks ({sharded}); sketchps exchanges the gradient of "
                          "the whole model, which every rank holds (FSDP and tensor parallelism are not supported: "
                          "docs/pytorch.md \"Models sketchps cannot train\"). Train the unsharded model: "
                          "DistributedOptimizer(optimizer, model), or DDP(model) with sketchps.ddp.comm_hook")


def _check_unwrapped(model):
    """DistributedOptimizer's model: not sharded (_check_whole_replica) and not a DDP, which would
    all-reduce every gradient densely in backward, before sketchps compresses it."""
    _check_whole_replica(model, "DistributedOptimizer")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise ConfigError("DistributedOptimizer: the model is a DistributedDataParallel, which would all-reduce every "
                          "gradient densely in backward before sketchps compresses it. Pass the model itself "
                          "(ddp_model.module) and drop DDP, or keep DDP and register sketchps.ddp.comm_hook instead "
                          "(docs/pytorch.md \"DDP's comm hook\")")


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


def _check_same_parameters(model, optimizer, named, group_ids):
    """ConfigError when the model's trainable parameters (named: (name, tensor) as _trainable gave
    them) or the tensors of the optimizer's param_groups (group_ids: their ids then) changed since:
    a module replaced, a parameter frozen or unfrozen, add_param_group. The job's layout is fixed, so
    such a change would leave a parameter untrained, or trained on its own gradient on each rank."""
    now = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if [id(p) for _, p in now] != [id(p) for _, p in named]:
        before, after = {id(p) for _, p in named}, {id(p) for _, p in now}
        added = [n for n, p in now if id(p) not in before]
        gone = [n for n, p in named if id(p) not in after]
        what = (f"'{added[0]}' is new or no longer frozen" if added else
                f"'{gone[0]}' was removed or frozen" if gone else "their order changed")
        raise ConfigError(f"model: its trainable parameters changed after DistributedOptimizer was made ({what}); the "
                          "job's parameter layout is fixed for the whole job: give the model its final modules and "
                          "requires_grad before making DistributedOptimizer (progressive unfreezing is not supported)")
    if {id(p) for g in optimizer.param_groups for p in g["params"]} != group_ids:
        raise ConfigError("optimizer: its param_groups hold other tensors than when DistributedOptimizer was made "
                          "(add_param_group, or a group's params changed); the job trains the tensors it was made "
                          "with: give the torch optimizer every parameter before making DistributedOptimizer")


def _check_same_settings(optimizer, model, settings, when):
    """apply="sketchps": ConfigError naming the first of the optimizer's settings (_optimizer_settings)
    that differs from `settings`, the job's: sketchps applies the job's, so a change would be ignored."""
    now = _optimizer_settings(optimizer, model)
    for key, was in settings.items():
        if now[key] != was:
            raise ConfigError(f"optimizer.{key}: {now[key]} {when}, the job has {was}; with apply=\"sketchps\" "
                              "the job's optimizer settings (and its optimizer.schedule for the lr) hold for the "
                              "whole job: set them in the job, or pass apply=\"torch\" to let your torch optimizer "
                              "apply its own to the aggregated gradient")
