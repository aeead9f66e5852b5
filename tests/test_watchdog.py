"""Workers stop when their launcher dies (dnadiff/training/watchdog.py), without a DDP run: a launcher
process starts a worker that watches it, the launcher is killed with SIGKILL, the worker must be
gone at once with one line on stderr. (tests/test_ddp.py checks the same on a real 2-process run.)"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from helpers.progress_wait import Child
from helpers.subprocess_env import REPO, child_env

pytestmark = [pytest.mark.subprocess]

WORKER = textwrap.dedent("""
    import os, sys, time
    from dnadiff.training.watchdog import watch_launcher
    watch = watch_launcher(int(sys.argv[1]))
    print("watching" if watch else "not watching", os.getpid(), flush=True)
    if sys.argv[2] == "close":
        watch.close()
    time.sleep(60)  # a worker busy with its own computation, in no collective
""")
LAUNCHER = textwrap.dedent("""
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
    time.sleep(60)
""")


def _start(rank: int, mode: str = "watch") -> tuple[Child, int]:
    child = Child([sys.executable, "-c", LAUNCHER, WORKER, str(rank), mode], cwd=REPO, env=child_env())
    assert child.wait_until(lambda: "watching" in child.stdout)
    return child, int(child.stdout.split()[-1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie (exited, not yet reaped by init) counts as gone
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_worker_stops_in_one_line_when_its_launcher_is_killed():
    child, worker = _start(rank=1)
    assert child.stdout.startswith("watching")
    os.kill(child.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    done = child.wait()  # returns when the worker, the last holder of the pipes, has closed them
    # the kernel closes a process's files before its state turns Z: on a loaded machine /proc may still show the
    # worker running for a moment after the pipes closed (a CI failure of 7 Dec), so its end is polled too
    while _alive(worker) and time.monotonic() - killed < 10:
        time.sleep(0.05)
    assert not _alive(worker)
    assert time.monotonic() - killed < 10  # polled every 0.2 s: at once, even on a loaded machine
    assert done.stderr == f"dnadiff: rank 1: the launcher (pid {child.proc.pid}) has exited; stopping this worker\n"


def test_rank_zero_started_by_a_user_is_not_watched_and_a_closed_watch_stays_quiet():
    child, worker = _start(rank=0)  # its parent is the user's shell: a nohup run outlives it
    assert child.stdout.startswith("not watching")
    os.kill(worker, signal.SIGKILL)
    child.kill()
    child, worker = _start(rank=1, mode="close")  # the work is done: the launcher may exit first
    os.kill(child.proc.pid, signal.SIGKILL)
    time.sleep(1.0)
    assert _alive(worker) and child.stderr == ""
    os.kill(worker, signal.SIGKILL)
