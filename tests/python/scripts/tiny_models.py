"""Models of the Python tests' scripts (imported by the scripts and by the tests that check them)."""
import torch
from torch import nn
import torch.nn.functional as F


class Mlp(nn.Module):
    """sketchps-worker's built-in `mlp` (worker/models.cc), defined in Python."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.relu(self.fc1(x.flatten(1)))
        h = F.relu(self.fc2(h))
        return self.fc3(h)


class FrozenStem(nn.Module):
    """A model of its own: a frozen random projection (left out of the job) and two trained layers
    with LayerNorm in between."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(784, 64)
        self.stem.requires_grad_(False)
        self.hidden = nn.Linear(64, 48)
        self.norm = nn.LayerNorm(48)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        h = torch.tanh(self.stem(x.flatten(1)))
        return self.head(F.relu(self.norm(self.hidden(h))))


def adamw_groups(model, weight_decay):
    """AdamW's usual param groups: weight decay on the weight matrices, none on biases and norms."""
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() > 1]
    rest = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() <= 1]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def torch_adamw(model):
    """Torch's AdamW in adamw_groups, applied by torch (DiLoCo's inner optimizer under local steps)."""
    return torch.optim.AdamW(adamw_groups(model, 0.05), lr=3e-3, betas=(0.9, 0.98), eps=1e-7)


def adamw_cosine(model, rounds):
    """Torch's AdamW in adamw_groups with torch's CosineAnnealingLR over `rounds` steps (the user's own
    optimizer and scheduler, applied by torch: DistributedOptimizer(..., apply="torch"))."""
    opt = torch.optim.AdamW(adamw_groups(model, 0.05), lr=3e-3, betas=(0.9, 0.98), eps=1e-7)
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=rounds)


class BatchNormMlp(nn.Module):
    """A small MLP with BatchNorm1d (running statistics: buffers) for DDP scripts: 20-dimensional
    points, 4 classes (centres_dataset). middle > 0 adds a Linear(64, middle) and a Linear(middle, 64)
    after the norm (middle 2500: 324k parameters, 1.3 MB, more than DDP's 1 MiB first bucket, so
    DDP hands a comm hook two buckets per backward). dropout: a Dropout(dropout) in the norm's place
    (no buffers; each training forward draws from torch's RNG). ema: a buffer `ema`, the running mean
    of the hidden features, which each training forward re-assigns (a new tensor, not in place)."""

    def __init__(self, middle=0, dropout=None, ema=False):
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.norm = nn.BatchNorm1d(64) if dropout is None else nn.Dropout(dropout)
        if ema:
            self.register_buffer("ema", torch.zeros(64))
        self.middle = nn.Sequential(nn.Linear(64, middle), nn.ReLU(), nn.Linear(middle, 64)) if middle else None
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        h = F.relu(self.norm(self.fc1(x)))
        if hasattr(self, "ema") and self.training:
            self.ema = 0.9 * self.ema + 0.1 * h.detach().mean(0)
        if self.middle is not None:
            h = F.relu(self.middle(h))
        return self.fc2(h)


def centres_dataset(n=1024, seed=0):
    """A TensorDataset of n 20-dimensional points labelled by the nearest of 4 random centres (the
    same on every rank: its own generator)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 20, generator=g)
    x = torch.randn(n, 20, generator=g)
    return torch.utils.data.TensorDataset(x, torch.cdist(x, centres).argmin(1))


def centres_data(train=1024, test=512, seed=0):
    """(train_x, train_y, test_x, test_y): centres_dataset's points, the first `train` for training
    and the next `test` for evaluation."""
    x, y = centres_dataset(train + test, seed).tensors
    return x[:train], y[:train], x[train:], y[train:]
