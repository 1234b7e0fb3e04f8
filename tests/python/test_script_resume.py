"""Issue 39's done-when script (scripts/ddp_full.py: BatchNorm with broadcast buffers, AdamW,
OneCycleLR, accumulation over 2 batches, clipping) through the DDP comm hook and through
DistributedOptimizer(apply="torch"), whose torch optimizer applies the update (optimizer.name
external): with the dense scheme both end bitwise equal to the same script under plain DDP (gloo,
no sketchps), and interrupted with Ctrl-C and resumed with `sketchps run --resume` (topk: the
workers' error feedback resumes too) every rank ends bitwise equal to its uninterrupted run. A resume
the launcher refuses (a rank's script state missing) moves nothing. CI runs the hook's 2-rank
resume; test_script_resume_long.py (the long lane) the wrapper's, both against plain DDP, and 4 ranks.
A model without buffers under the job's SGD (dropout: torch's RNG from the script's state) resumes
bitwise too.
The script's state alone: a resume refuses objects other than the saved ones."""
import os
import shutil
import signal
import subprocess
import time

import pytest
import torch

from conftest import HERE, build_dir, records, run
from sketchps import _resume
from sketchps.errors import ConfigError, OrderError

SCRIPT = os.path.join(HERE, "scripts", "ddp_full.py")
EPOCHS = 3


