#!/usr/bin/env python3
"""Fashion-MNIST CNN, data-parallel under PyTorch DDP (gloo): the DDP side of bench/e2e.

A plain PyTorch training script; the data, the data order, evaluation and the DDP hooks are
workload_common.py's (shared with the workload scripts).

The job mirrors the sketchps default job (schemes/job_spec.h):
  - the CNN of worker/models.cc, initialised exactly as sketchps does (SplitMix64 stream,
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), modules in registration order), so both start from the
    same weights;
  - Fashion-MNIST from the Debian IDX files, x = (pixel/255 - 0.2860) / 0.3530;
  - the data order rule of worker/fashion_mnist.h: epoch e uses the seeded permutation pi_e and at
    step s rank w trains on pi_e[s*P*b + w*b : s*P*b + w*b + b];
  - SGD (lr, momentum), batch b per rank, rounds = --rounds or ceil(epochs * floor(N / (P*b))).
Launch: one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set (env://);
set GLOO_SOCKET_IFNAME to the interface to use. torch.set_num_threads(1).
--compression none | fp16 (DDP's fp16_compress_hook) | powersgd (PowerSGDState(process_group=None,
matrix_approximation_rank=--powersgd-rank, start_powerSGD_iter=--powersgd-start), torch's defaults
otherwise: its own default start, 1000, is more than this job runs) | postlocal (PyTorch's post-local
SGD) | diloco (DiLoCo): both from local_rivals.py (shared with the workload scripts), --period H
(post-local SGD: models averaged every H steps after --local-warmup dense all-reduce rounds; DiLoCo: H
inner steps of the SGD, then the outer Nesterov step --outer-lr 0.7 --outer-momentum 0.9, the
paper's); their intermediate evaluations use the weights of the last synchronisation (test_round: its
round).

Evaluation: after every --eval-every rounds on the first --eval-samples test images, and after the
last round on all of them (10,000). It is sharded (rank w takes a contiguous 1/P block) and the counts are
all-reduced, so every rank knows the exact accuracy.

--metrics-out: one JSON line per round: round, round_start (unix s, before the forward), time (unix
s, after the optimizer step), epoch, loss (this rank's), and after an evaluation test_accuracy,
test_loss, test_round (the round whose weights were evaluated), test_samples, eval_s. Finally
{"event": "final_eval", "start", "end", "test_accuracy", "test_loss", "test_round", "test_samples",
"weights"} (weights: the final model's checksum, equal on every rank).
Exit 0 when trained; 2 for bad options or data (message names the option or file).
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import local_rivals
from workload_common import (DATA_DIR, TEST_SAMPLES, Batches, SplitMix64, WorkloadError, all_sum,  # noqa: F401
                             checksum, count_correct, epoch_permutation, load_split, normalize, share, wrap_ddp, write)


# --- the model and the data ------------------------------------------------------------------

class Cnn(nn.Module):
    """conv3x3 1->32, ReLU, maxpool2, conv3x3 32->64, ReLU, maxpool2, fc 3136->64, ReLU, fc 64->10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


# --- sketchps' deterministic initialisation and data order (worker/rng.h) ---------------------

