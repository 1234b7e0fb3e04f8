"""How the chaos suite breaks the emulated network and disks (deploy/emulate/netns_run.py's topology:
one namespace per service, one veth `eth0` per host to port `pN` of bridge `br0` in the switch's
namespace).

This kernel has no netem (shared/design/TOOLCHAIN.md), so:
  - loss: an nftables `bridge` table in the switch drops each forwarded frame with probability p
    (`numgen random`), one draw per frame between two hosts: what `netem loss p` on every host's
    egress gives. Silent, as on a real link (dropping in the sender's own output would return EPERM
    to the sender instead of losing the packet);
  - partition: the same kind of table drops every frame entering or leaving the host's switch port;
    the host keeps its link up and sees silence; healing deletes the table;
  - latency: delay_relay.py in each connecting host's namespace, fed by an nftables `nat output`
    redirect of the host's TCP connections to the emulated subnet (marked relay traffic excluded);
  - slow link: tbf at the given rate on both ends of the host's veth (the harness's own cap method);
  - full disk: a small tmpfs mounted over the shard's checkpoint folder and filled to the last byte, or
    over a worker's state folder, empty, and filled to the last byte during the run;
  - asymmetric partition: the same table, dropping only the frames between two ports;
  - damaged checkpoint: the newest checkpoint file of a killed shard, a byte flipped or cut to half;
  - a kill mid-checkpoint: inotify on the shard's checkpoint folder, SIGKILL at the first write into
    the .tmp file of a checkpoint (the shard writes it, fsyncs it, then renames it).
The *_ruleset functions are pure (tested); apply with nft().
"""
from __future__ import annotations

import ctypes
import os
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

TABLE = "sketchps_chaos"
RELAY_PORT = 15999
RELAY_MARK = 0x5C
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "launch/py"))
from supervisor import Procs  # noqa: E402


class FaultError(Exception):
    pass


def loss_ruleset(percent: float, ports: list[str]) -> str:
    """Drops each frame that a host sends through the switch (from one of `ports`) with probability
    percent/100, resolved to 1/10000."""
    if not 0 < percent <= 100:
        raise FaultError(f"loss {percent}%: expected 0 < p <= 100")
    threshold = round(percent * 100)
    ifaces = ", ".join(f'"{p}"' for p in ports)
    return (f"table bridge {TABLE}_loss {{\n"
            f"  chain forward {{\n"
            f"    type filter hook forward priority 0; policy accept;\n"
            f"    iifname {{ {ifaces} }} numgen random mod 10000 < {threshold} counter drop\n"
            f"  }}\n"
            f"}}\n")


def partition_ruleset(port: str, peer: str = "") -> str:
    """Drops every frame entering the switch from `port` or leaving it to `port`; with `peer`, only the
    frames between `port` and `peer` (an asymmetric partition: the host loses that one host)."""
    if peer:
        rules = (f'    iifname "{port}" oifname "{peer}" counter drop\n'
                 f'    iifname "{peer}" oifname "{port}" counter drop\n')
    else:
        rules = (f'    iifname "{port}" counter drop\n'
                 f'    oifname "{port}" counter drop\n')
    return (f"table bridge {TABLE}_partition {{\n"
            f"  chain forward {{\n"
            f"    type filter hook forward priority 0; policy accept;\n"
            + rules +
            f"  }}\n"
            f"}}\n")


def redirect_ruleset(subnet: str, port: int = RELAY_PORT, mark: int = RELAY_MARK) -> str:
    """Sends the host's new TCP connections to `subnet` through the local relay on `port`."""
    return (f"table ip {TABLE}_delay {{\n"
            f"  chain output {{\n"
            f"    type nat hook output priority -100; policy accept;\n"
            f"    ip daddr {subnet} meta l4proto tcp meta mark != {mark:#x} counter redirect to :{port}\n"
            f"  }}\n"
            f"}}\n")


def nft(ns: str, ruleset: str) -> None:
    proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=ruleset, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FaultError(f"nft in {ns} failed: {proc.stderr.strip()}\n{ruleset}")


def nft_delete(ns: str, family: str, table: str) -> None:
    proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", family, table],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise FaultError(f"nft delete table {family} {table} in {ns} failed: {proc.stderr.strip()}")


def counters(ns: str, family: str, table: str) -> int:
    """Packets counted by the table's `counter` statements (0 when it is gone)."""
    proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", family, table],
                          capture_output=True, text=True)
    return sum(int(w) for w in _after(proc.stdout.split(), "packets"))


def _after(words: list[str], key: str):
    for i, w in enumerate(words[:-1]):
        if w == key and words[i + 1].isdigit():
            yield words[i + 1]


def tbf(ns: str, dev: str, rate: str) -> None:
    proc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                           "burst", "32kbit", "latency", "50ms"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise FaultError(f"tc tbf {rate} on {dev} in {ns} failed: {proc.stderr.strip()}")


class Relay:
    """delay_relay.py in one namespace (run by the harnesses' supervisor), with its redirect rule."""

    def __init__(self, ns: str, subnet: str, delay_ms: float, jitter_ms: float, log: Path, seed: int):
        self.ns, self.log = ns, log
        self.procs = Procs()
        argv = [sys.executable, str(HERE / "delay_relay.py"), "--port", str(RELAY_PORT), "--delay-ms", str(delay_ms),
                "--jitter-ms", str(jitter_ms), "--mark", hex(RELAY_MARK), "--seed", str(seed)]
        proc = self.procs.start("relay", "relay", ns, argv, None, log)
        deadline = time.monotonic() + 10
        while "listening" not in log.read_text(errors="replace"):
            if self.procs.poll() or time.monotonic() > deadline:
                self.stop()
                raise FaultError(f"delay relay in {ns} did not start (exit {proc.rc}): "
                                 f"{log.read_text(errors='replace').strip()}")
            time.sleep(0.05)
        nft(ns, redirect_ruleset(subnet))

    def stop(self) -> None:
        self.procs.kill_all(grace=5)


