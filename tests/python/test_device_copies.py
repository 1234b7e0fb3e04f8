"""What a round copies between host and device memory (docs/gpu.md "What stays on the GPU"): every
round's record counts the bytes the process copied each way since the previous one
(copied_to_device, copied_to_host; kernels::BytesCopied). On the CPU kernels these copies are memcpys,
counted the same, so this runs in CI: for every compressed scheme a round copies less than one dense
vector each way (dense copies one, its payload), and local steps add nothing to a round, whatever H
and train.inner_state (their inner steps read the gradient where it lives). A decentralized job of
one peer (its own Peer service on loopback), in-process: the peer's own reduction is counted too."""
import pytest
import torch

import tiny_models
from conftest import train_one_peer

JOB = """job_id: copies
mode: decentralized
workers: 1
model: mlp
data: {{batch_size: 8, train_samples: 200}}
train: {{rounds: 5, eval_every_rounds: 0, seed: 11{train}}}
optimizer: {{lr: 0.05, momentum: 0.9}}
scheme: {scheme}
"""

COMPRESSED = ["{name: topk, density: 0.01}", "{name: gs_sgd, density: 0.01}", "{name: sketched_sgd, density: 0.01}",
              "{name: fetchsgd, density: 0.01}", "{name: dgc, density: 0.01, warmup_rounds: 0}",
              "{name: sdagc, density: 0.01}", "{name: gtopk, density: 0.01}", "{name: scalecom, density: 0.01}",
              "{name: sidco, density: 0.01}"]


def round_records(monkeypatch, tmp_path, scheme, train=""):
    """Trains the job's rounds; the round records (step()'s statistics), the inner steps' left out."""
    torch.manual_seed(0)
    x, y = torch.randn(200, 784), torch.randint(0, 10, (200,))
    records = []

    def keep(stats, opt):
        if "dense_bytes" in stats:  # a round's record; an inner step's has none
            records.append(stats)

    train_one_peer(monkeypatch, tmp_path, JOB.format(scheme=scheme, train=train), tiny_models.Mlp, x, y, 0.05, keep)
    return records


def test_dense_copies_one_dense_vector_each_way(monkeypatch, tmp_path):
    for r in round_records(monkeypatch, tmp_path, "{name: dense}")[1:]:
        assert r["copied_to_host"] == r["dense_bytes"], r
        assert r["copied_to_device"] == r["dense_bytes"], r


@pytest.mark.parametrize("scheme", COMPRESSED)
def test_a_compressed_round_copies_less_than_a_dense_vector(monkeypatch, tmp_path, scheme):
    records = round_records(monkeypatch, tmp_path, scheme)
    assert len(records) == 5
    for r in records[1:]:  # the first round sizes its arrays
        assert 0 < r["copied_to_host"] < r["dense_bytes"], (scheme, r)
        assert 0 < r["copied_to_device"] < r["dense_bytes"], (scheme, r)


@pytest.mark.parametrize("inner_state", ["reset", "keep"])
def test_local_steps_copy_nothing_more_than_one_step_rounds(monkeypatch, tmp_path, inner_state):
    one = round_records(monkeypatch, tmp_path, COMPRESSED[0])
    four = round_records(monkeypatch, tmp_path, COMPRESSED[0], f", local_steps: 4, inner_state: {inner_state}")
    assert len(four) == len(one) == 5
    for a, b in zip(one[1:], four[1:]):
        assert (b["copied_to_host"], b["copied_to_device"]) == (a["copied_to_host"], a["copied_to_device"])
