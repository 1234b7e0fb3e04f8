"""The Python path's round engine as the C++ worker's: the exchange overlapping backward gives the
same bits as the exchange after it; two backward passes in an overlapped round are refused, not
sent half-accumulated; and in decentralized mode a killed Python peer makes the survivors regroup
and finish with equal replicas."""
from conftest import SCRIPT, records, run, summary

PEERS = """job_id: python-regroup
mode: decentralized
workers: 3
servers: 1
model: mlp
data: {batch_size: 32, train_samples: 6400}
train: {rounds: 24, eval_every_rounds: 0, seed: 3}
optimizer: {lr: 0.05, momentum: 0.9}
scheme: {name: topk, density: 0.02}
peer: {timeout_seconds: 3, on_failure: regroup}
"""


def test_overlapped_and_sequential_exchanges_compute_the_same_bits(tmp_path):
    overlapped, _ = run(tmp_path, "overlap", "--script", SCRIPT, "--", "--model", "mlp")
    sequential, _ = run(tmp_path, "sequential", "--script", SCRIPT, "--", "--model", "mlp", "--no-overlap")
    for rank in (0, 1):
        a, b = records(overlapped, rank), records(sequential, rank)
        assert len(a) == len(b) == 24
        assert [r["checksum"] for r in a] == [r["checksum"] for r in b]
        assert len({r["checksum"] for r in a}) == 24


def test_two_backward_passes_in_an_overlapped_round_are_refused(tmp_path):
    out, done = run(tmp_path, "twice", "--script", SCRIPT, "--", "--model", "mlp", "--backward-twice", check=False)
    assert done.returncode == 1
    logs = (out / "worker-0.log").read_text() + (out / "worker-1.log").read_text()
    assert "more than one backward in this round" in logs and "overlap=False" in logs


def test_a_killed_python_peer_makes_the_survivors_regroup(tmp_path):
    out, _ = run(tmp_path, "regroup", "--kill", "worker:2@8", "--script", SCRIPT, "--", "--model", "mlp", job=PEERS)
    finals = []
    for rank in (0, 1):
        recs = records(out, rank)
        assert recs[-1]["round"] == 23
        assert recs[-1]["workers"] == 2
        notes = [r["regroup"] for r in recs if "regroup" in r]
        assert len(notes) == 1 and notes[0]["lost"] == 1 and notes[0]["workers"] == 2
        finals.append(recs[-1]["checksum"])
    assert finals[0] == finals[1]
    assert "regrouped, going on from round" in (out / "worker-0.log").read_text()
    assert summary(out)["final_weights_checksum"] == finals[0]