def mount_tmpfs(path: Path, size: str) -> None:
    """Mounts an empty tmpfs of `size` at `path`. The caller unmounts."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "chaos-full", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise FaultError(f"mount tmpfs at {path} failed: {proc.stderr.strip()}")


def fill(path: Path, name: str = "filler") -> int:
    """Fills the file system holding `path` to the last byte with the file `name`; returns the bytes written."""
    written = 0
    with open(path / name, "ab") as f:
        block = b"\0" * 65536
        while True:
            try:
                written += f.write(block)
                f.flush()
            except OSError:
                break
    # the last partial block, byte by byte
    with open(path / name, "ab", buffering=0) as f:
        while True:
            try:
                f.write(b"\0")
                written += 1
            except OSError:
                break
    return written


def fill_tmpfs(path: Path, size: str = "1m") -> int:
    """Mounts a tmpfs of `size` at `path` and fills it; returns the bytes written. The caller unmounts."""
    mount_tmpfs(path, size)
    return fill(path)


CHECKPOINT_NAME = re.compile(r"shard-(\d+)-round-(\d+)\.ckpt")


def newest_checkpoint(folder: Path, shard: str) -> Path | None:
    """The shard's checkpoint file of the highest round in `folder` (ps/checkpoint.h's names), or None."""
    found = []
    for p in folder.glob(f"shard-{shard}-round-*.ckpt"):
        m = CHECKPOINT_NAME.fullmatch(p.name)
        if m:
            found.append((int(m.group(2)), p))
    return max(found)[1] if found else None


def damage_bytes(data: bytes, how: str) -> bytes:
    """A damaged copy: `flip` inverts every bit of the middle byte (the CRC no longer matches),
    `truncate` keeps the first half."""
    if len(data) < 2:
        raise FaultError(f"nothing to damage in {len(data)} bytes")
    if how == "flip":
        mid = len(data) // 2
        return data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
    if how == "truncate":
        return data[: len(data) // 2]
    raise FaultError(f"unknown damage {how!r} (flip, truncate)")


def damage(path: Path, how: str) -> str:
    """Damages the file in place; returns what was done, in words."""
    data = path.read_bytes()
    path.write_bytes(damage_bytes(data, how))
    return (f"byte {len(data) // 2} of {len(data)} flipped" if how == "flip"
            else f"truncated from {len(data)} to {len(data) // 2} bytes")


class CheckpointWatch:
    """SIGKILLs a process the moment it first writes into a file matching `pattern` (group 1: the round,
    at least `at_round`) in `folder`: inotify (IN_MODIFY) on a thread of its own, so the kill lands while
    the checkpoint is being written: some bytes in its .tmp file, before the fsync and the rename.
    arm(pid) names the process (again after a restart)."""

    IN_MODIFY = 0x2

    def __init__(self, folder: Path, pattern: str, at_round: int):
        self.folder, self.pattern, self.at_round = folder, re.compile(pattern), at_round
        self.pid: int | None = None
        self.killed = False
        self.killed_file = ""
        self.killed_at: float | None = None
        self.delay_ms = 0.0
        folder.mkdir(parents=True, exist_ok=True)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise FaultError(f"inotify_init1: {os.strerror(ctypes.get_errno())}")
        if self.libc.inotify_add_watch(self.fd, str(folder).encode(), self.IN_MODIFY) < 0:
            raise FaultError(f"inotify_add_watch {folder}: {os.strerror(ctypes.get_errno())}")
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def arm(self, pid: int) -> None:
        self.pid = pid

    def matches(self, name: str) -> bool:
        m = self.pattern.fullmatch(name)
        return bool(m) and int(m.group(1)) >= self.at_round

    def run(self) -> None:
        while not self.stopped.is_set() and not self.killed:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            seen = time.monotonic()
            for mask, name in parse_inotify(data):
                if mask & self.IN_MODIFY and self.matches(name) and self.pid and not self.killed:
                    try:
                        os.kill(self.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed_at = time.monotonic()
                    self.delay_ms = (self.killed_at - seen) * 1000
                    self.killed_file, self.killed = name, True
                    break

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def parse_inotify(data: bytes) -> list[tuple[int, str]]:
    """(mask, name) of each struct inotify_event (int wd; uint32 mask, cookie, len; char name[len]) in a buffer."""
    events, off = [], 0
    while off + 16 <= len(data):
        _wd, mask, _cookie, length = struct.unpack_from("iIII", data, off)
        raw = data[off + 16: off + 16 + length]
        events.append((mask, raw.split(b"\0", 1)[0].decode(errors="replace")))
        off += 16 + length
    return events


def unmount(path: Path) -> None:
    if os.path.ismount(path):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def mounts_under(folder: Path) -> list[Path]:
    """tmpfs mounts this suite left under `folder` (a run that was killed before its cleanup)."""
    found = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[0] == "chaos-full":
                p = Path(parts[1].replace("\\040", " "))
                if folder.resolve() in [p, *p.parents]:
                    found.append(p)
    except OSError:
        pass
    return found
