"""Run directory ownership under several processes: the launcher's rank, and an exclusive lock.

Multi-process launches start the *same command* several times (Lightning's `ddp` re-runs it with
LOCAL_RANK=1.., torchrun sets RANK, SLURM's srun sets SLURM_PROCID). Only global rank 0 creates,
replaces or cleans the run directory; the other ranks only read it (the checkpoint to resume).

Two independent `dnadiff train` processes aimed at the same run directory (or two concurrent
`--overwrite`) would both pass the exists-check and corrupt each other's run: rank 0 holds an
exclusive advisory lock (fcntl.flock) for the whole run on a lock file named after the run
directory's absolute path, in dnadiff's cache folder (`utils.cache_dir("locks")`). The lock file
lives outside the run directory so `--overwrite` (which deletes the directory) cannot drop it, and
nothing is left beside the user's outputs; the kernel releases it when the holder dies, even by
kill -9, and the holder removes the file when it releases it (data/file_lock.py: no pile of lock files).
"""

from __future__ import annotations

import os
from pathlib import Path

from dnadiff.errors import DnadiffError
from dnadiff.utils import cache_dir

# env variables that carry a process's rank, in the order launchers set them
_RANK_VARS = ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK")


def launch_rank() -> int:
    """This process's rank as its launcher set it before any process group exists: 0 for the
    process a user started; > 0 for a copy started by Lightning's ddp launcher, torchrun or srun."""
    for var in _RANK_VARS:
        value = os.environ.get(var, "")
        if value.strip().isdigit() and int(value) > 0:
            return int(value)
    return 0


def refuse_existing_run_dir(run_dir: Path, overwrite: bool, hint: str = "use --resume to continue or --overwrite "
                            "to replace it") -> None:
    """A new run may go into a missing or empty directory, or replace a full one with --overwrite.
    No torch here: the commands also call it before anything heavy is imported (commands/preflight.py)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()) and not overwrite:
        raise DnadiffError(f"{run_dir}: run directory exists ({hint})")


def lock_path(run_dir: Path) -> Path:
    import hashlib


    key = hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:20]
    return Path(cache_dir("locks")) / f"{Path(run_dir).name}.{key}.lock"


class RunDirLock:
    """Exclusive, non-blocking lock on a run directory (no-op where fcntl does not exist)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = lock_path(self.run_dir)
        from dnadiff.data.file_lock import FileLock  # here: dnadiff.data imports torch, launch_rank() needs none

        self._lock = FileLock(self.path, blocking=False)

    def acquire(self) -> "RunDirLock":
        if not self._lock.acquire():
            holder = self._lock.holder
            raise DnadiffError(
                f"{self.run_dir}: run directory is in use by another dnadiff process"
                f"{f' (pid {holder})' if holder else ''}; wait for it or choose another --run-dir"
            )
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "RunDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
