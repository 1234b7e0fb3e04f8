"""sketchps: compressed data-parallel training of your own PyTorch model (docs/pytorch.md).

    import sketchps.torch as sps
    sps.init()
    opt = sps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)

The rounds run in the C++ core (sketchps._core over libsketchps_python_core.so): the same schemes,
parameter-server client, peer collectives and job spec as the sketchps-worker daemon. The core links
no torch (it works with the torch installed); its kernels are the CPU or the CUDA ones, chosen by
SKETCHPS_KERNELS before it loads (sketchps/_kernels.py).
"""
import torch  # noqa: F401  (the package's modules use it; loaded before the core's threads start)

from sketchps import _kernels
from sketchps._libdir import LIBRARY_DIR

KERNELS, KERNELS_LIBRARY = _kernels.load(LIBRARY_DIR)

from sketchps import _core  # noqa: E402  (after the kernels it links are loaded)

_kernels.check(_core, KERNELS, KERNELS_LIBRARY)

from sketchps.errors import ConfigError, Error, ModelMismatchError, OrderError, TransportError  # noqa: E402

__all__ = ["ConfigError", "Error", "ModelMismatchError", "OrderError", "TransportError", "KERNELS"]
