"""A training progress bar that counts optimizer steps: `train 120/1000 steps  14.2 step/s  loss 1.43  val 1.39`.

Lightning's default bars count batches per epoch; with `max_epochs=-1` (a step-bounded stream)
they print `Epoch 0/-2`, their it/s counts micro-batches (not optimizer steps under gradient
accumulation) and the rich table truncates the validation column. This bar shows the run's own
unit: optimizer steps out of `train.max_steps`, steps per second, the last training loss and the
last validation bound, on one stderr line; validation gets a short transient bar of its batches.

The first step of a session is a warm-up (data loading, the first forward and backward, numba's
compile of the scan kernels): 24 s against 0.2 s for the next ones made `dnadiff demo`'s first line
promise 1:00:38 for two minutes of training. The rate, hence the ETA, counts only the steps after
it (`_warmed_up`); until a second step is timed the ETA shows `?`. The elapsed time keeps it.
"""

from __future__ import annotations

import time
from typing import Any

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar

from dnadiff.logs import log, progress_bar


def _fmt(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


class _SwitchableBar(ProgressBar):
    """Lightning's enable/disable switches for a bar of dnadiff's own (it disables bars while validating)."""

    _enabled = True

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled


class StepProgressBar(_SwitchableBar):
    """tqdm bar over optimizer steps (global_step / max_steps) plus a transient validation bar."""

    def __init__(self) -> None:
        super().__init__()
        self._enabled = True
        self._bar = None
        self._val_bar = None
        self._last_step = 0
        self._warm = False  # the session's first optimizer step (the warm-up) is behind us

    def _postfix(self, trainer) -> str:
        metrics = trainer.callback_metrics
        parts = []
        for key in ("reward", "kl"):  # reward fine-tuning (training/reward_loop.py)
            if f"train/{key}" in metrics:
                parts.append(f"{key} {_fmt(metrics[f'train/{key}'])}")
        if "train/loss" in metrics:
            parts.append(f"loss {_fmt(metrics['train/loss'])}")
        if "val/nats_per_token" in metrics:
            parts.append(f"val {_fmt(metrics['val/nats_per_token'])} nats/token")
        return "  ".join(parts)

    def on_train_start(self, trainer, pl_module) -> None:
        if not self._enabled or not trainer.is_global_zero:
            return
        self._last_step = int(trainer.global_step)
        self._bar = progress_bar(total=int(trainer.max_steps), initial=self._last_step, desc="train", unit="step",
                                 leave=True, smoothing=0.1)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._bar is None:
            return
        step = int(trainer.global_step)
        if step != self._last_step:  # an optimizer step happened (accumulation: every k batches)
            warm = self._warm
            if warm:
                self._bar.update(step - self._last_step)
            else:
                self._warmed_up(step)
            self._last_step = step
            self._bar.set_postfix_str(self._postfix(trainer), refresh=not warm)  # the warm-up step: shown now

    def _warmed_up(self, step: int) -> None:
        """Count the warm-up step without timing it: the rate starts from here (tqdm's average rate is
        (n - initial) / elapsed, its smoothed one is fed by the intervals between updates)."""
        bar, self._warm = self._bar, True
        bar.n = bar.last_print_n = bar.initial = step
        bar.last_print_t = getattr(bar, "_time", time.time)()  # the next interval starts now

    def on_validation_start(self, trainer, pl_module) -> None:
        if not self._enabled or not trainer.is_global_zero or trainer.sanity_checking:
            return
        total = self.trainer.num_val_batches
        total = int(sum(total)) if isinstance(total, (list, tuple)) else int(total)
        # on a terminal a transient second line; in a log file none (its cursor moves left `[A` codes)
        self._val_bar = progress_bar(total=total or None, desc="validate", unit="batch", nested=self._bar is not None,
                                     **({"position": 1} if self._bar is not None else {}))

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self._val_bar is not None:
            self._val_bar.update(1)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._val_bar is not None:
            self._val_bar.close()
            self._val_bar = None
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(trainer), refresh=True)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(trainer), refresh=True)
            self._bar.close()
            self._bar = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        for bar in (self._val_bar, self._bar):
            if bar is not None:
                bar.close()
        self._bar = self._val_bar = None


