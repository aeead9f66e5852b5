"""The tests' process waiting (tests/helpers/progress_wait.py): a slow child that keeps making progress is
waited for however long it takes; a silent one fails after the stall window and is killed."""

from __future__ import annotations

import sys
import time

import pytest

from helpers.progress_wait import Child, run

pytestmark = [pytest.mark.subprocess]

TICKER = "import sys, time\nfor i in range({n}):\n    print(i, flush=True)\n    time.sleep({dt})\n"


def test_a_child_that_keeps_printing_outlives_the_stall_window():
    start = time.monotonic()
    proc = run([sys.executable, "-c", TICKER.format(n=8, dt=0.25)], stall=1.0)  # 2 s in all, never 1 s silent
    assert proc.returncode == 0 and proc.stdout.split() == [str(i) for i in range(8)]
    assert time.monotonic() - start > 1.5  # longer than the window: a fixed 1 s timeout would have failed


def test_a_child_writing_files_silently_is_progress(tmp_path):
    code = ("import pathlib, time, sys\nfor i in range(8):\n"
            f"    pathlib.Path({str(tmp_path)!r}, 'f').write_text('x' * (i + 1))\n    time.sleep(0.25)\n")
    assert run([sys.executable, "-c", code], watch=[tmp_path], stall=1.0).returncode == 0


def test_a_silent_child_fails_after_the_stall_window_and_is_killed():
    child = Child([sys.executable, "-c", "print('started', flush=True)\nimport time\ntime.sleep(60)"], stall=1.0)
    start = time.monotonic()
    with pytest.raises(AssertionError, match="no progress for 1 s"):
        child.wait()
    assert time.monotonic() - start < 20 and child.proc.poll() is not None  # killed, not left running
    assert child.stdout == "started\n"
