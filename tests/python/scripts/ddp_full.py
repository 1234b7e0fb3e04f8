"""Issue 39's whole DDP script: BatchNorm (tiny_models.BatchNormMlp, its buffers broadcast), AdamW with
weight decay, OneCycleLR, gradient accumulation over --accumulate batches (the first under no_sync()),
clipping of the aggregated gradient to --clip, a DataLoader over torch's DistributedSampler, and a
loop that starts where the job (re)starts, so that Ctrl-C and `sketchps run --resume` end where the
uninterrupted run does.

    ddp_full.py --via hook|wrapper|plain [--accumulate K] [--clip C] [--epochs N] [--batch B]
                [--save-dir DIR]

hook: DDP with sketchps.ddp.comm_hook (clip_grad_norm_ between backward and step, as with DDP);
wrapper: sps.DistributedOptimizer(apply="torch", clip_grad_norm=C) over the plain module;
plain: DDP's own allreduce, no sketchps (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
Every step is one round: len(loader) // K steps per epoch (the job's train.rounds must be
--epochs times that). Resume: the loop starts at the position's round (the epoch and its batches
already run are skipped), and the optimizer and scheduler are registered with checkpoint(), so the
job saves them with the model and a resume restores them. --save-dir: every rank saves its module's
state_dict there (rank<R>.pt) at the end. --sleep-forward S: every forward sleeps S seconds first.
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--via", choices=("hook", "wrapper", "plain"), required=True)
parser.add_argument("--accumulate", type=int, default=2)
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--save-dir", default="")
parser.add_argument("--sleep-forward", type=float, default=0.0, help="seconds every forward sleeps first")
args = parser.parse_args()

dist.init_process_group("gloo")
if args.via != "plain":
    import sketchps.ddp
    import sketchps.torch as sps
    sps.init()
rank = dist.get_rank()
torch.manual_seed(7)
dataset = tiny_models.centres_dataset()
sampler = DistributedSampler(dataset, seed=1)
loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)
steps_per_epoch = len(loader) // args.accumulate
net = tiny_models.BatchNormMlp()
if args.sleep_forward:  # a slow forward: the records' compute_s must count it
    net.register_forward_pre_hook(lambda module, inputs: time.sleep(args.sleep_forward))


def adamw(params):
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)


position = None
if args.via == "wrapper":
    model = net
    opt = sps.DistributedOptimizer(adamw(net.parameters()), net, apply="torch", clip_grad_norm=args.clip)
    no_sync, position = opt.no_sync, opt
else:
    model = DDP(net)
    opt = adamw(model.parameters())
    no_sync = model.no_sync
    if args.via == "hook":
        position = sketchps.ddp.CommHookState(model)
        model.register_comm_hook(position, sketchps.ddp.comm_hook)
scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps_per_epoch * args.epochs)
if args.via == "hook":
    position.checkpoint(opt, scheduler)  # the wrapper saves its torch optimizer itself
elif args.via == "wrapper":
    position.checkpoint(scheduler)


def step(batches):
    """One round: --accumulate batches, the last one synchronized; clipping; the update."""
    opt.zero_grad()
    for i in range(args.accumulate):
        x, y = next(batches)
        last = i == args.accumulate - 1
        with contextlib.nullcontext() if last else no_sync():
            loss = F.cross_entropy(model(x), y) / args.accumulate
            if last and args.via == "hook":
                position.record_loss(loss)
            loss.backward()
    if args.via == "wrapper":
        opt.step(loss=loss)  # clips the aggregate itself (clip_grad_norm=)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
    scheduler.step()


first = position.round if position is not None else 0
model.train()
with position if position is not None else contextlib.nullcontext():
    for epoch in range(first // steps_per_epoch, args.epochs):
        sampler.set_epoch(epoch)
        batches = iter(loader)
        done = first - epoch * steps_per_epoch if epoch == first // steps_per_epoch else 0
        for _ in range(done * args.accumulate):  # the batches of the rounds already run
            next(batches)
        for _ in range(done, steps_per_epoch):
            step(batches)
print(f"rank {rank}: {args.epochs * steps_per_epoch - first} steps from round {first}", flush=True)
if args.save_dir:
    torch.save(net.state_dict(), os.path.join(args.save_dir, f"rank{rank}.pt"))
dist.destroy_process_group()
