"""A write cut off half way through a file, as a crash or a kill leaves it: tests/test_safety.py stops the
writer with an exception, benchmarks/kill_safety.py with SIGKILL in a child process; both then check that
the output on disk is still the old file or the new one, never half of it."""

from __future__ import annotations

import os
from typing import Callable


class HalfThenStop:
    """An open file whose `write` puts the first half of its data on disk (flushed and fsynced, so the half
    really is there) and then calls `stop`, which raises or kills the process."""

    def __init__(self, fh, stop: Callable[[], None]):
        self.fh, self.stop = fh, stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.fh.__exit__(*exc)

    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.stop()
