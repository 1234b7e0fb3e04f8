"""sketchps._status: this rank's status file (SKETCHPS_STATUS_FILE), which the launcher of
`sketchps run --servers-only` watches (tools/worker_watch.h): open() writes the pid and host first
thing in init(); write() appends a "left=" or "failed=" line. Best effort: a write that fails is
ignored (the launcher then names the rank without the reason). Not thread-safe (one main thread).
"""
import os
import socket

from sketchps._job_context import _env

_status_path = None  # this rank's SKETCHPS_STATUS_FILE, once init() wrote it


def _status_open():
    """SKETCHPS_STATUS_FILE ({rank}: RANK; `sketchps run --servers-only` sets it in workers.env): this
    process's pid and host, written first thing in init(), then a "left=" line once it leaves the job
    or a "failed=" line with the reason it stopped. The launcher watches these files (a process gone
    without "left=" failed; tools/worker_watch.h), so a rank that torchrun started, which is not the
    launcher's child, cannot fail unnoticed."""
    global _status_path
    path = _env("SKETCHPS_STATUS_FILE")
    rank = _env("RANK", _env("JOB_COMPLETION_INDEX"))
    if not path or not rank.isdigit() or _env("SKETCHPS_DESCRIBE"):
        return
    _status_path = path.replace("{rank}", rank)
    with open(_status_path + ".tmp", "w") as f:
        f.write(f"pid={os.getpid()}\nhost={socket.gethostname()}\n")
    os.replace(_status_path + ".tmp", _status_path)  # whole: the launcher reads it at any time


def _status_write(key, text):
    if _status_path is None:
        return
    try:
        with open(_status_path, "a") as f:
            f.write(f"{key}={' '.join(str(text).split())[:1000]}\n")
    except OSError:
        pass  # best effort: the launcher then names the rank without the reason
