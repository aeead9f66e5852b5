"""`reward_finetune(...)`: fine-tune a masked-diffusion DNA model toward a reward with Lightning
(`dnadiff design-finetune`); the algorithms are dnadiff/reward_tuning/ (no Lightning there).

The output folder OUT is both a run directory and, once training ends, a model directory:
    config.json, model.safetensors, metrics.json   the fine-tuned model (dnadiff.load(OUT) reads it);
                                                   config.json's `reward_finetune` records the method,
                                                   reward, kl_weight (β), the pretrained model and the
                                                   settings
    finetune_config.yaml   the run's settings (what --resume checks the command line against)
    checkpoints/last.ckpt  Lightning checkpoints (atomic), for --resume only
    logs/metrics.csv       reward, KL and loss per update
metrics.json (and the printed table) also state the target and how close the run got
(dnadiff/reward_tuning/target.py): target_reward / target_kl / target_ess, the SNIS estimates of
p* ∝ p_pre · exp(r/β)'s expected reward and KL(p* ‖ p_pre) over `target_samples` pretrained samples
(drawn at the start), and reached_reward / reached_kl, the fine-tuned model's mean reward and
trajectory KL to the pretrained model over `eval_samples` of its own samples (drawn at the end).
The run-directory rules are `dnadiff train`'s: a new run needs a missing or empty OUT (or
--overwrite), one process at a time holds it (lock), --resume continues from the last checkpoint,
and a new run that fails before its first checkpoint leaves nothing behind.

Determinism: update n draws its Gumbel noise from a generator seeded by (seed, n), so a resumed run
draws what an uninterrupted one does; the policy-gradient batch reused over `ppo_epochs` updates
is saved in the checkpoint.
"""

from __future__ import annotations

import ctypes
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from dnadiff.checkpoint import load_model_dir
from dnadiff.config import RunConfig, load_config, replace, save_config
from dnadiff.errors import DnadiffError
from dnadiff.logs import log, quiet_libraries
from dnadiff.model import DiffusionModel, SuppressTokens
from dnadiff.reward_tuning import drakes_loss, make_grid, policy_gradient_loss, sample_groups
from dnadiff.reward_tuning.policy_gradient import GroupBatch
from dnadiff.reward_tuning.preference import TrajectoryPool, preference_loss, sample_pool
from dnadiff.reward_tuning.target import reached, sample_scores, snis_target
from dnadiff.training.export import ExportAtEnd, loaded_model_trainer
from dnadiff.training.rundir import RunDirLock
from dnadiff.utils import format_duration

SETTINGS_FILE = "finetune_config.yaml"
DEFAULTS: dict[str, Any] = {
    "method": None, "reward": None, "target": None, "kl_weight": None, "pretrained": None, "length": None,
    "train_steps": 100, "sample_steps": None, "truncate_steps": None, "gumbel_temperature": 0.1,
    "final_temperature": None, "estimator": "soft", "kl": "all", "group_size": 8,
    "ppo_epochs": 1, "clip": 0.2, "advantage": "center", "lr": 1e-4, "batch_size": None, "grad_clip": 0.0,
    "seed": 0, "target_samples": 256, "eval_samples": 64, "pool_size": 256, "model_sample_steps": None,
}
# None above: sized to the model (sized_defaults): T = its sampling steps, K = ⌈T/4⌉, B·L·T ≈ TOKEN_STEPS.
# drakes: soft states at τ = 0.1, the least biased estimator measured (docs/references.md, DRAKES estimators)
TOKEN_STEPS = 2**16
MAX_BATCH = 16
# settings a resumed run may change (it continues to a new number of updates; the evaluation sizes)
RESUMABLE_CHANGES = ("train_steps", "target_samples", "eval_samples")
# generator offsets of the target's, the evaluation's and the dpo pool's samples
TARGET_SEED, EVAL_SEED, POOL_SEED = 2**40, 2**41, 2**42


MMAP_THRESHOLD = 256 * 1024


