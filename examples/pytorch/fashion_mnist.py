"""Fashion-MNIST with a model defined here, trained by sketchps (docs/pytorch.md).

    build/ci/tools/sketchps run --job examples/pytorch/fashion_mnist.yaml --script examples/pytorch/fashion_mnist.py \
        -- --save runs/fmnist.pt

The model, the SGD settings and the method are this script's; the job file gives the workers, the
servers, the data size and batch, the rounds and the learning-rate schedule. The model trains on the
device of the kernels sketchps loaded (SKETCHPS_KERNELS, docs/pytorch.md): cuda:0 with the CUDA
kernels, else the CPU."""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

import sketchps
import sketchps.torch as sps
from sketchps import data


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.norm = nn.GroupNorm(4, 32)  # BatchNorm works too: its buffers are broadcast from rank 0 each round
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.norm(self.conv2(h))), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def evaluate(opt, model, ctx, test_x, test_y, final):
    start = time.monotonic()
    mine = torch.tensor(data.share(len(test_y), ctx.rank, ctx.world_size), dtype=torch.int64)
    counts = data.count_correct(model, test_x[mine], test_y[mine])
    return opt.evaluate(*counts, final=final, seconds=time.monotonic() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", default="fashion_mnist.pt", help="where rank 0 saves the trained state_dict")
    args = parser.parse_args()

    ctx = sps.init()  # RANK, WORLD_SIZE, SKETCHPS_JOB, SKETCHPS_SERVERS or SKETCHPS_PEERS
    device = torch.device("cuda" if sketchps.KERNELS == "cuda" else "cpu")
    model = Net().to(device)  # after init(): the same initial weights on every rank
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
                                   scheme="gs_sgd", density=0.01)
    print(f"rank {ctx.rank}: {sketchps.KERNELS} kernels, model on {device}", flush=True)
    train_x, train_y = data.fashion_mnist("train", ctx.job.data_path)
    test_x, test_y = data.fashion_mnist("test", ctx.job.data_path)
    with opt:
        while not opt.done:
            idx = opt.batch_indices()  # this rank's share of the round's global batch
            opt.zero_grad()
            loss = F.cross_entropy(model(train_x[idx].to(device)), train_y[idx].to(device))
            loss.backward()
            stats = opt.step(loss=loss)
            if ctx.rank == 0 and stats["round"] % 100 == 0:
                print(f"round {stats['round']} loss {stats['loss']:.3f}: {stats['bytes_up']} bytes up "
                      f"({stats['dense_bytes'] / max(1, stats['bytes_up']):.0f}x less than dense)", flush=True)
            every = ctx.job.eval_every_rounds
            if every and opt.round % every == 0 and not opt.done:
                print(f"test accuracy {evaluate(opt, model, ctx, test_x, test_y, False)['accuracy']:.4f}", flush=True)
        result = evaluate(opt, model, ctx, test_x, test_y, True)
        print(f"final test accuracy {result['accuracy']:.4f}", flush=True)
    if ctx.rank == 0:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
