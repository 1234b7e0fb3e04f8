"""The local-step rivals of issue 35 under torch.distributed: PyTorch's post-local SGD and DiLoCo.

One module for every DDP script of bench/e2e (ddp_train.py, the cnn; workload_common.py, the vgg and
vit workloads), so the rivals are the same code on every workload. Each is a LocalRival: the module
to train (`model`), the optimizer to step (`optimizer`, whose param_groups take the round's learning
rate), `end_step(r, rounds)` after every optimizer step, `eval_module()` for the evaluations (the
weights of round `synced_round`) and `finish()` before the final one. A round is one inner step;
both rivals see the script's data order.

  postlocal  PyTorch 1.13's recipe: DistributedDataParallel with post_localSGD_hook and
             PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=warmup,
             post_local_gradient_allreduce=False) (dense all-reduce of the gradients for the first
             `warmup` rounds, then none), and PostLocalSGDOptimizer over the script's optimizer with
             PeriodicModelAverager(period=H, warmup_steps=warmup): the parameters are averaged after
             the step of round r when r >= warmup and (r - warmup) % H == 0 (postlocal_synced()). The
             inner optimizer's state (momentum, Adam's moments) stays local and is never averaged, as
             in torch. finish() averages the models once more.
  diloco     DiLoCo (Douillard et al. 2023), no DDP wrapper: every rank takes H steps of the script's
             own optimizer (the inner optimizer: SGD for cnn and vgg, AdamW for vit) on its own
             batches; then the pseudo-gradient (the weights at the period's start minus the weights
             now) is all-reduced to its mean, and an outer SGD with Nesterov momentum (lr 0.7,
             momentum 0.9 by default, the paper's) steps the period's start weights with it
             (nesterov_outer_step); every rank continues from the result. The inner optimizer's state
             persists across periods, as in DiLoCo (sketchps' own local steps reset it every round:
             docs/methods.md "Local steps"). A last, shorter period ends at the last round.
             Two settings make the ablations of issue 35: outer lr 1 and momentum 0 is plain
             averaging of the models (bench/e2e `--ddp dilocoHavg`); `reset_inner` (`--inner-reset`,
             `--ddp dilocoHavgreset`) zeroes the inner optimizer's state at every outer step, as
             sketchps' local steps do (torch's state cleared: momentum and Adam's moments and step
             count start afresh).

Evaluations (eval_module) use the weights of the last synchronisation, which every rank holds
alike: DiLoCo's last outer step; post-local SGD's last averaging (or, during the warm-up, the last
step: the all-reduced gradients keep the replicas equal). They cost no communication, so the link
counters see the training only. These weights can be up to H - 1 rounds older than the round after
which the evaluation runs: the scripts record `synced_round` as its test_round, so the time to
accuracy counts to the end of the round that made them (figures.py). sketchps' own local steps
evaluate at exchanges too.

Needs an initialised default process group (gloo). Not thread-safe.
"""
from __future__ import annotations

import copy
from typing import Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn as nn

KINDS = ("postlocal", "diloco")
OUTER_LR, OUTER_MOMENTUM = 0.7, 0.9  # DiLoCo's outer Nesterov step (the paper's)
LOCAL_WARMUP = 10                     # post-local SGD's dense rounds (issue 35's configuration)


def add_arguments(ap, selector: str) -> None:
    """The rivals' options on a script's parser; `selector` names the option that picks a rival
    (e.g. "--compression" or "ddp --hook") in their help."""
    ap.add_argument("--period", type=int, default=8,
                    help=f"{selector} postlocal: steps between model averages; diloco: inner steps H per outer step")
    ap.add_argument("--local-warmup", type=int, default=LOCAL_WARMUP,
                    help=f"{selector} postlocal: dense all-reduce rounds before the local steps (start_localSGD_iter)")
    ap.add_argument("--outer-lr", type=float, default=OUTER_LR, help=f"{selector} diloco: the outer Nesterov step's lr")
    ap.add_argument("--outer-momentum", type=float, default=OUTER_MOMENTUM, help=f"{selector} diloco: its momentum")
    ap.add_argument("--inner-reset", action="store_true",
                    help=f"{selector} diloco: zero the inner optimizer's state at every outer step (an ablation: "
                         "sketchps' local steps do so)")


