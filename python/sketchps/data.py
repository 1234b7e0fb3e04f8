"""Data sets as the C++ worker reads them, so a Python job can reproduce a C++ one bit for bit."""
import warnings

import torch

from sketchps import _core

DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def fashion_mnist(split, path=None):
    """(images float32 [N, 1, 28, 28] normalized as worker/fashion_mnist.h says, labels int64 [N]).

    split: "train" (60000 images) or "test" (10000); path: the folder of the IDX files (default:
    the Debian package dataset-fashion-mnist)."""
    count, images, labels = _core.fashion_mnist(path or DEFAULT_FASHION_MNIST, split)
    return tensor_of_bytes(images, torch.float32, (count, 1, 28, 28)), tensor_of_bytes(labels, torch.int64, (count,))


def tensor_of_bytes(data, dtype, shape):
    """A tensor of its own (a copy) holding the raw bytes `data` (sketchps._core's arrays) as `dtype`."""
    with warnings.catch_warnings():  # bytes are read-only: torch warns, and the clone owns its memory
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(data, dtype=dtype).view(shape).clone()


def count_correct(model, images, labels, batch_size=1000):
    """(correct, samples, loss_sum) of `model` on the samples, without gradients: the counts that
    DistributedOptimizer.evaluate sums over the workers. Each batch goes to the device of the
    model's first parameter (the samples may stay on the CPU)."""
    correct, loss_sum = 0, 0.0
    device = next(model.parameters()).device
    with torch.no_grad():
        for lo in range(0, len(labels), batch_size):
            logits = model(images[lo:lo + batch_size].to(device))
            target = labels[lo:lo + batch_size].to(device)
            loss_sum += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
            correct += int((logits.argmax(1) == target).sum().item())
    return correct, len(labels), loss_sum


def share(n, rank, world):
    """This rank's contiguous block of range(n) (worker/fashion_mnist.h Shard: the static split of
    an evaluation over the workers)."""
    return _core.shard(n, rank, world)


def global_batch_indices(job, round):
    """The samples every worker trains on in `round`, in rank order (int64 tensor): what one process
    with batch workers * batch_size uses to reproduce a job (sketchps._core.Job from
    sketchps.torch.init().job or sketchps._core.load_job)."""
    return torch.tensor(_core.global_batch(job, round), dtype=torch.int64)
