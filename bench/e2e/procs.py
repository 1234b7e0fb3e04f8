"""The processes of one benchmark run, each in a network namespace, reaped with their rusage.

Contract:
  - Procs.start() runs `ip netns exec NS argv...` (ip execs the program in place, so the child
    is the program) in a session of its own, with stdout and stderr to a log file, and notes the
    launch time (unix seconds) and the SKETCHPS_* variables of its environment.
  - Procs.poll() reaps finished children with os.wait4(pid, WNOHANG): exit code (negative: killed
    by that signal), end time, and CPU seconds (user and system of the process and of every
    descendant it waited for). Popen's own wait is never used, so the rusage is not lost.
  - Procs.kill_all() sends SIGTERM, then after a grace SIGKILL, to the process group of every
    child still running, and reaps them; it only ever touches processes this object started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


class RunFailure(Exception):
    """A benchmark run failed; the message names the process and carries its log tail."""


@dataclass
class Proc:
    name: str               # e.g. "server-0", "worker-2"
    role: str               # "server" or "worker"
    ns: str                 # network namespace
    argv: list[str]
    log: Path
    popen: subprocess.Popen = field(repr=False)
    start: float = 0.0      # unix seconds at launch
    end: float | None = None
    rc: int | None = None
    cpu_user: float = 0.0
    cpu_sys: float = 0.0
    env: dict = field(default_factory=dict)  # the SKETCHPS_* variables it was given

    def summary(self) -> dict:
        return {"name": self.name, "role": self.role, "start": self.start, "end": self.end, "exit": self.rc,
                "cpu_user_s": self.cpu_user, "cpu_sys_s": self.cpu_sys, "cpu_s": self.cpu_user + self.cpu_sys,
                "log": str(self.log), "argv": self.argv, "env": self.env}


class Procs:
    def __init__(self):
        self.procs: dict[str, Proc] = {}

    def start(self, name: str, role: str, ns: str, argv: list[str], env: dict, log: Path) -> Proc:
        with open(log, "w") as out:
            out.write(f"# ip netns exec {ns} {' '.join(argv)}\n")
            out.flush()
            popen = subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env, stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        proc = Proc(name, role, ns, argv, log, popen, start=time.time(),
                    env={k: v for k, v in env.items() if k.startswith("SKETCHPS_")})
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

    def of_role(self, role: str) -> list[Proc]:
        return [p for p in self.procs.values() if p.role == role]

    def signal(self, proc: Proc, sig: int) -> None:
        if proc.rc is None:
            try:
                os.killpg(proc.popen.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, procs: list[Proc], timeout: float) -> bool:
        """Polls until every one of `procs` has exited or `timeout` passed; True if all exited."""
        deadline = time.monotonic() + timeout
        while any(p.rc is None for p in procs):
            self.poll()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

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
        text = proc.log.read_text(errors="replace").splitlines() if proc.log.exists() else []
        return "\n".join(f"    {proc.name}| {line}" for line in text[-lines:])
