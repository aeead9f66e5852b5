"""An exclusive advisory lock on a file, shared by the run-directory lock and tokenizer training.

    with FileLock(path):                       # waits for the holder
        ...
    lock = FileLock(path, blocking=False)
    if not lock.acquire():                     # held elsewhere: lock.holder is the holder's pid ("" unknown)
        ...

fcntl.flock is per open file, so a second FileLock on the same path is refused even within one
process; the kernel drops the lock when its holder dies (even by kill -9). While held, the file
holds the holder's pid (for the refusal message of a second process). Where fcntl does not exist
(Windows) locking is a no-op: single-process use is still fine. No Lightning here: data/ imports it.
"""

from __future__ import annotations

import os
from pathlib import Path


class FileLock:
    def __init__(self, path: str | os.PathLike, blocking: bool = True):
        self.path = Path(path)
        self.blocking = blocking
        self.holder = ""  # after a refused non-blocking acquire: the pid the holder wrote
        self._fh = None

    def acquire(self) -> bool:
        """Take the lock (waiting for it when blocking); False: held elsewhere (non-blocking only)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
        except OSError:
            fh.seek(0)
            self.holder = fh.read().strip()
            fh.close()
            return False
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return True

    def release(self) -> None:
        if self._fh is not None:
            import fcntl

            try:
                self._fh.seek(0)
                self._fh.truncate()
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
