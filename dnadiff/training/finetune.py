"""Fine-tuning one classifier run with Lightning: the LightningModule and `fit_classifier`.

One run = one (learning rate, seed, train/valid split): train for `epochs`, evaluate validation
accuracy after every epoch, keep the weights of the best epoch (a copy in memory; strictly
better accuracy wins, so ties keep the earlier epoch), then score those weights on the test set.
The protocols (seeds, folds, lr grid) are in training/finetune_protocol.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from dnadiff.eval.classification import classification_metrics
from dnadiff.heads.classifier import SequenceClassifier
from dnadiff.heads.config import FinetuneConfig
from dnadiff.training.optim import build_optimizer, build_scheduler
from dnadiff.training.run import resolve_precision


class ClassifierModule(L.LightningModule):
    """Cross-entropy training of a SequenceClassifier; validation accuracy picks the best epoch."""

    def __init__(self, model: SequenceClassifier, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.999),
                 warmup_steps: int = 0, total_steps: int = 1):
        super().__init__()
        self.model = model
        self.lr, self.weight_decay, self.betas = lr, weight_decay, tuple(betas)
        self.warmup_steps, self.total_steps = warmup_steps, max(1, total_steps)
        self.best_acc = -math.inf
        self.best_epoch = -1
        self.best_state: dict[str, torch.Tensor] | None = None
        self.history: list[dict[str, float]] = []
        self._val_logits: list[torch.Tensor] = []
        self._val_labels: list[torch.Tensor] = []

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids, attention_mask)

    def training_step(self, batch, batch_idx):
        logits = self.model(batch["input_ids"], batch["attention_mask"])  # (B, C)
        loss = F.cross_entropy(logits.float(), batch["labels"])
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=len(logits))
        self.log("lr", self.optimizers().param_groups[0]["lr"], on_step=True, on_epoch=False)
        return loss

    def on_validation_epoch_start(self):
        self._val_logits, self._val_labels = [], []

    def validation_step(self, batch, batch_idx):
        logits = self.model(batch["input_ids"], batch["attention_mask"])  # (B, C)
        self._val_logits.append(logits.float().cpu())
        self._val_labels.append(batch["labels"].cpu())

    def on_validation_epoch_end(self):
        if not self._val_logits or self.trainer.sanity_checking:
            return
        logits, labels = torch.cat(self._val_logits), torch.cat(self._val_labels)
        loss = float(F.cross_entropy(logits, labels))
        acc = float((logits.argmax(-1) == labels).float().mean())
        self.log("val_acc", acc, prog_bar=True)
        self.log("val_loss", loss)
        self.history.append({"epoch": int(self.current_epoch), "val_acc": acc, "val_loss": loss})
        if acc > self.best_acc:  # best-validation-accuracy checkpoint, kept in memory
            self.best_acc, self.best_epoch = acc, int(self.current_epoch)
            self.best_state = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    def configure_optimizers(self):
        opt = build_optimizer(self.model, self.lr, self.betas, self.weight_decay)
        sched = build_scheduler(opt, "cosine", self.warmup_steps, self.total_steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


@torch.no_grad()
def predict_logits(model: nn.Module, loader: DataLoader, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """All logits (N, C) and labels (N,) of a loader, model in eval mode."""
    was_training = model.training
    model.eval().to(device)
    logits, labels = [], []
    for batch in loader:
        logits.append(model(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float().cpu())
        labels.append(batch["labels"])
    model.train(was_training)
    return torch.cat(logits), torch.cat(labels)


def quiet_lightning() -> None:
    """Per-run Lightning banners (GPU available, tips) would repeat for every seed: keep warnings only."""
    import logging

    from dnadiff.logs import quiet_libraries

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    quiet_libraries(logging.WARNING)  # and the LeafSpec deprecation warning raised from inside Lightning


@dataclass
class RunResult:
    run: str
    seed: int
    lr: float
    best_epoch: int
    val_acc: float
    test: dict[str, float]
    num_train: int
    num_valid: int
    steps: int
    wall_s: float
    history: list[dict[str, float]] = field(default_factory=list)
    log_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def fit_classifier(
    cfg: FinetuneConfig,
    make_model: Callable[[], SequenceClassifier],
    train_set: Dataset,
    valid_set: Dataset,
    test_set: Dataset,
    collate: Callable,
    lr: float,
    seed: int,
    run: str,
    log_root: str | None = None,
) -> RunResult:
    """Train one run and evaluate its best-validation-accuracy weights on the (shuffled) test set."""
    from lightning.pytorch.loggers import CSVLogger

    quiet_lightning()
    t0 = time.time()
    tc = cfg.train
    L.seed_everything(seed, workers=True, verbose=False)
    model = make_model()
    gen = torch.Generator().manual_seed(seed)
    nw = cfg.data.num_workers
    eval_bs = tc.eval_batch_size or tc.batch_size
    train_loader = DataLoader(train_set, batch_size=tc.batch_size, shuffle=True, generator=gen, collate_fn=collate,
                              num_workers=nw, persistent_workers=nw > 0)
    valid_loader = DataLoader(valid_set, batch_size=eval_bs, shuffle=False, collate_fn=collate, num_workers=nw)
    # the test set is read in a shuffled (fixed) order: class-ordered files must not matter (caduceus#38)
    test_loader = DataLoader(test_set, batch_size=eval_bs, shuffle=True, generator=torch.Generator().manual_seed(seed),
                             collate_fn=collate, num_workers=nw)
    steps_per_epoch = len(train_loader)
    if tc.max_steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, tc.max_steps_per_epoch)
    total = tc.epochs * steps_per_epoch
    warmup = int(round(tc.warmup_frac * total))
    module = ClassifierModule(model, lr, tc.weight_decay, tc.betas, warmup, total)
    logger = CSVLogger(log_root, name="logs", version=run) if log_root else False
    trainer = L.Trainer(
        max_epochs=tc.epochs,
        limit_train_batches=steps_per_epoch,
        gradient_clip_val=tc.grad_clip or None,
        accelerator=tc.accelerator,
        devices=tc.devices,
        precision=resolve_precision(tc.precision),
        deterministic=tc.deterministic,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=tc.progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=max(1, min(50, steps_per_epoch)),
    )
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        trainer.fit(module, train_loader, valid_loader)
    finally:  # Trainer(deterministic=...) flips a process-wide flag: restore it for the caller
        torch.use_deterministic_algorithms(was_deterministic)
    if module.best_state is not None:
        model.load_state_dict(module.best_state)
    device = trainer.strategy.root_device  # Lightning's teardown moves the module back to the CPU
    logits, labels = predict_logits(model, test_loader, device)
    model.cpu()
    test = classification_metrics(labels, logits, model.num_classes)
    return RunResult(
        run=run, seed=seed, lr=lr, best_epoch=module.best_epoch, val_acc=module.best_acc, test=test,
        num_train=len(train_set), num_valid=len(valid_set), steps=int(trainer.global_step),
        wall_s=round(time.time() - t0, 2), history=module.history,
        log_dir=logger.log_dir if logger else None,
    )
