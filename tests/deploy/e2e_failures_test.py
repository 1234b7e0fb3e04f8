#!/usr/bin/env python3
"""Shows that bench/e2e/run.sh completes a good run and fails each broken one cleanly, with
stand-in daemons (shell scripts written per case; no C++ build, no DDP). The stand-ins follow the
daemons' contract: they refuse to start without --tls-dir holding their certificate (or
--insecure), the workers leave at the end, and a shard exits 0 once all four have left. Cases: a
good run (certificates from the stand-in `sketchps certs`); a good run with --insecure (the
harness must not run `sketchps certs` then); the certificates step failing; a worker that exits 3;
a server that dies before its port file; a server failing at the end of the job; a server that
does not exit by itself; the per-run timeout; SIGTERM to the harness mid-run; a bad option. Each
case checks the exit code, a message naming the culprit, and that no namespace and no stand-in
process is left behind. Prints one line per case and "N passed, M failed"; exits 1 if any case did
not behave. Needs root.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netns_leftovers import namespaces, new_namespaces

RUN = Path(__file__).resolve().parents[2] / "bench/e2e/run.sh"

# Both daemons: the TLS rule of the real ones (exit 2 without their certificate or --insecure).
TLS_CHECK = """if [ -z "$insecure" ]; then
  [ -f "$tls_dir/ca.pem" ] && [ -f "$tls_dir/$identity.pem" ] && [ -f "$tls_dir/$identity.key" ] || {
    echo "fake: no certificate for $identity in '$tls_dir' (and no --insecure)"; exit 2; }
fi"""
# A shard: serves, then exits 0 once the four workers have left (files left-<rank> in its folder).
SERVER_OK = """trap 'exit 0' TERM
echo '{"grpc": 7070}' > "$port_file.tmp" && mv "$port_file.tmp" "$port_file"
while [ "$(ls "$(dirname "$port_file")" | grep -c '^left-')" -lt 4 ]; do sleep 0.1; done
echo "fake: every worker has finished the job"; exit ${END_RC:-0}"""
SERVER_STAYS = SERVER_OK.replace('-lt 4 ]', '-lt 99 ]')
WORKER_OK = """i=0
while [ $i -lt 3 ]; do
  printf '{"round": %d, "time": %s, "compute_s": 0.01, "bytes_up": 10, "bytes_down": 5, "dense_bytes": 100%s}\\n' \\
    $i "$(date +%s.%N)" "$([ $i -eq 2 ] && echo ', "test_accuracy": 0.5, "test_round": 2')" >> "$metrics_out"
  i=$((i + 1)); sleep 0.2
done
touch "$(dirname "$metrics_out")/left-$rank"
"""
CERTS_OK = """mkdir -p "$out"
for f in ca.pem ca.key $(i=0; while [ $i -lt "$workers" ]; do echo worker-$i.pem worker-$i.key; i=$((i+1)); done) \\
         $(i=0; while [ $i -lt "$servers" ]; do echo server-$i.pem server-$i.key; i=$((i+1)); done); do
  echo "-----BEGIN fake $f" > "$out/$f"
