"""`train(cfg)`: build everything from a RunConfig, fit with Lightning, export a model directory.

Run directory layout (runs/NAME/):
    config.yaml            the resolved config of the run
    checkpoints/last.ckpt  Lightning checkpoints (atomic), for --resume only
    logs/                  CSV metrics;  tb/  TensorBoard
    loss_curve.png         training (and validation) loss
    model/                 the model directory (config.yaml, model.safetensors, metrics.json)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dnadiff.config import RunConfig, replace, save_config
from dnadiff.errors import DnadiffError


@dataclass
class TrainResult:
    run_dir: Path
    model_dir: Path
    metrics: dict[str, Any]


def resolve_precision(precision: str) -> str:
    """Lightning precision: "auto" = bf16 autocast on a GPU, fp32 on the CPU; short names expanded."""
    if precision == "auto":
        return "bf16-mixed" if torch.cuda.is_available() else "32-true"
    return {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed"}.get(str(precision), str(precision))


def build_backbone_for(cfg: RunConfig, tokenizer) -> tuple[RunConfig, torch.nn.Module]:
    """The run's backbone: from the preset, or initialised from a pretrained model (init_from)."""
    from dnadiff.backbones import build_backbone
    from dnadiff.checkpoint import load_backbone, wrap_conditional

    if cfg.model.init_from:
        name, backbone = load_backbone(cfg.model.init_from, keep_label_embedding=cfg.model.num_classes > 0)
        if backbone.vocab_size != tokenizer.vocab_size:
            raise DnadiffError(
                f"model.init_from: {cfg.model.init_from} has vocab_size {backbone.vocab_size}, "
                f"the tokenizer has {tokenizer.vocab_size}"
            )
        loaded = dataclasses.asdict(backbone.config)
        changed = sorted(k for k, v in cfg.model.overrides.items() if k in loaded and loaded[k] != v)
        unknown = sorted(k for k in cfg.model.overrides if k not in loaded)
        if changed or unknown:
            raise DnadiffError(
                f"model.overrides: {', '.join(changed + unknown)} cannot change the architecture of "
                f"model.init_from ({cfg.model.init_from})"
            )
        if getattr(backbone, "num_classes", 0) != cfg.model.num_classes:
            raise DnadiffError(
                f"model.num_classes is {cfg.model.num_classes} but model.init_from has "
                f"{getattr(backbone, 'num_classes', 0)} classes (a label embedding cannot be added or dropped)"
            )
        cfg = replace(cfg, **{"model.backbone": name, "model.overrides": loaded})
        return cfg, backbone
    overrides = dict(cfg.model.overrides)
    overrides.setdefault("vocab_size", tokenizer.vocab_size)
    if cfg.data.kind == "benchmark" and cfg.model.num_classes == 0:
        raise DnadiffError("data.kind=benchmark trains a class-conditional model: set model.num_classes (> 1)")
    if cfg.model.num_classes > 0:
        if cfg.data.kind == "benchmark":
            from dnadiff.data.benchmarks import load_benchmark_split, resolve_benchmark

            classes = load_benchmark_split(resolve_benchmark(cfg.data.benchmark or ""), "test").classes
            if len(classes) != cfg.model.num_classes:
                raise DnadiffError(f"model.num_classes is {cfg.model.num_classes}, {cfg.data.benchmark} has {len(classes)} classes")
            cfg = replace(cfg, **{"model.class_names": classes})
        overrides.setdefault("cond_dim", 32)
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, **overrides)
    return cfg, wrap_conditional(cfg, backbone)


def _prepare_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> Path | None:
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    if resume:
        if not ckpt.is_file():
            raise DnadiffError(f"{run_dir}: nothing to resume (no checkpoints/last.ckpt)")
        for stale in ckpt.parent.glob(".*.tmp"):  # half-written checkpoints of a killed run
            stale.unlink(missing_ok=True)
        return ckpt
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise DnadiffError(f"{run_dir}: run directory exists (use --resume to continue or --overwrite to replace it)")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return None


