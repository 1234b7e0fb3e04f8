"""`pip install` of the package (python/setup.py, docs/pytorch.md "Install with pip"): built with
Debian's pip, setuptools and pybind11 against this build tree (SKETCHPS_PREFIX) into a folder of its
own (--target), the package imports from there, not from the build tree, and a 2-rank decentralized
job trains with it (the tests' script, equal replicas). Without SKETCHPS_PREFIX the build names it."""
import json
import os
import shutil
import subprocess
import sys

from conftest import HERE, JOB, SCRIPT, build_dir, free_port

SOURCE = os.path.join(HERE, "..", "..", "python")


def pip_install(tmp_path, prefix):
    """pip install of a copy of python/ (pip builds in the source folder) into tmp_path/site."""
    source = tmp_path / "src"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SKETCHPS_PREFIX")}
    if prefix is not None:
        env["SKETCHPS_PREFIX"] = prefix
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                           "--no-cache-dir", "--disable-pip-version-check", "--target", str(target), str(source)],
                          env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    return target, done


def package_env(target, **extra):
    """The environment of a process that finds the package only in `target`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKETCHPS_", "RANK", "WORLD_SIZE"))}
    env.update(PYTHONPATH=str(target), OMP_NUM_THREADS="1", **extra)
    return env


def test_pip_installs_the_package_and_a_two_rank_job_trains_from_it(tmp_path):
    target, done = pip_install(tmp_path, build_dir())
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    where = subprocess.run([sys.executable, "-c", "import sketchps.torch, sketchps._core as c, sketchps._libdir as d; "
                            "print(c.__file__); print(d.LIBRARY_DIR)"], env=package_env(target),
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert where.returncode == 0, where.stderr[-3000:]
    extension, library_dir = where.stdout.split("\n")[:2]
    assert extension.startswith(str(target))
    assert os.path.samefile(library_dir, os.path.join(build_dir(), "lib"))

    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("mode: ps", "mode: decentralized").replace("rounds: 24", "rounds: 6"))
    ports = [free_port(), free_port()]
    peers = ",".join(f"127.0.0.1:{p}" for p in ports)
    ranks = [subprocess.Popen([sys.executable, SCRIPT, "--model", "mlp"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=package_env(target, RANK=str(r), WORLD_SIZE="2", SKETCHPS_JOB=str(job),
                                              SKETCHPS_INSECURE="1", SKETCHPS_LISTEN=f"127.0.0.1:{ports[r]}",
                                              SKETCHPS_PEERS=peers,
                                              SKETCHPS_METRICS_OUT=str(tmp_path / "worker-{rank}.jsonl")))
             for r in (0, 1)]
    logs = [p.communicate(timeout=240)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], "\n".join(log[-2000:] for log in logs)
    records = [[json.loads(line) for line in (tmp_path / f"worker-{r}.jsonl").read_text().splitlines()] for r in (0, 1)]
    assert [r["round"] for r in records[0]] == list(range(6))
    assert [r["checksum"] for r in records[0]] == [r["checksum"] for r in records[1]]
    assert "final test accuracy" in logs[0]


def test_the_build_needs_the_prefix(tmp_path):
    _, done = pip_install(tmp_path, None)
    assert done.returncode != 0
    assert "SKETCHPS_PREFIX: not set" in done.stdout + done.stderr
    _, done = pip_install(tmp_path / "x", str(tmp_path))
    assert done.returncode != 0
    assert f"SKETCHPS_PREFIX: {tmp_path}/lib/libsketchps_python_core.so does not exist" in done.stdout + done.stderr