def return_freed_memory() -> bool:
    """Linux glibc: serve allocations of 256 KiB and more by mmap (mallopt M_MMAP_THRESHOLD), so that
    memory freed during an update goes back to the system. An update allocates and frees thousands of
    batch × length × vocabulary tensors and recomputed activations; under glibc's default (a threshold
    that grows to 32 MiB after the first frees) they are carved from a heap that fragments and is not
    returned: at the defaults, a DRAKES update of caduceus:tiny peaks at 1.5 GB resident of which
    0.6 GB is live (benchmarks/reward_update_cost.py). Returns whether the setting was applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(-3, MMAP_THRESHOLD))  # -3: M_MMAP_THRESHOLD (malloc.h)
    except (OSError, AttributeError):
        return False


class _Ticks(IterableDataset):
    """An endless stream of dummy items: every update samples its own trajectories."""

    def __iter__(self):
        while True:
            yield 0


class RewardFinetuneModule(L.LightningModule):
    def __init__(self, cfg: RunConfig, backbone: torch.nn.Module, pretrained: torch.nn.Module, tokenizer, reward):
        super().__init__()
        self.cfg, self.s = cfg, dict(cfg.reward_finetune)
        self.backbone = backbone
        self._frozen = [pretrained.requires_grad_(False).eval()]  # not a submodule: not checkpointed or optimised
        self.model = DiffusionModel(cfg, backbone, tokenizer)
        self.pre_model = DiffusionModel(cfg, pretrained, tokenizer)
        banned = self.model.banned_ids()
        # in a tuple: not submodules (the pretrained weights stay out of checkpoints and the optimizer)
        self._calls = (SuppressTokens(self.model.denoiser, banned), SuppressTokens(self.pre_model.denoiser, banned))
        self.reward = reward
        for part in (reward, getattr(reward, "inner", None)):  # a classifier reward is read, never trained
            net = getattr(part, "model", None)
            if isinstance(net, torch.nn.Module):
                net.requires_grad_(False)
        self.mask_id, self.vocab = tokenizer.mask_id, tokenizer.vocab_size
        self.grid = make_grid(self.model.schedule, self.s["sample_steps"], eps=self.model.sampling_eps)
        self.groups: GroupBatch | None = None
        self.last = {"reward": float("nan"), "kl": float("nan"), "loss": float("nan")}
        self.target: dict = {}
        self.pool: TrajectoryPool | None = None

    def on_fit_start(self) -> None:
        self._frozen[0].to(self.device)
        s = self.s
        if s["method"] == "dpo":  # the offline data: pretrained trajectories, drawn once (again on resume)
            self.pool = sample_pool(self.pre_denoiser, self.grid, self.mask_id, int(s["length"]), self.vocab,
                                    self.reward, int(s["pool_size"]), int(s["batch_size"]),
                                    generator=self._generator(POOL_SEED), device=self.device).to(self.device)
        n = int(s.get("target_samples") or 0)
        if n > 0:  # the target this run aims at, from the pretrained model's samples
            if self.pool is not None and len(self.pool) >= n:  # dpo: its pool is such a sample already
                rewards = self.pool.reward[:n].cpu()
            else:
                rewards, _ = sample_scores(self.pre_denoiser, None, self.grid, self.mask_id, int(s["length"]),
                                           self.vocab, self.reward, n, int(s["batch_size"]),
                                           generator=self._generator(TARGET_SEED), device=self.device)
            est = snis_target(rewards, float(self.s["kl_weight"]))
            self.target = {"pretrained_reward": est["pretrained_reward"],
                           **{f"target_{k}": v for k, v in est.items() if k != "pretrained_reward"}}
            log.info("target p* ∝ p_pre·exp(r/β) (SNIS over %d pretrained samples, ESS %.1f): E*[r] = %.4g ± %.2g, "
                     "KL(p*‖p_pre) = %.4g ± %.2g nats; pretrained mean reward %.4g", n, est["ess"], est["reward"],
                     est["reward_se"], est["kl"], est["kl_se"], est["pretrained_reward"])

    def reach(self) -> dict:
        """The fine-tuned model's mean reward and trajectory KL to the pretrained model (eval_samples)."""
        n = int(self.s.get("eval_samples") or 0)
        if n <= 0:
            return {}
        self.backbone.eval()
        rewards, kls = sample_scores(self.denoiser, self.pre_denoiser, self.grid, self.mask_id, int(self.s["length"]),
                                     self.vocab, self.reward, n, int(self.s["batch_size"]),
                                     generator=self._generator(EVAL_SEED), device=self.device)
        got = reached(rewards, kls)
        log.info("fine-tuned (%d samples): mean reward %.4g ± %.2g, trajectory KL to pretrained %.4g ± %.2g nats",
                 n, got["reward"], got["reward_se"], got["kl"], got["kl_se"])
        out = {f"reached_{k}": v for k, v in got.items()}
        steps = int(self.s.get("model_sample_steps") or self.grid.steps)
        if steps != self.grid.steps:  # trained with another step count than the model samples with: measure both
            grid = make_grid(self.model.schedule, steps, eps=self.model.sampling_eps)
            rewards, kls = sample_scores(self.denoiser, self.pre_denoiser, grid, self.mask_id, int(self.s["length"]),
                                         self.vocab, self.reward, n, int(self.s["batch_size"]),
                                         generator=self._generator(EVAL_SEED), device=self.device)
            at = reached(rewards, kls)
            log.info("at the model's own %d sampling steps (trained with %d): mean reward %.4g ± %.2g, trajectory "
                     "KL %.4g ± %.2g nats", steps, self.grid.steps, at["reward"], at["reward_se"], at["kl"],
                     at["kl_se"])
            out.update({f"reached_{k}_at_model_steps": v for k, v in at.items() if k != "n"})
        return out

    def train_dataloader(self):
        return DataLoader(_Ticks(), batch_size=1)

    def _generator(self, step: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed((int(self.s["seed"]) * 1_000_003 + step) % (2**63 - 1))

    @property
    def denoiser(self):
        return self._calls[0]

    @property
    def pre_denoiser(self):
        return self._calls[1]

    def training_step(self, batch, batch_idx):
        s, step = self.s, int(self.global_step)
        self.backbone.eval()  # no dropout: the KL compares two deterministic transitions
        x_init = torch.full((int(s["batch_size"]), int(s["length"])), self.mask_id, dtype=torch.long,
                            device=self.device)
        beta = float(s["kl_weight"])
        if s["method"] == "drakes":
            out = drakes_loss(self.denoiser, self.pre_denoiser, self.reward.soft, self.grid, self.mask_id, x_init,
                              self.vocab, beta, truncate_steps=int(s["truncate_steps"]),
                              temperature=temperature_at(s, step), estimator=str(s.get("estimator") or "soft"),
                              kl_scope=str(s.get("kl") or "all"), generator=self._generator(step))
        elif s["method"] == "dpo":
            idx = torch.randint(len(self.pool), (int(s["batch_size"]),), generator=self._generator(step),
                                device=self.device)
            out = preference_loss(self.denoiser, self.grid, self.mask_id, self.pool, idx, beta, int(s["group_size"]))
        else:
            if self.groups is None or step % int(s["ppo_epochs"]) == 0:
                self.groups = sample_groups(self.denoiser, self.grid, self.mask_id, x_init, self.vocab, self.reward,
                                            generator=self._generator(step))
            out = policy_gradient_loss(self.denoiser, self.pre_denoiser, self.grid, self.mask_id, self.groups, beta,
                                       int(s["group_size"]), clip=float(s["clip"]), advantage=str(s["advantage"]))
        if not torch.isfinite(out.loss):
            raise DnadiffError(f"non-finite fine-tuning loss at update {step}; the last good checkpoint is kept "
                               "(try a lower --lr)")
        self.last = {"reward": float(out.reward.mean()), "kl": float(out.kl.mean()), "loss": float(out.loss.detach())}
        for key, value in self.last.items():
            self.log(f"train/{key}", value, prog_bar=True, on_step=True, on_epoch=False, batch_size=x_init.shape[0])
        return out.loss.float()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.backbone.parameters(), lr=float(self.s["lr"]), weight_decay=0.0)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["dnadiff_reward"] = {"groups": self.groups.state_dict() if self.groups is not None else None}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        groups = checkpoint.get("dnadiff_reward", {}).get("groups")
        self.groups = GroupBatch.from_state_dict(groups) if groups is not None else None