def splitmix_uniform(seed: int, count: int) -> np.ndarray:
    """The first `count` SplitMix64(seed).Uniform01() values as float32 (vectorised)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def init_like_sketchps(model: nn.Module, seed: int) -> None:
    """InitParameters of worker/models.cc: weight then bias of each module, one stream."""
    params = [p for m in model.modules() for p in m.parameters(recurse=False)]
    u = splitmix_uniform(seed, sum(p.numel() for p in params))
    at = 0
    with torch.no_grad():
        for m in model.modules():
            own = list(m.parameters(recurse=False))
            if not own:
                continue
            bound = np.float32(1.0 / math.sqrt(m.weight[0].numel()))
            for p in own:
                values = (np.float32(2.0) * u[at:at + p.numel()] - np.float32(1.0)) * bound
                p.copy_(torch.from_numpy(values.reshape(tuple(p.shape))))
                at += p.numel()


# --- training ---------------------------------------------------------------------------------

def evaluate(model: nn.Module, images, labels, n: int, rank: int, world: int) -> dict:
    """Accuracy and mean loss on the first n test images; this rank takes block `rank` of `world`."""
    correct, total, loss_sum = all_sum(list(count_correct(model, images, labels, *share(n, rank, world), chunk=1000)))
    return {"test_accuracy": correct / total, "test_loss": loss_sum / total, "test_samples": int(total)}


def train(args) -> None:
    torch.set_num_threads(1)
    model = Cnn()
    init_like_sketchps(model, args.seed)
    rival = None
    if args.compression in local_rivals.KINDS:
        if not dist.is_initialized():
            dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        rival = local_rivals.from_args(args.compression, model,
                                       lambda m: torch.optim.SGD(m.parameters(), lr=args.lr, momentum=args.momentum), args)
        model, optimizer = rival.model, rival.optimizer
    else:
        model, _ = wrap_ddp(model, args.compression, args.powersgd_rank, args.powersgd_start)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    rank, world = dist.get_rank(), dist.get_world_size()
    net = model.module if hasattr(model, "module") else model
    batches = Batches(*load_split(args.data, "train"), args.train_samples, args.seed, args.batch, rank, world)
    test_x, test_y = load_split(args.data, "t10k")
    rounds = args.rounds if args.rounds > 0 else math.ceil(args.epochs * batches.steps)
    out = open(args.metrics_out, "a") if args.metrics_out else None
    if rank == 0 and rival is not None:
        what = local_rivals.describe_args(args.compression, args)
        print(f"ddp_train: {what}", file=sys.stderr, flush=True)
    for r in range(rounds):
        x, y = batches(r)
        record = {"round": r, "round_start": time.time()}
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if rival is not None:
            rival.end_step(r, rounds)
        record.update(time=time.time(), epoch=r / batches.steps, loss=loss.item())
        if args.eval_every > 0 and (r + 1) % args.eval_every == 0 and r + 1 < rounds:
            t0 = time.time()
            record.update(evaluate(rival.eval_module() if rival is not None else net, test_x, test_y,
                                   min(args.eval_samples, len(test_y)), rank, world))
            record.update(test_round=rival.synced_round if rival is not None else r, eval_s=time.time() - t0)
        write(out, record)
        if rank == 0 and (r % 50 == 0 or r + 1 == rounds):
            print(f"ddp_train: round {r + 1}/{rounds} loss {record['loss']:.4f}", file=sys.stderr, flush=True)
    if rival is not None:
        rival.finish()  # post-local SGD: the ranks' models differ since the last averaging
    start = time.time()
    final = evaluate(net, test_x, test_y, len(test_y), rank, world)
    write(out, {"event": "final_eval", "start": start, "end": time.time(), "test_round": rounds - 1,
                "weights": checksum(net), **final})
    if rank == 0:
        print(f"ddp_train: final test accuracy {final['test_accuracy']:.4f}", file=sys.stderr, flush=True)
    if out:
        out.close()
    dist.barrier()


def fail(message: str):
    print(f"ddp_train: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Fashion-MNIST CNN under PyTorch DDP (see the module doc)")
    ap.add_argument("--compression", choices=["none", "fp16", "powersgd", "postlocal", "diloco"], default="none")
    local_rivals.add_arguments(ap, "--compression")
    ap.add_argument("--powersgd-rank", type=int, default=2, help="--compression powersgd: matrix_approximation_rank")
    ap.add_argument("--powersgd-start", type=int, default=10,
                    help="--compression powersgd: start_powerSGD_iter (vanilla allreduce before; >= 2)")
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per round")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    ap.add_argument("--rounds", type=int, default=0, help="rounds to train (0: from --epochs)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=100, metavar="ROUNDS", help="0: final evaluation only")
    ap.add_argument("--eval-samples", type=int, default=TEST_SAMPLES, metavar="N",
                    help="test images of the intermediate evaluations (the final one uses all)")
    ap.add_argument("--train-samples", type=int, default=60_000, help="the permuted prefix of the train set")
    ap.add_argument("--data", default=DATA_DIR, help="folder of the Fashion-MNIST IDX files")
    ap.add_argument("--metrics-out", help="append one JSON line per round here")
    args = ap.parse_args(argv)
    for name in ("batch", "eval_samples", "train_samples"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.rounds < 0 or args.epochs <= 0 or args.eval_every < 0:
        ap.error("--rounds and --eval-every must be >= 0 and --epochs > 0")
    local_rivals.check_arguments(ap, args, args.compression)
    if args.powersgd_rank < 1 or args.powersgd_start < 2:
        ap.error("--powersgd-rank must be >= 1 and --powersgd-start >= 2")
    return args


if __name__ == "__main__":
    try:
        train(parse_args())
    except WorkloadError as e:
        fail(str(e))
    # Leave at once: with torch 1.13 and gloo, tearing down the DDP reducer at interpreter exit can
    # deadlock (its process group joins a gloo thread that waits for the GIL the teardown holds).
    # Everything is written and every rank has passed the final barrier.
    sys.stderr.flush()
    os._exit(0)
