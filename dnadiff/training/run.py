"""`train(cfg)`: build everything from a RunConfig, fit with Lightning, export a model directory.

Run directory layout (runs/NAME/):
    config.yaml            the resolved config of the run
    checkpoints/           Lightning checkpoints (atomic: stepN.ckpt, last.ckpt), for --resume only;
                           --resume takes the newest complete one (training/checkpoints.py)
    logs/                  CSV metrics;  tb/  TensorBoard
    loss_curve.png         training (and validation) loss
    model/                 the model directory (config.json, model.safetensors, metrics.json)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.base import BACKBONES
from dnadiff.config import RunConfig, replace, save_config
from dnadiff.data.benchmarks import load_benchmark_split, resolve_benchmark
from dnadiff.data.dhs import CELL_TYPES as DHS_CELL_TYPES
from dnadiff.data.tokenizer_training import ensure_tokenizer
from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.logs import log, progress_enabled, quiet_libraries
from dnadiff.modelio import read_backbone_noted, resolve
from dnadiff.modelio.model_dir import is_model_dir, resolve_time_input, save_model_dir, wrap_conditional
from dnadiff.threads import apply_threads, default_threads
from dnadiff.tokenizers import build_tokenizer
from dnadiff.training.interrupt import TrainingInterrupted, interrupted_fit, sigint_restored
from dnadiff.training.rundir import RunDirLock, launch_rank, refuse_existing_run_dir
from dnadiff.training.strategy import build_strategy, resolve_precision
from dnadiff.training.watchdog import watch_launcher


@dataclass
class TrainResult:
    run_dir: Path
    model_dir: Path
    metrics: dict[str, Any]


def resolve_threads(cfg: RunConfig) -> RunConfig:
    """train.threads: null -> the default of every computing command (dnadiff/threads.py):
    OMP_NUM_THREADS when set, else the free physical cores at start (cores minus the 1-minute
    load average, at least 1), shared among the node's processes; recorded in the run's config.
    `dnadiff finetune` applies the same count (cfg: a RunConfig or a FinetuneConfig).

    torch's own default (every logical CPU of the machine) oversubscribes a shared machine: one
    100-step run took 642 s that later took 65 s with threads matched to the free cores.
    """
    if cfg.train.threads:
        return cfg

    devices = cfg.train.devices
    per_node = devices if isinstance(devices, int) and devices > 1 else 1  # processes sharing this node's cores
    return replace(cfg, **{"train.threads": default_threads(per_process=per_node)})


def adapt_ar_backbone(backbone: torch.nn.Module, tokenizer) -> torch.nn.Module:
    """model.adapt_ar: the init_from Mamba AR as a Caduceus-PH that starts as it (a class-conditional AR
    keeps its label embedding in front of the adapted network)."""
    from dnadiff.backbones.ar_adapt import caduceus_from_mamba_ar

    if capabilities_of(backbone).conditional:
        backbone.backbone = caduceus_from_mamba_ar(backbone.backbone, tokenizer.ar_context_id)
        return backbone
    return caduceus_from_mamba_ar(backbone, tokenizer.ar_context_id)


def parameter_counts(source: dict[str, torch.Tensor], final: torch.nn.Module) -> tuple[int, int, int]:
    """(matched, new, dropped): the parameters (elements) of `final` that hold a tensor of `source` (the
    network as init_from read it, name -> tensor), those that hold none, and those of `source` left unused.

    A tensor of `final` matches one of `source` with its name, shape and values, else (a copy under another
    name: model.adapt_ar's Mamba -> Caduceus) one of the same shape and values not matched yet."""
    unmatched = dict(source)
    matched = new = 0
    for name, param in final.named_parameters():
        value = param.detach()
        hit = name if name in unmatched and _same(unmatched[name], value) else None
        if hit is None:
            hit = next((n for n, t in unmatched.items() if _same(t, value)), None)
        if hit is None:
            new += value.numel()
        else:
            matched += unmatched.pop(hit).numel()
    return matched, new, sum(t.numel() for t in unmatched.values())


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


def with_class_names(cfg: RunConfig) -> RunConfig:
    """A class-conditional run on a benchmark or the DHS table records its data's class names (checked against
    model.num_classes), whether its network is new or comes from model.init_from."""
    if cfg.model.num_classes <= 0:
        return cfg
    if cfg.data.kind == "benchmark":
        classes = load_benchmark_split(resolve_benchmark(cfg.data.benchmark or ""), "test").classes
        if len(classes) != cfg.model.num_classes:
            raise DnadiffError(f"model.num_classes is {cfg.model.num_classes}, "
                               f"{cfg.data.benchmark} has {len(classes)} classes")
        return replace(cfg, **{"model.class_names": classes})
    if cfg.data.kind == "dhs":  # the DHS table's cell types (dnadiff/data/dhs.py), labels 0..3
        if len(DHS_CELL_TYPES) != cfg.model.num_classes:
            raise DnadiffError(f"model.num_classes is {cfg.model.num_classes}, the DHS data has "
                               f"{len(DHS_CELL_TYPES)} cell types ({', '.join(DHS_CELL_TYPES)})")
        return replace(cfg, **{"model.class_names": list(DHS_CELL_TYPES)})
    return cfg


def build_backbone_for(cfg: RunConfig, tokenizer, announce: bool = False) -> tuple[RunConfig, torch.nn.Module]:
    """The run's backbone: from the preset, or initialised from a pretrained model (init_from).
    The returned config records `model.time_input` (a dnadiff init_from model passes its own on).
    `announce`: log one line of what init_from loaded (path, parameters matched / new / dropped)."""
    source = resolve(cfg.model.init_from) if cfg.model.init_from else None  # resolved once, read twice
    if cfg.model.time_input is None and source is not None and source.official is None and is_model_dir(source.path):
        cfg = replace(cfg, **{"model.time_input": source.config.model.time_input})
    cfg = replace(cfg, **{"model.time_input": resolve_time_input(cfg.model.time_input)})
    cfg = with_class_names(cfg)
    if source is not None:
        name, backbone, dropped_note = read_backbone_noted(source, vocab_size=tokenizer.vocab_size,
                                                           keep_label_embedding=cfg.model.num_classes > 0,
                                                           objective=cfg.objective.name)
        read = {n: p.detach() for n, p in backbone.named_parameters()}  # before adapt_ar replaces modules
        if cfg.model.adapt_ar:
            name, backbone = "caduceus", adapt_ar_backbone(backbone, tokenizer)
        if cfg.model.num_classes > 0 and not capabilities_of(backbone).conditional:  # e.g. chr22 MDLM -> DHS classes
            from dnadiff.training.init_labels import add_class_conditioning, check_same_tokenizer

            if source.official is None:
                check_same_tokenizer(source.config, cfg, source.given)
            backbone = add_class_conditioning(backbone, name, cfg.model.num_classes,
                                              cfg.model.overrides.get("cond_dim"))
        if announce:
            matched, new, dropped = parameter_counts(read, backbone)
            how = "a dnadiff model directory" if source.official is None else f"an official {source.format} checkpoint"
            log.info("model.init_from: loaded %s (%s%s): %s parameters matched, %s new, %s dropped%s", source.given,
                     how, ", adapted into a Caduceus-PH" if cfg.model.adapt_ar else "", f"{matched:,}", f"{new:,}",
                     f"{dropped:,}", f"; {dropped_note}" if dropped_note else "")
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
        if capabilities_of(backbone).num_classes != cfg.model.num_classes:
            raise DnadiffError(
                f"model.num_classes is {cfg.model.num_classes} but model.init_from has "
                f"{capabilities_of(backbone).num_classes} classes (an unconditional model gains a label embedding; a "
                f"conditional one keeps its number of classes)"
            )
        cfg = replace(cfg, **{"model.backbone": name, "model.overrides": loaded})
        if source.official is not None or source.config.objective.name != cfg.objective.name:
            from dnadiff.diffusion import OBJECTIVES  # e.g. plaid from an MDLM: fresh embeddings and schedule

            backbone = OBJECTIVES.get(cfg.objective.name).wrap_backbone(backbone, cfg)
        # loaders hand back eval-mode models (for inference) and Lightning switches only the
        # LightningModule itself: without this, dropout stays off in every loaded module
        return cfg, backbone.train()
    overrides = dict(cfg.model.overrides)
    overrides.setdefault("vocab_size", tokenizer.vocab_size)
    if cfg.data.kind == "benchmark" and cfg.model.num_classes == 0:
        raise DnadiffError("data.kind=benchmark trains a class-conditional model: set model.num_classes (> 1)")
    if cfg.model.num_classes > 0:
        overrides.setdefault("cond_dim", 32)
    backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, **overrides)
    return cfg, wrap_conditional(cfg, backbone)


