"""The Python tests' training script: Fashion-MNIST with a model from tiny_models.py.

    train.py --model mlp|frozen_stem [--optimizer sgd|adamw] [--cpp-init FILE] [--perturb-rank R] [--save PATH]
             [--fail-rank R --fail-at-round N]

--cpp-init FILE starts from sketchps-worker's initial weights of its built-in mlp, as
`sketchps-worker --job JOB --write-initial-weights FILE` wrote them (to compare both paths bit for bit); --perturb-rank makes rank R's model differ (a bad-use test); --fail-rank makes rank R
raise inside `with opt:` before round N (a failure test)."""
import argparse
import sys
import os

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
import sketchps.torch as sps  # noqa: E402
from sketchps import data  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="mlp")
parser.add_argument("--cpp-init", default="", help="raw float32 initial weights (sketchps-worker --write-initial-weights)")
parser.add_argument("--perturb-rank", type=int, default=-1)
parser.add_argument("--save", default="")
parser.add_argument("--optimizer", default="sgd",
                    choices=["sgd", "adamw", "torch-adamw", "torch-adamw-cosine", "rmsprop"],
                    help="torch-adamw: tiny_models.torch_adamw with apply='torch'; torch-adamw-cosine: AdamW with "
                         "apply='torch' and torch's CosineAnnealingLR stepped every round; rmsprop: "
                         "torch.optim.RMSprop (apply 'auto' makes it 'torch')")
parser.add_argument("--no-overlap", action="store_true", help="DistributedOptimizer(overlap=False)")
parser.add_argument("--fail-rank", type=int, default=-1, help="this rank raises RuntimeError ...")
parser.add_argument("--fail-at-round", type=int, default=0, help="... before this round")
parser.add_argument("--backward-twice", action="store_true", help="two backward passes per step (misuse with overlap)")
args = parser.parse_args()

ctx = sps.init()
job = ctx.job
model = tiny_models.Mlp() if args.model == "mlp" else tiny_models.FrozenStem()
if args.cpp_init:
    with torch.no_grad():
        with open(args.cpp_init, "rb") as f:
            weights = data.tensor_of_bytes(f.read(), torch.float32, (-1,))
        torch.nn.utils.vector_to_parameters(weights, model.parameters())
if ctx.rank == args.perturb_rank:
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)

scheduler = None
if args.optimizer == "adamw":
    torch_opt = torch.optim.AdamW(tiny_models.adamw_groups(model, 0.05), lr=2e-3, betas=(0.9, 0.98), eps=1e-7)
elif args.optimizer == "torch-adamw":
    torch_opt = tiny_models.torch_adamw(model)
elif args.optimizer == "torch-adamw-cosine":
    torch_opt, scheduler = tiny_models.adamw_cosine(model, job.total_rounds)
elif args.optimizer == "rmsprop":
    torch_opt = torch.optim.RMSprop([p for p in model.parameters() if p.requires_grad], lr=1e-3)
else:
    torch_opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=job.lr, momentum=job.momentum)
opt = sps.DistributedOptimizer(torch_opt, model, overlap=not args.no_overlap,
                               apply="torch" if args.optimizer.startswith("torch-") else "auto")
train_x, train_y = data.fashion_mnist("train", job.data_path)
test_x, test_y = data.fashion_mnist("test", job.data_path)
with opt:
    while not opt.done:
        if ctx.rank == args.fail_rank and opt.round == args.fail_at_round:
            raise RuntimeError(f"rank {ctx.rank} fails on purpose at round {opt.round}")
        idx = opt.batch_indices()
        opt.zero_grad()
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        loss.backward()
        if args.backward_twice:
            F.cross_entropy(model(train_x[idx]), train_y[idx]).backward()
        stats = opt.step(loss=loss)
        if scheduler is not None:
            scheduler.step()
        if "regroup" in stats and "redo_from" in stats:
            print(f"rank {ctx.rank}: regrouped, going on from round {stats['redo_from']}", flush=True)
    mine = torch.tensor(data.share(len(test_y), ctx.rank, ctx.world_size), dtype=torch.int64)
    result = opt.evaluate(*data.count_correct(model, test_x[mine], test_y[mine], batch_size=200), final=True)
    print(f"rank {ctx.rank}: final test accuracy {result['accuracy']:.4f}", flush=True)
if args.save and ctx.rank == 0:
    torch.save(model.state_dict(), args.save)
