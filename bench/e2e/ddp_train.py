#!/usr/bin/env python3
"""Fashion-MNIST CNN, data-parallel under PyTorch DDP (gloo): the DDP side of bench/e2e.

A plain PyTorch training script. Everything distributed is in `distributed()` (process group,
DDP wrapper, optional gradient compression hook) and `all_sum()` (one all-reduce of a few
numbers), so that the same script can later run on another backend.

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

Evaluation: after every --eval-every rounds on the first --eval-samples test images, and after the
last round on all 10,000. It is sharded (rank w takes a contiguous 1/P block) and the counts are
all-reduced, so every rank knows the exact accuracy.

--metrics-out: one JSON line per round: round, round_start (unix s, before the forward), time (unix
s, after the optimizer step), epoch, loss (this rank's), and after an evaluation test_accuracy,
test_loss, test_round (the round whose weights were evaluated), test_samples, eval_s. Finally
{"event": "final_eval", "start", "end", "test_accuracy", "test_loss", "test_round", "test_samples"}.
Exit 0 when trained; 2 for bad options or data (message names the option or file).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
TEST_SAMPLES = 10_000
MASK64 = (1 << 64) - 1


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


def read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """An IDX ubyte file (gzip or not) as a uint8 array."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if int.from_bytes(raw[:4], "big") != magic:
        fail(f"{path}: bad magic (not an IDX file of the expected kind)")
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims)
    if data.size != math.prod(shape):
        fail(f"{path}: {data.size} bytes of data, header says {shape}")
    return data.reshape(shape)


def load_split(data_dir: str, prefix: str) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images [N, 28, 28] and int64 labels [N] of `prefix` ("train" or "t10k")."""
    d = Path(data_dir)
    images = read_idx(d / f"{prefix}-images-idx3-ubyte.gz", 0x803, 3)
    labels = read_idx(d / f"{prefix}-labels-idx1-ubyte.gz", 0x801, 1)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 [B, 28, 28] -> float32 [B, 1, 28, 28], the sketchps normalization."""
    return ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)


# --- sketchps' deterministic initialisation and data order (worker/rng.h) ---------------------

class SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        limit = MASK64 - (MASK64 % n)
        x = self.next()
        while x >= limit:
            x = self.next()
        return x % n


def epoch_permutation(n: int, seed: int, epoch: int) -> list[int]:
    """EpochPermutation of worker/fashion_mnist.cc: Fisher-Yates with SplitMix64."""
    rng = SplitMix64(SplitMix64(seed).next() ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & MASK64))
    perm = list(range(n))
    for i in range(n, 1, -1):
        j = rng.below(i)
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


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


# --- the distributed backend ------------------------------------------------------------------

def distributed(model: nn.Module, compression: str) -> tuple[nn.Module, int, int]:
    """Joins the process group (env://, gloo) and wraps the model; returns (model, rank, world)."""
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    ddp = nn.parallel.DistributedDataParallel(model)
    if compression == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    return ddp, dist.get_rank(), dist.get_world_size()


def all_sum(values: list[float]) -> list[float]:
    """The element-wise sum of `values` over all ranks."""
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


# --- training ---------------------------------------------------------------------------------

def evaluate(model: nn.Module, images, labels, n: int, rank: int, world: int) -> dict:
    """Accuracy and mean loss on the first n test images; this rank takes block `rank` of `world`."""
    lo, hi = n * rank // world, n * (rank + 1) // world
    correct = loss_sum = 0.0
    with torch.no_grad():
        for start in range(lo, hi, 1000):
            end = min(hi, start + 1000)
            logits = model(normalize(images[start:end]))
            loss_sum += F.cross_entropy(logits, labels[start:end], reduction="sum").item()
            correct += (logits.argmax(1) == labels[start:end]).sum().item()
    correct, total, loss_sum = all_sum([correct, hi - lo, loss_sum])
    return {"test_accuracy": correct / total, "test_loss": loss_sum / total, "test_samples": int(total)}


class Batches:
    """This rank's training batches by the data order rule (one permutation per epoch)."""

    def __init__(self, args, rank: int, world: int):
        self.images, self.labels = load_split(args.data, "train")
        if args.train_samples > len(self.labels):
            fail(f"--train-samples {args.train_samples} > the {len(self.labels)} samples in {args.data}")
        self.n, self.seed, self.b, self.rank, self.world = args.train_samples, args.seed, args.batch, rank, world
        self.steps = max(1, self.n // (world * self.b))
        self.perm, self.perm_epoch = None, -1

    def __call__(self, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, step = divmod(r, self.steps)
        if epoch != self.perm_epoch:
            self.perm, self.perm_epoch = torch.tensor(epoch_permutation(self.n, self.seed, epoch)), epoch
        first = step * self.world * self.b + self.rank * self.b
        idx = self.perm[first:first + self.b]
        return normalize(self.images[idx]), self.labels[idx]


def train(args) -> None:
    torch.set_num_threads(1)
    model = Cnn()
    init_like_sketchps(model, args.seed)
    model, rank, world = distributed(model, args.compression)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    batches = Batches(args, rank, world)
    test_x, test_y = load_split(args.data, "t10k")
    rounds = args.rounds if args.rounds > 0 else math.ceil(args.epochs * batches.steps)
    out = open(args.metrics_out, "a") if args.metrics_out else None
    for r in range(rounds):
        x, y = batches(r)
        record = {"round": r, "round_start": time.time()}
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        record.update(time=time.time(), epoch=r / batches.steps, loss=loss.item())
        if args.eval_every > 0 and (r + 1) % args.eval_every == 0 and r + 1 < rounds:
            t0 = time.time()
            record.update(evaluate(model.module, test_x, test_y, min(args.eval_samples, TEST_SAMPLES), rank, world))
            record.update(test_round=r, eval_s=time.time() - t0)
        write(out, record)
        if rank == 0 and (r % 50 == 0 or r + 1 == rounds):
            print(f"ddp_train: round {r + 1}/{rounds} loss {record['loss']:.4f}", file=sys.stderr, flush=True)
    start = time.time()
    final = evaluate(model.module, test_x, test_y, TEST_SAMPLES, rank, world)
    write(out, {"event": "final_eval", "start": start, "end": time.time(), "test_round": rounds - 1, **final})
    if rank == 0:
        print(f"ddp_train: final test accuracy {final['test_accuracy']:.4f}", file=sys.stderr, flush=True)
    if out:
        out.close()
    dist.barrier()


def fail(message: str):
    print(f"ddp_train: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def write(out, record: dict) -> None:
    if out:
        out.write(json.dumps(record) + "\n")
        out.flush()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Fashion-MNIST CNN under PyTorch DDP (see the module doc)")
    ap.add_argument("--compression", choices=["none", "fp16"], default="none")
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
    return args


if __name__ == "__main__":
    train(parse_args())
    # Leave at once: with torch 1.13 and gloo, tearing down the DDP reducer at interpreter exit can
    # deadlock (its process group joins a gloo thread that waits for the GIL the teardown holds).
    # Everything is written and every rank has passed the final barrier.
    sys.stderr.flush()
    os._exit(0)
