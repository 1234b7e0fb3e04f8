"""launch/py, the Python harnesses' one supervisor and port-file reader (bench/e2e, deploy/emulate and
deploy/chaos use them), on short local commands: no namespaces, no root, no build. Each test checks
one clause of the modules' contracts: the log and its restart line, exit codes and signals, the
rusage, the process group, SIGTERM then SIGKILL, and the port files."""
import os
import signal
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "launch/py"))
import launcher  # noqa: E402
import supervisor  # noqa: E402
from supervisor import RESTARTED, Procs  # noqa: E402

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SKETCHPS_FLAVOUR": "test", "OTHER": "x"}


@pytest.fixture
def procs():
    p = Procs()
    yield p
    p.kill_all(grace=1)


def first_output(path: Path, timeout: float = 20) -> str:
    """The first line a process wrote into its log (the line after the supervisor's own)."""
    deadline = time.monotonic() + timeout
    while len(lines := path.read_text(errors="replace").splitlines(keepends=True)) < 2 or not lines[1].endswith("\n"):
        assert time.monotonic() < deadline, f"{path} got no output: {path.read_text()!r}"
        time.sleep(0.02)
    return lines[1].rstrip("\n")


def test_exit_code_log_and_record(procs, tmp_path):
    log = tmp_path / "a.log"
    p = procs.start("a", "job", None, ["sh", "-c", "echo hello; echo oops >&2; exit 3"], ENV, log)
    assert procs.wait([p], 20)
    assert p.rc == 3 and p.end >= p.start and p.pid > 0
    lines = log.read_text().splitlines()
    assert lines[0] == "# sh -c echo hello; echo oops >&2; exit 3"
    assert lines[1:] == ["hello", "oops"]
    assert Procs.tail(p, 2) == "    a| hello\n    a| oops"
    summary = p.summary()
    assert summary["exit"] == 3 and summary["role"] == "job" and summary["env"] == {"SKETCHPS_FLAVOUR": "test"}
    assert [q.name for q in procs.exited()] == ["a"] and procs.running() == []


def test_poll_reports_each_exit_once_and_keeps_the_rusage(procs, tmp_path):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    p = procs.start("burn", "worker", None, [sys.executable, "-c", burn], ENV, tmp_path / "burn.log")
    seen = []
    deadline = time.monotonic() + 60
    while p.rc is None and time.monotonic() < deadline:
        seen += procs.poll()
        time.sleep(0.02)
    assert seen == [p] and procs.poll() == []
    assert p.rc == 0
    assert p.cpu_user + p.cpu_sys >= 0.25, (p.cpu_user, p.cpu_sys)


def test_kill_and_restart_continue_the_log(procs, tmp_path):
    log = tmp_path / "s.log"
    p = procs.start("s", "service", None, ["sh", "-c", "echo first; exec sleep 30"], ENV, log)
    assert first_output(log) == "first"
    with pytest.raises(RuntimeError, match="still running"):
        procs.start("s", "service", None, ["true"], ENV, log, restart="too early")
    assert procs.kill(p) == [-signal.SIGKILL]
    q = procs.start("s", "service", None, ["sh", "-c", "echo second"], ENV, log, restart="after SIGKILL")
    assert procs.wait([q], 20) and q.rc == 0
    assert procs["s"] is q
    text = log.read_text()
    assert text.index("first") < text.index(f"{RESTARTED} after SIGKILL\n") < text.index("second")


def test_signals_reach_the_whole_process_group(procs, tmp_path):
    log = tmp_path / "g.log"
    p = procs.start("g", "service", None, ["sh", "-c", "sleep 30 & echo pid=$!; wait"], ENV, log)
    grandchild = int(first_output(log).split("pid=")[1])
    assert os.getpgid(grandchild) == p.pid   # a session, hence a group, of its own
    procs.kill_all(grace=5)
    assert p.rc == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while is_sleep(grandchild):
        assert time.monotonic() < deadline, "the child's own child survived SIGTERM to the group"
        time.sleep(0.02)


def is_sleep(pid: int) -> bool:
    """Whether `pid` is a running `sleep` (not gone, not a zombie, not a reused pid)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep")
    except OSError:
        return False


def test_kill_all_sends_sigkill_after_the_grace(procs, tmp_path):
    log = tmp_path / "stubborn.log"
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(60)"
    p = procs.start("stubborn", "service", None, [sys.executable, "-c", stubborn], ENV, log)
    assert first_output(log) == "ready"
    t0 = time.monotonic()
    procs.kill_all(grace=0.5)
    assert p.rc == -signal.SIGKILL
    assert time.monotonic() - t0 >= 0.5
    assert procs.wait([p], 0) and procs.running() == []


def test_wait_times_out_while_running(procs, tmp_path):
    p = procs.start("slow", "service", None, ["sleep", "30"], ENV, tmp_path / "slow.log")
    assert procs.wait([p], 0.2) is False and p.rc is None and procs.running("service") == [p]


def test_netns_argv_and_tail_of_a_missing_log(tmp_path):
    assert supervisor.netns_argv("ns-1", ["a", "b"]) == ["ip", "netns", "exec", "ns-1", "a", "b"]
    assert supervisor.netns_argv(None, ["a"]) == ["a"]
    assert supervisor.tail("x", tmp_path / "none.log") == ""


def test_port_files(tmp_path):
    path = tmp_path / "server-0.ports.json"
    with pytest.raises(OSError):
        launcher.read_ports(path)
    path.write_text('{"grpc": 41123, "health": 41124, "metrics": 9100}\n')
    assert launcher.read_ports(path) == {"grpc": 41123, "health": 41124, "metrics": 9100}
    for bad in ("7070\n", '{"grpc": "7070"}', "{", "[1]"):
        path.write_text(bad)
        with pytest.raises(launcher.LaunchError, match="not a port file"):
            launcher.read_ports(path)


def test_daemon_argv_refuses_what_is_not_a_command_line(tmp_path):
    fake = tmp_path / "sketchps"
    fake.write_text("#!/bin/sh\n[ \"$1 $2 $3\" = \"launch argv server\" ] || exit 9\n"
                    "case \"$*\" in *--shard\\ 1*--listen\\ a:1*) echo '[\"/x/server\", \"--shard\", \"1\"]';;\n"
                    "  *--shard\\ 2*) echo 'not json';; *) echo 'bad flags' >&2; exit 2;; esac\n")
    fake.chmod(0o755)
    argv = launcher.daemon_argv(str(fake), "server", "/mine/server", shard=1, listen="a:1", job=None)
    assert argv == ["/mine/server", "--shard", "1"]
    with pytest.raises(launcher.LaunchError, match="not a command line"):
        launcher.daemon_argv(str(fake), "server", "/mine/server", shard=2)
    with pytest.raises(launcher.LaunchError, match="exited 2: bad flags"):
        launcher.daemon_argv(str(fake), "server", "/mine/server", shard=3)
