"""A DDP training script as users write it: the "before" of docs/pytorch.md's "Migrating a DDP script".
tests/python/test_migrate_ddp.py runs it as it is (torch.distributed, one process) and applies that
diff to it, then runs the result under `sketchps run --script`.

A small MLP without buffers on a synthetic task (20-dimensional points labelled by the nearest of 4
random centres), a TensorDataset, a DataLoader with torch's DistributedSampler."""
import torch, torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torch import nn
from torch.utils.data import TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.norm = nn.LayerNorm(64)  # not BatchNorm: sketchps refuses buffers (running statistics)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.norm(self.fc1(x))))


def make_dataset(n=1024, seed=0):
    g = torch.Generator().manual_seed(seed)  # the same data on every rank
    centres = torch.randn(4, 20, generator=g)
    x = torch.randn(n, 20, generator=g)
    return TensorDataset(x, torch.cdist(x, centres).argmin(1))


dataset = make_dataset()
dist.init_process_group("gloo")                      # RANK, WORLD_SIZE, MASTER_ADDR from the environment
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
model = Net()
model = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for x, y in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
print(f"final loss {loss.item():.4f}", flush=True)
