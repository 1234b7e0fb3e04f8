#!/usr/bin/env python3
"""Run a command in a fresh network namespace whose loopback has an added one-way latency and/or a
bandwidth cap: the network of docs/reports/reproduction.md's sweep.

    netem.py [--delay-ms D] [--rate R] [--name seedcX] -- COMMAND...

This kernel has no netem (shared/design/TOOLCHAIN.md), so:
  - delay: deploy/chaos/delay_relay.py runs inside the namespace and an nftables `nat output` rule
    redirects every TCP connection to 127.0.0.1 (except the relay's own, marked, and connections to
    the relay's port) to it; the relay delays every chunk D ms in each direction, order kept. One
    message's one-way latency is D, a request/response round trip 2 D. The relay is one Python
    process: it costs CPU in proportion to the bytes it copies (it shares the 2 cores), and it runs
    at nice -10 so that it is not starved by the job's own threads.
  - rate: tbf on the namespace's `lo`. Every flow of the job crosses that one qdisc, so it is ONE
    shared link of rate R for all P workers and all servers together (a bus, not per-host links).
    With the relay every byte crosses `lo` twice (to the relay, from the relay), so the qdisc is
    set to 2 R and the job sees R.
The namespace (prefix seedc) is deleted afterwards, with every process still in it. Exit code: the
command's.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELAY = REPO / "deploy" / "chaos" / "delay_relay.py"
sys.path.insert(0, str(REPO / "launch/py"))
from supervisor import Procs  # noqa: E402  (the harnesses' one supervisor: the relay runs under it)

RELAY_PORT = 7399
RELAY_MARK = 0x5C


def sh(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc


def parse_rate_bits(rate: str) -> float:
    """'1gbit' -> 1e9, '100mbit' -> 1e8, '500kbit' -> 5e5 (tc's units, bits per second)."""
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0}
    r = rate.strip().lower()
    for u, f in units.items():
        if r.endswith(u):
            value = float(r[: -len(u)])
            if value <= 0:
                raise ValueError(f"--rate {rate}: must be > 0")
            return value * f
    raise ValueError(f"--rate {rate}: expected a number with gbit, mbit, kbit or bit")


def tbf_args(bits_per_second: float) -> list[str]:
    # burst: at least one 64 KiB loopback segment and 1 ms at the rate; the queue may hold 1 s of it.
    burst = max(262144, int(bits_per_second / 8 / 1000))
    return ["tbf", "rate", f"{int(bits_per_second)}bit", "burst", str(burst), "latency", "1000ms"]


def redirect_ruleset() -> str:
    return ("table ip seedc_delay {\n"
            "  chain out {\n"
            "    type nat hook output priority -100; policy accept;\n"
            f"    ip daddr 127.0.0.1 meta l4proto tcp tcp dport != {RELAY_PORT} meta mark != {RELAY_MARK:#x} "
            f"redirect to :{RELAY_PORT}\n"
            "  }\n"
            "}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way latency added to every TCP connection")
    ap.add_argument("--rate", default="", help="cap of the shared loopback link, e.g. 1gbit, 100mbit")
    ap.add_argument("--name", default=f"seedc{os.getpid()}", help="namespace name (must start with seedc)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the command after --")
    if not a.name.startswith("seedc"):
        ap.error("--name: must start with seedc")
    if a.delay_ms < 0:
        ap.error("--delay-ms: must be >= 0")
    try:
        bits = parse_rate_bits(a.rate) if a.rate else 0.0
    except ValueError as e:
        ap.error(str(e))
    ns = a.name
    sh("ip", "netns", "add", ns)
    procs = Procs()
    try:
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        if bits:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "lo", "root",
               *tbf_args(bits * (2 if a.delay_ms > 0 else 1)))
        if a.delay_ms > 0:
            log = Path(f"/tmp/{ns}-relay.log")
            # nice -10: on 2 shared cores the relay must not wait behind P worker threads, or every
            # message waits for the relay's turn on a core.
            procs.start("relay", "relay", ns, ["nice", "-n", "-10", sys.executable, str(RELAY), "--port", str(RELAY_PORT),
                                               "--delay-ms", str(a.delay_ms), "--mark", hex(RELAY_MARK)], None, log)
            deadline = time.monotonic() + 10
            while "listening" not in log.read_text(errors="replace"):
                if procs.poll() or time.monotonic() > deadline:
                    raise RuntimeError(f"delay relay did not start: {log.read_text(errors='replace')}")
                time.sleep(0.05)
            sh("ip", "netns", "exec", ns, "nft", "-f", "-", input=redirect_ruleset())
        print(f"netem.py: namespace {ns}: delay {a.delay_ms:g} ms each way, rate {a.rate or 'uncapped'}",
              file=sys.stderr, flush=True)
        return subprocess.call(["ip", "netns", "exec", ns, *cmd])
    finally:
        procs.kill_all(grace=5)
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns, check=False)


if __name__ == "__main__":
    sys.exit(main())
