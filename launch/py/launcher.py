"""The daemons' command lines and ports for the Python harnesses, from the launcher library (launch/)
through `sketchps launch argv`: a harness that starts the daemons (bench/e2e) builds no command line
of its own, so they start exactly as `sketchps run` starts them. deploy/emulate runs the compose
file's commands as written (that is what it emulates) and reads only the port files.

    argv = daemon_argv(sketchps, "server", binary, job=..., shard=0, listen="0.0.0.0:0", port_file=...)
    port = read_ports(port_file)["grpc"]

Contract: daemon_argv() runs `sketchps launch argv` once and raises LaunchError when it fails or
prints anything but a JSON array of strings; read_ports() reads a port file (the JSON that
common/net/port_file.h writes atomically) and raises OSError while there is none, LaunchError
for a file that is not one. Both are thread-safe (they keep no state).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


class LaunchError(Exception):
    """`sketchps launch` failed or answered something that is not a command line or a port file."""


def daemon_argv(sketchps: str, role: str, binary: str, *, overrides: list[str] = (), tls_args: list[str] = (),
                **flags) -> list[str]:
    """The command line of a daemon (role "server" or "worker") with `binary` as its program. flags:
    keyword arguments named as the flags (shard=0 gives --shard 0; lists are comma-joined);
    overrides: --set key=value; tls_args: ["--tls-dir", DIR] or ["--insecure"]."""
    args = [sketchps, "launch", "argv", role, *tls_args]
    for kv in overrides:
        args += ["--set", kv]
    for name, value in flags.items():
        if value is None or value == "" or value == []:
            continue
        args += [f"--{name.replace('_', '-')}", ",".join(value) if isinstance(value, list) else str(value)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise LaunchError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    try:
        argv = json.loads(done.stdout)
    except ValueError:
        argv = None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise LaunchError(f"{' '.join(args)}: not a command line: {done.stdout[:200]!r}")
    return [binary, *argv[1:]]


def read_ports(path: Path) -> dict:
    """A daemon's port file (common/net/port_file.h): {"grpc": N, "health": N, "metrics": N} or
    {"peer": N}; LaunchError for anything else."""
    text = Path(path).read_text().strip()
    try:
        ports = json.loads(text)
    except ValueError:
        ports = None
    if not isinstance(ports, dict) or not all(isinstance(v, int) for v in ports.values()):
        raise LaunchError(f"{path}: not a port file (a JSON object of ports): {text[:80]!r}")
    return ports