class EpochProgressBar(_SwitchableBar):
    """Fine-tuning's bar: `finetune lr3e-4/seed0 epoch 2/3  38/60 steps  loss 0.52  val_acc 0.81`.

    Lightning's own bar counts epochs from 0 and to max_epochs - 1 ("Epoch 0/0" for one epoch) and
    appends the logger's version hash ("v_num: eed0"); this one shows the epoch out of the run's
    epochs (from 1), optimizer steps out of epochs x steps per epoch, the last training loss and the
    last validation accuracy."""

    def __init__(self, run: str, epochs: int, steps_per_epoch: int) -> None:
        super().__init__()
        self.run, self.epochs, self.steps_per_epoch = run, int(epochs), int(steps_per_epoch)
        self._enabled = True
        self._bar = None

    def _describe(self, trainer) -> None:
        epoch = min(int(trainer.current_epoch) + 1, self.epochs)
        self._bar.set_description_str(f"finetune {self.run} epoch {epoch}/{self.epochs}", refresh=False)
        metrics = trainer.callback_metrics
        parts = [f"{name} {_fmt(metrics[key])}" for name, key in (("loss", "train_loss_step"), ("loss", "train_loss"),
                                                                     ("val_acc", "val_acc")) if key in metrics]
        seen, shown = set(), []
        for part in parts:  # train_loss_step when logged, else train_loss
            if part.split()[0] not in seen:
                seen.add(part.split()[0])
                shown.append(part)
        self._bar.set_postfix_str("  ".join(shown), refresh=False)

    def on_train_start(self, trainer, pl_module) -> None:
        if not self._enabled or not trainer.is_global_zero:
            return
        self._bar = progress_bar(total=self.epochs * self.steps_per_epoch, initial=int(trainer.global_step),
                                 desc=f"finetune {self.run}", unit="step", leave=False)
        self._describe(trainer)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self._bar is not None:
            self._describe(trainer)
            self._bar.refresh()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._bar is not None:
            step = min(int(trainer.global_step), self._bar.total)
            if step > self._bar.n:
                self._describe(trainer)
                self._bar.update(step - self._bar.n)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._bar is not None and not trainer.sanity_checking:
            self._describe(trainer)
            self._bar.refresh()

    def on_train_end(self, trainer, pl_module) -> None:
        if self._bar is not None:
            self._describe(trainer)
            self._bar.close()
            self._bar = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class StartMessage(Callback):
    """Logs one line when training really starts (after data and model setup, so a setup error stays
    the only line the user sees); a resumed run adds one note of where it continues:
    `resumed at step S (N samples seen) from checkpoints/step40.ckpt`."""

    def __init__(self, message: str, resumed=None) -> None:
        self.message = message
        self.resumed = resumed  # a ResumePoint (dnadiff.training.checkpoints) or None

    def on_train_start(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        log.info("%s", self.message)
        point = self.resumed
        if point is not None:  # every rank consumed micro_step micro-batches of batch_size windows
            seen = point.micro_step * int(pl_module.cfg.train.batch_size) * int(trainer.world_size)
            log.info("resumed at step %d (%d samples seen) from %s/%s", point.step, seen, point.path.parent.name,
                     point.path.name)


class CpuBudget(Callback):
    """train.budget_clock=cpu: the run stops once this process has used max_minutes of CPU time
    (time.process_time, all its threads), checked after every optimizer step. Unlike Lightning's wall-clock
    max_time, the budget does not shrink when other work shares the machine. A resumed run continues the
    count from its checkpoint."""

    def __init__(self, max_minutes: float) -> None:
        self.budget_s = 60.0 * max_minutes
        self.used_before_s = 0.0  # CPU seconds of earlier sessions of this run (from the checkpoint)
        self.session_start: float | None = None

    def used_s(self) -> float:
        return self.used_before_s + (time.process_time() - self.session_start if self.session_start is not None
                                     else 0.0)

    def on_train_start(self, trainer, pl_module) -> None:
        self.session_start = time.process_time()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        spent = self.used_s() >= self.budget_s
        # every rank stops at the same step (rank 0's clock decides)
        spent = trainer.strategy.broadcast(spent, src=0)
        if spent and not trainer.should_stop:
            log.info("train.max_minutes: %.1f CPU minutes used (budget_clock=cpu); stopping at step %d",
                     self.used_s() / 60, trainer.global_step)
            trainer.should_stop = True

    def state_dict(self) -> dict[str, Any]:
        return {"cpu_seconds_used": self.used_s()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.used_before_s = float(state_dict.get("cpu_seconds_used", 0.0))
