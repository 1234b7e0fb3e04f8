"""Which kernels library the package loads (python/sketchps/_kernels.py, SKETCHPS_KERNELS): the choice
rule on a folder of stand-in libraries, and in fresh processes without a visible GPU: auto and cpu
run on the CPU kernels, cuda is a clear ConfigError naming the library and the variable (not a
crash), an unknown value is named. The CUDA kernels themselves need a GPU (scripts/gpu-check.sh)."""
import os
import subprocess
import sys

import pytest
import torch

from sketchps import _core, _kernels
from sketchps._libdir import LIBRARY_DIR
from sketchps.errors import ConfigError


def python(code, kernels=None):
    """Runs `code` in a fresh python3 with no visible GPU; the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k != "SKETCHPS_KERNELS"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    if kernels is not None:
        env["SKETCHPS_KERNELS"] = kernels
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def libraries(tmp_path):
    """A library folder with (empty) stand-ins for both kernels libraries."""
    (tmp_path / "cuda").mkdir()
    for path in _kernels.library_paths(str(tmp_path)).values():
        open(path, "w").close()
    return tmp_path


def test_the_choice(libraries):
    paths = _kernels.library_paths(str(libraries))
    assert _kernels.choose(str(libraries), "auto", cuda_available=lambda: True) == ("cuda", paths["cuda"])
    assert _kernels.choose(str(libraries), "auto", cuda_available=lambda: False) == ("cpu", paths["cpu"])
    assert _kernels.choose(str(libraries), "", cuda_available=lambda: True) == ("cuda", paths["cuda"])  # unset: auto
    assert _kernels.choose(str(libraries), "cpu", cuda_available=lambda: True) == ("cpu", paths["cpu"])
    assert _kernels.choose(str(libraries), "cuda", cuda_available=lambda: False) == ("cuda", paths["cuda"])
    os.remove(paths["cuda"])  # a build without nvcc
    assert _kernels.choose(str(libraries), "auto", cuda_available=lambda: True) == ("cpu", paths["cpu"])
    with pytest.raises(ConfigError, match=f"SKETCHPS_KERNELS=cuda: the CUDA kernels {paths['cuda']} do not exist"):
        _kernels.choose(str(libraries), "cuda")
    with pytest.raises(ConfigError, match="SKETCHPS_KERNELS: 'gpu' is not cpu, cuda or auto"):
        _kernels.choose(str(libraries), "gpu")


def test_this_process_runs_the_kernels_it_chose():
    import sketchps
    assert _core.kernels_backend() == sketchps.KERNELS
    assert sketchps.KERNELS_LIBRARY in _core.kernels_description()
    assert os.path.dirname(sketchps.KERNELS_LIBRARY).startswith(LIBRARY_DIR)


@pytest.mark.parametrize("kernels", [None, "auto", "cpu"])
def test_without_a_gpu_the_cpu_kernels_run(kernels):
    done = python("import sketchps, sketchps._core as c; print(sketchps.KERNELS, c.kernels_backend())", kernels)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["cpu", "cpu"]


def test_cuda_kernels_without_a_gpu_are_a_clear_error():
    done = python("import sketchps", "cuda")
    assert done.returncode == 1, done.stderr[-3000:]  # an exception, not a signal
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sketchps.errors.ConfigError: SKETCHPS_KERNELS=cuda: ")
    assert os.path.join(LIBRARY_DIR, "cuda", "libsketchps_kernels.so") in last
    if os.path.exists(os.path.join(LIBRARY_DIR, "cuda", "libsketchps_kernels.so")):
        assert "no CUDA device" in last and "set SKETCHPS_KERNELS=cpu" in last  # loaded, then checked
    else:
        assert "do not exist" in last


def test_an_unknown_choice_is_named():
    done = python("import sketchps", "gpu")
    assert done.returncode == 1
    assert "ConfigError: SKETCHPS_KERNELS: 'gpu' is not cpu, cuda or auto" in done.stderr


def test_the_core_refuses_buffers_off_the_loaded_kernels_device(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("job_id: k\nmode: decentralized\nworkers: 1\nmodel: custom\nlayers: [[w, [4]]]\n"
                   "data: {batch_size: 1, train_samples: 8}\ntrain: {rounds: 1, seed: 1}\n")
    params, grads = torch.zeros(4), torch.zeros(4)
    with pytest.raises(ConfigError, match="parameters are on cuda, but the cpu kernels are loaded .*SKETCHPS_KERNELS"):
        _core.Worker(_core.load_job(str(job)), _core.WorkerConfig(), [("w", [4])], params.data_ptr(),
                     grads.data_ptr(), 4, "cuda", [])
    with pytest.raises(ConfigError, match="buffers: 5 values, the layout's parameters 4"):
        _core.Worker(_core.load_job(str(job)), _core.WorkerConfig(), [("w", [4])], params.data_ptr(),
                     grads.data_ptr(), 5, "cpu", [])