def check_arguments(ap, args, kind: str) -> None:
    """ap.error() naming the option when add_arguments' options are out of range, or --inner-reset
    is given for another rival than diloco (`kind`: the script's selected hook or compression)."""
    if args.period < 1 or args.local_warmup < 1 or args.outer_lr <= 0 or not 0 <= args.outer_momentum < 1:
        ap.error("--period and --local-warmup must be >= 1, --outer-lr > 0 and --outer-momentum in [0, 1)")
    if args.inner_reset and kind != "diloco":
        ap.error(f"--inner-reset is for diloco, not {kind}")


def nesterov_outer_step(anchor: Sequence[torch.Tensor], pseudo_grad: Sequence[torch.Tensor],
                        momentum_buf: Sequence[torch.Tensor], lr: float, momentum: float) -> None:
    """DiLoCo's outer step in place, torch.optim.SGD(nesterov=True, dampening 0) on the
    pseudo-gradient g, per tensor: buf = momentum * buf + g; anchor -= lr * (g + momentum * buf)."""
    with torch.no_grad():
        for a, g, buf in zip(anchor, pseudo_grad, momentum_buf):
            buf.mul_(momentum).add_(g)
            a.sub_(lr * (g + momentum * buf))


def all_reduce_mean(flat: torch.Tensor) -> torch.Tensor:
    """The mean of `flat` over the default group's ranks (gloo all-reduce of the sum, in place)."""
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    return flat


def period_ends(r: int, rounds: int, period: int) -> bool:
    """Whether DiLoCo's period ends after round r (every `period` rounds, and at the last round)."""
    return (r + 1) % period == 0 or r + 1 == rounds


def postlocal_synced(r: int, warmup: int, period: int) -> bool:
    """Whether post-local SGD's replicas are equal after the step of round r: the warm-up's
    all-reduced gradients, or PeriodicModelAverager's averaging (torch 1.13's condition)."""
    return r < warmup or (r - warmup) % period == 0


class DiLoCo:
    """DiLoCo over a plain (not DDP) model; `optimizer` is the inner one, built by the caller."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, period: int, lr: float = OUTER_LR,
                 momentum: float = OUTER_MOMENTUM, reduce_mean: Callable[[torch.Tensor], torch.Tensor] = all_reduce_mean,
                 reset_inner: bool = False):
        self.model, self.optimizer, self.period = model, optimizer, period
        self.lr, self.momentum, self.reduce_mean, self.reset_inner = lr, momentum, reduce_mean, reset_inner
        self.anchor = [p.detach().clone() for p in model.parameters()]
        self.buf = [torch.zeros_like(a) for a in self.anchor]
        self._eval = copy.deepcopy(model)  # holds the anchor for the evaluations
        self.synced_round = -1  # the round of the last outer step (-1: the initial weights)

    def end_step(self, r: int, rounds: int) -> None:
        if period_ends(r, rounds, self.period):
            self.sync()
            self.synced_round = r

    def sync(self) -> None:
        """Ends a period: the outer step on the ranks' mean pseudo-gradient; the model continues from it."""
        params = list(self.model.parameters())
        with torch.no_grad():
            flat = self.reduce_mean(torch.cat([(a - p.detach()).reshape(-1) for a, p in zip(self.anchor, params)]))
            grads, at = [], 0
            for a in self.anchor:
                grads.append(flat[at:at + a.numel()].view_as(a))
                at += a.numel()
            nesterov_outer_step(self.anchor, grads, self.buf, self.lr, self.momentum)
            for a, p in zip(self.anchor, params):
                p.copy_(a)
        if self.reset_inner:
            self.optimizer.state.clear()  # torch builds it afresh at the next step (SGD's buffer is then g)

    def eval_module(self) -> nn.Module:
        with torch.no_grad():
            for p, a in zip(self._eval.parameters(), self.anchor):
                p.copy_(a)
        return self._eval

    def finish(self) -> None:
        """Nothing: the last period ended at the last round, so the model is the last outer step's."""


