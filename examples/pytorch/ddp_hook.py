"""A DDP training script whose gradient exchange goes through sketchps: DDP's comm hook
(docs/pytorch.md "DDP's comm hook"). The rest is plain DDP: torch.distributed over gloo, a DataLoader
with torch's DistributedSampler, torch's AdamW and an LR scheduler, BatchNorm (DDP broadcasts its
running statistics from rank 0 at every forward).

    build/ci/tools/sketchps run --job examples/pytorch/ddp_hook.yaml \
        --script examples/pytorch/ddp_hook.py -- --save runs/ddp_hook.pt

Every backward DDP synchronizes is one round of the job; the job's rounds end the loop (this job:
one epoch of floor(60000 / (32 * 4)) = 468 rounds, the DataLoader's 468 batches per rank with
drop_last)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import sketchps.ddp
import sketchps.torch as sps
from sketchps import data


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def evaluate(state, model, ctx, test_x, test_y, final):
    """This rank's share of the test set, summed over the workers and recorded with the last round."""
    model.eval()  # through DDP: BatchNorm uses rank 0's running statistics, the same on every rank
    mine = torch.tensor(data.share(len(test_y), ctx.rank, ctx.world_size), dtype=torch.int64)
    counts = data.count_correct(model, test_x[mine], test_y[mine])
    model.train()
    return state.evaluate(*counts, final=final)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", default="ddp_hook.pt", help="where rank 0 saves the trained state_dict")
    parser.add_argument("--scheme", default="topk")
    parser.add_argument("--density", type=float, default=0.05)
    parser.add_argument("--lr", type=float, default=2e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (sketchps run sets them)
    ctx = sps.init()                 # the job, and SKETCHPS_SERVERS or the peers
    model = DDP(Net())
    state = sketchps.ddp.CommHookState(model, scheme=args.scheme, density=args.density)
    model.register_comm_hook(state, sketchps.ddp.comm_hook)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=state.rounds)

    train = TensorDataset(*data.fashion_mnist("train", ctx.job.data_path))
    test_x, test_y = data.fashion_mnist("test", ctx.job.data_path)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=ctx.job.batch_size, sampler=sampler, drop_last=True)
    every = ctx.job.eval_every_rounds
    with state:  # leaves the job at the end (or tells the servers this rank failed)
        epoch = 0
        while not state.done:
            sampler.set_epoch(epoch)
            for x, y in loader:
                if state.done:
                    break
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                state.record_loss(loss)  # optional: the round's loss in metrics.jsonl and the progress line
                loss.backward()          # the round: DDP's buckets through sketchps
                opt.step()
                scheduler.step()
                stats = state.last_stats
                if ctx.rank == 0 and stats["round"] % 100 == 0:
                    print(f"round {stats['round']} loss {stats['loss']:.3f}: {stats['bytes_up']} bytes up "
                          f"({stats['dense_bytes'] / max(1, stats['bytes_up']):.0f}x less than dense)", flush=True)
                if every and state.round % every == 0 and not state.done:
                    accuracy = evaluate(state, model, ctx, test_x, test_y, False)["accuracy"]
                    print(f"test accuracy {accuracy:.4f}", flush=True)
            epoch += 1
        result = evaluate(state, model, ctx, test_x, test_y, True)
        print(f"final test accuracy {result['accuracy']:.4f}", flush=True)
    if ctx.rank == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