def _prepare_run_dir(run_dir: Path, resume: bool, overwrite: bool, rank: int = 0):
    """Rank 0 checks, replaces or creates the run directory; other ranks only find the checkpoint.

    With --resume: the newest complete checkpoint (a ResumePoint), or None when there is none yet (a
    job preempted before its run directory or first checkpoint existed): the run starts afresh."""
    from dnadiff.training.checkpoints import newest_complete_checkpoint

    if resume:
        folder = run_dir / "checkpoints"
        point = newest_complete_checkpoint(folder, warn=rank == 0) if folder.is_dir() else None
        if point is not None:
            if rank == 0:
                remove_stale_temporaries(run_dir)
            return point
        if rank > 0:  # rank 0 restarts the run afresh
            return None
        if (run_dir / "model").exists():
            raise DnadiffError(f"{run_dir}: nothing to resume (no checkpoint) but a model directory exists; "
                               "use --overwrite to train the run again")
        if run_dir.exists() and any(run_dir.iterdir()) and not (run_dir / "config.yaml").is_file():
            raise DnadiffError(f"{run_dir}: nothing to resume (no checkpoint) and not a dnadiff run directory "
                               "(no config.yaml); choose another --run-dir")
        # nothing of a run killed before its first checkpoint can be continued: start it afresh
        log.warning("%s: nothing to resume yet (no checkpoint): starting the run afresh", run_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        return None
    if rank > 0:  # rank 0 (which started this copy of the command) made the directory
        return None
    refuse_existing_run_dir(run_dir, overwrite)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return None


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """What a killed run left under temporary names (`.NAME.*.tmp` files of atomic writes, the
    `.model.*` folder a model directory is built in): never read, removed before a resume."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "logs"):
        if not folder.is_dir():
            continue
        for stale in folder.glob(".*.tmp"):
            if stale.is_file():
                stale.unlink(missing_ok=True)
                removed.append(stale)
    for stale in run_dir.glob(".model.*"):
        if stale.is_dir() and stale.name != ".model.old":  # .model.old: the previous model while it is replaced
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
    return removed


def train(cfg: RunConfig, resume: bool = False, overwrite: bool = False, run_dir: str | os.PathLike | None = None,
          callbacks: list | None = None,
          on_interrupt: Callable[[TrainingInterrupted], None] | None = None) -> TrainResult:
    """Train and export; a new run that fails before its first checkpoint leaves no run directory.

    Ctrl-C raises TrainingInterrupted (a KeyboardInterrupt: the step, the newest complete checkpoint);
    rank 0 first calls `on_interrupt` with it, while a second Ctrl-C is still ignored (training/interrupt.py).

    Multi-process runs: every rank calls this (Lightning's ddp launcher re-runs the command, torchrun
    and srun start it N times); only rank 0 locks, prepares and cleans the run directory and writes
    the model directory, the other ranks train and return the same metrics."""
    where = Path(run_dir) if run_dir is not None else Path(cfg.out_dir) / cfg.name
    family = BACKBONES.get(cfg.model.backbone)
    if not family.neural:  # a count model fits itself, no Lightning (the Markov baseline: baselines/markov_fit.py)
        from dnadiff.baselines import COUNT_FITS

        with RunDirLock(where):  # the directory is replaced only after a good fit: no cleanup needed
            return _fit_counts(cfg, COUNT_FITS.get(cfg.model.backbone), resume, overwrite, where)
    rank = launch_rank()
    watch = watch_launcher(rank)  # a worker whose launcher is killed stops at once, in one line
    try:
        with sigint_restored():  # Lightning ignores SIGINT after a Ctrl-C: the caller's handler comes back
            try:
                if rank > 0:
                    result = _train(cfg, resume, overwrite, where, callbacks, rank)
                else:
                    result = _train_rank0(cfg, resume, overwrite, where, callbacks)
            except TrainingInterrupted as stop:
                if on_interrupt is not None and rank == 0:
                    on_interrupt(stop)
                raise
    except BaseException:
        if watch is not None and watch.orphaned():  # a collective failed because the launcher died
            watch.stop()
        raise
    if watch is not None:
        watch.close()  # rank 0 may exit first once every rank has the model directory
    return result


def _fit_counts(cfg: RunConfig, fit, resume: bool, overwrite: bool, run_dir: Path) -> TrainResult:
    """`train(cfg)` for a count model: writes run_dir/{config.yaml, metrics.json, model/}; bad data leaves
    nothing behind (the fit runs before the directory is touched)."""
    from dnadiff.utils import write_json  # local: tests monkeypatch dnadiff.utils.write_json

    if resume:
        raise DnadiffError(f"model.backbone={cfg.model.backbone}: a count fit has nothing to resume; run it again "
                           "(it takes seconds)")
    refuse_existing_run_dir(run_dir, overwrite, hint="use --overwrite to replace it")
    tokenizer = build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path, cfg.tokenizer.strict)
    model, metrics, cfg = fit(cfg, tokenizer)
    _prepare_run_dir(run_dir, resume=False, overwrite=True)  # refused above unless empty or --overwrite
    save_config(cfg, run_dir / "config.yaml")
    model_dir = save_model_dir(run_dir / "model", cfg, model, tokenizer, metrics)
    write_json(run_dir / "metrics.json", metrics)
    return TrainResult(run_dir, model_dir, metrics)


def _train_rank0(cfg: RunConfig, resume: bool, overwrite: bool, where: Path, callbacks: list | None) -> TrainResult:
    with RunDirLock(where):  # a second `dnadiff train` into the same directory stops here
        # a directory this call creates or replaces (also --resume of a run not started yet)
        ours = (overwrite and not resume) or not where.exists() or not any(where.iterdir())
        try:
            return _train(cfg, resume, overwrite, where, callbacks, 0)
        except BaseException:
            if ours and where.is_dir() and not any((where / "checkpoints").glob("*.ckpt")):
                shutil.rmtree(where, ignore_errors=True)  # no partial output: nothing to resume from anyway
            raise


def _train(cfg: RunConfig, resume: bool, overwrite: bool, run_dir: Path, callbacks: list | None,
           rank: int = 0) -> TrainResult:
    import lightning as L
    from lightning.pytorch.loggers import TensorBoardLogger

    from dnadiff.training.checkpoint_io import AtomicCheckpointIO
    from dnadiff.training.checkpoints import RunCheckpoint
    from dnadiff.training.csv_log import SessionCSVLogger
    from dnadiff.training.datamodule import StreamDataModule
    from dnadiff.training.export import ExportModelDir, read_export_metrics
    from dnadiff.training.module import DiffusionLitModule
    from dnadiff.training.progress import CpuBudget, StartMessage, StepProgressBar

    start = time.time()
    quiet_libraries(log.getEffectiveLevel())  # -v (setup_logging) keeps Lightning's INFO messages
    point = _prepare_run_dir(run_dir, resume, overwrite, rank)
    resume = point is not None  # --resume of a run without a checkpoint starts afresh
    cfg = resolve_threads(cfg)

    apply_threads(cfg.train.threads)
    L.seed_everything(cfg.train.seed, workers=True, verbose=False)
    ensure_tokenizer(cfg)  # tokenizer.train: built from the training text on first use
    tokenizer = build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path, cfg.tokenizer.strict)
    # said once, and not on a resume (its weights come from the checkpoint)
    cfg, backbone = build_backbone_for(cfg, tokenizer, announce=rank == 0 and not resume)
    l_max = getattr(getattr(backbone, "config", None), "l_max", None)
    if isinstance(l_max, int) and cfg.data.seq_len > l_max:  # refused now, not at the first forward pass
        raise DnadiffError(f"data.seq_len: {cfg.data.seq_len} exceeds the model's l_max {l_max} "
                           f"({cfg.model.backbone}); lower data.seq_len or raise model.overrides.l_max")
    if not resume and rank == 0:
        save_config(cfg, run_dir / "config.yaml")
    module = DiffusionLitModule(cfg, backbone, tokenizer)
    data = StreamDataModule(cfg, tokenizer)
    resume_step = None
    if point is not None:  # where the data stream continues
        data.consumed_samples = point.micro_step * cfg.train.batch_size
        resume_step = point.step

    t = cfg.train
    # saved after the validation of its step, with the logs flushed first (training/checkpoints.py)
    checkpointing = RunCheckpoint(dirpath=run_dir / "checkpoints", filename="step{step}",
                                  every_n_train_steps=t.ckpt_every, save_top_k=1, monitor="step", mode="max",
                                  save_last=True, auto_insert_metric_name=False)
    export = ExportModelDir(run_dir / "model", cfg, tokenizer, start)
    settings = trainer_kwargs(cfg, run_dir)
    show_bar = settings["enable_progress_bar"]  # train.progress, off under -q
    trainer = L.Trainer(
        **settings,
        logger=[SessionCSVLogger(str(run_dir), resume_step=resume_step, name="logs", version=""),
                TensorBoardLogger(str(run_dir), name="tb", version="")],
        callbacks=[checkpointing, export, *([StepProgressBar()] if show_bar else []),
                   StartMessage(f"{cfg.name}: {t.threads} CPU thread{'s' if t.threads != 1 else ''} (train.threads), "
                                f"{t.max_steps} steps of batch {t.batch_size}", resumed=point),
                   *([CpuBudget(t.max_minutes)] if t.max_minutes and t.budget_clock == "cpu" else []),
                   *(callbacks or [])],
        plugins=[AtomicCheckpointIO()])
    with resume_warnings_silenced():
        try:
            trainer.fit(module, datamodule=data, ckpt_path=str(point.path) if point is not None else None)
        except SystemExit:  # Lightning's answer to Ctrl-C: sys.exit(1), no word
            stop = interrupted_fit(trainer, run_dir, t.max_steps, t.ckpt_every)
            if stop is None:
                raise
            raise stop from None
    # the model directory is written inside the training processes (ddp_spawn trains in children);
    # rank 0's metrics reach every rank (and the parent of ddp_spawn) through the export callback
    metrics = export.metrics if export.metrics is not None else read_export_metrics(run_dir / "model")
    return TrainResult(run_dir, run_dir / "model", metrics)


@contextlib.contextmanager
def resume_warnings_silenced():
    """Lightning warnings that dnadiff's resume makes untrue, ignored while the Trainer runs (only
    these messages, only then):
      - "... your dataloader is not resumable": the data stream continues from the checkpoint's
        micro-step (datamodule.py), a resumed run is byte-identical to an uninterrupted one;
      - "Checkpoint directory ... exists and is not empty": the directory holds this run's own
        checkpoints (a new run always starts in an empty directory)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch "
                                                  r"ended and your dataloader is not resumable")
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
        yield


def trainer_kwargs(cfg: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The Trainer's settings from the config (everything but loggers, callbacks, plugins)."""
    t = cfg.train
    from datetime import timedelta

    return dict(
        max_steps=t.max_steps, max_epochs=-1,
        max_time=timedelta(minutes=t.max_minutes) if t.max_minutes and t.budget_clock == "wall" else None,
        accumulate_grad_batches=t.accumulate, gradient_clip_val=t.grad_clip or None,
        precision=resolve_precision(t.precision), accelerator=t.accelerator, devices=t.devices, num_nodes=t.num_nodes,
        strategy=build_strategy(cfg), sync_batchnorm=False, use_distributed_sampler=False,
        val_check_interval=t.val_every * t.accumulate, check_val_every_n_epoch=None, limit_val_batches=t.val_batches,
        num_sanity_val_steps=0, log_every_n_steps=t.log_every, enable_progress_bar=t.progress and progress_enabled(),
        enable_model_summary=False, default_root_dir=str(run_dir),
    )
