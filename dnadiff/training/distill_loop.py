"""`distill(...)`: distil a diffusion model into a few-step student, run by Lightning (`dnadiff distill`):
masked models with SDTT (training/sdtt.py, method "sdtt"), uniform-noise (udlm) models with DUO's discrete
consistency distillation (training/dcd.py, method "dcd").

Rounds (SDTT §3 "multiple rounds"; DUO Alg. 1's teacher update every `update_teacher_every` steps): the
teacher samples with n = teacher_steps steps; round r (0-based) trains the student for `round_updates`
updates against the round's teacher at n / 2^r steps (SDTT: one student step = two teacher steps; DCD: the
student at t matches the teacher at t - dt, dt one step of the round's teacher, doubling each round); the
next round's teacher is the student as it stands. The student starts from the teacher's weights.
rounds = log2(teacher_steps / steps), so the last round's student samples with `steps`.
DCD needs clean sequences: `pool_size` samples of the teacher (its own sampler at teacher_steps), drawn once
at the start (again, identically, on --resume); no data is read.

The output folder OUT is both a run directory and, once training ends, a model directory:
    config.json, model.safetensors, metrics.json   the student (dnadiff.load(OUT) reads it); config.json's
                                                   `distill` records the method, the teacher (absolute
                                                   path), its steps and the settings, and `sample.steps`
                                                   is the student's step count (`dnadiff sample OUT`
                                                   samples with it by default)
    distill_config.yaml    the run's settings (what --resume checks the command line against)
    checkpoints/last.ckpt  Lightning checkpoints (atomic) holding the student, its optimizer, and the
                           current round's teacher, for --resume only
    logs/metrics.csv       loss, round and teacher steps per update
The run-directory rules are `dnadiff train`'s (reward_loop.py's): a new run needs a missing or empty OUT
(or --overwrite), one process at a time holds it (lock), --resume continues from the last checkpoint, and a
new run that fails before its first checkpoint leaves nothing behind.

Determinism: update u rolls the teacher out with a generator seeded by (seed, u), so a resumed run draws
what an uninterrupted one does; the networks are in eval mode (no dropout).
"""

from __future__ import annotations

import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from dnadiff.checkpoint import load_model_dir
from dnadiff.config import RunConfig, load_config, replace, save_config
from dnadiff.diffusion import OBJECTIVES
from dnadiff.errors import DnadiffError
from dnadiff.logs import log, quiet_libraries
from dnadiff.model import DiffusionModel, SuppressTokens
from dnadiff.samplers.base import build_sampler
from dnadiff.sampling import sample
from dnadiff.training.dcd import DCD_LOSSES, dcd_loss
from dnadiff.training.export import ExportAtEnd, loaded_model_trainer
from dnadiff.training.rundir import RunDirLock
from dnadiff.training.sdtt import LOSSES, TARGETS, check_steps, sdtt_loss

SETTINGS_FILE = "distill_config.yaml"
DEFAULTS: dict[str, Any] = {
    "method": "sdtt", "teacher": None, "teacher_steps": None, "steps": None, "rounds": None, "round_updates": 100,
    "batch_size": 16, "length": None, "lr": 1e-4, "loss": "kl-bwd", "target": "sdtt", "max_pairs": None,
    "grad_clip": 0.0, "seed": 0, "pool_size": 256,
}
METHODS = {"mask": "sdtt", "uniform": "dcd"}  # the objective's noise -> the distillation
PAIR_SEED, POOL_SEED, TIME_SEED = 2**40, 2**41, 2**42  # generator offsets: pair subsampling, DCD's pool and times


class _Ticks(IterableDataset):
    """An endless stream of dummy items: every update rolls out its own teacher trajectories."""

    def __iter__(self):
        while True:
            yield 0


