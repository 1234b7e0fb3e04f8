"""What a test run of the netns emulator left behind: namespaces that were not there before the case.

Namespaces of other live runs on the host (a benchmark beside CI) are in `before` and stay out of the
report; a killed run's namespaces are reaped by the emulator itself (netns_run.reap_stale_namespaces)."""
from __future__ import annotations

import subprocess


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("sps")}


def new_namespaces(before: set[str]) -> list[str]:
    return sorted(namespaces() - before)
