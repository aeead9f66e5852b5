"""LightningModule wrapping one backbone + one objective; no math of its own.

Determinism: before every micro-batch the global RNG is reseeded from (seed, global micro-batch
index G = micro-step · world + rank), so the masks, times and dropout of step n are the same in a
resumed run as in an uninterrupted one, each rank draws its own noise, and a W-process run draws
what a 1-process run with W times the accumulation draws (data.py numbers the batches the same way).
The EMA weights (MDLM's decay schedule) are used for validation and exported at the end.
"""

from __future__ import annotations

import math
import time
import warnings

import lightning as L
import torch

from dnadiff.config import RunConfig
from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.model import DiffusionModel
from dnadiff.training.duo_curriculum import training_loss
from dnadiff.training.ema import EMA
from dnadiff.training.optim import build_optimizer, build_scheduler

# the validation metrics are gathered by hand (on_validation_epoch_end), so Lightning's advice to
# add sync_dist=True (an average of per-rank values) is wrong here: keep it off every rank's screen
warnings.filterwarnings("ignore", message=r".*recommended to use `self\.log\('val/.*sync_dist=True",
                        category=UserWarning)


class NonFiniteLossError(DnadiffError):
    pass


class DiffusionLitModule(L.LightningModule):
    def __init__(self, cfg: RunConfig, backbone: torch.nn.Module, tokenizer):
        super().__init__()
        self.cfg = cfg
        self.backbone = backbone
        self.model = DiffusionModel(cfg, backbone, tokenizer)  # holds the objective (not an nn.Module)
        self.ema = EMA(backbone, cfg.train.ema) if cfg.train.ema > 0 else None
        self.micro_step = 0
        self._ema_active = False
        self.last_train_loss = float("nan")
        self._fit_start = time.time()

    def on_fit_start(self) -> None:
        self._fit_start = time.time()  # val/wall_seconds counts from here (this session's training)

    def setup(self, stage: str) -> None:
        # ddp_spawn hands this module to its children through shared memory: without a private copy,
        # every rank would update one EMA shadow in place (W updates per step)
        if self.ema is not None:
            self.ema.unshare()

    # ------------------------------------------------------------------ steps
    def _world(self) -> tuple[int, int]:
        trainer = self._trainer
        return (int(trainer.global_rank), int(trainer.world_size)) if trainer is not None else (0, 1)

    def global_micro_step(self) -> int:
        """G of the coming micro-batch: the same numbering as the data stream's micro-batches."""
        rank, world = self._world()
        return self.micro_step * world + rank

    def _seed_step(self) -> None:
        torch.manual_seed((self.cfg.train.seed * 1_000_003 + self.global_micro_step()) % (2**63 - 1))

    def training_step(self, batch, batch_idx):
        self._seed_step()
        self.micro_step += 1
        # objective.loss, or DUO's curriculum estimate while a udlm objective's curriculum runs (the step decides)
        out = training_loss(self.model.objective, self._denoiser_for(batch, train=True), batch["input_ids"],
                            batch["attention_mask"], step=self.global_step)
        if not torch.isfinite(out.loss):
            raise NonFiniteLossError(
                f"non-finite training loss ({out.loss.item()}) at step {self.global_step}; "
                "training stopped, the last good checkpoint is kept (try a lower train.lr)"
            )
        tokens = out.num_tokens.sum()
        self.last_train_loss = float(out.loss.detach())
        self.log("train/loss", out.loss, prog_bar=True, on_step=True, on_epoch=False,
                 batch_size=len(batch["input_ids"]))
        self.log("train/tokens", tokens.float(), on_step=True, on_epoch=False, reduce_fx="sum")
        return out.loss

    def _denoiser_for(self, batch, train: bool = False):
        """Class-conditional runs: the batch's labels, a share replaced by the null label (CFG)."""
        if "labels" not in batch or not capabilities_of(self.backbone).conditional:
            return self.model.denoiser
        labels = batch["labels"]
        if train and self.cfg.model.label_dropout > 0:
            drop = torch.rand(labels.shape, device=labels.device) < self.cfg.model.label_dropout
            labels = torch.where(drop, torch.full_like(labels, self.backbone.null_label), labels)
        return self.model.make_denoiser(labels=labels)

    def on_before_optimizer_step(self, optimizer) -> None:
        """A finite loss can still give inf/NaN gradients: stop before they reach the weights (and a
        checkpoint). fp16 loss scaling produces inf gradients on purpose (the scaler skips the step)."""
        if self.trainer is not None and str(self.trainer.precision) == "16-mixed":
            return
        grads = [p.grad.detach() for p in self.backbone.parameters() if p.grad is not None]
        if grads and not bool(torch.isfinite(torch.stack([g.norm() for g in grads])).all()):
            raise NonFiniteLossError(
                f"non-finite gradient at step {self.global_step} (loss {self.last_train_loss:.4g}); "
                "training stopped, the last good checkpoint is kept (try a lower train.lr or train.grad_clip)"
            )

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)
        if self.ema is not None:
            self.ema.update(self.backbone)

    def on_validation_epoch_start(self) -> None:
        self._val_nll = torch.zeros((), dtype=torch.float64)
        self._val_tokens = torch.zeros((), dtype=torch.float64)
        if self.ema is not None and not self._ema_active:
            self._backup = {n: p.detach().clone() for n, p in self.backbone.named_parameters()}
            self.ema.copy_to(self.backbone)
            self._ema_active = True

    def _val_sharded(self) -> bool:
        dm = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        return bool(getattr(dm, "val_sharded", True))

    def validation_step(self, batch, batch_idx):
        rank, world = self._world()
        if self._val_sharded():  # this rank's batch_idx-th batch is batch batch_idx·W + rank of 1 process
            batch_idx = batch_idx * world + rank
        gen = torch.Generator(device="cpu").manual_seed(self.cfg.train.seed + 7919 * batch_idx)
        out = self.model.objective.loss(self._denoiser_for(batch), batch["input_ids"], batch["attention_mask"],
                                        generator=gen)
        self._val_nll += out.nll.double().sum().cpu()
        self._val_tokens += out.num_tokens.double().sum().cpu()

    def on_validation_epoch_end(self) -> None:
        if self.trainer.world_size > 1:  # summed over ranks (NCCL reduces device tensors only)
            # an all-reduce, not LightningModule.all_gather: torch deprecates the gather Lightning calls
            sums = self.trainer.strategy.reduce(torch.stack([self._val_nll, self._val_tokens]).to(self.device),
                                                reduce_op="sum").cpu()
            nll, tok = sums[0], sums[1]  # unsharded: every rank added the same sums (the ratio is unchanged)
        else:
            nll, tok = self._val_nll, self._val_tokens
        if tok > 0:  # the gathered value, logged on every rank (callbacks on any rank see the same number)
            per_tok = float(nll / tok)
            self.log("val/nats_per_token", per_tok, prog_bar=True, sync_dist=False)
            self.log("val/bits_per_token", per_tok / math.log(2), sync_dist=False)
            # wall clock of the validation point (seconds since this session's fit began, validation
            # time included): logs/metrics.csv gives the validation curve against time, not just steps
            self.log("val/wall_seconds", time.time() - self._fit_start, sync_dist=False)
        if self._ema_active:
            with torch.no_grad():
                for n, p in self.backbone.named_parameters():
                    p.copy_(self._backup[n])
            self._backup, self._ema_active = None, False

    # ------------------------------------------------------------------ optimiser / state
    def configure_optimizers(self):
        t = self.cfg.train
        opt = build_optimizer(self.backbone, t.lr, t.betas, t.weight_decay)
        sched = build_scheduler(opt, t.lr_schedule, t.warmup_steps, t.max_steps, t.min_lr_ratio)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def _fsdp_full_state_dict(self) -> dict[str, torch.Tensor] | None:
        trainer = self._trainer
        if trainer is None or type(trainer.strategy).__name__ != "FSDPStrategy":
            return None
        from lightning.fabric.strategies.fsdp import _get_full_state_dict_context

        root = trainer.strategy.model  # the FSDP-wrapped LightningModule
        with _get_full_state_dict_context(root, world_size=trainer.world_size):
            full = root.state_dict()  # rank 0: the whole model on the CPU; other ranks: empty
        prefix = "backbone."
        return {k[len(prefix):]: v for k, v in full.items() if k.startswith(prefix)}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["dnadiff"] = {"micro_step": self.micro_step, "ema": self.ema.state_dict() if self.ema else None}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("dnadiff", {})
        self.micro_step = int(state.get("micro_step", 0))
        if self.ema is not None and state.get("ema") is not None:
            self.ema.load_state_dict(state["ema"])

    def export_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights to ship: EMA when enabled, else the live ones (buffers always live).
        Called on every rank: under FSDP the full weights are gathered collectively (rank 0 gets them)."""
        fsdp = self._fsdp_full_state_dict()
        if fsdp is not None:
            return fsdp
        state = {k: v.detach().clone() for k, v in self.backbone.state_dict().items()}
        if self.ema is not None:
            first_name = {}
            for name, p in self.backbone.named_parameters(remove_duplicate=False):
                first_name.setdefault(id(p), name)  # tied weights: EMA keeps the first name only
                shadow = self.ema.shadow.get(first_name[id(p)])
                if shadow is not None and name in state:
                    state[name] = shadow.detach().clone()
        return state
