"""The typed fields the package reads from the core's Job (the job is parsed once, in C++; the package
never reads its YAML text): whether data.train_samples is set, peer.on_failure, and the optimizer's
learning-rate schedule keys, each against the job that sets it and the default job that does not."""
from sketchps import _core


def test_a_job_that_sets_none_of_them(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: mlp\ndata: {batch_size: 32}\n")
    job = _core.load_job(str(path))
    assert job.train_samples_set is False
    assert job.peer_on_failure == "regroup"
    assert job.schedule_settings == []


def test_each_field_follows_the_key_that_sets_it(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: mlp\n")
    job = _core.load_job(str(path), ["data.train_samples=6000", "mode=decentralized", "peer.on_failure=stop"])
    assert job.train_samples_set is True
    assert job.train_samples == 6000
    assert job.peer_on_failure == "stop"


def test_the_schedule_settings_name_every_key_that_changes_the_rate():
    job = _core.load_job("", ["optimizer.schedule=step", "optimizer.milestones=[1, 2]", "optimizer.warmup_epochs=0.5"])
    assert job.schedule_settings == [("schedule", "step"), ("warmup", "0.5 epochs"), ("milestones", "[1, 2]")]
    cosine = _core.load_job("", ["optimizer.schedule=cosine", "optimizer.min_lr=0.001"])
    assert cosine.schedule_settings == [("schedule", "cosine"), ("min_lr", "0.001")]
