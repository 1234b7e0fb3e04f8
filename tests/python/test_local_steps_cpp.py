"""train.local_steps on the Python path computes what sketchps-worker computes: the same job (H = 3
inner momentum-SGD steps, top-k with error feedback on the pseudo-gradient, an outer Nesterov step)
and seeds, once with the C++ workers and once with tests/python/scripts/train.py started from the C++
worker's initial weights, give bitwise equal weights, payloads and losses (the inner steps' mean)
after every round."""
from conftest import SCRIPT, records, run
from test_local_steps import JOB
from test_same_as_cpp import cpp_initial_weights


def test_python_workers_equal_cpp_workers_bit_for_bit_with_topk(tmp_path):
    job = JOB.replace("name: dense", "name: topk").replace("rounds: 2", "rounds: 4")
    cpp, _ = run(tmp_path, "cpp", job=job)
    init = cpp_initial_weights(tmp_path)
    py, _ = run(tmp_path, "python", "--script", SCRIPT, "--", "--model", "mlp", "--cpp-init", str(init), job=job)
    for rank in (0, 1):
        a, b = records(cpp, rank), records(py, rank)
        assert len(a) == len(b) == 4
        assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
        assert len({r["checksum"] for r in a}) == 4
        assert [r["payload_up"] for r in a] == [r["payload_up"] for r in b]
        assert [r["loss"] for r in a] == [r["loss"] for r in b]  # the inner steps' mean