def train(cfg: RunConfig, resume: bool = False, overwrite: bool = False, run_dir: str | os.PathLike | None = None,
          callbacks: list | None = None) -> TrainResult:
    """Train and export; a new run that fails before its first checkpoint leaves no run directory."""
    if cfg.model.backbone == "markov":  # a count fit, no Lightning: dnadiff/baselines/markov_fit.py
        from dnadiff.baselines.markov_fit import fit_markov_run

        return fit_markov_run(cfg, resume=resume, overwrite=overwrite, run_dir=run_dir)
    where = Path(run_dir) if run_dir is not None else Path(cfg.out_dir) / cfg.name
    ours = not resume and (overwrite or not where.exists() or not any(where.iterdir()))
    try:
        return _train(cfg, resume, overwrite, run_dir, callbacks)
    except BaseException:
        if ours and where.is_dir() and not (where / "checkpoints" / "last.ckpt").exists():
            shutil.rmtree(where, ignore_errors=True)  # no partial output: nothing to resume from anyway
        raise


def _train(cfg: RunConfig, resume: bool, overwrite: bool, run_dir: str | os.PathLike | None,
           callbacks: list | None) -> TrainResult:
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from dnadiff.checkpoint import save_model_dir
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training.checkpoint_io import AtomicCheckpointIO
    from dnadiff.training.data import StreamDataModule
    from dnadiff.training.module import DiffusionLitModule
    from dnadiff.training.plots import plot_loss_curve

    run_dir = Path(run_dir) if run_dir is not None else Path(cfg.out_dir) / cfg.name
    ckpt_path = _prepare_run_dir(run_dir, resume, overwrite)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    L.seed_everything(cfg.train.seed, workers=True, verbose=False)
    tokenizer = build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path, cfg.tokenizer.strict)
    cfg, backbone = build_backbone_for(cfg, tokenizer)
    if not resume:
        save_config(cfg, run_dir / "config.yaml")
    module = DiffusionLitModule(cfg, backbone, tokenizer)
    data = StreamDataModule(cfg, tokenizer)
    if ckpt_path is not None:  # where the data stream continues
        try:  # weights_only: a checkpoint holding anything but tensors and containers is refused
            state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise DnadiffError(f"{ckpt_path}: cannot resume, not a readable weights-only checkpoint "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0][:100]})") from None
        data.consumed_samples = int(state.get("dnadiff", {}).get("micro_step", 0)) * cfg.train.batch_size

    t = cfg.train
    checkpointing = ModelCheckpoint(dirpath=run_dir / "checkpoints", filename="step{step}", every_n_train_steps=t.ckpt_every,
                                    save_top_k=1, monitor="step", mode="max", save_last=True, auto_insert_metric_name=False)
    trainer = L.Trainer(
        max_steps=t.max_steps, max_epochs=-1,
        accumulate_grad_batches=t.accumulate, gradient_clip_val=t.grad_clip or None,
        precision=resolve_precision(cfg.train.precision), accelerator=t.accelerator, devices=t.devices, num_nodes=t.num_nodes,
        strategy=t.strategy, use_distributed_sampler=False,
        val_check_interval=t.val_every * t.accumulate, check_val_every_n_epoch=None, limit_val_batches=t.val_batches,
        num_sanity_val_steps=0, log_every_n_steps=t.log_every, enable_progress_bar=t.progress,
        enable_model_summary=False, default_root_dir=str(run_dir),
        logger=[CSVLogger(str(run_dir), name="logs", version=""), TensorBoardLogger(str(run_dir), name="tb", version="")],
        callbacks=[checkpointing, *(callbacks or [])], plugins=[AtomicCheckpointIO()],
    )
    start = time.time()
    trainer.fit(module, datamodule=data, ckpt_path=str(ckpt_path) if ckpt_path else None)
    wall = time.time() - start

    metrics: dict[str, Any] = {
        "steps": int(trainer.global_step),
        "train_loss_last": module.last_train_loss,
        "wall_seconds_this_session": round(wall, 2),
        "parameters": sum(p.numel() for p in backbone.parameters()),
        "ema": cfg.train.ema,
    }
    for key in ("val/nats_per_token", "val/bits_per_token"):
        if key in trainer.callback_metrics:
            metrics[key.replace("/", "_")] = float(trainer.callback_metrics[key])
    model_dir = run_dir / "model"
    export = module.export_state_dict()  # on every rank: sharded strategies gather collectively
    if trainer.is_global_zero:
        save_model_dir(model_dir, cfg, backbone, tokenizer, metrics, state_dict=export)
        plot_loss_curve(run_dir / "logs" / "metrics.csv", run_dir / "loss_curve.png", title=cfg.name)
    return TrainResult(run_dir, model_dir, metrics)