class UpdateTimer(L.Callback):
    """After the first update of a session: one line with its wall time and the ETA of the rest (the
    warm-up before it, model loading and the target's pretrained samples, is not counted)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.first_s: float | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.first_s is None:
            self.started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.first_s is not None or self.started is None:
            return
        self.first_s = time.perf_counter() - self.started
        left = max(0, int(trainer.max_steps) - int(trainer.global_step))
        eta = time.strftime("%H:%M", time.localtime(time.time() + left * self.first_s))
        log.info("design-finetune: the first update took %.1f s; %d more: about %s (ETA %s), then the evaluation "
                 "samples", self.first_s, left, format_duration(left * self.first_s), eta)


class ExportFinetuned(ExportAtEnd):
    """At the end of training: the model files into OUT (config.json last)."""

    def run_metrics(self, pl_module) -> dict[str, Any]:
        rf = self.cfg.reward_finetune
        return {"method": rf["method"], "reward": rf["reward"], "kl_weight": rf["kl_weight"],
                "reward_last": pl_module.last["reward"], "kl_last": pl_module.last["kl"],
                "loss_last": pl_module.last["loss"], **pl_module.target, **pl_module.reach()}


def sized_defaults(length: int, model_steps: int, method: str, group_size: int, sample_steps: int | None = None
                   ) -> dict:
    """The trajectory settings sized to the model, for those left unset: T = the model's own sampling steps
    (training with the step count it samples with), K = ⌈T/4⌉ (gradient through the last quarter), and the
    batch B = TOKEN_STEPS // (L·T) clamped to 2…MAX_BATCH (policy_gradient, dpo: whole groups), so that an
    update's denoiser work B·L·T stays near 65,536 token-steps whatever the length and step count. An
    update then costs about T forward passes plus T + K forward+backward passes at batch B (drakes, kl=all;
    kl=live: K + K forward+backward), e.g. caduceus:tiny at L = 128, T = 64: K = 16, B = 8."""
    T = int(sample_steps or model_steps)
    batch = max(2, min(MAX_BATCH, TOKEN_STEPS // max(1, int(length) * T)))
    if method in ("policy_gradient", "dpo"):
        batch = max(int(group_size), batch // int(group_size) * int(group_size))
    return {"sample_steps": T, "truncate_steps": max(1, math.ceil(T / 4)), "batch_size": batch}


def complete_settings(model_dir: str, settings: dict, sample_length: int, model_steps: int | None = None) -> dict:
    """`settings` over DEFAULTS, with the pretrained model's absolute path, the length (default: the
    model's sample.length), the trajectory settings left unset sized to the model (sized_defaults;
    `model_steps`: its sample.steps, read from its config when not given) and K ≤ T. Unknown keys are refused."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise DnadiffError(f"reward fine-tuning: unknown settings {', '.join(unknown)} (known: {', '.join(DEFAULTS)})")
    out = {**DEFAULTS, **{k: v for k, v in settings.items() if v is not None or k in ("target", "final_temperature")}}
    out["pretrained"] = str(Path(model_dir).resolve())
    out["length"] = int(out["length"] or sample_length)
    if model_steps is None:
        from dnadiff.modelio import resolve

        model_steps = int(resolve(model_dir).config.sample.steps)
    out["model_sample_steps"] = int(model_steps)
    sized = sized_defaults(out["length"], int(model_steps), str(out["method"]), int(out["group_size"]),
                           out["sample_steps"])
    for key, value in sized.items():
        if out[key] is None:
            out[key] = value
    out["truncate_steps"] = min(int(out["truncate_steps"]), int(out["sample_steps"]))
    out["kl_weight"] = float(out["kl_weight"])
    return out


