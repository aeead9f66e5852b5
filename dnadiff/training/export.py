"""Writing the model directory at the end of training, inside the processes that trained.

With `ddp_spawn` the training runs in child processes and the parent's module never sees the
EMA weights, the step count or the last loss (its metrics.json said `steps: 0`); so the export is a
callback: every rank takes part in assembling the weights (sharded strategies gather them
collectively), rank 0 alone writes the model directory and the loss plot, and its metrics are
broadcast so every rank's `train()` returns the same numbers.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import lightning as L
import safetensors
import torch

from dnadiff.config import RunConfig
from dnadiff.errors import DnadiffError
from dnadiff.logs import progress_enabled
from dnadiff.training.checkpoint_io import AtomicCheckpointIO
from dnadiff.training.checkpoints import UpdateCheckpoint
from dnadiff.training.csv_log import SessionCSVLogger
from dnadiff.training.plots import plot_loss_curve
from dnadiff.training.progress import StepProgressBar


class ExportModelDir(L.Callback):
    def __init__(self, model_dir: Path, cfg: RunConfig, tokenizer, start_time: float):
        self.model_dir, self.cfg, self.tokenizer, self.start_time = Path(model_dir), cfg, tokenizer, start_time
        self.metrics: dict[str, Any] | None = None

    def on_train_end(self, trainer: L.Trainer, pl_module) -> None:
        from dnadiff.modelio.model_dir import save_model_dir

        metrics: dict[str, Any] = {
            "steps": int(trainer.global_step),
            "train_loss_last": pl_module.last_train_loss,
            "wall_seconds_this_session": round(time.time() - self.start_time, 2),
            "parameters": sum(p.numel() for p in pl_module.backbone.parameters()),
            "ema": self.cfg.train.ema,
            "world_size": int(trainer.world_size),
        }
        for key in ("val/nats_per_token", "val/bits_per_token"):
            if key in trainer.callback_metrics:
                metrics[key.replace("/", "_")] = float(trainer.callback_metrics[key])
        state = pl_module.export_state_dict()  # on every rank: sharded strategies gather collectively
        if trainer.is_global_zero:
            try:  # a full disk: one line, nothing half-written (save_model_dir builds it in a temporary folder)
                save_model_dir(self.model_dir, self.cfg, pl_module.backbone, self.tokenizer, metrics, state_dict=state)
            except safetensors.SafetensorError as exc:  # safetensors' own writer: its I/O faults are no OSErrors
                raise self._not_written(f"{self.model_dir}: cannot write ({safetensors_io_reason(exc)})") from None
            except DnadiffError as exc:
                raise self._not_written(str(exc)) from None
            plot_loss_curve(self.model_dir.parent / "logs" / "metrics.csv", self.model_dir.parent / "loss_curve.png",
                            title=self.cfg.name)
        self.metrics = trainer.strategy.broadcast(metrics, src=0)
        trainer.strategy.barrier("dnadiff-export")  # no rank returns before the model directory exists


    @staticmethod
    def _not_written(reason: str) -> DnadiffError:
        return DnadiffError(f"{reason}; the checkpoints are kept: free space and run the same command with --resume "
                            "to write the model directory")


class ExportAtEnd(L.Callback):
    """The model directory of a loop that trains a loaded model (distillation, reward fine-tuning) written into
    OUT at the end of training, config.json last, by rank 0. A subclass gives `run_metrics`: what its loop
    records beside the update count and the session's wall time."""

    def __init__(self, out: Path, cfg: RunConfig, tokenizer, start: float):
        self.out, self.cfg, self.tokenizer, self.start = out, cfg, tokenizer, start
        self.metrics: dict[str, Any] = {}

    def run_metrics(self, pl_module) -> dict[str, Any]:
        raise NotImplementedError

    def on_train_end(self, trainer, pl_module) -> None:
        from dnadiff.modelio.model_dir import save_model_files

        self.metrics = {"updates": int(trainer.global_step), **self.run_metrics(pl_module),
                        "wall_seconds_this_session": round(time.time() - self.start, 2)}
        if trainer.is_global_zero:
            backbone = pl_module.backbone
            state = {k: v.detach().cpu() for k, v in backbone.state_dict().items()}
            save_model_files(self.out, self.cfg, backbone, self.tokenizer, self.metrics, state_dict=state)


def loaded_model_trainer(where: Path, export: ExportAtEnd, updates: int, every: int, settings: dict,
                         resume_step: int | None, progress: bool, extra: tuple[L.Callback, ...] = ()) -> L.Trainer:
    """The Lightning trainer of a loop that trains a loaded model on one device (distillation, reward fine-tuning):
    `updates` optimizer steps in float32, a checkpoint every `every` (the newest kept, and last.ckpt, written
    atomically), the session's CSV log continuing at `resume_step`, `export` writing the model directory at the
    end, then the `extra` callbacks and (`progress`, when progress bars are on) the step bar."""
    checkpointing = UpdateCheckpoint(dirpath=where / "checkpoints", filename="step{step}", every_n_train_steps=every,
                                     save_top_k=1, monitor="step", mode="max", save_last=True,
                                     auto_insert_metric_name=False)
    show = progress and progress_enabled()
    return L.Trainer(max_steps=updates, max_epochs=-1, accelerator="cuda" if torch.cuda.is_available() else "cpu",
                     devices=1, precision="32-true", gradient_clip_val=float(settings.get("grad_clip") or 0.0) or None,
                     logger=SessionCSVLogger(str(where), resume_step=resume_step, name="logs", version=""),
                     callbacks=[checkpointing, export, *extra, *([StepProgressBar()] if show else [])],
                     plugins=[AtomicCheckpointIO()], enable_progress_bar=show, enable_model_summary=False,
                     num_sanity_val_steps=0, log_every_n_steps=1, default_root_dir=str(where))


def safetensors_io_reason(exc: Exception) -> str:
    """The OS reason in a SafetensorError ("... I/O error: No space left on device (os error 28) at path
    ..." -> "No space left on device"), or its first line."""
    found = re.search(r"os error (\d+)", str(exc))
    if found:
        return os.strerror(int(found.group(1)))
    return str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__


def read_export_metrics(model_dir: Path) -> dict[str, Any]:
    """metrics.json of a model directory written by a child process (ddp_spawn's parent reads it)."""
    path = Path(model_dir) / "metrics.json"
    if not path.is_file():
        return {"steps": 0, "train_loss_last": float("nan")}
    return json.loads(path.read_text())

