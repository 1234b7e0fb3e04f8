"""sketchps._buffers: DistributedOptimizer's broadcast_buffers (docs/pytorch.md "Buffers"): the
checks before the describe pass writes anything (_check_buffers), the torch.distributed group the
buffers go over (_buffer_group) and the broadcast of rank 0's buffers in one call
(_BufferBroadcast). The broadcast is collective: every rank calls it at the same point.
"""
import torch
import torch.distributed as dist

from sketchps._job_context import _env
from sketchps.errors import ConfigError


def _check_buffers(ctx, model, broadcast):
    """Buffers (BatchNorm's running statistics) are not in the job: the replicas keep only the
    parameters equal. With broadcast_buffers (DDP's default) DistributedOptimizer broadcasts rank
    0's over a torch.distributed process group; what that needs is checked here, before the describe
    pass writes anything, so `sketchps run --script` fails before it starts a server. Returns the
    names of the buffers to broadcast (named_buffers' order), [] without buffers or with
    broadcast_buffers False."""
    named = list(model.named_buffers())
    if not named or not broadcast:
        return []
    what = (f"model: has buffer '{named[0][0]}' (state outside the parameters, e.g. BatchNorm running statistics), "
            "which DistributedOptimizer broadcasts from rank 0 every round over a torch.distributed gloo process "
            "group (broadcast_buffers=True, as DDP)")
    instead = ("; or pass broadcast_buffers=False (each rank keeps its own statistics), or use GroupNorm or "
               "LayerNorm instead of BatchNorm (no buffers)")
    if ctx.job.mode == "decentralized" and ctx.job.peer_on_failure == "regroup":
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
    return [n for n, _ in named]


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
    """Broadcasts the model's buffers `names` from rank 0 in one call: their bytes are packed into one
    uint8 tensor (largest element size first, so every buffer's slice stays aligned for its dtype),
    which keeps every dtype (float running statistics, int64 num_batches_tracked) bitwise. The
    buffers are looked up by name at every call, as DDP does, so a module that re-assigns one
    (self.ema = 0.9 * self.ema + ...) has its new tensor broadcast; a buffer registered or removed
    since, or one whose shape or dtype changed, is a ConfigError naming it (every rank raises it)."""

    def __init__(self, model, names, group, rank):
        self.model = model
        now = dict(model.named_buffers())
        self.names = sorted(names, key=lambda n: -now[n].element_size())
        self.forms = [(now[n].shape, now[n].dtype) for n in self.names]
        self.sizes = [now[n].numel() * now[n].element_size() for n in self.names]
        self.flat = torch.empty(sum(self.sizes), dtype=torch.uint8)
        self.group = group
        self.rank = rank

    def _buffers(self):
        now = dict(self.model.named_buffers())
        if set(now) != set(self.names):
            added = sorted(set(now) - set(self.names))
            what = f"'{added[0]}' is new" if added else f"'{sorted(set(self.names) - set(now))[0]}' is gone"
            raise ConfigError(f"model: its buffers changed after DistributedOptimizer was made ({what}); "
                              "broadcast_buffers broadcasts the buffers the model had then: register every buffer "
                              "before making DistributedOptimizer")
        for name, (shape, dtype) in zip(self.names, self.forms):
            b = now[name]
            if b.shape != shape or b.dtype != dtype:
                raise ConfigError(f"model: buffer '{name}' is now {b.dtype} {list(b.shape)}, it was {dtype} "
                                  f"{list(shape)} when DistributedOptimizer was made (broadcast_buffers needs the "
                                  "same shape and dtype on every rank for the whole job)")
        return [now[n] for n in self.names]

    def __call__(self):
        buffers = self._buffers()
        with torch.no_grad():
            if self.rank == 0:
                _pack(buffers, self.flat)
            dist.broadcast(self.flat, 0, group=self.group)
            if self.rank != 0:
                offset = 0
                for b, n in zip(buffers, self.sizes):
                    b.copy_(self.flat[offset:offset + n].view(b.dtype).view(b.shape))
                    offset += n


def _pack(buffers, flat):
    """Copies the buffers' bytes into `flat` in order. `flat` is a host tensor (gloo broadcasts host
    memory) and the buffers live on the model's device: torch.cat(..., out=flat) would refuse an out
    tensor on another device, so the bytes are joined where the buffers are and then copied."""
    flat.copy_(torch.cat([b.detach().reshape(-1).view(torch.uint8) for b in buffers]))
