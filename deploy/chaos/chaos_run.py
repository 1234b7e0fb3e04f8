#!/usr/bin/env python3
"""The chaos suite: small jobs on emulated hosts (deploy/emulate/netns_run.py: one network namespace per
service, veth links to a bridge, 100mbit tbf caps), one fault per case, each judged against what the
documentation says should happen (cases.py). Run it with deploy/chaos/run.sh (root; see docs/reliability.md):

  bash deploy/chaos/run.sh --bin-dir DIR [--out runs/chaos] [--cases GLOB,...] [--short] [--write-doc docs/reliability.md]

DIR holds the daemons, either as a build folder (server/sketchps-server, worker/sketchps-worker,
tools/sketchps) or flat. Use a copy of the build, not a folder being rebuilt.

For each case (and first, once per job, the fault-free baseline it is compared with) it runs the job
in ps mode on deploy/compose/docker-compose.yml (certs, 2 shards, 2 workers, mutual TLS) or in
decentralized mode on a compose file of the same shape without shards (written to OUT/compose/),
with the workers' round records (--metrics-out) in OUT/CASE/records/. The fault:
  loss, delay, slow link: from just before the first worker starts to the end;
  partition: when worker-0 has recorded the case's round, for its duration, then healed;
  kill: a shard at its applied round (the harness's --kill, restarted on its checkpoint volume); a worker,
        or both shards together, at worker-0's recorded round, SIGKILL, then started again (ps) or gone for
        good (decentralized, or a case that says so);
  kill-mid-checkpoint: a shard SIGKILLed at the first write into its checkpoint's .tmp file (inotify);
  damaged-checkpoint: a shard SIGKILLed, its newest checkpoint damaged (a byte flipped, cut to half),
        then started again on it;
  disk-full: the shards' checkpoint folders are full tmpfs mounts before the shards start, or a worker's
        state folder is an empty tmpfs filled during the run;
  partition: also of one worker from one shard only (asymmetric);
  a case with loss_pct and another fault has both at once.
Jobs of other than 2 ps workers (or with a patience, SKETCHPS_STOP_ON_STATE_ERROR, elastic joins) run
a copy of the compose file for P workers (ps_compose), written to OUT/compose/CASE.yml. --merge runs the
suite in parts into one OUT.
A worker that fails is given --settle seconds for the others to end by themselves before the run is
stopped, so "every worker stops" can be observed. Writes OUT/CASE/outcome.json, OUT/results.json,
OUT/table.md and, with --write-doc, the table into the file between its GENERATED markers.
--render-only rebuilds table and doc from OUT/results.json without running anything.

Everything is cleaned up after each case, also on failure or Ctrl-C: processes, relays, namespaces,
tmpfs mounts. Exit 0 when every case ran and passed, 1 when a case failed, 2 for bad usage.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "deploy/emulate"))
import cases as C  # noqa: E402
import faults  # noqa: E402
import netns_run  # noqa: E402
import topology  # noqa: E402

PS_COMPOSE = REPO / "deploy/compose/docker-compose.yml"
JOB_FILE = REPO / "deploy/k8s/base/job.yaml"
ACCURACY = re.compile(r"final test accuracy ([0-9.]+)")
PROBLEM_LINE = re.compile(r"^\S+ \S+ (?:warn|warning|error|fatal|critical) ", re.I)
SETTLE_S = 40.0


def log(msg: str) -> None:
    print(f"chaos: {time.strftime('%H:%M:%S')} {msg}", flush=True)
    if CASE_LOG[0] is not None:
        CASE_LOG[0](msg)


CASE_LOG: list = [None]


def decentralized_compose(workers: int) -> dict:
    """Compose services for a decentralized job: the one-shot `certs`, then P workers that serve the Peer
    service on 7080 and name every rank's address; the same job file, TLS folder and worker flags as
    deploy/compose/docker-compose.yml."""
    peers = ",".join(f"worker-{r}:7080" for r in range(workers))
    services: dict = {"certs": {"entrypoint": ["sketchps", "certs"],
                                "command": ["--out", "/certs", "--workers", str(workers)],
                                "volumes": ["certs:/certs"], "restart": "no", "healthcheck": {"disable": True}}}
    for r in range(workers):
        services[f"worker-{r}"] = {
            "entrypoint": ["sketchps-worker"],
            "command": ["--patience-seconds=300", "--listen=0.0.0.0:7080", f"--peers={peers}"],
            "environment": {"SKETCHPS_JOB": "/etc/sketchps/job.yaml", "SKETCHPS_TLS_DIR": "/certs", "RANK": str(r),
                            "WORLD_SIZE": str(workers)},
            "volumes": [f"{JOB_FILE}:/etc/sketchps/job.yaml:ro", "certs:/certs:ro"],
            "depends_on": {"certs": {"condition": "service_completed_successfully"}},
            "healthcheck": {"disable": True},
        }
    return {"services": services, "volumes": {"certs": {}}}


def ps_compose(workers: int, patience_s: float = 0, stop_on_state_error: bool = False,
               joiners: dict[str, int] | None = None) -> dict:
    """deploy/compose/docker-compose.yml for P workers: its anchors resolved, its relative paths made
    absolute (the file is written elsewhere), `certs` for P ranks, and worker-0 .. worker-(P-1) made from
    its worker-1 (RANK, WORLD_SIZE, a state volume each). Optionally the workers' --patience-seconds,
    SKETCHPS_STOP_ON_STATE_ERROR, and --join-at-round for the slots that join an elastic job."""
    raw = json.loads(json.dumps(yaml.safe_load(PS_COMPOSE.read_text())))   # merge keys resolved, no shared nodes
    base = PS_COMPOSE.parent
    services = raw["services"]
    for s in services.values():
        if isinstance(s.get("build"), dict) and "context" in s["build"]:
            s["build"]["context"] = str((base / s["build"]["context"]).resolve())
        vols = []
        for v in s.get("volumes") or []:
            src, sep, rest = v.partition(":")
            vols.append(str((base / src).resolve()) + sep + rest if src.startswith((".", "/")) else v)
        if vols:
            s["volumes"] = vols
    certs = services["certs"]["command"]
    certs[certs.index("--workers") + 1] = str(workers)
    template = services["worker-1"]
    for name in [n for n in services if n.startswith("worker-")]:
        del services[name]
    for r in range(workers):
        w = json.loads(json.dumps(template))
        w["environment"].update({"RANK": str(r), "WORLD_SIZE": str(workers)})
        if stop_on_state_error:
            w["environment"]["SKETCHPS_STOP_ON_STATE_ERROR"] = "true"
        w["volumes"] = [v.replace("worker-state-1:", f"worker-state-{r}:") for v in w["volumes"]]
        if patience_s:
            w["command"] = [f"--patience-seconds={patience_s:g}" if a.startswith("--patience-seconds") else a
                            for a in w["command"]]
        if joiners and f"worker-{r}" in joiners:
            w["command"] = w["command"] + [f"--join-at-round={joiners[f'worker-{r}']}"]
        services[f"worker-{r}"] = w
        raw["volumes"][f"worker-state-{r}"] = None
    for k in [k for k in raw if k.startswith("x-")]:
        del raw[k]
    return raw


def compose_for(case: C.Case, out: Path) -> Path:
    """The compose file a case runs: deploy/compose's own for the plain 2-worker ps job, else one written
    to OUT/compose/."""
    if case.mode == "ps" and case.workers == 2 and not (case.patience_s or case.stop_on_state_error or case.elastic):
        return PS_COMPOSE
    folder = out / "compose"
    folder.mkdir(parents=True, exist_ok=True)
    if case.mode == "ps":
        path = folder / f"{case.name}.yml"
        text = yaml.safe_dump(ps_compose(case.workers, case.patience_s, case.stop_on_state_error, case.joiners),
                              sort_keys=False)
        what = f"deploy/compose/docker-compose.yml for {case.workers} workers"
    else:
        path = folder / f"decentralized-p{case.workers}.yml"
        text = yaml.safe_dump(decentralized_compose(case.workers), sort_keys=False)
        what = "a decentralized job"
    path.write_text(f"# Written by deploy/chaos/chaos_run.py: {what} on emulated hosts.\n" + text)
    return path


def binaries(bin_dir: Path) -> list[str]:
    """--bin NAME=PATH for the three binaries, from a build folder or a flat folder."""
    out = []
    for name, rel in netns_run.BINARIES.items():
        for path in (bin_dir / rel, bin_dir / name):
            if path.is_file() and os.access(path, os.X_OK):
                out += ["--bin", f"{name}={path.absolute()}"]
                break
        else:
            raise SystemExit(f"chaos: no executable {name} in {bin_dir} (as {rel} or {name})")
    return out


class ChaosRunner(netns_run.Runner):
    """The emulator's runner plus the case's fault, settled failures and the timings the table needs."""

    def __init__(self, args, services, case: C.Case, rec_dir: Path, settle_s: float):
        super().__init__(args, services)
        self.case = case
        self.rec_dir = rec_dir
        self.settle_s = settle_s
        self.original_jobs = list(self.jobs)
        self.exit_time: dict[str, float] = {}
        self.held: dict[str, int] = {}
        self.first_job_start: float | None = None
        self.fault_at: float | None = None
        self.healed_at: float | None = None
        self.fault_done = False            # the point fault (partition, kill, fill, damage) has happened
        self.whole_done = False            # the whole-job fault (loss, latency, slow link) is in place
        self.ckpt_watch: faults.CheckpointWatch | None = None
        self.state_mounts: dict[str, Path] = {}   # disk-full of a worker: its state folder, mounted empty
        self.killed_for_good: list[str] = []
        self.interrupted: list[str] = []
        self.relays: list[faults.Relay] = []
        self.mounts: list[Path] = []
        self.notes: list[str] = []
        self.kills_seen = 0
        self.mid_checkpoint: bool | None = None

    # --- helpers --------------------------------------------------------------------------------
    def port_of(self, service: str) -> str:
        """The switch port of a service's link (netns_run.Network names them p<index> in start order)."""
        return f"p{list(self.net.ns).index(service)}"

    def worker0_rounds(self) -> int:
        try:
            return (self.rec_dir / "worker-0.jsonl").read_bytes().count(b"\n")
        except OSError:
            return 0

    def targets(self) -> list[str]:
        return [s for s in self.order if fnmatch.fnmatchcase(s, self.case.target)] if self.case.target else []

    # --- the fault ------------------------------------------------------------------------------
    def volume(self, name: str, prefix: str) -> Path:
        """The host folder of a service's named volume (checkpoints-N of server-N, worker-state-N of worker-N)."""
        return self.run_dir / "volumes" / f"{prefix}-{name.rsplit('-', 1)[1]}"

    def start(self, name: str, restart: str = ""):
        c = self.case
        if not restart and name in self.original_jobs and not self.whole_done:
            self.whole_job_fault()
        if not restart and c.fault == "disk-full" and fnmatch.fnmatchcase(name, c.target):
            if name.startswith("server"):
                folder = self.volume(name, "checkpoints")
                written = faults.fill_tmpfs(folder)
                log(f"{name}'s checkpoint folder {folder} is a full 1 MiB tmpfs ({written} bytes of filler)")
            else:   # filled during the run (inject_faults)
                folder = self.volume(name, "worker-state")
                faults.mount_tmpfs(folder, "64m")
                self.state_mounts[name] = folder
                log(f"{name}'s state folder {folder} is an empty 64 MiB tmpfs, filled at worker-0's round {c.at_round}")
            self.mounts.append(folder)
        super().start(name, restart)
        if not restart and name in self.original_jobs and self.first_job_start is None:
            self.first_job_start = self.procs[name].t0
        if c.fault == "kill-mid-checkpoint" and name == c.target and not self.fault_done:
            if self.ckpt_watch is None:
                shard = name.rsplit("-", 1)[1]
                self.ckpt_watch = faults.CheckpointWatch(self.volume(name, "checkpoints"),
                                                         rf"shard-{shard}-round-(\d+)\.ckpt\.tmp", c.at_round)
            self.ckpt_watch.arm(self.procs[name].pid)

    def whole_job_fault(self):
        c = self.case
        subnet = f"{netns_run.SUBNET}.0/24"
        self.whole_done = True
        if c.loss_pct:
            ports = [self.port_of(s) for s in self.order]
            faults.nft(self.net.switch, faults.loss_ruleset(c.loss_pct, ports))
            log(f"fault: {c.loss_pct:g}% loss on every frame a host sends through the switch")
        if c.fault == "delay":
            for i, w in enumerate(self.original_jobs):
                self.relays.append(faults.Relay(self.net.ns[w], subnet, c.delay_ms, c.jitter_ms,
                                                self.run_dir / f"relay-{w}.log", seed=i + 1))
            log(f"fault: {c.delay_ms:g} ms +- {c.jitter_ms:g} ms each way on every connection the workers open")
        elif c.fault == "slow":
            for t in self.targets():
                faults.tbf(self.net.ns[t], "eth0", c.rate)
                faults.tbf(self.net.switch, self.port_of(t), c.rate)
            log(f"fault: {', '.join(self.targets())} at {c.rate} (tbf, both ends of the link)")
        if c.fault in ("loss", "delay", "slow"):     # the case's one fault; else the point fault's time counts
            self.fault_at = time.monotonic()
            self.fault_done = True

    def kill(self, names: list[str], where: str):
        """SIGKILL every one of `names` first, then start them again (c.restart) or leave them dead."""
        c = self.case
        codes = dict(zip(names, self.procs.kill(*(self.procs[name] for name in names))))
        now = time.monotonic()
        self.fault_at, self.fault_done = now, True
        for name in names:
            if c.restart:
                self.interrupted.append(name)
                self.restarts[name] = self.restarts.get(name, 0) + 1
                log(f"fault: SIGKILL {name} {where} (exit {codes[name]}); starting it again, same command")
                shutil.rmtree(self.run_dir / f"tmpfs/{name}", ignore_errors=True)   # a restarted container's tmpfs
                self.start(name, restart=f"after SIGKILL {where}")
            else:
                self.killed_for_good.append(name)
                self.jobs.remove(name)
                self.exit[name] = codes[name]
                self.exit_time[name] = now
                log(f"fault: SIGKILL {name} {where} (exit {codes[name]}); not restarted")

    def inject_faults(self):
        before = sum(k.done for k in self.kills)
        super().inject_faults()                      # the shard kills (--kill SERVICE@ROUND)
        if sum(k.done for k in self.kills) > before:
            self.fault_at = time.monotonic() if self.case.fault == "kill" else (self.fault_at or time.monotonic())
            self.fault_done = True
            self.interrupted += [k.service for k in self.kills if k.done and k.service not in self.interrupted]
        c = self.case
        now = time.monotonic()
        reached = not self.fault_done and self.worker0_rounds() >= c.at_round
        where = f"at worker-0's round {self.worker0_rounds()}"
        if c.fault == "partition":
            if reached:
                for t in self.targets():
                    peer = self.port_of(c.peer) if c.peer else ""
                    faults.nft(self.net.switch, faults.partition_ruleset(self.port_of(t), peer))
                self.fault_at, self.fault_done = now, True
                log(f"fault: {c.target} cut off{' from ' + c.peer if c.peer else ''} {where} for {c.duration_s:g} s")
            elif self.fault_done and self.healed_at is None and now - self.fault_at >= c.duration_s:
                dropped = faults.counters(self.net.switch, "bridge", f"{faults.TABLE}_partition")
                faults.nft_delete(self.net.switch, "bridge", f"{faults.TABLE}_partition")
                self.healed_at = now
                self.notes.append(f"{dropped} frames dropped during the partition")
                log(f"fault: {c.target} reconnected after {now - self.fault_at:.1f} s ({dropped} frames dropped)")
        elif c.fault == "kill" and not self.own_kill_is_harness() and reached:
            self.kill(self.targets(), where)
        elif c.fault == "disk-full" and c.target.startswith("worker") and reached:
            for t, folder in self.state_mounts.items():
                written = faults.fill(folder)
                log(f"fault: {t}'s state folder filled {where} ({written} bytes of filler)")
            self.fault_at, self.fault_done = now, True
        elif c.fault == "damaged-checkpoint" and reached:
            name = c.target
            code, = self.procs.kill(self.procs[name])
            newest = faults.newest_checkpoint(self.volume(name, "checkpoints"), name.rsplit("-", 1)[1])
            if newest is None:
                raise netns_run.RunError(f"{name} has no checkpoint to damage {where}")
            what = faults.damage(newest, c.damage)
            self.notes.append(f"{newest.name}: {what}")
            log(f"fault: SIGKILL {name} {where} (exit {code}); {newest}: {what}; starting it again")
            self.fault_at, self.fault_done = now, True
            self.interrupted.append(name)
            self.restarts[name] = self.restarts.get(name, 0) + 1
            shutil.rmtree(self.run_dir / f"tmpfs/{name}", ignore_errors=True)
            self.start(name, restart=f"after SIGKILL {where} and damaging {newest.name}")
        elif c.fault == "kill-mid-checkpoint" and not self.fault_done and self.ckpt_watch and self.ckpt_watch.killed:
            name, w = c.target, self.ckpt_watch
            self.procs.wait([self.procs[name]], None)     # the watch's SIGKILL
            code = self.procs[name].rc
            self.fault_at, self.fault_done = w.killed_at, True
            left = w.folder / w.killed_file
            final = w.folder / w.killed_file[: -len(".tmp")]
            state = (f"{left.name} left with {left.stat().st_size} bytes, {final.name} "
                     f"{'present' if final.exists() else 'absent'}") if left.exists() else \
                    f"{w.killed_file} already renamed: the kill came after the write"
            self.mid_checkpoint = left.exists() and not final.exists()
            self.notes.append(f"SIGKILL {w.delay_ms:.1f} ms after the first write into {w.killed_file}: {state}")
            log(f"fault: SIGKILL {name} while writing {w.killed_file} (exit {code}); {state}; starting it again")
            self.interrupted.append(name)
            self.restarts[name] = self.restarts.get(name, 0) + 1
            shutil.rmtree(self.run_dir / f"tmpfs/{name}", ignore_errors=True)
            self.start(name, restart=f"after SIGKILL while writing {w.killed_file}")

    def own_kill_is_harness(self) -> bool:
        """A kill of one shard at its applied round is the emulator's --kill; the others are this runner's."""
        return is_harness_kill(self.case)

    # --- exits: a failing worker waits for the others (settle) ----------------------------------
    def poll(self):
        now = time.monotonic()
        self.procs.poll()
        for p in self.procs.exited():
            name, code = p.name, p.rc
            if name in self.exit or name in self.held:
                continue
            self.exit_time[name] = now
            since = p.end - p.start
            if code != 0 and name in self.jobs and self.settle_s > 0:
                self.held[name] = code
                netns_run.log(f"{name} exited {code} after {since:.1f} s (waiting up to {self.settle_s:.0f} s "
                              "for the other workers to end by themselves)")
                continue
            self.exit[name] = code
            netns_run.log(f"{name} exited {code} after {since:.1f} s")
        if self.held:
            first = min(self.exit_time[n] for n in self.held)
            if all(j in self.exit or j in self.held for j in self.jobs) or now - first >= self.settle_s:
                self.exit.update(self.held)
                self.held.clear()

    def finish_long_running(self):
        """The shards' end is recorded and judged by the case, not a run failure here."""
        try:
            super().finish_long_running()
        except netns_run.RunError as e:
            if not re.search(r"exited -?\d+ at the end of the job", str(e)):  # exit codes are in the outcome
                self.notes.append(f"at the end: {C._first_line(str(e))}")
            for name in self.long_running:
                if name not in self.exit:
                    self.exit[name] = None

    def cleanup(self):
        for r in self.relays:
            r.stop()
            text = r.log.read_text(errors="replace")
            stats = [l for l in text.splitlines() if "connections" in l]
            if stats:
                self.notes.append(f"relay {r.ns.rsplit('-', 2)[-2]}-{r.ns.rsplit('-', 1)[-1]}: {stats[-1].split(': ', 1)[-1]}")
        if self.ckpt_watch:
            self.ckpt_watch.stop()
        if self.case.loss_pct and self.net.made_ns:
            dropped = faults.counters(self.net.switch, "bridge", f"{faults.TABLE}_loss")
            self.notes.append(f"{dropped} frames dropped by the loss rule")
        try:
            super().cleanup()
        finally:
            for m in self.mounts:
                faults.unmount(m)