done"""
CERTS_FAIL = 'echo "fake: cannot write $out"; exit 1'
# (name, server body, worker body, certs body, extra args, signal the harness after N s, exit code, expected text)
CASES = [
    ("good run", SERVER_OK, WORKER_OK, CERTS_OK, [], None, 0, "results in"),
    ("good run, --insecure", SERVER_OK, WORKER_OK, CERTS_FAIL, ["--insecure"], None, 0, "results in"),
    ("certificates step fails", SERVER_OK, WORKER_OK, CERTS_FAIL, [], None, 1, "certs --out"),
    ("worker exits 3", SERVER_OK, '[ "$rank" = 1 ] && { echo "fake: cannot reach the servers"; exit 3; }\nsleep 600',
     CERTS_OK, [], None, 1, "worker-1 exited 3"),
    ("server dies early", 'echo "fake: bad job"; exit 2', WORKER_OK, CERTS_OK, [], None, 1,
     "server-0 exited 2 before it wrote its port file"),
    ("server fails at the end of the job", SERVER_OK.replace("${END_RC:-0}", "1"), WORKER_OK, CERTS_OK, [], None, 1,
     "exited 1"),
    ("server does not exit by itself", SERVER_STAYS, WORKER_OK, CERTS_OK, ["--server-exit-wait", "2"], None, 1,
     "still running 2 s after the last worker exited"),
    ("timeout", SERVER_OK, "sleep 600", CERTS_OK, ["--timeout", "4"], None, 1, "timeout after 4 s (--timeout)"),
    ("SIGTERM to the harness", SERVER_OK, "sleep 600", CERTS_OK, [], 4.0, 1, "interrupted by signal 15"),
    ("bad option", SERVER_OK, WORKER_OK, CERTS_OK, ["--bandwidth", "100"], None, 2, "--bandwidth '100'"),
]


# The stand-in front end's `sketchps launch argv ROLE FLAGS...`: the flags as the daemon's command line
# (a JSON array; the harness puts its own binary in front), as the real launcher library does.
LAUNCH = """if [ "$1" = launch ] && [ "$2" = argv ]; then
  shift 3; printf '["%s"' fake-daemon; for a in "$@"; do printf ',"%s"' "$a"; done; echo ']'; exit 0
fi
"""


def fake(path: Path, body: str, role: str) -> None:
    identity = {"server": 'server-$shard', "worker": 'worker-$rank'}.get(role, "")
    path.write_text("#!/bin/sh\n" + (LAUNCH if role == "tool" else "") + "insecure=; tls_dir=\n"
                    "while [ $# -gt 0 ]; do case \"$1\" in\n"
                    "  --rank) rank=$2; shift;; --shard) shard=$2; shift;; --port-file) port_file=$2; shift;;\n"
                    "  --metrics-out) metrics_out=$2; shift;; --tls-dir) tls_dir=$2; shift;; --insecure) insecure=1;;\n"
                    "  --out) out=$2; shift;; --workers) workers=$2; shift;; --servers) servers=$2; shift;;\n"
                    "esac; shift; done\n"
                    + (f"identity={identity}\n{TLS_CHECK}\n" if identity else "") + body + "\n")
    path.chmod(0o755)


def leftovers(tmp: str, before: set[str]) -> list[str]:
    found = new_namespaces(before)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if tmp.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(f"process {pid}")
        except OSError:
            pass
    return found


def run_case(case) -> tuple[bool, str]:
    name, server, worker, certs, extra, kill_after, want_rc, expect = case
    before = namespaces()
    with tempfile.TemporaryDirectory(prefix="sketchps-e2e-case-") as tmp:
        fake(Path(tmp) / "server", server, "server")
        fake(Path(tmp) / "worker", worker, "worker")
        fake(Path(tmp) / "sketchps", certs, "tool")
        argv = ["bash", str(RUN), "--bin", f"sketchps-server={tmp}/server", "--bin", f"sketchps-worker={tmp}/worker",
                "--bin", f"sketchps={tmp}/sketchps", "--ddp", "none", "--set", "train.rounds=3", "--out", f"{tmp}/out", "--progress-every", "1", *extra]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if kill_after:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            return False, f"the harness hung (killed after 120 s)\n{out}"
        time.sleep(0.2)
        left = leftovers(tmp, before)
        results = Path(tmp) / "out/results.json"
        good_rounds = want_rc == 0 and json.loads(results.read_text())["runs"][0]["figures"]["rounds"] == 3
    if proc.returncode != want_rc:
        return False, f"exit {proc.returncode}, expected {want_rc}\n{out}"
    if expect not in out:
        return False, f"output lacks {expect!r}\n{out}"
    if left:
        return False, f"left behind: {left}\n{out}"
    if want_rc == 0 and not good_rounds:
        return False, f"results.json does not show the 3 rounds\n{out}"
    return True, ""


def main() -> int:
    if os.geteuid() != 0:
        print("e2e_failures: FAILED: must run as root (network namespaces); not skipping")
        return 1
    passed = failed = 0
    for case in CASES:
        ok, why = run_case(case)
        print(f"{'ok  ' if ok else 'FAIL'} {case[0]}" + ("" if ok else f": {why}"), flush=True)
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