class DistillModule(L.LightningModule):
    def __init__(self, cfg: RunConfig, backbone: torch.nn.Module, teacher: torch.nn.Module, tokenizer):
        super().__init__()
        self.cfg, self.s = cfg, dict(cfg.distill)
        self.backbone = backbone
        self._teacher = [teacher.requires_grad_(False).eval()]  # not a submodule: saved by on_save_checkpoint
        self._original = {k: v.detach().clone() for k, v in teacher.state_dict().items()}  # DCD's pool sampler
        self.model = DiffusionModel(cfg, backbone, tokenizer)
        self.teacher_model = DiffusionModel(cfg, teacher, tokenizer)
        banned = self.model.banned_ids()
        self._calls = (SuppressTokens(self.model.denoiser, banned), SuppressTokens(self.teacher_model.denoiser, banned))
        self.mask_id = tokenizer.mask_id
        self.teacher_round = 0  # the round whose teacher self._teacher holds
        self.last = {"loss": float("nan"), "pairs": 0}
        self.pool: torch.Tensor | None = None

    def on_fit_start(self) -> None:
        self._teacher[0].to(self.device)
        if self.s["method"] == "dcd":  # the clean sequences: the (original) teacher's samples, drawn once
            self._teacher[0].eval()
            start = ({k: v.detach().clone() for k, v in self._teacher[0].state_dict().items()}
                     if self.teacher_round > 0 else None)
            if start is not None:  # resumed in a later round: the pool comes from the original teacher
                self._teacher[0].load_state_dict(self._original)
            n, size = int(self.s["teacher_steps"]), int(self.s["pool_size"])
            log.info("distill (dcd): drawing %d teacher samples (%d steps) as the clean sequences", size, n)
            # a sampling run (dnadiff/sampling.py): per-sequence streams, so its batches do not change the pool
            self.pool = sample(self.teacher_model, size, int(self.s["length"]), steps=n,
                               seed=int(self.s["seed"]) + POOL_SEED).x.to(self.device)
            if start is not None:
                self._teacher[0].load_state_dict(start)

    def train_dataloader(self):
        return DataLoader(_Ticks(), batch_size=1)

    def _generator(self, offset: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed((int(self.s["seed"]) * 1_000_003 + offset) % (2**63 - 1))

    def round_of(self, update: int) -> int:
        return min(update // int(self.s["round_updates"]), int(self.s["rounds"]) - 1)

    def training_step(self, batch, batch_idx):
        s, step = self.s, int(self.global_step)
        r = self.round_of(step)
        if r > self.teacher_round:  # a new round: the student becomes the teacher (SDTT §3)
            self._teacher[0].load_state_dict(self.backbone.state_dict())
            self.teacher_round = r
            log.info("distill: round %d of %d, teacher %d steps -> student %d", r + 1, s["rounds"],
                     int(s["teacher_steps"]) >> r, int(s["teacher_steps"]) >> (r + 1))
        self.backbone.eval()  # no dropout: the targets and the student see the same network function
        n = int(s["teacher_steps"]) >> r
        if s["method"] == "dcd":
            return self._dcd_step(step, n)
        sampler = build_sampler("ancestral", steps=n, eps=self.model.sampling_eps)
        x_init = torch.full((int(s["batch_size"]), int(s["length"])), self.mask_id, dtype=torch.long,
                            device=self.device)
        loss, pairs = sdtt_loss(self._calls[0], self._calls[1], sampler, self.model.schedule, self.mask_id, x_init,
                                generator=self._generator(step), target=str(s["target"]), loss=str(s["loss"]),
                                max_pairs=s.get("max_pairs"), pair_generator=self._generator(PAIR_SEED + step))
        if not torch.isfinite(loss):
            raise DnadiffError(f"non-finite distillation loss at update {step}; the last good checkpoint is kept "
                               "(try a lower --lr)")
        self.last = {"loss": float(loss.detach()), "pairs": len(pairs)}
        self.log("train/loss", self.last["loss"], prog_bar=True, on_step=True, on_epoch=False, batch_size=len(pairs))
        self.log("train/teacher_steps", float(n), on_step=True, on_epoch=False, batch_size=1)
        return loss.float()

    def _dcd_step(self, step: int, n: int):
        """DUO Alg. 1: clean x from the pool, t ~ U[eps + dt, 1], s = t - dt with dt one step of the round's
        teacher (the udlm sampler's grid linspace(1, eps, n)); the student at (z_t, t) against the teacher at
        (z_s, s) on one coupled trajectory."""
        s, eps = self.s, self.model.sampling_eps
        g = self._generator(TIME_SEED + step)
        B = int(s["batch_size"])
        rows = torch.randint(len(self.pool), (B,), generator=g, device=self.device)
        dt = (1.0 - eps) / max(n - 1, 1)
        t = eps + dt + torch.rand(B, generator=g, dtype=torch.float64, device=self.device) * (1.0 - eps - dt)
        loss = dcd_loss(self._calls[0], self._calls[1], self.pool[rows], t, t - dt, self.model.schedule,
                        self.model.objective.data_ids, self.model.tokenizer.vocab_size, generator=g,
                        loss=str(s["loss"]))
        if not torch.isfinite(loss):
            raise DnadiffError(f"non-finite distillation loss at update {step}; the last good checkpoint is kept "
                               "(try a lower --lr)")
        self.last = {"loss": float(loss.detach()), "pairs": B}
        self.log("train/loss", self.last["loss"], prog_bar=True, on_step=True, on_epoch=False, batch_size=B)
        self.log("train/teacher_steps", float(n), on_step=True, on_epoch=False, batch_size=1)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.backbone.parameters(), lr=float(self.s["lr"]), weight_decay=0.0)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        teacher = {k: v.detach().cpu() for k, v in self._teacher[0].state_dict().items()}
        checkpoint["dnadiff_distill"] = {"teacher_round": self.teacher_round, "teacher": teacher}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("dnadiff_distill")
        if saved is not None:
            self._teacher[0].load_state_dict(saved["teacher"])
            self.teacher_round = int(saved["teacher_round"])


class ExportStudent(ExportAtEnd):
    """At the end of training: the student's model files into OUT (config.json last)."""

    def run_metrics(self, pl_module) -> dict[str, Any]:
        d = self.cfg.distill
        return {"method": d["method"], "teacher_steps": d["teacher_steps"], "steps": d["steps"], "rounds": d["rounds"],
                "loss": d["loss"], "target": d["target"], "loss_last": pl_module.last["loss"],
                "pairs_last": pl_module.last["pairs"]}


def complete_settings(model_dir: str, settings: dict, cfg: RunConfig) -> dict:
    """`settings` over DEFAULTS with the teacher's absolute path, its steps (default: its sample.steps), the
    length (default: its sample.length) and the number of rounds. Unknown keys and bad values are refused."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise DnadiffError(f"distillation: unknown settings {', '.join(unknown)} (known: {', '.join(DEFAULTS)})")
    out = {**DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    noise = OBJECTIVES.get(cfg.objective.name).noise
    out["method"] = METHODS[noise]
    if out["method"] == "dcd":
        if out["loss"] not in DCD_LOSSES:
            raise DnadiffError(f"--loss {out['loss']!r}: a uniform-noise model is distilled by DCD, which takes "
                               f"{' or '.join(DCD_LOSSES)}")
        if settings.get("target") not in (None, "sdtt"):
            raise DnadiffError("--target applies to masked models (SDTT); a uniform-noise model is distilled by DCD")
        if settings.get("max_pairs") is not None:
            raise DnadiffError("--max-pairs applies to masked models (SDTT); DCD takes --batch-size sequences")
        if int(out["pool_size"]) < 1:
            raise DnadiffError(f"--pool-size must be positive, got {out['pool_size']}")
        out["target"] = None
    else:
        out["pool_size"] = None
    out["teacher"] = str(Path(model_dir).resolve())
    out["teacher_steps"] = int(out["teacher_steps"] or cfg.sample.steps)
    if out["steps"] is None:
        raise DnadiffError("--steps is required (the student's number of sampling steps)")
    out["steps"] = int(out["steps"])
    out["rounds"] = check_steps(out["teacher_steps"], out["steps"])
    out["length"] = int(out["length"] or cfg.sample.length)
    if out["loss"] not in LOSSES:
        raise DnadiffError(f"--loss {out['loss']!r}: choose {', '.join(LOSSES)}")
    if out["method"] == "sdtt" and out["target"] not in TARGETS:
        raise DnadiffError(f"--target {out['target']!r}: choose {' or '.join(TARGETS)}")
    for key in ("round_updates", "batch_size", "length"):
        if int(out[key]) < 1:
            raise DnadiffError(f"--{key.replace('_', '-')} must be positive, got {out[key]}")
    if out["max_pairs"] is not None and int(out["max_pairs"]) < 1:
        raise DnadiffError(f"--max-pairs must be positive, got {out['max_pairs']}")
    if not float(out["lr"]) > 0:
        raise DnadiffError(f"--lr must be a positive number, got {out['lr']}")
    return out


def student_config(cfg: RunConfig, settings: dict) -> RunConfig:
    """The student's config: the teacher's, sampled at `steps` with the sampler it was distilled for (SDTT:
    ancestral; DCD: udlm), with the record."""
    sampler = "ancestral" if settings["method"] == "sdtt" else "udlm"
    return replace(cfg, **{"distill": dict(settings), "sample.steps": int(settings["steps"]),
                           "sample.sampler": sampler})


def distill(model_dir: str, settings: dict, out: str, resume: bool = False, overwrite: bool = False,
            progress: bool = True, threads: int | None = None) -> dict[str, Any]:
    """Distil `model_dir` with `settings` (complete_settings' output) into `out`; returns the metrics."""
    where = Path(out)
    with RunDirLock(where):
        ours = not resume and (overwrite or not where.exists() or not any(where.iterdir()))
        try:
            return _distill(model_dir, settings, where, resume, overwrite, progress, threads)
        except BaseException:
            if ours and where.is_dir() and not (where / "checkpoints" / "last.ckpt").exists():
                shutil.rmtree(where, ignore_errors=True)
            raise


def _distill(model_dir, settings, where: Path, resume, overwrite, progress, threads) -> dict[str, Any]:
    from dnadiff.training.run import _prepare_run_dir, resume_warnings_silenced

    start = time.time()
    quiet_libraries(log.getEffectiveLevel())
    point = _prepare_run_dir(where, resume, overwrite)
    if point is not None and (where / SETTINGS_FILE).is_file():
        old = load_config(RunConfig, str(where / SETTINGS_FILE), resolve_paths=False).distill
        changed = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if changed:
            raise DnadiffError(f"{where}: --resume with other settings than the run's ({', '.join(changed)}: "
                               f"{', '.join(f'{old.get(k)!r} -> {settings.get(k)!r}' for k in changed)})")
    if threads:
        torch.set_num_threads(int(threads))
    student = load_model_dir(model_dir, map_location="cpu")
    teacher = load_model_dir(model_dir, map_location="cpu")
    cfg = student_config(student.config, settings)
    save_config(cfg, where / SETTINGS_FILE)
    module = DistillModule(cfg, student.backbone, teacher.backbone, student.tokenizer)
    updates = int(settings["rounds"]) * int(settings["round_updates"])
    every = max(1, min(50, int(settings["round_updates"]) // 2))  # two checkpoints a round at least
    export = ExportStudent(where, cfg, student.tokenizer, start)
    trainer = loaded_model_trainer(where, export, updates, every, settings, point.step if point else None, progress)
    log.info("distill: %s, teacher %d steps -> student %d steps in %d round(s) of %d updates, %d rollouts x %d "
             "tokens per update%s", settings["method"], settings["teacher_steps"], settings["steps"],
             settings["rounds"], settings["round_updates"], settings["batch_size"], settings["length"],
             f", resuming at update {point.step}" if point is not None else "")
    with resume_warnings_silenced(), warnings.catch_warnings():
        # the student runs in eval mode on purpose (training_step): Lightning's note about it is noise here
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training.*")
        trainer.fit(module, ckpt_path=str(point.path) if point is not None else None)
    return export.metrics


__all__ = ["DEFAULTS", "DistillModule", "SETTINGS_FILE", "complete_settings", "distill", "student_config"]
