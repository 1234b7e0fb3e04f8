"""torchrun with the servers of `sketchps run --servers-only` (docs/pytorch.md "torchrun"): the
launcher starts the shards, publishes the workers' environment in <out>/workers.env and waits;
torchrun starts the ranks with that environment; the shards exit once every rank has left, and the
launcher writes the summary from the ranks' records. The same for the DDP script with the comm hook
(tests/python/scripts/ddp_hook.py: DataLoader, AdamW + cosine, BatchNorm): unchanged under both
launchers."""
import os
import re
import subprocess
import time

import pytest

from conftest import HERE, JOB, SCRIPT, build_dir, records, summary
from test_comm_hook import JOB as HOOK_JOB

# Debian 12's torchrun (torch 1.13) fails at start under Python 3.11 unless --redirects and --tee
# name a stream: the default "0" does not parse (Std.NONE is not iterable as an IntFlag member).
TORCHRUN = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1",
            "--tee", "1"]


HOOK_SCRIPT = os.path.join(HERE, "scripts", "ddp_hook.py")
CASES = {"optimizer": (JOB, [SCRIPT, "--model", "mlp"], 24), "comm_hook": (HOOK_JOB, [HOOK_SCRIPT], 48)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_torchrun_trains_with_the_servers_of_servers_only(tmp_path, case):
    text, script, rounds = CASES[case]
    out = tmp_path / "run"
    servers, env = start_servers_only(tmp_path, text, script)
    assert env["SKETCHPS_SERVERS"].count(",") == 1
    assert os.path.isabs(env["SKETCHPS_JOB"])
    ranks = subprocess.run(TORCHRUN + script, env=env, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert ranks.returncode == 0, (ranks.stdout + ranks.stderr)[-4000:]
    stdout, stderr = servers.communicate(timeout=60)
    assert servers.returncode == 0, stderr[-4000:]
    assert "SKETCHPS_SERVERS=" in stdout  # printed as well as written
    assert [r["round"] for r in records(out, 0)] == list(range(rounds))
    assert [r["checksum"] for r in records(out, 0)] == [r["checksum"] for r in records(out, 1)]
    assert summary(out)["rounds"] == rounds


def test_servers_only_refuses_what_it_cannot_do(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    for extra, message in [(["--mode", "decentralized"], "mode decentralized has no servers"),
                           (["--kill", "server:0@5"], "--kill: not with --servers-only")]:
        done = subprocess.run([os.path.join(build_dir(), "tools", "sketchps"), "run", "--servers-only", "--job",
                               str(job), "--insecure", "--out", str(tmp_path / "x"), *extra], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr, done.stderr


def start_servers_only(tmp_path, text, script):
    """`sketchps run --servers-only` for `script`; returns (the launcher, the workers' environment)."""
    job = tmp_path / "job.yaml"
    job.write_text(text)
    out = tmp_path / "run"
    servers = subprocess.Popen([os.path.join(build_dir(), "tools", "sketchps"), "run", "--servers-only", "--job",
                                str(job), "--insecure", "--no-progress", "--out", str(out), "--script", script[0], "--",
                                *script[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env_file = out / "workers.env"
    deadline = time.time() + 120
    while not env_file.exists():
        assert servers.poll() is None, servers.communicate()[1][-3000:]
        assert time.time() < deadline, "no workers.env"
        time.sleep(0.1)
    published = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    return servers, {**os.environ, **published, "OMP_NUM_THREADS": "1"}


# What torchrun's ranks do wrong -> what `sketchps run --servers-only` must name after torchrun exits.
LOST = {"killed": (["--kill-rank", "1", "--kill-at-round", "5"], 2, r"rank 1 \(pid \d+\) is gone without leaving"),
        "world_size": ([], 1, r"rank 0 \(pid \d+\) failed: ConfigError: WORLD_SIZE: 1 disagrees with the job's "
                              r"workers: 2"),
        "no_finish": (["--no-finish", "--epochs", "1"], 2,
                      r"rank 0 \(pid \d+\) failed: OrderError: the script ended after round 16 of the job's 48 "
                      r"rounds without finish\(\)")}


@pytest.mark.parametrize("case", sorted(LOST))
def test_servers_only_names_a_lost_rank_and_stops_within_seconds(tmp_path, case):
    """A rank killed with SIGKILL, ranks of the wrong world size, a script that ends early without
    finish(): torchrun exits, and the launcher names the rank from its status file, stops both
    servers and exits 1 within seconds (it waited for Ctrl-C)."""
    extra, nproc, message = LOST[case]
    servers, env = start_servers_only(tmp_path, HOOK_JOB, [HOOK_SCRIPT, *extra])
    command = [a if a != "2" else str(nproc) for a in TORCHRUN]
    ranks = subprocess.run(command + [HOOK_SCRIPT, *extra], env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
    assert ranks.returncode != 0 or case == "no_finish", (ranks.stdout + ranks.stderr)[-3000:]
    ended = time.time()
    try:
        _, stderr = servers.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        servers.kill()
        pytest.fail(f"the launcher still waits 20 s after torchrun exited: {servers.communicate()[1][-3000:]}")
    assert servers.returncode == 1, stderr[-3000:]
    assert re.search(message, stderr), stderr[-3000:]
    assert time.time() - ended < 20
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "run")], capture_output=True).returncode == 1  # none left
