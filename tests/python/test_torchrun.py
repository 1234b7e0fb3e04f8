"""torchrun with the servers of `sketchps run --servers-only` (docs/pytorch.md "torchrun"): the
launcher starts the shards, publishes the workers' environment in <out>/workers.env and waits;
torchrun starts the ranks with that environment; the shards exit once every rank has left, and the
launcher writes the summary from the ranks' records. The same for the DDP script with the comm hook
(tests/python/scripts/ddp_hook.py: DataLoader, AdamW + cosine, BatchNorm): unchanged under both
launchers."""
import os
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
    assert published["SKETCHPS_SERVERS"].count(",") == 1
    assert os.path.isabs(published["SKETCHPS_JOB"])
    env = {**os.environ, **published, "OMP_NUM_THREADS": "1"}
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
