"""A model of its own (tests/python/scripts/tiny_models.py FrozenStem: a frozen layer, LayerNorm)
trained by 2 Python workers over real servers and in decentralized mode: replicas equal, the
exported checkpoints load into PyTorch and evaluate to the accuracy the run reported, and a model
that differs between the ranks stops the run with ModelMismatchError in both modes."""
import shutil

import pytest
import torch

import tiny_models
from conftest import SCRIPT, records, run, summary
from sketchps import _core, data, export
from sketchps.export import state_dict_from_checkpoints


def fresh_model(seed):
    torch.manual_seed(seed)  # what sketchps.torch.init() does before the script builds its model
    return tiny_models.FrozenStem()


def assert_replicas_equal(run_dir):
    a, b = records(run_dir, 0), records(run_dir, 1)
    assert len(a) == len(b) == 24
    assert [r["checksum"] for r in a] == [r["checksum"] for r in b]


def test_ps_mode_trains_exports_and_evaluates_as_reported(tmp_path):
    saved = tmp_path / "saved.pt"
    out, _ = run(tmp_path, "ps", "--script", SCRIPT, "--", "--model", "frozen_stem", "--save", str(saved))
    assert_replicas_equal(out)
    job = _core.load_job(str(out / "job.yaml"))
    assert job.model == "custom"
    assert [name for name, _ in job.layout] == ["hidden.weight", "hidden.bias", "norm.weight", "norm.bias",
                                                "head.weight", "head.bias"]
    rounds, exported = state_dict_from_checkpoints(str(out / "job.yaml"), str(out / "checkpoints"))
    assert rounds == 24
    model = fresh_model(job.seed)
    initial_stem = model.stem.weight.clone()
    missing, unexpected = model.load_state_dict(exported, strict=False)
    assert sorted(missing) == ["stem.bias", "stem.weight"] and not unexpected
    trained = torch.load(saved)
    assert torch.equal(trained["stem.weight"], initial_stem)  # frozen: left out, unchanged
    for name, tensor in exported.items():
        assert torch.equal(trained[name], tensor), name  # the replica is the servers' master copy
    test_x, test_y = data.fashion_mnist("test")
    correct, samples, _ = data.count_correct(model, test_x, test_y, batch_size=200)
    assert correct / samples == summary(out)["final_test_accuracy"]
    assert_export_finds_the_jobs_checkpoint_dir(tmp_path, out, exported)


def assert_export_finds_the_jobs_checkpoint_dir(tmp_path, out, exported):
    """`sketchps export RUN_DIR` reads the checkpoints where the job's checkpoint.dir put them, with
    the run's key (RUN_DIR/checkpoint.key), and names an --out it cannot write."""
    moved = tmp_path / "elsewhere"
    shutil.move(str(out / "checkpoints"), str(moved))
    text = (out / "job.yaml").read_text()
    assert "checkpoint: {every_rounds: 8}" in text  # conftest's JOB, as the launcher wrote it
    (out / "job.yaml").write_text(text.replace("checkpoint: {every_rounds: 8}",
                                               f"checkpoint: {{every_rounds: 8, dir: {moved}}}"))
    assert export.main([str(out)]) == 0
    written = torch.load(out / "model.pt")
    assert written.keys() == exported.keys() and all(torch.equal(written[k], exported[k]) for k in exported)
    assert export.main([str(out), "--out", str(tmp_path / "no-such-dir" / "model.pt")]) == 2


def test_decentralized_mode_keeps_replicas_equal(tmp_path):
    out, _ = run(tmp_path, "decentralized", "--mode", "decentralized", "--script", SCRIPT, "--", "--model",
                 "frozen_stem")
    assert_replicas_equal(out)
    assert summary(out)["final_test_accuracy"] > 0.3


@pytest.mark.parametrize("mode, why", [("ps", "different replicas at round 0"),
                                       ("decentralized", "starts from other weights than this one's")])
def test_a_model_that_differs_between_ranks_stops_the_run(tmp_path, mode, why):
    out, done = run(tmp_path, mode, "--mode", mode, "--script", SCRIPT, "--", "--model", "mlp", "--perturb-rank", "1",
                    check=False)
    assert done.returncode == 1
    logs = (out / "worker-0.log").read_text() + (out / "worker-1.log").read_text()
    assert "sketchps.errors.ModelMismatchError" in logs
    assert why in logs
