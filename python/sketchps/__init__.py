"""sketchps: compressed data-parallel training of your own PyTorch model (docs/pytorch.md).

    import sketchps.torch as sps
    sps.init()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)

The rounds run in the C++ core (sketchps._core): the same schemes, parameter-server client, peer
collectives and job spec as the sketchps-worker daemon.
"""
import torch  # noqa: F401  (loads libtorch before the extension that links it)

from sketchps import _core  # noqa: F401
from sketchps.errors import ConfigError, Error, ModelMismatchError, OrderError, TransportError

__all__ = ["ConfigError", "Error", "ModelMismatchError", "OrderError", "TransportError"]
