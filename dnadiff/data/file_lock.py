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

The holder removes the file when it releases the lock (lock files no longer pile up in the cache's
locks/ folder), still holding it while it unlinks. A waiter may then own the lock of a file that
has just been unlinked, with a newer file (or none) under the name: a lock counts only when the
locked file is still the one under the path (same device and inode), else it opens the path again.
So two holders never overlap: at any time at most one holds the lock on the file the name points
to. A holder killed by kill -9 leaves its file behind; the next holder removes it on release.
"""

from __future__ import annotations

import contextlib
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
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
            except OSError:
                fh.seek(0)
                self.holder = fh.read().strip()
                fh.close()
                return False
            if self._is_current(fh):
                break
            fh.close()  # its holder released and removed it while we waited: lock the path's file now
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return True

    def _is_current(self, fh) -> bool:
        """Is the open (locked) file still the one under the path (not unlinked by its last holder)?"""
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fh.fileno())
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self._fh is not None:
            import fcntl

            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)  # while still locked: a waiter on this file sees it gone and retries
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
