"""The Python path computes what sketchps-worker computes: the same job and seeds, once with the C++
workers and once with tests/python/scripts/train.py (the built-in mlp defined in Python, started from
the C++ worker's initial weights: sketchps-worker --write-initial-weights), give bitwise equal weights
after every round."""
import os
import subprocess

import torch

from conftest import JOB, SCRIPT, build_dir, records, run, summary
from sketchps.export import state_dict_from_checkpoints


def cpp_initial_weights(tmp_path):
    """The file of sketchps-worker's initial weights for the tests' job (its mlp, its seed)."""
    job, out = tmp_path / "init.yaml", tmp_path / "init.f32"
    job.write_text(JOB)
    worker = os.path.join(build_dir(), "worker", "sketchps-worker")
    subprocess.run([worker, "--job", str(job), "--write-initial-weights", str(out)], check=True, timeout=120)
    return out


def test_the_worker_writes_its_initial_weights(tmp_path):
    weights = cpp_initial_weights(tmp_path).read_bytes()
    assert len(weights) == 4 * 235146  # the mlp's parameters, float32
    again = tmp_path / "again"
    again.mkdir()
    assert cpp_initial_weights(again).read_bytes() == weights  # the seed decides them
    other = tmp_path / "other.yaml"
    other.write_text(JOB.replace("seed: 3", "seed: 4"))
    worker = os.path.join(build_dir(), "worker", "sketchps-worker")
    subprocess.run([worker, "--job", str(other), "--write-initial-weights", str(tmp_path / "o.f32")], check=True)
    assert (tmp_path / "o.f32").read_bytes() != weights


def test_python_workers_equal_cpp_workers_bit_for_bit(tmp_path):
    cpp, _ = run(tmp_path, "cpp")
    init = cpp_initial_weights(tmp_path)
    py, _ = run(tmp_path, "python", "--script", SCRIPT, "--", "--model", "mlp", "--cpp-init", str(init))
    for rank in (0, 1):
        a, b = records(cpp, rank), records(py, rank)
        assert len(a) == len(b) == 24
        assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
        assert len({r["checksum"] for r in a}) == 24  # the weights move every round
        assert [r["payload_up"] for r in a] == [r["payload_up"] for r in b]
        assert [r["loss"] for r in a] == [r["loss"] for r in b]
    assert summary(py)["final_test_accuracy"] == summary(cpp)["final_test_accuracy"]
    rounds_cpp, weights_cpp = state_dict_from_checkpoints(str(cpp / "job.yaml"), str(cpp / "checkpoints"))
    rounds_py, weights_py = state_dict_from_checkpoints(str(py / "job.yaml"), str(py / "checkpoints"))
    assert rounds_cpp == rounds_py == 24
    assert list(weights_cpp) == list(weights_py) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                                     "fc3.bias"]
    for name in weights_cpp:
        assert torch.equal(weights_cpp[name], weights_py[name]), name

