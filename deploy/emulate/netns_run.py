#!/usr/bin/env python3
"""Runs a compose topology as processes, one network namespace per service, and checks the job.

What it emulates of `docker compose up`:
  - one host per service: a network namespace with one veth link to a shared bridge (the bridge
    lives in its own namespace, so nothing is added to the host's network), 10.213.0.0/24
    addresses, and /etc/netns/<ns>/hosts so that service names resolve as on a compose network;
  - optionally a bandwidth cap per link (--bandwidth 100mbit: tbf on both ends of every veth, with
    the MTU of lo and the veths at 1500, which tbf needs here);
  - each service's command as the image would run it (topology.py: entrypoint from the compose file
    or the Dockerfile target, then `command`), with the binaries taken from a build folder;
  - the environment, bind mounts (container paths in arguments and env values are rewritten to the
    host paths) and named volumes (a folder per volume under the run folder, emptied when the run
    starts, as after `docker compose down -v`: a --log-dir used again must not resume the job from
    the last run's checkpoints);
  - depends_on: service_healthy waits for the dependency's healthcheck command to pass, run in the
    dependency's namespace with its interval, timeout, retries and start_period;
    service_completed_successfully runs the dependency to completion first (a one-shot service such
    as `certs`), and it must exit 0.
With --check-probes FILE (Kubernetes manifests), the gRPC probes of its workloads (the shards' Job
or StatefulSet) are also run against every shard (`sketchps health 127.0.0.1:PORT --service NAME`)
once the shards are healthy, so a probe asking for a health service name or a port the daemon does
not serve fails here, not in a cluster.
What it does not: restart policies (any failure fails the run; only a --kill restarts, below), users,
read-only roots, limits.

Fault injection: --kill SERVICE@ROUND (repeatable) sends SIGKILL to that long-running service (a
shard) once it has applied ROUND rounds, then starts it again at once in the same namespace with the
same command, environment and volumes, as a restart policy would (its tmpfs folders are emptied,
its named volumes, hence its checkpoints, are kept). The rounds are the shard's own
sketchps_rounds_applied gauge, read from the metrics port it reports in its port file (the harness
adds --port-file to the shard's command; the port is its --metrics-listen) by a thread in its namespace every --kill-poll seconds (0.05), so
the kill lands at ROUND or shortly after. SERVICE@Ns kills N seconds after the first worker (job) started
instead (for daemons without metrics). The service's log continues in the same file after a
"# restarted" line. A kill that has not happened when the last job ends fails the run. With
--expect-log SERVICE=REGEX (repeatable) the run passes only if the log of that service's last start
(after its last restart) matches REGEX, e.g. where a restarted shard took its state from.

Three kinds of services: one-shot (others wait for them to complete), long-running (others wait for
them to start or be healthy: the shards) and jobs (nothing depends on them: the workers). The run
passes when every one-shot service exits 0, every job exits 0 and all of them logged the same
"final weights checksum <hex>", and no long-running service fails: each exits 0 by itself (a shard
does once every worker has left) within --exit-wait seconds after the last job, and one still
running then is stopped with SIGTERM and must drain and exit 143 (128 + SIGTERM, as the shard
does) within its stop_grace_period (--require-self-exit: it fails the run instead). Anything else, a hard timeout included, fails it
(exit 1). If namespaces cannot be created it fails too, loudly:
this test never passes without having run. Exit 2: bad usage or configuration.

The services' processes are run by the harnesses' one supervisor (launch/py/supervisor.py: a session
of their own, a log each, reaped with os.wait4) and the port files read by launch/py/launcher.py.
Cleanup is always attempted (also on SIGINT/SIGTERM): it kills only the processes it started,
deletes its namespaces and its /etc/netns/<ns> folders. Needs root, iproute2 and python3-yaml.
"""
from __future__ import annotations

import argparse
import ctypes
import fnmatch
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "launch/py"))
import supervisor  # noqa: E402
import topology  # noqa: E402
import yaml  # noqa: E402
from launcher import LaunchError, read_ports  # noqa: E402
from supervisor import RESTARTED, Procs, netns_argv  # noqa: E402

BINARIES = {"sketchps-server": "server/sketchps-server", "sketchps-worker": "worker/sketchps-worker",
            "sketchps": "tools/sketchps"}
