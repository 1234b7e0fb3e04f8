"""Which kernels library this process runs on, chosen before sketchps._core is imported.

The kernels are one shared library per backend with one soname (kernels/CMakeLists.txt):
LIBRARY_DIR/libsketchps_kernels.so (CPU) and LIBRARY_DIR/cuda/libsketchps_kernels.so (CUDA, where the
build had nvcc), LIBRARY_DIR being where libsketchps_python_core.so is (sketchps/_libdir.py, written
by the CMake build or by python/setup.py). load() preloads the chosen one with RTLD_GLOBAL, so the
core's NEEDED libsketchps_kernels.so resolves to it (the dynamic loader matches the soname of a
library already loaded before it searches any path).

Environment SKETCHPS_KERNELS:
  cpu   the CPU kernels (OpenMP; the model on the CPU);
  cuda  the CUDA kernels (the model on cuda:0); ConfigError naming the library and the variable when
        the library is missing or no CUDA device answers;
  auto  (default) cuda when the CUDA library exists and torch.cuda.is_available(), else cpu.
"""
import ctypes
import os

from sketchps.errors import ConfigError

VARIABLE = "SKETCHPS_KERNELS"
_CHOICES = ("cpu", "cuda", "auto")


def library_paths(library_dir):
    """{"cpu": path, "cuda": path} of the two kernels libraries under library_dir."""
    return {"cpu": os.path.join(library_dir, "libsketchps_kernels.so"),
            "cuda": os.path.join(library_dir, "cuda", "libsketchps_kernels.so")}


def _cuda_available():
    import torch
    return torch.cuda.is_available()


def choose(library_dir, value=None, cuda_available=_cuda_available):
    """(kind, path) of the kernels SKETCHPS_KERNELS (or `value`) asks for. ConfigError for an unknown
    value or a missing library, naming the variable and the file."""
    value = (os.environ.get(VARIABLE, "") if value is None else value).strip() or "auto"
    if value not in _CHOICES:
        raise ConfigError(f"{VARIABLE}: '{value}' is not cpu, cuda or auto")
    paths = library_paths(library_dir)
    if value == "auto":
        value = "cuda" if os.path.exists(paths["cuda"]) and cuda_available() else "cpu"
    elif value == "cuda" and not os.path.exists(paths["cuda"]):
        raise ConfigError(f"{VARIABLE}=cuda: the CUDA kernels {paths['cuda']} do not exist (this sketchps was built "
                          f"without nvcc); set {VARIABLE}=cpu or auto")
    if not os.path.exists(paths[value]):
        raise ConfigError(f"{VARIABLE}: the {value} kernels {paths[value]} do not exist (is the library folder "
                          "sketchps was installed against still there?)")
    return value, paths[value]


def load(library_dir):
    """Preloads the chosen kernels library; returns (kind, path)."""
    kind, path = choose(library_dir)
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise ConfigError(f"{VARIABLE}={kind}: cannot load {path}: {e}") from None
    return kind, path


def check(core, kind, path):
    """After importing _core: the process runs the kernels load() chose, and they can run here."""
    loaded = core.kernels_backend()
    if loaded != kind:
        raise ConfigError(f"{VARIABLE}: sketchps chose the {kind} kernels ({path}), but this process runs the "
                          f"{loaded} ones ({core.kernels_description()}): a libsketchps_kernels.so was loaded "
                          "before sketchps (LD_LIBRARY_PATH or LD_PRELOAD?)")
    try:
        core.check_kernels()
    except ConfigError as e:
        raise ConfigError(f"{VARIABLE}={kind}: the kernels {path} cannot run here: {e}; set {VARIABLE}=cpu to "
                          "train on the CPU") from None