def temperature_at(settings: dict, update: int) -> float:
    """τ of update n: `gumbel_temperature`, or with `final_temperature` the exponential anneal
    τ_n = τ_0 · (τ_1/τ_0)^(n/(N − 1)) over the N = train_steps updates (Jang et al. 2017, arXiv 1611.01144,
    §4: τ annealed as exp(−r·n); here the rate r is set by the two end points)."""
    tau0, tau1 = float(settings["gumbel_temperature"]), settings.get("final_temperature")
    n_total = int(settings["train_steps"])
    if tau1 is None or n_total <= 1:
        return tau0
    return tau0 * (float(tau1) / tau0) ** (min(int(update), n_total - 1) / (n_total - 1))


def settings_differ(old: dict, new: dict) -> list[str]:
    return sorted(k for k in set(old) | set(new) if k not in RESUMABLE_CHANGES and old.get(k) != new.get(k))


def reward_finetune(model_dir: str, settings: dict, out: str, resume: bool = False, overwrite: bool = False,
                    reward=None, progress: bool = True, threads: int | None = None) -> dict[str, Any]:
    """Fine-tune `model_dir` with `settings` (DEFAULTS' keys) into `out`; returns the metrics.
    `reward`: the built reward (the caller checked it against the method)."""
    where = Path(out)
    with RunDirLock(where):
        ours = not resume and (overwrite or not where.exists() or not any(where.iterdir()))
        try:
            return _reward_finetune(model_dir, settings, where, resume, overwrite, reward, progress, threads)
        except BaseException:
            if ours and where.is_dir() and not (where / "checkpoints" / "last.ckpt").exists():
                shutil.rmtree(where, ignore_errors=True)
            raise


