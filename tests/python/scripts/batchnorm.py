"""A DistributedOptimizer script with BatchNorm (tiny_models.BatchNormMlp on centres_data): its
running statistics are buffers, broadcast from rank 0 at every round (broadcast_buffers).

    batchnorm.py [--no-broadcast] [--init-group] [--perturb-buffers-rank R] [--save-dir DIR]
                 [--time-broadcast N] [--dropout P] [--ema-buffer]

Under `sketchps run --script` (RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT and the job from the
environment), the job's SGD (apply "sketchps"), the opt.batch_indices() loop. --no-broadcast:
DistributedOptimizer(broadcast_buffers=False). --init-group: the script makes the default gloo
process group itself (init_process_group before sps.init), which DistributedOptimizer then uses.
--perturb-buffers-rank: rank R's running statistics start different (the first broadcast must
replace them). --save-dir: every rank saves its state_dict there (rank<R>.pt) after the final
evaluation (model.eval() on its share of the test points). --time-broadcast N: after training, every
rank times N more broadcasts of the buffers and rank 0 prints the median. --dropout P: a Dropout(P)
in the norm's place, so the model has no buffers; --ema-buffer: a buffer the forward re-assigns
(tiny_models.BatchNormMlp)."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
import sketchps.torch as sps  # noqa: E402
from sketchps import data  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--no-broadcast", action="store_true")
parser.add_argument("--init-group", action="store_true")
parser.add_argument("--perturb-buffers-rank", type=int, default=-1)
parser.add_argument("--save-dir", default="")
parser.add_argument("--time-broadcast", type=int, default=0)
parser.add_argument("--dropout", type=float, default=None)
parser.add_argument("--ema-buffer", action="store_true")
args = parser.parse_args()

if args.init_group:
    dist.init_process_group("gloo")
ctx = sps.init()
job = ctx.job
model = tiny_models.BatchNormMlp(dropout=args.dropout, ema=args.ema_buffer)  # right after init(): the job's seed, the same weights on every rank
if ctx.rank == args.perturb_buffers_rank:
    with torch.no_grad():
        model.norm.running_mean.add_(1.0)
        model.norm.num_batches_tracked.add_(5)
train_x, train_y, test_x, test_y = tiny_models.centres_data()
opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=job.lr, momentum=job.momentum), model,
                               broadcast_buffers=not args.no_broadcast)
with opt:
    while not opt.done:
        idx = opt.batch_indices()
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        loss.backward()
        opt.step(loss=loss)
    model.eval()
    mine = torch.tensor(data.share(len(test_y), ctx.rank, ctx.world_size), dtype=torch.int64)
    result = opt.evaluate(*data.count_correct(model, test_x[mine], test_y[mine]), final=True)
    print(f"rank {ctx.rank}: final test accuracy {result['accuracy']:.4f}", flush=True)
    if args.time_broadcast:
        times = []
        for _ in range(args.time_broadcast):
            start = time.perf_counter()
            opt._broadcast()
            times.append(time.perf_counter() - start)
        times.sort()
        print(f"rank {ctx.rank}: buffer broadcast median {1e6 * times[len(times) // 2]:.0f} us over {len(times)}",
              flush=True)
if args.save_dir:
    torch.save(model.state_dict(), os.path.join(args.save_dir, f"rank{ctx.rank}.pt"))