def rounds_of(world, accumulate=2, batch=16):
    """The script's rounds: 1024 samples, len(loader) // accumulate steps per epoch."""
    return (1024 // world // batch) // accumulate * EPOCHS


def job(world, scheme="name: dense"):
    return f"""job_id: python-script-resume
mode: ps
workers: {world}
servers: 2
data: {{batch_size: 32, train_samples: 1024}}
train: {{rounds: {rounds_of(world)}, eval_every_rounds: 0, seed: 3}}
optimizer: {{lr: 0.05, momentum: 0.9}}
scheme: {{{scheme}}}
checkpoint: {{every_rounds: 4}}
"""


def saved(folder, world):
    return [torch.load(folder / f"rank{r}.pt") for r in range(world)]


BUFFERS = ("norm.running_mean", "norm.running_var", "norm.num_batches_tracked")


def assert_bitwise(a, b, what, buffers=True):
    """Every rank's state_dict in a equals b's (buffers=False: the parameters only: under DDP the
    ranks' BatchNorm statistics differ after the last step, until a forward broadcasts rank 0's)."""
    for rank, (x, y) in enumerate(zip(a, b)):
        assert x.keys() == y.keys()
        for key in x:
            if buffers or key not in BUFFERS:
                assert torch.equal(x[key], y[key]), f"{what}: rank {rank}'s {key} differs"


def script_run(tmp_path, name, via, world, scheme="name: dense", *extra):
    """An uninterrupted run: every rank's state_dict at the end, and the run directory."""
    folder = tmp_path / f"{name}-weights"
    folder.mkdir()
    out, _ = run(tmp_path, name, "--script", SCRIPT, "--", "--via", via, "--save-dir", str(folder), *extra,
                 job=job(world, scheme))
    return saved(folder, world), out


def recorded(path):
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def interrupted_then_resumed(tmp_path, via, world, scheme, check_refusal=False):
    """Ctrl-C after a third of the rounds, then --resume; every rank's state_dict at the end."""
    folder = tmp_path / "interrupted-weights"
    folder.mkdir()
    interrupt_and_resume(tmp_path, job(world, scheme), [SCRIPT, "--via", via, "--save-dir", str(folder)],
                         rounds_of(world), world, check_refusal)
    return saved(folder, world)


def interrupt_and_resume(tmp_path, job_text, script_args, rounds, world, check_refusal=False):
    """`sketchps run --script` of script_args interrupted with Ctrl-C after a third of its rounds,
    then --resume'd (after checking, with check_refusal, that a refused resume moves nothing):
    every round is recorded once. Returns the resumed launcher's stderr."""
    job_file = tmp_path / "interrupted.yaml"
    job_file.write_text(job_text)
    out = tmp_path / "interrupted"
    cmd = [os.path.join(build_dir(), "tools", "sketchps"), "run", "--job", str(job_file), "--insecure",
           "--no-progress", "--out", str(out)]
    script = ["--script", *script_args[:1], "--", *script_args[1:]]
    launcher = subprocess.Popen(cmd + script, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while recorded(out / "worker-0.jsonl") < rounds // 3 + 2 and launcher.poll() is None:
        assert time.time() < deadline, "the run did not reach a third of its rounds"
        time.sleep(0.05)
    assert launcher.poll() is None, "the run ended before it could be interrupted"
    launcher.send_signal(signal.SIGINT)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 130, stderr[-4000:]
    if check_refusal:
        assert_refused_resume_moves_nothing(cmd + ["--resume"] + script, out)
    resumed = subprocess.run(cmd + ["--resume"] + script, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "resuming from the checkpoints" in resumed.stderr
    for rank in range(world):
        assert [r["round"] for r in records(out, rank)] == list(range(rounds))
    return resumed.stderr


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def assert_refused_resume_moves_nothing(cmd, out):
    """Without rank 1's script state the launcher refuses the resume, and every file stays put."""
    state = out / "worker-state"
    aside = out.parent / "aside"
    aside.mkdir()
    for f in state.glob("worker-1-script-*.pt"):
        shutil.move(str(f), str(aside / f.name))
    before = listing(out)
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "script's state" in refused.stderr and "nothing was moved" in refused.stderr, refused.stderr[-3000:]
    assert listing(out) == before
    for f in aside.iterdir():
        shutil.move(str(f), str(state / f.name))


def resume_bitwise(tmp_path, via, world, check_refusal=False):
    """The script with topk (error feedback: the workers' state resumes too), uninterrupted and
    interrupted then resumed: every rank's state_dict bitwise equal."""
    scheme = "name: topk, density: 0.1"
    reference, _ = script_run(tmp_path, "reference", via, world, scheme)
    assert_bitwise(reference[1:], reference[:1] * (world - 1), f"{via}: the ranks' parameters", buffers=False)
    resumed = interrupted_then_resumed(tmp_path, via, world, scheme, check_refusal=check_refusal)
    assert_bitwise(resumed, reference, f"{via}: resumed against uninterrupted")


def test_the_hooks_script_resumes_bitwise_and_a_refused_resume_moves_nothing(tmp_path):
    resume_bitwise(tmp_path, "hook", 2, check_refusal=True)


# --- the script's state without a job (sketchps/_resume.py) -------------------------------------

class _Job:
    checkpoint_every, total_rounds = 2, 10


def saved_state(tmp_path, monkeypatch, *objects):
    """A ScriptState of rank 0 after 4 rounds of a model and `objects`, written to tmp_path."""
    monkeypatch.setenv("SKETCHPS_STATE_DIR", str(tmp_path))
    state = _resume.ScriptState(_Job(), 0, torch.nn.Linear(2, 2), 0, None)
    state.register(*objects)
    state.at_forward(4)
    assert (tmp_path / _resume.file_name(0, 4)).exists()


def test_a_resume_refuses_objects_other_than_the_saved_ones(tmp_path, monkeypatch):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    saved_state(tmp_path, monkeypatch, opt, torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=10))
    resumed = _resume.ScriptState(_Job(), 0, torch.nn.Linear(2, 2), 4, "model")
    with pytest.raises(ConfigError, match="object 0 registered is a SGD, the run being resumed saved AdamW"):
        resumed.register(torch.optim.SGD(model.parameters(), lr=0.1))
    resumed = _resume.ScriptState(_Job(), 0, torch.nn.Linear(2, 2), 4, "model")
    resumed.register(torch.optim.AdamW(model.parameters()))
    with pytest.raises(OrderError, match="saved the state of OneCycleLR, which this script did not register"):
        resumed.at_forward(4)
    with pytest.raises(ConfigError, match=r"rank 0 rejoins the job at round 6, but its script's state"):
        _resume.ScriptState(_Job(), 0, torch.nn.Linear(2, 2), 6, "model")


def test_a_model_without_buffers_under_the_jobs_sgd_resumes_bitwise(tmp_path):
    """apply="sketchps", dropout and no buffers (scripts/batchnorm.py --dropout): the servers resume
    the weights and the optimizer, the script's state torch's RNG, so the resumed run draws the same
    dropout masks as the uninterrupted one."""
    from test_buffers import JOB, SCRIPT
    job = JOB.replace("every_rounds: 16", "every_rounds: 4").replace("name: dense", "name: topk, density: 0.1")
    reference, resumed = tmp_path / "reference-weights", tmp_path / "interrupted-weights"
    reference.mkdir()
    resumed.mkdir()
    args = ["--dropout", "0.3", "--save-dir"]
    run(tmp_path, "reference", "--script", SCRIPT, "--", *args, str(reference), job=job)
    interrupt_and_resume(tmp_path, job, [SCRIPT, *args, str(resumed)], 48, 2)
    assert_bitwise(saved(resumed, 2), saved(reference, 2), "dropout: resumed against uninterrupted")


def test_the_first_save_names_what_a_resume_would_restart(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SKETCHPS_STATE_DIR", str(tmp_path))
    model = torch.nn.Linear(2, 2)
    bare = _resume.ScriptState(_Job(), 0, model, 0, None)
    bare.at_forward(2)
    assert "rank 0: warning: a --resume from this job's checkpoints would not be exact: no torch optimizer was " \
           "passed to checkpoint()" in capsys.readouterr().err
    bare.at_forward(4)
    assert capsys.readouterr().err == ""  # once
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    alone = _resume.ScriptState(_Job(), 0, model, 0, None)
    alone.register(opt)
    alone.at_forward(2)
    err = capsys.readouterr().err
    assert "an LR scheduler drives the optimizer (its param_groups have initial_lr) but none was passed" in err
    assert "no torch optimizer" not in err
    both = _resume.ScriptState(_Job(), 0, model, 0, None)
    both.register(opt, scheduler)
    both.at_forward(2)
    assert capsys.readouterr().err == ""
