"""`train(cfg)`: build everything from a RunConfig, fit with Lightning, export a model directory.

Run directory layout (runs/NAME/):
    config.yaml            the resolved config of the run
    checkpoints/last.ckpt  Lightning checkpoints (atomic), for --resume only
    logs/                  CSV metrics;  tb/  TensorBoard
    loss_curve.png         training (and validation) loss
    model/                 the model directory (config.json, model.safetensors, metrics.json)
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
from dnadiff.logs import log, quiet_libraries


@dataclass
class TrainResult:
    run_dir: Path
    model_dir: Path
    metrics: dict[str, Any]


def resolve_threads(cfg: RunConfig) -> RunConfig:
    """train.threads: null -> the physical cores this process may use (recorded in the run's config);
    `dnadiff finetune` applies the same count (cfg: a RunConfig or a FinetuneConfig).

    torch's own default (every logical CPU of the machine) oversubscribes a shared machine: one
    100-step run took 642 s that later took 65 s with threads matched to the free cores.
    """
    if cfg.train.threads:
        return cfg
    from dnadiff.machine import available_cores

    devices = cfg.train.devices
    per_node = devices if isinstance(devices, int) and devices > 1 else 1  # processes sharing this node's cores
    return replace(cfg, **{"train.threads": max(1, available_cores() // per_node)})


def build_backbone_for(cfg: RunConfig, tokenizer) -> tuple[RunConfig, torch.nn.Module]:
    """The run's backbone: from the preset, or initialised from a pretrained model (init_from).
    The returned config records `model.time_input` (a dnadiff init_from model passes its own on)."""
    from dnadiff.backbones import build_backbone
    from dnadiff.checkpoint import load_backbone, official_kind
    from dnadiff.model_dir import (
        is_model_dir,
        load_config_of,
        resolve_time_input,
        wrap_conditional,
    )

    if cfg.model.time_input is None and cfg.model.init_from and official_kind(cfg.model.init_from) is None \
            and is_model_dir(cfg.model.init_from):
        cfg = replace(cfg, **{"model.time_input": load_config_of(cfg.model.init_from).model.time_input})
    cfg = replace(cfg, **{"model.time_input": resolve_time_input(cfg.model.time_input)})
    if cfg.model.init_from:
        name, backbone = load_backbone(cfg.model.init_from, vocab_size=tokenizer.vocab_size,
                                       keep_label_embedding=cfg.model.num_classes > 0)
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
        # loaders hand back eval-mode models (for inference) and Lightning switches only the
        # LightningModule itself: without this, dropout stays off in every loaded module
        return cfg, backbone.train()
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


def _prepare_run_dir(run_dir: Path, resume: bool, overwrite: bool, rank: int = 0) -> Path | None:
    """Rank 0 checks, replaces or creates the run directory; other ranks only find the checkpoint."""
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    if resume:
        if not ckpt.exists():  # a file, or a directory of shards (FSDP)
            if not (run_dir / "config.yaml").is_file():
                raise DnadiffError(f"{run_dir}: nothing to resume (no checkpoints/last.ckpt)")
            if rank > 0:  # rank 0 restarts the run afresh
                return None
            # a run killed before its first checkpoint: nothing of it can be continued, so start it afresh
            log.warning("%s: no checkpoint yet (killed before the first one): starting the run afresh", run_dir)
            shutil.rmtree(run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            return None
        if rank == 0:
            for stale in ckpt.parent.glob(".*.tmp"):  # half-written checkpoints of a killed run
                stale.unlink(missing_ok=True)
        return ckpt
    if rank > 0:  # rank 0 (which started this copy of the command) made the directory
        return None
    refuse_existing_run_dir(run_dir, overwrite)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return None


def refuse_existing_run_dir(run_dir: Path, overwrite: bool, hint: str = "use --resume to continue or --overwrite "
                            "to replace it") -> None:
    """A new run may go into a missing or empty directory, or replace a full one with --overwrite."""
    if run_dir.exists() and any(run_dir.iterdir()) and not overwrite:
        raise DnadiffError(f"{run_dir}: run directory exists ({hint})")


def train(cfg: RunConfig, resume: bool = False, overwrite: bool = False, run_dir: str | os.PathLike | None = None,
          callbacks: list | None = None) -> TrainResult:
    """Train and export; a new run that fails before its first checkpoint leaves no run directory.

    Multi-process runs: every rank calls this (Lightning's ddp launcher re-runs the command, torchrun
    and srun start it N times); only rank 0 locks, prepares and cleans the run directory and writes
    the model directory, the other ranks train and return the same metrics."""
    from dnadiff.backbones.base import BACKBONES
    from dnadiff.registry import resolve_object
    from dnadiff.training.rundir import RunDirLock, launch_rank

    where = Path(run_dir) if run_dir is not None else Path(cfg.out_dir) / cfg.name
    family = BACKBONES.get(cfg.model.backbone)
    if not family.neural:  # a count model fits itself, no Lightning (the Markov baseline: baselines/markov_fit.py)
        fit = resolve_object(family.fit_run)
        with RunDirLock(where):  # it replaces the directory only after a good fit: no cleanup needed
            return fit(cfg, resume=resume, overwrite=overwrite, run_dir=where)
    rank = launch_rank()
    if rank > 0:
        return _train(cfg, resume, overwrite, where, callbacks, rank)
    with RunDirLock(where):  # a second `dnadiff train` into the same directory stops here
        ours = not resume and (overwrite or not where.exists() or not any(where.iterdir()))
        try:
            return _train(cfg, resume, overwrite, where, callbacks, rank)
        except BaseException:
            if ours and where.is_dir() and not (where / "checkpoints" / "last.ckpt").exists():
                shutil.rmtree(where, ignore_errors=True)  # no partial output: nothing to resume from anyway
            raise


def _train(cfg: RunConfig, resume: bool, overwrite: bool, run_dir: Path, callbacks: list | None,
           rank: int = 0) -> TrainResult:
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    from dnadiff.data.tokenizer_training import ensure_tokenizer
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training.checkpoint_io import AtomicCheckpointIO
    from dnadiff.training.csv_log import SessionCSVLogger
    from dnadiff.training.datamodule import StreamDataModule
    from dnadiff.training.export import ExportModelDir, read_export_metrics
    from dnadiff.training.module import DiffusionLitModule
    from dnadiff.training.progress import StartMessage, StepProgressBar

    start = time.time()
    quiet_libraries(log.getEffectiveLevel())  # -v (setup_logging) keeps Lightning's INFO messages
    ckpt_path = _prepare_run_dir(run_dir, resume, overwrite, rank)
    resume = ckpt_path is not None  # --resume of a run without a checkpoint starts afresh
    cfg = resolve_threads(cfg)
    torch.set_num_threads(cfg.train.threads)
    L.seed_everything(cfg.train.seed, workers=True, verbose=False)
    ensure_tokenizer(cfg)  # tokenizer.train: built from the training text on first use
    tokenizer = build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path, cfg.tokenizer.strict)
    cfg, backbone = build_backbone_for(cfg, tokenizer)
    l_max = getattr(getattr(backbone, "config", None), "l_max", None)
    if isinstance(l_max, int) and cfg.data.seq_len > l_max:  # refused now, not at the first forward pass
        raise DnadiffError(f"data.seq_len: {cfg.data.seq_len} exceeds the model's l_max {l_max} "
                           f"({cfg.model.backbone}); lower data.seq_len or raise model.overrides.l_max")
    if not resume and rank == 0:
        save_config(cfg, run_dir / "config.yaml")
    module = DiffusionLitModule(cfg, backbone, tokenizer)
    data = StreamDataModule(cfg, tokenizer)
    if ckpt_path is not None:  # where the data stream continues
        try:  # weights_only: a checkpoint holding anything but tensors and containers is refused
            meta = ckpt_path / "meta.pt" if ckpt_path.is_dir() else ckpt_path  # FSDP shards: the rest is in meta.pt
            state = torch.load(meta, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise DnadiffError(f"{ckpt_path}: cannot resume, not a readable weights-only checkpoint "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0][:100]})") from None
        data.consumed_samples = int(state.get("dnadiff", {}).get("micro_step", 0)) * cfg.train.batch_size
        resume_step = int(state.get("global_step", 0))
    else:
        resume_step = None

    t = cfg.train
    checkpointing = ModelCheckpoint(dirpath=run_dir / "checkpoints", filename="step{step}", every_n_train_steps=t.ckpt_every,
                                    save_top_k=1, monitor="step", mode="max", save_last=True, auto_insert_metric_name=False)
    export = ExportModelDir(run_dir / "model", cfg, tokenizer, start)
    settings = trainer_kwargs(cfg, run_dir)
    show_bar = settings["enable_progress_bar"]  # train.progress, off under -q
    trainer = L.Trainer(
        **settings,
        logger=[SessionCSVLogger(str(run_dir), resume_step=resume_step, name="logs", version=""),
                TensorBoardLogger(str(run_dir), name="tb", version="")],
        callbacks=[checkpointing, export, *([StepProgressBar()] if show_bar else []),
                   StartMessage(f"{cfg.name}: {t.threads} CPU thread{'s' if t.threads != 1 else ''} (train.threads), "
                                f"{t.max_steps} steps of batch {t.batch_size}" + (f", resuming at step {resume_step}"
                                                                                  if resume_step is not None else "")),
                   *(callbacks or [])],
        plugins=[AtomicCheckpointIO()])
    trainer.fit(module, datamodule=data, ckpt_path=str(ckpt_path) if ckpt_path else None)
    # the model directory is written inside the training processes (ddp_spawn trains in children);
    # rank 0's metrics reach every rank (and the parent of ddp_spawn) through the export callback
    metrics = export.metrics if export.metrics is not None else read_export_metrics(run_dir / "model")
    return TrainResult(run_dir, run_dir / "model", metrics)


def trainer_kwargs(cfg: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The Trainer's settings from the config (everything but loggers, callbacks, plugins)."""
    from dnadiff.logs import progress_enabled
    from dnadiff.training.strategy import build_strategy, resolve_precision

    t = cfg.train
    from datetime import timedelta

    return dict(
        max_steps=t.max_steps, max_epochs=-1,
        max_time=timedelta(minutes=t.max_minutes) if t.max_minutes else None,
        accumulate_grad_batches=t.accumulate, gradient_clip_val=t.grad_clip or None,
        precision=resolve_precision(t.precision), accelerator=t.accelerator, devices=t.devices, num_nodes=t.num_nodes,
        strategy=build_strategy(cfg), sync_batchnorm=False, use_distributed_sampler=False,
        val_check_interval=t.val_every * t.accumulate, check_val_every_n_epoch=None, limit_val_batches=t.val_batches,
        num_sanity_val_steps=0, log_every_n_steps=t.log_every, enable_progress_bar=t.progress and progress_enabled(),
        enable_model_summary=False, default_root_dir=str(run_dir),
    )
