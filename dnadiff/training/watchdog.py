"""Workers of a multi-process run stop, quietly, when their launcher dies.

Lightning's `ddp` launcher is rank 0 itself: it re-runs the command for ranks 1.. as its child
processes. After a `kill -9` of it (a preempted job, a user's Ctrl-\\), the children are orphaned:
they stay alive until their next collective fails and then print a raw gloo traceback
("Connection closed by peer"), or with NCCL hang until its timeout. torchrun's workers have the
same fate when the torchrun agent is killed.

`watch_launcher()` (called by every rank > 0, and by torchrun workers) notes the parent process
and polls it from a daemon thread; once the process has been re-parented (its launcher is gone) it
writes one line to stderr and exits at once (os._exit: nothing of a run that is gone is worth
finishing; rank > 0 writes no checkpoint). A collective that fails first (the dead launcher's
sockets close an instant before the kernel re-parents its children) goes through `orphaned()`,
so the same one line replaces the traceback.
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 0.2
EXIT_CODE = 1


class LauncherWatch:
    def __init__(self, rank: int, parent: int, poll: float = POLL_S) -> None:
        self.rank, self.parent, self.poll = rank, parent, poll
        self._said = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dnadiff-launcher-watch", daemon=True)
        self._thread.start()

    def launcher_alive(self) -> bool:
        return os.getppid() == self.parent

    def _run(self) -> None:
        while self.launcher_alive():
            if self._closed.wait(self.poll):
                return
        if not self._closed.is_set():
            self.stop()

    def close(self) -> None:
        """The work is done: a launcher that exits from now on is no reason to stop."""
        self._closed.set()

    def stop(self) -> None:
        """One line on stderr, then exit now (once, from whichever thread gets here first)."""
        if not self._said.acquire(blocking=False):
            time.sleep(3600)  # the other thread is exiting the process
        line = (f"dnadiff: rank {self.rank}: the launcher (pid {self.parent}) has exited; "
                "stopping this worker\n")
        try:
            os.write(2, line.encode())
        except OSError:
            pass
        os._exit(EXIT_CODE)

    def orphaned(self, grace: float = 2.0) -> bool:
        """Has the launcher died? Waits up to `grace` seconds for the kernel to re-parent this process
        (a failed collective can come first)."""
        deadline = time.monotonic() + grace
        while self.launcher_alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


def launched_worker(rank: int) -> bool:
    """A process whose parent is its launcher: a rank > 0 (Lightning's ddp children, torchrun, srun)
    or any torchrun worker. Rank 0 of a plain `dnadiff train` is not: its parent is the user's
    shell, which may go away (nohup) while the run should go on."""
    return rank > 0 or "TORCHELASTIC_RUN_ID" in os.environ


def watch_launcher(rank: int) -> LauncherWatch | None:
    if not launched_worker(rank):
        return None
    return LauncherWatch(rank, os.getppid())