def _reward_finetune(model_dir, settings, where: Path, resume, overwrite, reward, progress, threads) -> dict[str, Any]:
    from dnadiff.training.run import (  # local: tests monkeypatch run._prepare_run_dir
        _prepare_run_dir,
        resume_warnings_silenced,
    )

    start = time.time()
    quiet_libraries(log.getEffectiveLevel())
    point = _prepare_run_dir(where, resume, overwrite)  # the newest complete checkpoint (a ResumePoint) or None
    resume = point is not None
    if resume and (where / SETTINGS_FILE).is_file():
        old = load_config(RunConfig, str(where / SETTINGS_FILE), resolve_paths=False).reward_finetune
        changed = settings_differ(old, settings)
        if changed:
            raise DnadiffError(f"{where}: --resume with other settings than the run's ({', '.join(changed)}: "
                               f"{', '.join(f'{old.get(k)!r} -> {settings.get(k)!r}' for k in changed)})")
    if threads:  # the CLI applied --threads (or the load-aware default) already: dnadiff/threads.py
        torch.set_num_threads(int(threads))
    return_freed_memory()
    model = load_model_dir(model_dir, map_location="cpu")
    pre = load_model_dir(model_dir, map_location="cpu")
    cfg = replace(model.config, **{"reward_finetune": dict(settings)})
    save_config(cfg, where / SETTINGS_FILE)  # a resumed run records its new --train-steps
    module = RewardFinetuneModule(cfg, model.backbone.train(), pre.backbone, model.tokenizer, reward)
    resume_step = point.step if point is not None else None  # read and checked by newest_complete_checkpoint
    steps = int(settings["train_steps"])
    every = max(1, min(50, steps))
    export = ExportFinetuned(where, cfg, model.tokenizer, start)
    trainer = loaded_model_trainer(where, export, steps, every, settings, resume_step, progress, extra=(UpdateTimer(),))
    drakes = (f" (gradient through the last {settings['truncate_steps']}, estimator {settings.get('estimator')}, "
              f"KL on {settings.get('kl')} steps)") if settings["method"] == "drakes" else ""
    log.info("design-finetune: %s, β=%g, %d updates of %d sequences x %d bases, %d sampling steps%s%s",
             settings["method"], settings["kl_weight"], steps, settings["batch_size"], settings["length"],
             settings["sample_steps"], drakes, f", resuming at update {resume_step}" if resume_step is not None else "")
    model_steps = settings.get("model_sample_steps")
    if model_steps and int(model_steps) != int(settings["sample_steps"]):
        log.warning("design-finetune: training with %d sampling steps, the model samples with %d: the reach is "
                    "measured at both (metrics.json: reached_*_at_model_steps)", settings["sample_steps"], model_steps)
    with resume_warnings_silenced():  # as `dnadiff train --resume`: Lightning's notes that a resume makes untrue
        trainer.fit(module, ckpt_path=str(point.path) if point is not None else None)
    return export.metrics


__all__ = ["DEFAULTS", "RewardFinetuneModule", "UpdateTimer", "complete_settings", "return_freed_memory",
           "reward_finetune", "settings_differ", "sized_defaults", "temperature_at", "SETTINGS_FILE"]
