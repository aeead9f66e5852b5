"""Which checkpoint a `--resume` continues from, and when checkpoints are written.

Choosing (`newest_complete_checkpoint`): Lightning writes `stepN.ckpt` and then copies it to
`last.ckpt`; a run killed between the two has a `step40.ckpt` newer than its `last.ckpt`
(step 30). Resuming from `last.ckpt` would redo 10 finished steps, so every checkpoint of the
folder is a candidate and the one with the highest step wins. A candidate is *complete* when:
  - it has its final name (writers put half-written files under `.NAME.*.tmp`, never chosen), and
  - it loads with `torch.load(weights_only=True)` (a truncated zip archive fails) and records a
    `global_step`; a sharded (FSDP) checkpoint is a folder whose `meta.pt`, written after all the
    shards, loads so.
A candidate that exists but is not complete is skipped with one warning line; a pickle (a file
that needs code execution to load) is refused outright, whatever its step.

Writing (`RunCheckpoint`): Lightning saves an every-N-steps checkpoint at the end of the training
batch, *before* the validation that the same step runs, and the CSV logger flushes its rows only
now and then. A kill after such a checkpoint lost the validation row of that step for good (the
resumed run does not validate that step again, and keeps only rows before the checkpoint's step).
Here, when a validation follows the batch, the save waits for it, and the loggers are flushed
before every checkpoint file is written: every row logged before a checkpoint is on disk before it.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from dnadiff.errors import DnadiffError
from dnadiff.logs import log


@dataclass
class ResumePoint:
    path: Path          # the checkpoint file (or FSDP folder) Lightning restores
    state: dict          # its weights-only content (meta.pt for a folder)
    step: int            # optimizer steps done

    @property
    def micro_step(self) -> int:
        return int(self.state.get("dnadiff", {}).get("micro_step", 0))


def _is_pickle_refusal(exc: Exception) -> bool:
    return isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc)


def load_checkpoint_state(path: Path) -> dict:
    """The weights-only content of a checkpoint file or FSDP checkpoint folder.

    Raises DnadiffError (one line, no torch advice) for a pickle; other faults (truncated file,
    missing meta.pt) raise as they come. Only zip archives (torch.save's format) are read: the
    legacy format is a bare pickle stream, refused without handing it to the unpickler."""
    meta = path / "meta.pt" if path.is_dir() else path
    if not zipfile.is_zipfile(meta):
        head = meta.read_bytes()[:2] if meta.is_file() else b""
        if head[:1] == b"\x80":  # pickle protocol 2+ opcode PROTO: a pickled object, not a torch archive
            raise DnadiffError(f"{path}: cannot resume: it is a pickled Python object, not a weights-only "
                               "torch checkpoint (refusing to unpickle it)")
        raise ValueError("not a torch checkpoint archive (truncated or another format)")
    try:
        state = torch.load(meta, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:
        if _is_pickle_refusal(exc):
            raise DnadiffError(f"{path}: cannot resume: it holds Python objects beyond tensors and containers "
                               "(refusing to unpickle them)") from None
        raise
    if not isinstance(state, dict) or "global_step" not in state:
        raise ValueError("no global_step recorded")
    return state


def _candidates(folder: Path) -> list[Path]:
    return [p for p in folder.glob("*.ckpt") if not p.name.startswith(".")]


def newest_complete_checkpoint(folder: Path, warn: bool = True) -> ResumePoint | None:
    """The complete checkpoint of `folder` with the highest step (last.ckpt wins a tie); None if
    there is none. Incomplete ones are skipped, each named in one warning line (`warn`: rank 0 only)."""
    best: ResumePoint | None = None
    for path in sorted(_candidates(Path(folder)), key=lambda p: (p.name != "last.ckpt", p.name)):
        try:
            state = load_checkpoint_state(path)
        except DnadiffError:
            raise
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
            if warn:
                log.warning("%s: skipped, not a complete checkpoint (%s)", path, reason)
            continue
        step = int(state["global_step"])
        if best is None or step > best.step:
            best = ResumePoint(path, state, step)
    return best


class RunCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that saves after the validation of its step and flushes the loggers first."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._after_validation = False

    @staticmethod
    def _validation_follows(trainer) -> bool:
        """Lightning's rule for a validation after this training batch (step-based checks, as
        trainer_kwargs sets them: check_val_every_n_epoch=None, val_check_interval in batches)."""
        if not trainer.enable_validation or trainer.check_val_every_n_epoch is not None:
            return False
        batches = trainer.num_val_batches
        if not (sum(batches) if isinstance(batches, list) else batches):
            return False
        every = trainer.val_check_batch
        if not isinstance(every, int) or every <= 0:
            return False
        return (trainer.fit_loop.epoch_loop.total_batch_idx + 1) % every == 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        due = self._every_n_train_steps >= 1 and trainer.global_step % self._every_n_train_steps == 0
        if due and not self._should_skip_saving_checkpoint(trainer) and self._validation_follows(trainer):
            self._after_validation = True  # saved in on_validation_end, with the validation row logged
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def _save_deferred(self, trainer) -> None:
        self._after_validation = False
        if self._should_skip_saving_checkpoint(trainer):
            return
        candidates = self._monitor_candidates(trainer)
        self._save_topk_checkpoint(trainer, candidates)
        self._save_last_checkpoint(trainer, candidates)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._after_validation and not trainer.sanity_checking:
            self._save_deferred(trainer)
            return
        super().on_validation_end(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._after_validation:  # the validation did not come after all: save the step now
            self._save_deferred(trainer)
        super().on_train_end(trainer, pl_module)

    def _save_checkpoint(self, trainer, filepath: str) -> None:
        for logger in trainer.loggers:  # rows logged so far reach the disk before the checkpoint does
            logger.save()
        super()._save_checkpoint(trainer, filepath)


class UpdateCheckpoint(ModelCheckpoint):
    """The reward fine-tuning's checkpoints (every min(50, --train-steps) updates), saved under a state key
    without that interval. Lightning keys a callback's state by its settings; a `design-finetune --resume`
    to more updates changed the interval, so the checkpoint's ModelCheckpoint state was not restored and
    Lightning printed "Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need
    to be provided during `Trainer` instantiation" with its site-packages path."""

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, mode=self.mode)