class PostLocal:
    """PyTorch's post-local SGD: DDP with post_localSGD_hook, PostLocalSGDOptimizer over `inner`."""

    def __init__(self, model: nn.Module, inner: torch.optim.Optimizer, period: int, warmup: int = LOCAL_WARMUP):
        from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
        from torch.distributed.algorithms.model_averaging import averagers
        from torch.distributed.optim import PostLocalSGDOptimizer
        self.net, self.period, self.warmup = model, period, warmup
        self._eval = copy.deepcopy(model)  # the replicas' weights at the last synchronisation
        self.synced_round = -1               # its round (-1: the initial weights)
        self.model = nn.parallel.DistributedDataParallel(model)
        state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=warmup,
                                                     post_local_gradient_allreduce=False)
        self.model.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
        averager = averagers.PeriodicModelAverager(period=period, warmup_steps=warmup)
        self.optimizer = PostLocalSGDOptimizer(optim=inner, averager=averager)

    def end_step(self, r: int, rounds: int) -> None:
        if postlocal_synced(r, self.warmup, self.period):
            with torch.no_grad():
                for e, p in zip(self._eval.parameters(), self.net.parameters()):
                    e.copy_(p)
            self.synced_round = r

    def eval_module(self) -> nn.Module:
        return self._eval

    def finish(self) -> None:
        """Averages the models once more: they differ since the last averaging."""
        from torch.distributed.algorithms.model_averaging import utils
        utils.average_parameters(iter(self.net.parameters()), None)


def make(kind: str, model: nn.Module, make_optimizer: Callable[[nn.Module], torch.optim.Optimizer], period: int,
         warmup: int = LOCAL_WARMUP, outer_lr: float = OUTER_LR, outer_momentum: float = OUTER_MOMENTUM,
         reset_inner: bool = False):
    """The rival `kind` (KINDS) over `model` (not yet wrapped) with the script's optimizer, built by
    make_optimizer(model); ValueError for another kind or bad settings (reset_inner is DiLoCo's)."""
    if kind not in KINDS:
        raise ValueError(f"local rival {kind!r}: expected one of {', '.join(KINDS)}")
    if period < 1 or warmup < 1 or outer_lr <= 0 or not 0 <= outer_momentum < 1:
        raise ValueError("the period and the warm-up must be >= 1, the outer lr > 0 and the outer momentum in [0, 1)")
    if kind == "postlocal":
        if reset_inner:
            raise ValueError("the inner-state reset is DiLoCo's (post-local SGD keeps torch's optimizer as it is)")
        return PostLocal(model, make_optimizer(model), period, warmup)
    return DiLoCo(model, make_optimizer(model), period, outer_lr, outer_momentum, reset_inner=reset_inner)


def describe(kind: str, period: int, warmup: int = LOCAL_WARMUP, outer_lr: float = OUTER_LR,
             outer_momentum: float = OUTER_MOMENTUM, reset_inner: bool = False) -> str:
    """One line for the scripts' logs."""
    if kind == "postlocal":
        return f"post-local SGD, models averaged every {period} steps after {warmup} dense ones"
    state = ", the inner state reset at each outer step" if reset_inner else ""
    return f"DiLoCo, {period} inner steps, then outer Nesterov lr {outer_lr} momentum {outer_momentum}{state}"


def from_args(kind: str, model: nn.Module, make_optimizer: Callable[[nn.Module], torch.optim.Optimizer], args):
    """make() with the settings of add_arguments' options (args.period, .local_warmup, .outer_lr,
    .outer_momentum, .inner_reset); the scripts' one call."""
    return make(kind, model, make_optimizer, args.period, args.local_warmup, args.outer_lr, args.outer_momentum,
                reset_inner=args.inner_reset)


def describe_args(kind: str, args) -> str:
    """describe() with the settings of add_arguments' options."""
    return describe(kind, args.period, args.local_warmup, args.outer_lr, args.outer_momentum, args.inner_reset)