DAEMONS = ("sketchps-server", "sketchps-worker")
CHECKSUM = re.compile(r"final weights checksum ([0-9a-fA-F]+)")
SUBNET = "10.213.0"
WORKLOADS = ("Job", "StatefulSet", "Deployment")
STOPPED_BY_SIGTERM = 128 + signal.SIGTERM   # a shard's exit code after a SIGTERM drain (0: the job is over)
ROUNDS_APPLIED = re.compile(r"^sketchps_rounds_applied(?:\{[^}]*\})? (\S+)$", re.M)
CLONE_NEWNET = 0x40000000


class Kill:
    """One --kill SERVICE@ROUND or SERVICE@Ns."""

    def __init__(self, spec: str):
        self.spec = spec
        self.service, _, at = spec.rpartition("@")
        m = re.fullmatch(r"(\d+)(s?)", at)
        if not self.service or not m:
            raise topology.TopologyError(f"--kill {spec!r}: expected SERVICE@ROUND or SERVICE@SECONDSs")
        self.at = int(m.group(1))
        self.seconds = bool(m.group(2))
        self.done = False

    def __str__(self):
        return self.spec


class RoundWatch(threading.Thread):
    """Reads a shard's sketchps_rounds_applied from its metrics port every `interval` seconds, from a
    thread that has joined the shard's network namespace (setns applies to the calling thread only)."""

    def __init__(self, ns: str, port: int, interval: float):
        super().__init__(daemon=True)
        self.ns, self.port, self.interval = ns, port, interval
        self.rounds: int | None = None
        self.error = "no scrape yet"
        self.stopped = threading.Event()

    def run(self):
        try:
            fd = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
        except OSError as e:
            self.error = f"/run/netns/{self.ns}: {e}"
            return
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                self.error = f"setns {self.ns}: {os.strerror(ctypes.get_errno())}"
                return
        finally:
            os.close(fd)
        while not self.stopped.wait(self.interval):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/metrics")
                text = conn.getresponse().read().decode(errors="replace")
                conn.close()
            except (OSError, http.client.HTTPException) as e:
                self.error = f"127.0.0.1:{self.port}/metrics: {e}"
                continue
            found = ROUNDS_APPLIED.search(text)
            if found:
                self.rounds = int(float(found.group(1)))
            else:
                self.error = f"127.0.0.1:{self.port}/metrics: no sketchps_rounds_applied"


class RunError(Exception):
    """A failure of the emulated job (exit 1)."""


def log(msg: str):
    print(f"emulate: {msg}", flush=True)


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RunError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


NAMESPACE = re.compile(r"^sps(\d+)(?:\.\d+)?-")


def run_is_alive(pid: int) -> bool:
    """Whether the Python process that named namespaces after `pid` (a Network's run_id starts with the
    owner's pid) still runs."""
    try:
        return b"python" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def reap_stale_namespaces():
    """Removes the namespaces of runs that were killed before they could clean up (SIGKILL, a session
    that ended): each name carries its emulator's pid, and a namespace whose emulator is gone is stale.
    A live run's namespaces are left alone, so two runs on one host do not disturb each other."""
    for ns in sh("ip", "netns", "list", check=False).stdout.split():
        match = NAMESPACE.match(ns)
        if match and not run_is_alive(int(match.group(1))):
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
            log(f"removed namespace {ns}: left behind by run {match.group(1)}, which no longer runs")


