"""Ctrl-C during a training run: where it stopped, and the checkpoint `--resume` continues from.

Lightning catches the KeyboardInterrupt of a fit, ignores SIGINT from then on (a second Ctrl-C
cannot break its shutdown), runs the callbacks' `on_exception` and calls `sys.exit(1)`: exit code
1 and not a word. `interrupted_fit` turns that exit into `TrainingInterrupted`, a KeyboardInterrupt
that says the step the run stopped at and its newest complete checkpoint. `train()` hands it to
its `on_interrupt` hook (the command prints the resume command there) while SIGINT is still
ignored, then puts back the handler it found and raises it: `dnadiff train` exits 130, the code of
a process stopped by SIGINT, as `dnadiff sample` does.

No checkpoint is half-written by either Ctrl-C: a checkpoint reaches its final name only by a
rename after it is complete (checkpoint_io.py), and nothing is saved after the interrupt
(ModelCheckpoint's save_on_exception stays off).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # checkpoints.py imports Lightning; run.py imports this module at its top
    from dnadiff.training.checkpoints import ResumePoint


class TrainingInterrupted(KeyboardInterrupt):
    """A fit stopped by Ctrl-C: `step` optimizer steps of `max_steps` done; `checkpoint` the newest
    complete checkpoint of the run directory (None: none yet, `--resume` starts the run afresh)."""

    def __init__(self, run_dir: Path, step: int, max_steps: int, checkpoint: ResumePoint | None,
                 ckpt_every: int) -> None:
        super().__init__(f"training interrupted at step {step}")
        self.run_dir, self.step, self.max_steps = Path(run_dir), int(step), int(max_steps)
        self.checkpoint, self.ckpt_every = checkpoint, int(ckpt_every)

    def describe(self) -> str:
        """`interrupted at step 37 of 150 (run directory runs/x); newest complete checkpoint: step 30
        (checkpoints/step30.ckpt)`, or that there is none yet."""
        where = f"interrupted at step {self.step} of {self.max_steps} (run directory {self.run_dir})"
        point = self.checkpoint
        if point is None:
            return (f"{where}; no checkpoint yet (the first is written at step {self.ckpt_every}, "
                    "train.ckpt_every): --resume starts the run afresh")
        return (f"{where}; newest complete checkpoint: step {point.step} "
                f"({point.path.parent.name}/{point.path.name}), where --resume continues")


def interrupted_fit(trainer, run_dir: Path, max_steps: int, ckpt_every: int) -> TrainingInterrupted | None:
    """After `trainer.fit` raised SystemExit: the TrainingInterrupted to raise instead when Lightning
    exited for a Ctrl-C (its state says interrupted), else None (the exit is someone else's)."""
    from dnadiff.training.checkpoints import newest_complete_checkpoint

    if not getattr(trainer, "interrupted", False):
        return None
    folder = Path(run_dir) / "checkpoints"
    point = newest_complete_checkpoint(folder, warn=False) if folder.is_dir() else None
    return TrainingInterrupted(run_dir, int(trainer.global_step), max_steps, point, ckpt_every)


@contextlib.contextmanager
def sigint_restored() -> Iterator[None]:
    """Put back, when the block ends, the SIGINT handler in place when it began (Lightning leaves
    SIGINT ignored after a Ctrl-C; a notebook or a program that goes on needs its Ctrl-C back).
    A no-op off the main thread, where handlers cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        if previous is not None and signal.getsignal(signal.SIGINT) is not previous:
            signal.signal(signal.SIGINT, previous)


__all__ = ["TrainingInterrupted", "interrupted_fit", "sigint_restored"]
