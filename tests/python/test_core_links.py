"""sketchps._core is torch-free, so one build works with any torch: neither the extension nor
libsketchps_python_core.so links libtorch, libc10 or libtorch_python (directly or through anything
they load), the core exports only its API (sketchps/python_core.h), and the extension loads and
works in a process that never imported torch."""
import os
import re
import subprocess
import sys

import sketchps._core
from sketchps._libdir import LIBRARY_DIR

EXTENSION = sketchps._core.__file__
CORE = os.path.join(LIBRARY_DIR, "libsketchps_python_core.so")
TORCH = re.compile(r"^lib(torch|c10|shm|caffe2)")


def needed(path):
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)


def loaded(path):
    """Every library the dynamic loader resolves for `path` (ldd), by name."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "not found" not in out, out
    return [line.split()[0] for line in out.splitlines() if "=>" in line]


def test_the_extension_links_only_the_core_library():
    names = needed(EXTENSION)
    assert "libsketchps_python_core.so" in names
    assert not [n for n in names if TORCH.match(n)], names
    assert not [n for n in names if n.startswith(("libgrpc", "libabsl", "libprotobuf"))], names  # all in the core


def test_nothing_they_load_is_torch():
    for path in (EXTENSION, CORE):
        names = loaded(path)
        assert "libsketchps_kernels.so" in names, (path, names)
        assert not [n for n in names if TORCH.match(n)], (path, names)


def test_the_core_exports_its_api_only():
    symbols = subprocess.run(["nm", "-D", "--defined-only", CORE], capture_output=True, text=True,
                             check=True).stdout.split("\n")
    ours = [line.split()[-1] for line in symbols if "8sketchps" in line]
    assert ours and all("6pycore" in s for s in ours), [s for s in ours if "6pycore" not in s][:5]
    assert not [line for line in symbols if "4absl" in line or "4grpc" in line][:1]


def test_the_extension_works_without_torch(tmp_path):
    """The core's own calls, in a process where importing torch fails."""
    code = f"""
import ctypes, importlib.machinery, importlib.util, sys
sys.modules["torch"] = None  # import torch raises ImportError
ctypes.CDLL({os.path.join(LIBRARY_DIR, "libsketchps_kernels.so")!r}, mode=ctypes.RTLD_GLOBAL)
spec = importlib.util.spec_from_file_location("_core", {EXTENSION!r})
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
job = core.load_job("", ["workers=3"])
print(job.workers, core.kernels_backend(), len(core.global_batch(job, 0)), core.shard(10, 1, 3))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[0] == "3 cpu 96 [4, 5, 6]"