class Network:
    """The namespaces, links and hosts files of one run; remove() undoes whatever was made. run_id is the
    owning process's pid, optionally followed by '.' and a number: namespaces of a dead owner are stale."""

    def __init__(self, run_id: str, services: list[str], bandwidth: str | None):
        self.switch = f"sps{run_id}-switch"
        self.ns = {s: f"sps{run_id}-{s}" for s in services}
        self.addr = {s: f"{SUBNET}.{i + 2}" for i, s in enumerate(services)}
        self.bandwidth = bandwidth
        self.made_ns: list[str] = []
        self.made_etc: list[Path] = []

    def create(self):
        reap_stale_namespaces()
        for ns in [self.switch, *self.ns.values()]:
            proc = sh("ip", "netns", "add", ns, check=False)
            if proc.returncode != 0:
                raise RunError(f"cannot create network namespaces (`ip netns add {ns}`: {proc.stderr.strip()}); "
                               "this test needs root and CAP_SYS_ADMIN and does not pass without them")
            self.made_ns.append(ns)
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        hosts = "127.0.0.1 localhost\n::1 localhost\n" + "".join(f"{a} {s}\n" for s, a in self.addr.items())
        for i, (service, ns) in enumerate(self.ns.items()):
            port = f"p{i}"
            sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.switch)
            sh("ip", "-n", self.switch, "link", "set", port, "master", "br0")
            for n, dev in ((ns, "lo"), (ns, "eth0"), (self.switch, port)):
                if self.bandwidth:
                    sh("ip", "-n", n, "link", "set", dev, "mtu", "1500")
                sh("ip", "-n", n, "link", "set", dev, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[service]}/24", "dev", "eth0")
            if self.bandwidth:
                for n, dev in ((ns, "eth0"), (self.switch, port)):
                    sh("ip", "netns", "exec", n, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                       "rate", self.bandwidth, "burst", "32kbit", "latency", "50ms")
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            self.made_etc.append(etc)
            (etc / "hosts").write_text(hosts)
        log(f"network: {len(self.ns)} hosts on {SUBNET}.0/24" +
            (f", every link capped at {self.bandwidth} (tbf, MTU 1500)" if self.bandwidth else ""))

    def remove(self):
        for ns in reversed(self.made_ns):
            sh("ip", "netns", "del", ns, check=False)
        for etc in self.made_etc:
            shutil.rmtree(etc, ignore_errors=True)
        try:
            Path("/etc/netns").rmdir()  # only if empty: other users' folders stay
        except OSError:
            pass


