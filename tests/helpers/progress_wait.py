"""Waiting for a child process by its progress, not by a wall-clock limit.

A fixed timeout tuned on an idle machine fails on a loaded one (a 2-process fine-tuning run that
takes 2.4 minutes alone passed its 300 s limit under load). `Child` starts a command in its own
session, reads its stdout and stderr as they come, and counts as progress any new output and any
change of the watched paths (sizes and modification times of files, folders walked). It fails only
when nothing moved for `stall` seconds (STALL_S; $DNADIFF_TEST_STALL_S overrides it), and then kills
the child's whole process group and shows the end of its output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

STALL_S = float(os.environ.get("DNADIFF_TEST_STALL_S", "600"))


def _signature(paths: Iterable[Path]) -> tuple:
    """(name, size, mtime) of every file under the watched paths: any change is progress."""
    seen = []
    for root in paths:
        root = Path(root)
        files = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for f in files:
            try:
                st = f.stat()
            except OSError:  # removed while walking (a temporary file renamed into place)
                continue
            seen.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(sorted(seen))


class Child:
    """A command started in a new session, its output collected, waited for by progress."""

    def __init__(self, cmd: list[str] | None = None, *, cwd=None, env=None, watch: Iterable[Path] = (),
                 stall: float = STALL_S, proc: subprocess.Popen | None = None):
        """Start `cmd`, or (proc=) follow a process started elsewhere whose output goes to files
        (then watch those files)."""
        self.watch, self.stall = [Path(p) for p in watch], stall
        self._chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []
        if proc is not None:
            self.proc, self.cmd = proc, list(map(str, proc.args)) if isinstance(proc.args, list) else [str(proc.args)]
            return
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(getattr(self.proc, name), name), daemon=True)
                         for name in self._chunks]
        for thread in self._readers:
            thread.start()

    def _read(self, stream, name: str) -> None:
        for line in iter(stream.readline, ""):
            with self._lock:
                self._chunks[name].append(line)
        stream.close()

    @property
    def stdout(self) -> str:
        with self._lock:
            return "".join(self._chunks["stdout"])

    @property
    def stderr(self) -> str:
        with self._lock:
            return "".join(self._chunks["stderr"])

    def _state(self) -> tuple:
        with self._lock:
            out = (len(self._chunks["stdout"]), len(self._chunks["stderr"]))
        return out, _signature(self.watch)

    def wait_until(self, done: Callable[[], bool], poll: float = 0.002, stop_on_exit: bool = True) -> bool:
        """Wait until `done()` holds (True) or, with stop_on_exit, the child exits first (False);
        fails after `stall` seconds without progress."""
        state, moved = self._state(), time.monotonic()
        next_look = moved
        while True:
            if done():
                return True
            if stop_on_exit and self.proc.poll() is not None:
                return bool(done())
            now = time.monotonic()
            if now >= next_look:  # walking the watched folders costs more than a poll of done()
                new = self._state()
                if new != state:
                    state, moved = new, now
                elif now - moved > self.stall:
                    self.kill()
                    raise AssertionError(f"no progress for {self.stall:.0f} s (no output, no file change): "
                                         f"{' '.join(self.cmd)[:300]}\n{self.stderr[-3000:]}")
                next_look = now + 0.5
            time.sleep(poll)

    def wait(self) -> subprocess.CompletedProcess:
        """Wait for the exit, as long as the child keeps making progress; and for its output to end
        (processes it started may hold its stdout and stderr a little longer)."""
        self.wait_until(lambda: self.proc.poll() is not None, poll=0.05)
        exited = time.monotonic()
        self.wait_until(lambda: not any(t.is_alive() for t in self._readers), poll=0.05, stop_on_exit=False)
        done = subprocess.CompletedProcess(self.cmd, self.proc.returncode, self.stdout, self.stderr)
        done.output_lag_s = time.monotonic() - exited  # how long its children outlived it (pipes held open)
        done.pid = self.proc.pid
        return done

    def kill(self) -> bool:
        """SIGKILL the child's process group; True if the child was still running."""
        alive = self.proc.poll() is None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        return alive


def run(cmd: list[str], *, cwd=None, env=None, watch: Iterable[Path] = (), stall: float = STALL_S
        ) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True), waiting by progress instead of a timeout."""
    return Child(cmd, cwd=cwd, env=env, watch=watch, stall=stall).wait()
