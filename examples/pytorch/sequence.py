"""A small attention model on a synthetic sequence task, trained by sketchps (docs/pytorch.md).

    build/ci/tools/sketchps run --job examples/pytorch/sequence.yaml --script examples/pytorch/sequence.py \
        -- --save runs/sequence.pt

Task: a sequence of 12 tokens from a 16-token vocabulary; the label is the token that occurs most
often (ties: the smallest). The data set is generated from the job's seed, identically on every rank
(data.train_samples sequences for training, 2000 for testing)."""
import argparse

import torch
import torch.nn.functional as F
from torch import nn

import sketchps.torch as sps
from sketchps import data

VOCAB, LENGTH = 16, 12


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (n, LENGTH), generator=g)
    counts = F.one_hot(x, VOCAB).sum(1)
    return x, counts.argmax(1)


class Attention(nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.randn(LENGTH, width) * 0.02)
        self.attend = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, x):
        h = self.embed(x) + self.position
        a, _ = self.attend(h, h, h, need_weights=False)
        return self.head(self.norm(h + a).mean(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", default="sequence.pt", help="where rank 0 saves the trained state_dict")
    args = parser.parse_args()

    ctx = sps.init()
    model = Attention()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model,
                                   scheme="topk", density=0.05)
    train_x, train_y = make_data(ctx.job.train_samples, ctx.job.seed)
    test_x, test_y = make_data(2000, ctx.job.seed + 1)
    with opt:
        while not opt.done:
            idx = opt.batch_indices()
            opt.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step(loss=loss)
        mine = torch.tensor(data.share(len(test_y), ctx.rank, ctx.world_size), dtype=torch.int64)
        result = opt.evaluate(*data.count_correct(model, test_x[mine], test_y[mine]), final=True)
        print(f"final test accuracy {result['accuracy']:.4f}", flush=True)
    if ctx.rank == 0:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
