"""A DDP training script whose gradient exchange goes through sketchps (sketchps.ddp.comm_hook): the
rest is plain DDP: torch.distributed over gloo, a DataLoader with torch's DistributedSampler,
torch's AdamW and CosineAnnealingLR, a model with BatchNorm1d (DDP broadcasts its buffers).

    ddp_hook.py [--plain] [--scheme S --density D] [--epochs N] [--save-dir DIR] [--check-mean]
                [--fail-rank R --fail-at-round N] [--middle M] [--no-overlap] [--accumulate K]
                [--no-finish] [--kill-rank R --kill-at-round N] [--overflow-rank R --overflow-at-round N [--scaler]]

Under `sketchps run --script` (RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT and the job from the
environment). --plain: the same script without sketchps (DDP's own allreduce), for 2 processes
started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. --save-dir: every rank saves its
state_dict there (rank<R>.pt) after a final evaluation through the DDP model (whose forward
broadcasts rank 0's buffers). --check-mean: each rank prints the largest difference between the
hook's aggregate and the mean of the workers' local gradients (over gloo) in the first rounds.
--fail-rank: rank R raises inside `with state:` before its backward of round N (a failure test).
--middle M: a wider model (tiny_models.BatchNormMlp(M): M >= 2500 makes DDP hand over two buckets
per backward); every rank then prints the most buckets one backward handed the hook.
--no-overlap: CommHookState(..., overlap=False), the round runs at the last bucket.
--accumulate K: each step accumulates K batches of the loader (the first K-1 under DDP's no_sync()),
so the loop runs one round per K batches. --no-finish: the loop runs without `with state:` and the
script never calls finish(). --kill-rank R: rank R kills itself with SIGKILL before its backward of
round N (a rank that vanishes without a word). --overflow-rank: rank R's batch of round N holds an
Inf (its gradient is not finite, as an fp16 overflow under a GradScaler), every rank prints whether
its .grad of that round is finite and steps only when it is, as GradScaler.step does; --scaler passes
an enabled scaler to CommHookState (torch's CPU GradScaler where this torch has one, else a stand-in
whose is_enabled() is True: the hook asks nothing else)."""
import argparse
import contextlib
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--plain", action="store_true", help="no sketchps: DDP's own allreduce")
parser.add_argument("--scheme", default=None)
parser.add_argument("--density", type=float, default=None)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--save-dir", default="")
parser.add_argument("--check-mean", action="store_true")
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-at-round", type=int, default=0)
parser.add_argument("--middle", type=int, default=0)
parser.add_argument("--no-overlap", action="store_true")
parser.add_argument("--accumulate", type=int, default=1)
parser.add_argument("--no-finish", action="store_true")
parser.add_argument("--kill-rank", type=int, default=-1)
parser.add_argument("--kill-at-round", type=int, default=0)
parser.add_argument("--overflow-rank", type=int, default=-1)
parser.add_argument("--overflow-at-round", type=int, default=0)
parser.add_argument("--scaler", action="store_true")
args = parser.parse_args()

dist.init_process_group("gloo")
if not args.plain:
    import sketchps.ddp
    import sketchps.torch as sps
    sps.init()
rank = dist.get_rank()
torch.manual_seed(7)  # the same initial weights in both variants (DDP broadcasts rank 0's anyway)
dataset = tiny_models.centres_dataset()
sampler = DistributedSampler(dataset, seed=1)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
model = DDP(tiny_models.BatchNormMlp(args.middle))
state = None
if not args.plain:
    scaler = None
    if args.scaler:
        class EnabledScaler:
            def is_enabled(self):
                return True
        make = getattr(torch.amp, "GradScaler", None)
        scaler = make("cpu") if make is not None else EnabledScaler()
    state = sketchps.ddp.CommHookState(model, scheme=args.scheme, density=args.density, overlap=not args.no_overlap,
                                       grad_scaler=scaler)
    buckets = {}  # round -> buckets handed over

    def hook(state, bucket):
        buckets[state.round] = buckets.get(state.round, 0) + 1
        return sketchps.ddp.comm_hook(state, bucket)
    local = []
    if args.check_mean:
        def hook(state, bucket, local=local):  # noqa: F811  (keeps this rank's own gradient of the bucket)
            local.extend((id(p), g.clone()) for p, g in zip(bucket.parameters(), bucket.gradients()))
            buckets[state.round] = buckets.get(state.round, 0) + 1
            return sketchps.ddp.comm_hook(state, bucket)
    model.register_comm_hook(state, hook)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))

losses = []
micro = 0  # batches accumulated into the next step
with state if state is not None and not args.no_finish else contextlib.nullcontext():
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            if micro == 0:
                opt.zero_grad()
            micro += 1
            if micro < args.accumulate:
                with model.no_sync():
                    F.cross_entropy(model(x), y).backward()
                continue
            micro = 0
            overflow_round = state is not None and state.round == args.overflow_at_round and args.overflow_rank >= 0
            if overflow_round and rank == args.overflow_rank:
                x = x.clone()
                x[0, 0] = float("inf")
            loss = F.cross_entropy(model(x), y)
            if state is not None:
                state.record_loss(loss)
                if rank == args.fail_rank and state.round == args.fail_at_round:
                    raise RuntimeError(f"rank {rank} fails on purpose at round {state.round}")
                if rank == args.kill_rank and state.round == args.kill_at_round:
                    os.kill(os.getpid(), signal.SIGKILL)
            loss.backward()
            if args.check_mean and len(losses) < 3:
                grads = {id(p): p for p in model.parameters()}
                worst = 0.0
                for key, g in local:
                    mean = g.clone()
                    dist.all_reduce(mean)
                    worst = max(worst, (grads[key].grad - mean / dist.get_world_size()).abs().max().item())
                local.clear()
                print(f"rank {rank}: round {len(losses)} aggregate - mean of local gradients: {worst:.3g}", flush=True)
            if overflow_round:
                finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
                print(f"rank {rank}: round {args.overflow_at_round}: gradient finite {finite}", flush=True)
                if not finite:  # as GradScaler.step skips the optimizer
                    scheduler.step()
                    losses.append(float("nan"))
                    continue
            opt.step()
            scheduler.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():  # through DDP: its forward first broadcasts rank 0's BatchNorm buffers
        x, y = dataset.tensors
        accuracy = (model(x).argmax(1) == y).float().mean().item()
print(f"rank {rank}: {len(losses)} steps, first loss {losses[0]:.4f}, last loss {losses[-1]:.4f}, "
      f"accuracy {accuracy:.4f}", flush=True)
if args.middle and state is not None:
    print(f"rank {rank}: most buckets in one backward: {max(buckets.values())}", flush=True)
if args.save_dir:
    torch.save(model.module.state_dict(), os.path.join(args.save_dir, f"rank{rank}.pt"))
dist.destroy_process_group()