def is_harness_kill(case: C.Case) -> bool:
    """A kill of one shard at its applied round: the emulator's --kill (deploy/emulate/netns_run.py)."""
    return case.fault == "kill" and re.fullmatch(r"server-\d+", case.target) is not None


def read_records(folder: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(folder.glob("worker-*.jsonl")):
        recs = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut by SIGKILL
        out[path.stem] = recs
    return out


def problem_lines(text: str, limit: int = 6) -> str:
    lines = [l for l in text.splitlines() if PROBLEM_LINE.match(l)]
    return "\n".join(lines[-limit:])


def failure_of(service: str, code, log_text: str, fallback: str = "") -> dict:
    """A failed process's message: its last error line first, then the warnings and errors before it
    (where the cause usually is), without time stamps."""
    lines = [strip_stamp(l) for l in problem_lines(log_text).splitlines()]
    errors = [l for l in lines if l.startswith(("error", "fatal", "critical"))]
    if errors:
        lines = [errors[-1]] + [l for l in lines if l != errors[-1]]
    if not lines:
        lines = [strip_stamp(l) for l in log_text.splitlines()[-3:]] or [fallback]
    return {"service": service, "code": code, "message": "\n".join(lines)}


def strip_stamp(line: str) -> str:
    """'2026-11-27 04:40:25.829 error [worker 0] text' -> 'error [worker 0] text'."""
    parts = line.split(" ", 2)
    return parts[2] if len(parts) == 3 and re.match(r"\d{4}-\d\d-\d\d", parts[0]) else line


def run_case(case: C.Case, out: Path, bin_args: list[str], settle_s: float, verbose: bool = False) -> dict:
    """Runs one case and returns its outcome (cases.judge's input)."""
    folder = out / case.name
    rec_dir = folder / "records"
    for m in faults.mounts_under(folder):
        faults.unmount(m)
    if folder.exists():
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    rec_dir.mkdir(parents=True)
    compose = compose_for(case, out)
    argv = ["--compose", str(compose), *bin_args, "--bandwidth", C.BANDWIDTH, "--timeout", str(case.timeout_s),
            "--exit-wait", "20", "--log-dir", str(folder)]
    for s in C.job_sets(case):
        argv += ["--set", s]
    for r in range(case.workers):
        argv += ["--service-arg", f"worker-{r}=--metrics-out={rec_dir / f'worker-{r}.jsonl'}"]
    if is_harness_kill(case):
        argv += ["--kill", f"{case.target}@{case.at_round}"]
    if case.also_kill:
        argv += ["--kill", f"{case.also_kill}@{case.at_round}"]
    args = netns_run.parse_args(argv)
    harness_log = open(folder / "harness.log", "w")

    def write(line: str) -> None:
        harness_log.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        harness_log.flush()

    def harness(msg: str) -> None:  # the emulator's own lines go to the case's harness.log
        write(f"emulate: {msg}")
        if verbose:
            print(f"emulate: {msg}", flush=True)

    netns_run.log = harness
    CASE_LOG[0] = lambda msg: write(f"chaos: {msg}")
    (folder / "command.txt").write_text("netns_run.py " + " ".join(shlex.quote(a) for a in argv) + "\n")
    services = topology.load(args.compose)
    if not case.expect.completes and case.expect.fail_within_s:   # every worker gets its bound to stop by itself
        settle_s = max(settle_s, case.expect.fail_within_s + 10)
    runner = ChaosRunner(args, services, case, rec_dir, settle_s)
    for s in services.values():
        runner.binary(s.argv[0])
    log(f"case {case.name}: {case.what}")
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    completed, error = False, None
    try:
        runner.run()
        completed = True
    except (netns_run.RunError, topology.TopologyError, faults.FaultError) as e:
        error = str(e)
    finally:
        end = time.monotonic()
        runner.poll()
        runner.exit.update(runner.held)
        runner.cleanup()
        CASE_LOG[0] = None
        harness_log.close()
    outcome = outcome_of(case, runner, completed, error, t0, end)
    outcome["load1"] = round(load, 2)
    return outcome


def outcome_of(case: C.Case, runner: ChaosRunner, completed: bool, error: str | None, t0: float, end: float) -> dict:
    start = runner.first_job_start or t0
    fault_at = runner.fault_at
    jobs = runner.original_jobs
    logs = {s: runner.current_log(s) for s in runner.order}
    whole = {s: (runner.run_dir / f"{s}.log").read_text(errors="replace") if (runner.run_dir / f"{s}.log").exists()
             else "" for s in runner.order}
    survivors = [j for j in jobs if j not in runner.killed_for_good]
    checksums = {}
    for j in survivors:
        found = netns_run.CHECKSUM.findall(logs[j])
        if found:
            checksums[j] = found[-1].lower()
    checksum = next(iter(checksums.values())) if checksums and len(set(checksums.values())) == 1 else None
    accuracy = None
    for j in survivors:
        found = ACCURACY.findall(logs[j])
        if found:
            accuracy = float(found[-1])
            break
    ref = fault_at if fault_at is not None else start
    worker_exits = {}
    for j in jobs:
        code = runner.exit.get(j)
        t = runner.exit_time.get(j)
        worker_exits[j] = (code, None if t is None or code is None else round(t - ref, 2))
    failed = sorted(((runner.exit_time.get(j, end), j) for j in survivors
                     if runner.exit.get(j) not in (None, 0)), key=lambda x: x[0])
    failure = {}
    if failed:
        t, j = failed[0]
        failure = failure_of(j, runner.exit.get(j), logs[j])
    elif error:
        m = re.match(r"(\S+) exited (-?\d+)", error)
        if m and m.group(1) in logs:
            failure = failure_of(m.group(1), int(m.group(2)), logs[m.group(1)], fallback=C._first_line(error))
        else:
            failure = {"service": "", "code": None, "message": C._first_line(error)}
    last_exit = max((runner.exit_time[j] for j in survivors if j in runner.exit_time), default=end)
    wall = (last_exit if completed else (failed[0][0] if failed else end)) - start
    records = read_records(runner.rec_dir)
    led = C.ledger(records, C.ROUNDS, survivors, runner.interrupted, case.joiners) if records else None
    timing = C.round_timing(records.get("worker-0", []))
    notes = list(runner.notes)
    for s in runner.order:
        if runner.restarts.get(s) or s in runner.interrupted:
            m = re.search(r"serving range [^\n]* from ([^\n]*)", logs[s])
            if m:
                notes.append(f"restarted {s} took its state from {m.group(1)}")
    if case.fault == "disk-full":
        for s in runner.order:
            if fnmatch.fnmatchcase(s, case.target):
                n = len(re.findall(C._NO_SPACE, whole[s]))
                line = next((l for l in whole[s].splitlines() if re.search(C._NO_SPACE, l)), "")
                notes.append(f"{s}: {n} log lines name the full disk" + (
                    f", e.g. \"{C._clip(C.short_paths(strip_stamp(line).split('] ', 1)[-1]), 240)}\"" if line else ""))
    return {
        "case": case.name, "completed": completed, "error": error, "checksum": checksum, "checksums": checksums,
        "accuracy": accuracy, "wall_s": round(wall, 2),
        "fault_at_s": None if fault_at is None else round(fault_at - start, 2),
        "healed_at_s": None if runner.healed_at is None else round(runner.healed_at - start, 2),
        "first_failure_s": None if not failed or fault_at is None else round(failed[0][0] - fault_at, 2),
        "exits": {s: runner.exit.get(s) for s in runner.long_running},
        "service_exits": {s: (runner.exit.get(s), None if runner.exit.get(s) is None or s not in runner.exit_time
                              else round(runner.exit_time[s] - ref, 2)) for s in runner.long_running},
        "mid_checkpoint": runner.mid_checkpoint,
        "worker_exits": worker_exits, "killed_for_good": runner.killed_for_good, "interrupted": runner.interrupted,
        "failure": failure, "ledger": led, "logs": {s: logs[s][-20000:] for s in runner.order},
        "addresses": dict(runner.net.addr), "notes": notes, "run_s": round(end - t0, 1), **timing,
    }


def render(rows: list[dict], out: Path, write_doc: Path | None, meta: dict) -> None:
    text = C.table(rows)
    summary = C.summary_line(rows)
    (out / "table.md").write_text(text + "\n\n" + summary + "\n")
    if write_doc:
        loads = [r["outcome"]["load1"] for r in rows if r["outcome"].get("load1") is not None]
        binaries_text = meta["bin_dir"] + (f", {meta['version']}" if meta.get("version") else "")
        load_text = f"{min(loads):.1f} to {max(loads):.1f}" if loads else "unknown"
        runs = f" ({meta['runs']} runs into one OUT)" if meta.get("runs", 1) > 1 else ""
        generated = (f"Generated by `{meta['command']}`{runs} from {meta['date']} in {meta['minutes']:.1f} min (binaries: "
                     f"{binaries_text}; 1-minute load average at the cases' starts {load_text} on {os.cpu_count()} "
                     f"cores). {summary}. Time cost: the case's wall time (first worker start to last worker exit) "
                     "minus its fault-free job's (the mean of its runs before and after the cases); for a fault at "
                     "a point in time also the stall (the longest pause between two rounds of worker-0 minus the "
                     "median round), for a fault over the whole job the median round time against the fault-free "
                     "one.\n\n" + text + "\n")
        not_run = [r["case"].name for r in rows if r["verdict"] not in ("PASS", "FAIL")]
        if not_run:
            generated += "\nNot run this time: " + ", ".join(not_run) + ".\n"
        C.write_doc(write_doc, generated)
        log(f"wrote the table into {write_doc}")


def merged_meta(before: dict, now: dict, results: dict) -> dict:
    """The meta of one table made by several runs (--merge): the first run's start, the minutes of all,
    each run's command once, and what is still not run."""
    runs = before.get("runs", 1) + 1
    command = now["command"] if before.get("command") == now["command"] else \
        re.sub(r" --cases \S+", " --cases CASES", now["command"]) + " --merge"
    return dict(now, date=before.get("date", now["date"]), minutes=before.get("minutes", 0) + now["minutes"],
                command=command, runs=runs,
                not_run=sorted(n for n in set(before.get("not_run") or []) | set(now["not_run"]) if n not in results))


def version(bin_args: list[str]) -> str:
    """`sketchps --version` of the binaries under test."""
    tool = next((a.split("=", 1)[1] for a in bin_args if a.startswith("sketchps=")), None)
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=10).stdout.strip() if tool \
            else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def rows_from(results: dict, selected: list[C.Case]) -> list[dict]:
    by_name = {c.name: c for c in C.CASES}
    rows = []
    baselines = {b.name: b for b in C.baselines_for(selected)}
    for b in baselines.values():
        o = results.get(b.name)
        if o is None:
            rows.append({"case": b, "outcome": {"skipped": "not run"}, "verdict": "not run", "unmet": []})
            continue
        verdict, unmet = C.judge_baseline(o)
        rows.append({"case": b, "outcome": o, "baseline": o, "verdict": verdict, "unmet": unmet})
    for c in selected:
        o = results.get(c.name)
        if o is None:
            rows.append({"case": by_name[c.name], "outcome": {"skipped": "not run"}, "verdict": "not run", "unmet": []})
            continue
        base = results.get(c.baseline)
        verdict, unmet = C.judge(c, o, base)
        rows.append({"case": c, "outcome": o, "baseline": base, "verdict": verdict, "unmet": unmet})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Chaos suite on emulated hosts (see the module doc).")
    ap.add_argument("--bin-dir", help="folder of sketchps-server, sketchps-worker, sketchps (build or flat)")
    ap.add_argument("--out", default=str(REPO / "runs/chaos"))
    ap.add_argument("--cases", help="comma-separated case names or globs (baselines are added as needed)")
    ap.add_argument("--short", action="store_true", help="the quick subset for CI")
    ap.add_argument("--write-doc", help="write the table into this Markdown file (between GENERATED markers)")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds a failed worker's peers get to end by themselves before the case is stopped")
    ap.add_argument("--render-only", action="store_true", help="rebuild table/doc from OUT/results.json")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--reuse-baselines", action="store_true",
                    help="take the fault-free runs from OUT/<baseline>/outcome.json when they exist (while iterating)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the outcomes already in OUT/results.json that this run does not redo (a suite run in "
                         "parts; --render-only then tables them all)")
    ap.add_argument("--no-second-baseline", dest="baseline_twice", action="store_false",
                    help="run each fault-free job once, not also after the cases (--short never does)")
    ap.add_argument("--verbose", action="store_true", help="also print the emulator's lines (always in CASE/harness.log)")
    args = ap.parse_args(argv)
    out = Path(args.out).absolute()
    try:
        selected = C.select(C.CASES, args.cases.split(",") if args.cases else None, args.short)
    except ValueError as e:
        print(f"chaos: {e}", file=sys.stderr)
        return 2
    if args.list:
        for c in selected:
            print(f"{c.name:28} {'short ' if c.short else '      '}{c.what}")
        return 0
    write_doc = Path(args.write_doc).absolute() if args.write_doc else None
    results_path = out / "results.json"
    if args.render_only:
        if not results_path.exists():
            print(f"chaos: {results_path} does not exist", file=sys.stderr)
            return 2
        saved = json.loads(results_path.read_text())
        results, meta = saved["outcomes"], saved["meta"]
        selected = [c for c in C.CASES if c.name in results] if not args.cases and not args.short else selected
        rows = rows_from(results, selected)
        render(rows, out, write_doc, meta)
        print(C.summary_line(rows))
        return 0 if all(r["verdict"] == "PASS" for r in rows) else 1
    if not args.bin_dir:
        print("chaos: --bin-dir is required", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("chaos: FAILED: must run as root (network namespaces, tmpfs mounts); not skipping", file=sys.stderr)
        return 1
    bin_args = binaries(Path(args.bin_dir))
    out.mkdir(parents=True, exist_ok=True)

    stopping: list[int] = []

    def on_signal(signum, _frame):
        # The case running now stops and cleans up (its outcome is dropped: it did not run to its end); the
        # suite then stops, writing what ran.
        stopping.append(signum)
        raise netns_run.RunError(f"interrupted by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.time()
    results: dict[str, dict] = {}
    earlier: dict = {}
    if args.merge and results_path.exists():
        earlier = json.loads(results_path.read_text())
        results.update(earlier.get("outcomes") or {})
    order = C.baselines_for(selected) + selected
    for case in order:      # redone now: a baseline's second run too
        results.pop(case.name, None)
    try:
        for case in order:
            saved = out / case.name / "outcome.json"
            if case.fault == "none" and args.reuse_baselines and saved.exists():
                results[case.name] = json.loads(saved.read_text())
                log(f"baseline {case.name}: reused from {saved}")
                continue
            outcome = run_case(case, out, bin_args, args.settle, args.verbose)
            if stopping:
                raise netns_run.RunError(f"interrupted by signal {stopping[0]} during {case.name}")
            (out / case.name / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
            results[case.name] = outcome
            if case.fault == "none":
                verdict = "ok" if outcome["completed"] else "FAILED"
                log(f"baseline {case.name}: {verdict}, {outcome['wall_s']:.1f} s, checksum {outcome['checksum']}, "
                    f"accuracy {outcome['accuracy']}")
            else:
                verdict, unmet = C.judge(case, outcome, results.get(case.baseline))
                log(f"case {case.name}: {verdict}: {C.observed(case, outcome, results.get(case.baseline))}"
                    + ("".join(f"\n    unmet: {u}" for u in unmet)))
        if args.baseline_twice and not args.short:
            for b in C.baselines_for(selected):
                if b.name not in results or results[b.name].get("wall_s_runs"):
                    continue
                again = replace(b, name=f"{b.name}-again")
                outcome = run_case(again, out, bin_args, args.settle, args.verbose)
                if stopping:
                    raise netns_run.RunError(f"interrupted by signal {stopping[0]} during {again.name}")
                (out / again.name / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
                results[again.name] = outcome
                results[b.name] = C.merge_baseline(results[b.name], outcome)
                log(f"baseline {b.name} again: {outcome['wall_s']:.1f} s, checksum {outcome['checksum']} "
                    f"({'the same' if results[b.name]['reproducible'] else 'DIFFERENT'})")
    except netns_run.RunError as e:  # Ctrl-C between cases: the case's own cleanup already ran
        log(f"stopped: {e}")
    minutes = (time.time() - t0) / 60
    cmd = "bash deploy/chaos/run.sh --bin-dir DIR --out OUT" + (f" --cases {args.cases}" if args.cases else "") + \
          (" --short" if args.short else "") + (" --write-doc " + str(args.write_doc) if args.write_doc else "")
    meta = {"command": cmd, "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(t0)), "minutes": minutes,
            "bin_dir": "a copy of build/ci" if "build" in str(args.bin_dir) else str(args.bin_dir),
            "not_run": [c.name for c in order if c.name not in results], "version": version(bin_args)}
    not_run_now = list(meta["not_run"])     # this run's own, for the exit code
    if earlier.get("meta"):
        meta = merged_meta(earlier["meta"], meta, results)
    results_path.write_text(json.dumps({"meta": meta, "outcomes": results}, indent=1) + "\n")
    rows = rows_from(results, selected)
    render(rows, out, write_doc, meta)
    log(f"{C.summary_line(rows)} in {minutes:.1f} min; table: {out / 'table.md'}")
    leftovers = [l for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                 if netns_run.NAMESPACE.match(l) and l.startswith(f"sps{os.getpid()}")]
    if leftovers:
        log(f"FAILED: namespaces left behind: {', '.join(leftovers)}")
        return 1
    return 0 if all(r["verdict"] == "PASS" for r in rows) and not not_run_now else 1


if __name__ == "__main__":
    sys.exit(main())