class Runner:
    def __init__(self, args, services: dict[str, topology.Service]):
        self.args = args
        self.services = services
        self.order = topology.start_order(services)
        needed = {d for s in services.values() for d in s.depends_on}
        shots = topology.one_shot(services)
        self.one_shot = [s for s in self.order if s in shots]
        self.jobs = [s for s in self.order if s not in needed]
        self.long_running = [s for s in self.order if s in needed and s not in shots]
        self.run_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="sketchps-emulate-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.procs = Procs()               # the last process of each service
        self.exit: dict[str, int] = {}
        self.healthy: set[str] = set()     # compose re-checks; once is enough for a start order
        self.net = Network(str(os.getpid()), self.order, args.bandwidth)
        self.deadline = time.monotonic() + args.timeout
        self.kills = [Kill(k) for k in args.kill]
        self.restarts: dict[str, int] = {}
        self.watches: dict[str, RoundWatch] = {}
        self.expect_logs = []
        for spec in args.expect_log:
            name, _, regex = spec.partition("=")
            if name not in services or not regex:
                raise topology.TopologyError(f"--expect-log {spec!r}: expected SERVICE=REGEX, SERVICE from the "
                                             "compose file")
            try:
                self.expect_logs.append((name, re.compile(regex)))
            except re.error as e:
                raise topology.TopologyError(f"--expect-log {spec!r}: bad regular expression: {e}")
        for k in self.kills:
            if k.service not in self.long_running:
                raise topology.TopologyError(f"--kill {k}: {k.service!r} is not a long-running service "
                                             f"(those are: {', '.join(self.long_running) or 'none'})")

    # --- command lines -------------------------------------------------------------------------
    def binary(self, name: str) -> str:
        overrides = dict(b.split("=", 1) for b in self.args.bin)
        if name in overrides:
            path = Path(overrides[name])
        elif name in BINARIES:
            path = Path(self.args.build_dir) / BINARIES[name]
        else:
            return name  # not ours (e.g. /bin/sh): taken from PATH
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise topology.TopologyError(f"{name}: no executable at {path} (build it: bash scripts/build.sh ci)")
        return str(path.absolute())  # not resolve(): a symlink's name can matter to the program

    def path_map(self, s: topology.Service) -> list[tuple[str, str]]:
        mapping = []
        for m in s.mounts:
            if m.kind == "bind":
                host = m.source
            else:
                host = str(self.run_dir / ("volumes" if m.kind == "volume" else f"tmpfs/{s.name}") / (m.source or m.target.strip("/").replace("/", "_")))
                Path(host).mkdir(parents=True, exist_ok=True)
            mapping.append((m.target, host))
        return sorted(mapping, key=lambda kv: -len(kv[0]))

    @staticmethod
    def rewrite(text: str, mapping) -> str:
        """Replaces container paths by host paths in one pass (a replacement is never rewritten again)."""
        if not mapping:
            return text
        hosts = dict(mapping)
        pattern = r"(?<![\w./-])(" + "|".join(re.escape(t) for t, _ in mapping) + r")(?=/|$|[,:=\s])"
        return re.sub(pattern, lambda m: hosts[m.group(1)], text)

    def argv(self, s: topology.Service, argv: list[str]) -> list[str]:
        mapping = self.path_map(s)
        out = [self.binary(argv[0])] + [self.rewrite(a, mapping) for a in argv[1:]]
        if argv[0] in DAEMONS:
            for kv in self.args.set:
                out += ["--set", kv]
        for spec in self.args.service_arg:
            pattern, _, arg = spec.partition("=")
            if fnmatch.fnmatch(s.name, pattern) and argv is s.argv:
                out.append(arg)
        return out

    def environment(self, s: topology.Service) -> dict[str, str]:
        mapping = self.path_map(s)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(self.run_dir)}
        env.update({k: self.rewrite(v, mapping) for k, v in s.environment.items()})
        return env

    # --- processes -----------------------------------------------------------------------------
    def port_file(self, name: str) -> Path:
        """Where a shard that --kill targets reports its ports (common/net/port_file.h)."""
        return self.run_dir / f"{name}.ports.json"

    def start(self, name: str, restart: str = ""):
        s = self.services[name]
        argv = self.argv(s, s.argv)
        if any(k.service == name and not k.seconds for k in self.kills):
            # The harness learns the shard's /metrics port from its port file, never from its log.
            self.port_file(name).unlink(missing_ok=True)
            argv += ["--port-file", str(self.port_file(name))]
        self.procs.start(name, "service", self.net.ns[name], argv, self.environment(s), self.run_dir / f"{name}.log",
                         restart=restart)
        log(f"started {name} ({self.net.addr[name]}): {' '.join(argv)}")

    def current_log(self, name: str) -> str:
        """The log of the service's last start (after its last restart line)."""
        path = self.run_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        at = text.rfind("\n" + RESTARTED)
        return text if at < 0 else text[at + 1:]

    def rounds_applied(self, name: str) -> int | None:
        """The shard's sketchps_rounds_applied as last scraped; None while not known yet. Fails the run
        when the shard names no metrics port within a minute of its start."""
        watch = self.watches.get(name)
        if watch is None:
            try:
                port = int(read_ports(self.port_file(name)).get("metrics", 0))
            except (OSError, LaunchError):
                port = 0
            if not port:
                if time.monotonic() - self.procs[name].t0 > 60:
                    raise RunError(f"--kill: {name} has reported no metrics port in 60 s ({self.port_file(name)}), so "
                                   f"its rounds cannot be read (give it --metrics-listen, or kill at SECONDSs)\n"
                                   f"{self.tail(name)}")
                return None
            watch = self.watches[name] = RoundWatch(self.net.ns[name], port, self.args.kill_poll)
            watch.start()
        return watch.rounds

    def stop_watch(self, name: str):
        watch = self.watches.pop(name, None)
        if watch:
            watch.stopped.set()
            watch.join(timeout=5)

    def inject_faults(self):
        """Carries out each --kill whose point has come: SIGKILL, then the same start again."""
        now = time.monotonic()
        for k in self.kills:
            if k.done or k.service in self.exit:
                continue
            if k.seconds:
                since = now - min(self.procs[j].t0 for j in self.jobs)
                reached, where = since >= k.at, f"{since:.1f} s after the first worker started"
            else:
                rounds = self.rounds_applied(k.service)
                reached = rounds is not None and rounds >= k.at
                where = f"at round {rounds}"
            if not reached:
                continue
            self.stop_watch(k.service)
            code, = self.procs.kill(self.procs[k.service])
            k.done = True
            self.restarts[k.service] = self.restarts.get(k.service, 0) + 1
            log(f"--kill {k}: SIGKILL {k.service} {where} (exit {code}); starting it again, same command and volumes")
            # A restarted container gets empty tmpfs mounts; its volumes persist.
            shutil.rmtree(self.run_dir / f"tmpfs/{k.service}", ignore_errors=True)
            self.start(k.service, restart=f"after SIGKILL {where} (--kill {k})")

    def poll(self):
        self.procs.poll()
        for p in self.procs.exited():
            if p.name not in self.exit:
                self.exit[p.name] = p.rc
                log(f"{p.name} exited {p.rc} after {p.end - p.start:.1f} s")

    def tail(self, name: str, lines: int = 25) -> str:
        return supervisor.tail(name, self.run_dir / f"{name}.log", lines)

    def check_health(self, name: str):
        s = self.services[name]
        hc = s.healthcheck
        if hc is None:
            raise RunError(f"{name} has no healthcheck test, but a service waits for it to be healthy")
        argv = netns_argv(self.net.ns[name], self.argv(s, hc.argv))
        limit = hc.start_period + hc.retries * (hc.interval + hc.timeout)
        if self.args.health_deadline is not None:
            limit = min(limit, self.args.health_deadline)
        t0, attempts = time.monotonic(), 0
        while True:
            self.poll()
            if name in self.exit:
                raise RunError(f"{name} exited {self.exit[name]} before it became healthy\n{self.tail(name)}")
            attempts += 1
            try:
                ok = subprocess.run(argv, env=self.environment(s), capture_output=True, timeout=hc.timeout).returncode == 0
            except subprocess.TimeoutExpired:
                ok = False
            waited = time.monotonic() - t0
            if ok:
                log(f"{name} healthy after {waited:.1f} s ({attempts} check(s): {' '.join(hc.argv)})")
                return
            if time.monotonic() > self.deadline:
                raise RunError(f"timeout after {self.args.timeout:.0f} s while waiting for {name} to be healthy "
                               f"({attempts} checks of `{' '.join(hc.argv)}`)\n{self.tail(name)}")
            if waited > limit:
                raise RunError(f"{name} did not become healthy within {limit:.0f} s ({attempts} checks of "
                               f"`{' '.join(hc.argv)}`)\n{self.tail(name)}")
            if attempts % 5 == 0:
                log(f"waiting for {name} to be healthy ({waited:.0f} s, {attempts} checks)")
            time.sleep(hc.interval)

    def wait_for(self, name: str):
        for dep, condition in sorted(self.services[name].depends_on.items()):
            if condition == "service_healthy" and dep not in self.healthy:
                self.check_health(dep)
                self.healthy.add(dep)
            elif condition == topology.COMPLETED:
                while dep not in self.exit:
                    self.poll()
                    if time.monotonic() > self.deadline:
                        raise RunError(f"timeout after {self.args.timeout:.0f} s waiting for {dep} to complete\n{self.tail(dep)}")
                    time.sleep(0.1)
                if self.exit[dep] != 0:
                    raise RunError(f"{dep} exited {self.exit[dep]}; {name} waits for it to complete successfully\n"
                                   f"{self.tail(dep)}")

    def grpc_probes(self) -> list[tuple[str, int, str]]:
        """(probe kind, port, service name) of every gRPC probe of the workloads (Job, StatefulSet,
        Deployment) in --check-probes; a named port is resolved through the container's ports."""
        probes = []
        for doc in yaml.safe_load_all(Path(self.args.check_probes).read_text()):
            if not doc or doc.get("kind") not in WORKLOADS:
                continue
            for c in doc["spec"]["template"]["spec"].get("containers") or []:
                named = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
                for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                    grpc = (c.get(kind) or {}).get("grpc")
                    if grpc:
                        port = grpc.get("port")
                        if not isinstance(port, int):
                            port = named.get(port)
                        if port is None:
                            raise RunError(f"--check-probes: {doc['kind']}/{doc['metadata']['name']} {kind}: port "
                                           f"{grpc.get('port')!r} is not a declared containerPort")
                        probes.append((kind, int(port), grpc.get("service", "")))
        if not probes:
            raise RunError(f"--check-probes {self.args.check_probes}: no gRPC probes in any workload")
        return probes

    def check_probes(self):
        servers = [n for n in self.long_running if self.services[n].argv[0] == "sketchps-server"]
        for kind, port, service in self.grpc_probes():
            for name in servers:
                argv = [self.binary("sketchps"), "health", f"127.0.0.1:{port}"] + (["--service", service] if service else [])
                proc = subprocess.run(netns_argv(self.net.ns[name], argv), capture_output=True, text=True, timeout=10,
                                      env=self.environment(self.services[name]))
                what = f"Kubernetes {kind} (grpc port {port}, service {service or '(overall)'}) on {name}"
                if proc.returncode != 0:
                    raise RunError(f"{what} fails: {(proc.stdout + proc.stderr).strip()}")
                log(f"{what}: SERVING")

    def run(self) -> None:
        log(f"run folder {self.run_dir}; services in start order: {', '.join(self.order)}; "
            f"run to completion first: {', '.join(self.one_shot) or 'none'}; must finish: {', '.join(self.jobs)}")
        for stale in ("volumes", "tmpfs"):  # an earlier run's, in a --log-dir used again
            shutil.rmtree(self.run_dir / stale, ignore_errors=True)
        self.net.create()
        probes_checked = not self.args.check_probes
        for name in self.order:
            self.wait_for(name)
            if name in self.jobs and not probes_checked:
                for dep in self.long_running:
                    if dep not in self.healthy and self.services[dep].healthcheck:
                        self.check_health(dep)
                        self.healthy.add(dep)
                self.check_probes()
                probes_checked = True
            self.start(name)
        last_report = time.monotonic()
        noted = set()
        while not all(j in self.exit for j in self.jobs):
            time.sleep(min(0.2, self.args.kill_poll) if any(not k.done for k in self.kills) else 0.2)
            self.inject_faults()
            self.poll()
            for name in self.jobs:
                if self.exit.get(name, 0) != 0:
                    raise RunError(f"{name} exited {self.exit[name]}\n{self.tail(name)}")
            for name in self.long_running:
                if self.exit.get(name, 0) != 0:
                    raise RunError(f"{name} exited {self.exit[name]} while the workers still ran\n{self.tail(name)}")
                still = [j for j in self.jobs if j not in self.exit]
                if name in self.exit and name not in noted and still:  # exit 0: every worker has left, the last end
                    noted.add(name)
                    log(f"{name} exited 0 while {', '.join(still)} still ran")
            now = time.monotonic()
            if now > self.deadline:
                raise RunError(f"timeout after {self.args.timeout} s; still running: "
                               f"{', '.join(j for j in self.jobs if j not in self.exit)}")
            if now - last_report >= 10:
                last_report = now
                log(f"{now - min(p.t0 for p in self.procs.procs.values()):.0f} s: running "
                    f"{', '.join(j for j in self.jobs if j not in self.exit)}")
        missed = [k for k in self.kills if not k.done]
        if missed:
            seen = "; ".join(f"{k.service} last read at round {self.watches[k.service].rounds} "
                             f"({self.watches[k.service].error})" for k in missed if k.service in self.watches)
            raise RunError(f"--kill {', '.join(map(str, missed))} did not happen: the job ended first (or the shard "
                           f"exited by itself before){'; ' + seen if seen else ''}")
        self.finish_long_running()
        self.check_checksums()
        self.check_logs()

    def finish_long_running(self):
        """The shards end with the job: each should exit 0 by itself within --exit-wait seconds; one
        still running then is drained with SIGTERM (or fails the run with --require-self-exit)."""
        until = time.monotonic() + self.args.exit_wait
        while any(n not in self.exit for n in self.long_running) and time.monotonic() < until:
            time.sleep(0.1)
            self.poll()
        for name in self.long_running:
            if name in self.exit:
                if self.exit[name] != 0:
                    raise RunError(f"{name} exited {self.exit[name]} at the end of the job (expected 0)\n{self.tail(name)}")
                log(f"{name} exited 0 by itself at the end of the job")
        running = [n for n in self.long_running if n not in self.exit]
        if running and self.args.require_self_exit:
            raise RunError(f"{', '.join(running)} still running {self.args.exit_wait:.0f} s after the workers finished "
                           f"(--require-self-exit: a shard exits once every worker has left)\n"
                           + "\n".join(self.tail(n) for n in running))
        for name in running:
            log(f"{name} still running {self.args.exit_wait:.0f} s after the workers finished: SIGTERM")
            self.procs.signal(self.procs[name], signal.SIGTERM)
        for name in running:
            grace = topology.parse_duration(self.services[name].raw.get("stop_grace_period", "10s"), name)
            if not self.procs.wait([self.procs[name]], grace):
                raise RunError(f"{name} did not exit within its stop_grace_period ({grace:.0f} s) after SIGTERM\n{self.tail(name)}")
            self.exit[name] = code = self.procs[name].rc
            if code != STOPPED_BY_SIGTERM:
                raise RunError(f"{name} exited {code} after SIGTERM (expected {STOPPED_BY_SIGTERM}: drain, checkpoint, "
                               f"then exit 128 + SIGTERM)\n{self.tail(name)}")
            log(f"{name} stopped cleanly after SIGTERM (exit {code})")

    def check_checksums(self):
        sums = {}
        for name in self.jobs:
            found = CHECKSUM.findall((self.run_dir / f"{name}.log").read_text(errors="replace"))
            if not found:
                raise RunError(f"{name} logged no 'final weights checksum'\n{self.tail(name)}")
            sums[name] = found[-1].lower()
        if len(set(sums.values())) != 1:
            raise RunError("replicas differ: " + ", ".join(f"{n}={c}" for n, c in sums.items()))
        log(f"all {len(sums)} workers exited 0 with the same final weights checksum {next(iter(sums.values()))}")

    def check_logs(self):
        for name, regex in self.expect_logs:
            which = "since its restart" if self.restarts.get(name) else "(it was not restarted)"
            if not regex.search(self.current_log(name)):
                raise RunError(f"--expect-log: the log of {name} {which} does not match {regex.pattern!r}\n"
                               f"{self.tail(name, 40)}")
            log(f"--expect-log: {name} logged {regex.search(self.current_log(name)).group(0)!r} {which}")

    def cleanup(self):
        for name in list(self.watches):
            self.stop_watch(name)
        try:
            self.procs.kill_all(grace=5)
        finally:
            self.net.remove()


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Run a compose topology in network namespaces (see the module doc).")
    ap.add_argument("--compose", default=str(REPO / "deploy/compose/docker-compose.yml"))
    ap.add_argument("--build-dir", default=str(REPO / "build/ci"), help="where server/, worker/, tools/ binaries are")
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH", help="binary for an image command name")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="job override for every daemon")
    ap.add_argument("--service-arg", action="append", default=[], metavar="GLOB=ARG",
                    help="extra argument for the services whose name matches GLOB")
    ap.add_argument("--bandwidth", help="cap every link, tc rate syntax (e.g. 100mbit)")
    ap.add_argument("--timeout", type=float, default=600, help="hard limit for the whole run, seconds")
    ap.add_argument("--health-deadline", type=float, help="cap on each wait for a healthcheck, seconds")
    ap.add_argument("--check-probes", metavar="K8S.yaml", help="also run the gRPC probes of these workloads on the shards")
    ap.add_argument("--exit-wait", type=float, default=30,
                    help="seconds the shards get to exit by themselves after the last worker, before SIGTERM")
    ap.add_argument("--require-self-exit", action="store_true",
                    help="fail when a shard is still running --exit-wait seconds after the last worker")
    ap.add_argument("--kill", action="append", default=[], metavar="SERVICE@ROUND",
                    help="SIGKILL that long-running service once it has applied ROUND rounds (SERVICE@Ns: N seconds "
                         "after the first worker started), then start it again with the same command and volumes")
    ap.add_argument("--kill-poll", type=float, default=0.05, help="seconds between the round scrapes of --kill")
    ap.add_argument("--expect-log", action="append", default=[], metavar="SERVICE=REGEX",
                    help="fail unless the log of SERVICE's last start matches REGEX")
    ap.add_argument("--log-dir", help="folder for logs and volumes (default: a new temporary folder)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        services = topology.load(args.compose)
        runner = Runner(args, services)
        for s in services.values():  # resolve every binary before touching the network
            runner.binary(s.argv[0])
            if s.healthcheck:
                runner.binary(s.healthcheck.argv[0])
    except topology.TopologyError as e:
        print(f"emulate: configuration error: {e}", file=sys.stderr)
        return 2

    def on_signal(signum, _frame):
        raise RunError(f"interrupted by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.monotonic()
    try:
        runner.run()
        log(f"PASSED in {time.monotonic() - t0:.1f} s (logs: {runner.run_dir})")
        return 0
    except (RunError, topology.TopologyError) as e:
        print(f"emulate: FAILED: {e}", flush=True)
        print(f"emulate: logs in {runner.run_dir}", flush=True)
        return 1
    finally:
        runner.cleanup()


if __name__ == "__main__":
    sys.exit(main())
