"""The one supervisor of the Python harnesses' processes (bench/e2e, deploy/emulate, deploy/chaos): each
process in a network namespace, with a log of its own, reaped with its rusage.

    procs = Procs()
    p = procs.start("server-0", "server", "ns-server-0", argv, env, run_dir / "server-0.log")
    ...
    for done in procs.poll(): print(done.name, done.rc)
    procs.kill_all()   # always, in a finally

Contract:
  - Procs.start() runs `ip netns exec NS argv...` (ip execs the program in place, so the child is
    the program; ns None: argv itself, on the host's network) in a session of its own, stdin from
    /dev/null, stdout and stderr to its log file after a first line "# ip netns exec NS argv", and
    notes the launch time (unix seconds, and monotonic for intervals) and the SKETCHPS_* variables of
    its environment (env None: this process's environment). restart="why" starts a name again whose
    last process has been reaped: its log continues after a "# restarted why" line (RESTARTED) and
    the new Proc replaces the old one under that name.
  - Procs.poll() reaps finished children with os.wait4(pid, WNOHANG): exit code (negative: killed
    by that signal), end time, and CPU seconds (user and system of the process and of every
    descendant it waited for). Popen's own wait is never used, so the rusage is not lost. It returns
    the children it reaped; exited() lists every one reaped so far, whoever reaped it.
  - Procs.signal() signals a child's process group; Procs.kill() sends SIGKILL and waits for the
    exit; Procs.wait() polls until the given children have exited or a timeout passed.
  - Procs.kill_all() sends SIGTERM, then after a grace SIGKILL, to the process group of every
    child still running, and reaps them; it only ever touches processes this object started.
  - tail() gives the last lines of a log, each line prefixed with the process's name.
Not thread-safe: one harness thread uses a Procs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

RESTARTED = "# restarted"   # the line a restart writes into the log before the new start's output


def netns_argv(ns: str | None, argv: list[str]) -> list[str]:
    """`argv` run in network namespace `ns` (None: as it is)."""
    return ["ip", "netns", "exec", ns, *argv] if ns else list(argv)


@dataclass
class Proc:
    name: str               # e.g. "server-0", "worker-2"
    role: str               # what the harness calls it: "server", "worker", "job", ...
    ns: str | None          # network namespace (None: the host's)
    argv: list[str]
    log: Path
    popen: subprocess.Popen = field(repr=False)
    start: float = 0.0      # unix seconds at launch
    t0: float = 0.0         # time.monotonic() at launch
    end: float | None = None
    rc: int | None = None
    cpu_user: float = 0.0
    cpu_sys: float = 0.0
    env: dict = field(default_factory=dict)  # the SKETCHPS_* variables it was given

    @property
    def pid(self) -> int:
        return self.popen.pid

    def summary(self) -> dict:
        return {"name": self.name, "role": self.role, "start": self.start, "end": self.end, "exit": self.rc,
                "cpu_user_s": self.cpu_user, "cpu_sys_s": self.cpu_sys, "cpu_s": self.cpu_user + self.cpu_sys,
                "log": str(self.log), "argv": self.argv, "env": self.env}


class Procs:
    def __init__(self):
        self.procs: dict[str, Proc] = {}   # by name: the last process started under it

    def __getitem__(self, name: str) -> Proc:
        return self.procs[name]

    def start(self, name: str, role: str, ns: str | None, argv: list[str], env: dict | None, log: Path,
              restart: str = "") -> Proc:
        old = self.procs.get(name)
        if old is not None and old.rc is None:
            raise RuntimeError(f"{name} is still running (pid {old.pid}): reap it before starting it again")
        full = netns_argv(ns, argv)
        with open(log, "a" if restart else "w") as out:
            out.write(f"{RESTARTED} {restart}\n" if restart else "")
            out.write(f"# {' '.join(full)}\n")
            out.flush()
            popen = subprocess.Popen(full, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        given = os.environ if env is None else env
        proc = Proc(name, role, ns, argv, log, popen, start=time.time(), t0=time.monotonic(),
                    env={k: v for k, v in given.items() if k.startswith("SKETCHPS_")})
        self.procs[name] = proc
        return proc

    def poll(self) -> list[Proc]:
        """Reaps every child that has finished; returns them."""
        done = []
        for p in self.running():
            pid, status, usage = os.wait4(p.popen.pid, os.WNOHANG)
            if pid == 0:
                continue
            p.end = time.time()
            p.rc = os.waitstatus_to_exitcode(status)
            p.popen.returncode = p.rc  # keeps Popen from waiting for it again
            p.cpu_user, p.cpu_sys = usage.ru_utime, usage.ru_stime
            done.append(p)
        return done

    def running(self, role: str | None = None) -> list[Proc]:
        return [p for p in self.procs.values() if p.rc is None and role in (None, p.role)]

    def exited(self) -> list[Proc]:
        return [p for p in self.procs.values() if p.rc is not None]

    def of_role(self, role: str) -> list[Proc]:
        return [p for p in self.procs.values() if p.role == role]

    def signal(self, proc: Proc, sig: int) -> None:
        if proc.rc is None:
            try:
                os.killpg(proc.popen.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, procs: list[Proc], timeout: float | None) -> bool:
        """Polls until every one of `procs` has exited or `timeout` (None: no limit) passed; True if all exited."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(p.rc is None for p in procs):
            self.poll()
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def kill(self, *procs: Proc) -> list[int]:
        """SIGKILL to each of `procs` (all first, then the waits); their exit codes once reaped."""
        for p in procs:
            self.signal(p, signal.SIGKILL)
        self.wait(list(procs), None)
        return [p.rc for p in procs]

    def kill_all(self, grace: float = 5.0) -> None:
        alive = self.running()
        for p in alive:
            self.signal(p, signal.SIGTERM)
        if not self.wait(alive, grace):
            for p in self.running():
                self.signal(p, signal.SIGKILL)
            self.wait(alive, 10)

    @staticmethod
    def tail(proc: Proc, lines: int = 25) -> str:
        return tail(proc.name, proc.log, lines)


def tail(name: str, log: Path, lines: int = 25) -> str:
    """The last `lines` lines of a log (none if it does not exist), each as "    name| line"."""
    text = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(f"    {name}| {line}" for line in text[-lines:])
