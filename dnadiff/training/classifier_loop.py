"""Fine-tuning one classifier run with Lightning: the LightningModule and `fit_classifier` (the only
Lightning part of `dnadiff finetune`; the config, protocol and runs are in dnadiff/classifier_tuning/).

One run = one (learning rate, seed, train/valid split): train for `epochs`, evaluate validation
accuracy after every epoch, keep the weights of the best epoch (a copy in memory; strictly
better accuracy wins, so ties keep the earlier epoch), then score those weights on the test set.

Several processes (`train.devices=2`, DDP): each global batch of the 1-process loader (same shuffle)
is cut into one contiguous slice per rank, and each example's loss is weighted W / (global batch
size), so DDP's gradient average is the 1-process batch mean; validation batches are dealt to the
ranks and their logits gathered, so every rank computes the same accuracy on the whole validation
split and keeps the same best epoch (the models stay identical, so the test scores agree too).
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
from torch.utils.data import DataLoader, Dataset, RandomSampler, Subset

from dnadiff.data.streams import rank_batches
from dnadiff.eval.classification import classification_metrics
from dnadiff.heads.classifier import SequenceClassifier
from dnadiff.logs import progress_enabled, quiet_libraries
from dnadiff.training.optim import build_optimizer, build_scheduler
from dnadiff.training.progress import EpochProgressBar
from dnadiff.training.strategy import resolve_precision


def noisy_inputs(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, mask_id: int,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """z_t of masked diffusion at a random time per sequence: each real position is replaced by the
    mask with probability t, t ~ U(0, 1) (1 - α_t under the log-linear schedule). What a
    noise-aware classifier for guidance is trained on (Schiff et al. 2024, arXiv 2412.10193, §3.2)."""
    B, L = input_ids.shape
    t = torch.rand(B, 1, generator=generator, device=input_ids.device)  # (B, 1)
    hit = torch.rand(B, L, generator=generator, device=input_ids.device) < t  # (B, L)
    if attention_mask is not None:
        hit &= attention_mask.bool()
    return torch.where(hit, torch.full_like(input_ids, mask_id), input_ids)


@dataclass
class RunResult:
    """One run of a neural head: its best validation epoch and that epoch's test metrics."""

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
    test_correct: list[int] = field(default_factory=list)  # 1/0 per test sequence, in the test set's order

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ClassifierModule(L.LightningModule):
    """Cross-entropy training of a SequenceClassifier; validation accuracy picks the best epoch."""

    def __init__(self, model: SequenceClassifier, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.999),
                 warmup_steps: int = 0, total_steps: int = 1, noisy: bool = False, mask_id: int = 3):
        super().__init__()
        self.model = model
        self.noisy, self.mask_id = bool(noisy), int(mask_id)  # noisy: train on z_t (validation stays clean)
        self.lr, self.weight_decay, self.betas = lr, weight_decay, tuple(betas)
        self.warmup_steps, self.total_steps = warmup_steps, max(1, total_steps)
        self.best_acc = -math.inf
        self.best_epoch = -1
        self.best_state: dict[str, torch.Tensor] | None = None
        self.history: list[dict[str, float]] = []
        self._val_logits: list[torch.Tensor] = []
        self._val_labels: list[torch.Tensor] = []
        self._val_positions: list[torch.Tensor] = []

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids, attention_mask)

    def training_step(self, batch, batch_idx):
        ids = batch["input_ids"]
        if self.noisy:
            ids = noisy_inputs(ids, batch["attention_mask"], self.mask_id)
        logits = self.model(ids, batch["attention_mask"])  # (B, C)
        if "loss_weight" in batch:  # a rank's slice of a global batch: weights W / global size (0: filler)
            loss = (F.cross_entropy(logits.float(), batch["labels"], reduction="none") * batch["loss_weight"]).sum()
        else:
            loss = F.cross_entropy(logits.float(), batch["labels"])
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=len(logits))
        self.log("lr", self.optimizers().param_groups[0]["lr"], on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self.model(batch["input_ids"], batch["attention_mask"])  # (B, C)
        self._val_logits.append(logits.float().cpu())
        self._val_labels.append(batch["labels"].cpu())
        self._val_positions.append(batch["position"].cpu() if "position" in batch else torch.empty(0, dtype=torch.long))

    def on_validation_epoch_start(self):
        self._val_logits, self._val_labels, self._val_positions = [], [], []

    def _gathered_validation(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """All ranks' validation logits (N, C) and labels (N,), in the validation split's order."""
        cat = lambda xs, empty: torch.cat(xs) if xs else empty  # noqa: E731
        mine = (cat(self._val_logits, torch.empty(0)), cat(self._val_labels, torch.empty(0, dtype=torch.long)),
                cat(self._val_positions, torch.empty(0, dtype=torch.long)))
        if self.trainer.world_size == 1:
            return mine[:2] if len(mine[0]) else None
        import torch.distributed as dist

        parts: list = [None] * self.trainer.world_size
        dist.all_gather_object(parts, mine)  # variable-length per rank (gloo and NCCL)
        logits = torch.cat([p[0] for p in parts if len(p[0])])
        labels = torch.cat([p[1] for p in parts if len(p[1])])
        positions = torch.cat([p[2] for p in parts if len(p[2])])
        keep = positions >= 0  # -1: the filler example of a rank without a batch of its own
        order = torch.argsort(positions[keep])
        return logits[keep][order], labels[keep][order]

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        gathered = self._gathered_validation()
        if gathered is None:
            return
        logits, labels = gathered
        loss = float(F.cross_entropy(logits, labels))
        acc = float((logits.argmax(-1) == labels).float().mean())
        self.log("val_acc", acc, prog_bar=True)  # the same gathered value on every rank
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
def predict_logits(model: nn.Module, loader: DataLoader,
                   device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """All logits (N, C) and labels (N,) of a loader, model in eval mode."""
    was_training = model.training
    model.eval().to(device)
    logits, labels = [], []
    for batch in loader:
        logits.append(model(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float().cpu())
        labels.append(batch["labels"])
    model.train(was_training)
    return torch.cat(logits), torch.cat(labels)


class _Tagged(Dataset):
    """dataset[(i, extra)] -> dataset[i] plus the extra fields (loss weight, position)."""

    def __init__(self, base: Dataset):
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, key):
        i, extra = key
        return {**self.base[i], **extra}


def _tagged_collate(collate: Callable) -> Callable:
    def fn(items):
        out = collate(items)
        for key in ("loss_weight", "position"):
            if key in items[0]:
                out[key] = torch.tensor([it[key] for it in items])
        return out

    return fn


class RankSlicedBatches:
    """Batches of the 1-process shuffled loader (RandomSampler with `generator`, batch_size, no
    drop), each cut into `world` contiguous slices; this rank's slice, with per-example loss weights
    world / len(global batch). A rank whose slice is empty gets the batch's first example, weight 0."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator, rank: int, world: int):
        self.sampler = RandomSampler(range(n), generator=generator)
        self.n, self.batch_size, self.rank, self.world = n, batch_size, rank, world

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)

    def __iter__(self):
        order = list(self.sampler)
        for s in range(0, self.n, self.batch_size):
            batch = order[s: s + self.batch_size]
            lo, hi = self.rank * len(batch) // self.world, (self.rank + 1) * len(batch) // self.world
            w = self.world / len(batch)
            mine = [(i, {"loss_weight": w}) for i in batch[lo:hi]] or [(batch[0], {"loss_weight": 0.0})]
            yield mine


class _FinetuneData(L.LightningDataModule):
    def __init__(self, train_set, valid_set, collate, batch_size, eval_bs, seed, num_workers):
        super().__init__()
        self.train_set, self.valid_set, self.collate = train_set, valid_set, collate
        self.batch_size, self.eval_bs, self.seed, self.nw = batch_size, eval_bs, seed, num_workers
        self.gen = torch.Generator().manual_seed(seed)  # one generator for the whole fit: epochs differ

    def _rank(self) -> tuple[int, int]:
        t = self.trainer
        return (int(t.global_rank), int(t.world_size)) if t is not None else (0, 1)

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank()
        if world == 1:  # exactly the single-process loader
            return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, generator=self.gen,
                              collate_fn=self.collate, num_workers=self.nw, persistent_workers=self.nw > 0)
        batches = RankSlicedBatches(len(self.train_set), self.batch_size, self.gen, rank, world)
        # generator: the loader draws its worker base seed from it before the shuffle, as the 1-process one does
        return DataLoader(_Tagged(self.train_set), batch_sampler=batches, collate_fn=_tagged_collate(self.collate),
                          num_workers=self.nw, persistent_workers=self.nw > 0, generator=self.gen)

    def val_dataloader(self) -> DataLoader:
        rank, world = self._rank()
        if world == 1:
            return DataLoader(self.valid_set, batch_size=self.eval_bs, shuffle=False, collate_fn=self.collate,
                              num_workers=self.nw)
        dealt = rank_batches(len(self.valid_set), self.eval_bs, rank, world)
        batches = [[(i, {"position": i}) for i in b] for b in dealt]
        if not batches:  # fewer batches than ranks: an empty rank must still reach the gather
            batches = [[(0, {"position": -1})]]
        return DataLoader(_Tagged(self.valid_set), batch_sampler=batches, collate_fn=_tagged_collate(self.collate),
                          num_workers=self.nw)


def quiet_lightning() -> None:
    """Per-run Lightning banners (GPU available, tips) would repeat for every seed: keep warnings only
    (and the LeafSpec deprecation warning raised from inside Lightning)."""
    import logging


    quiet_libraries(logging.WARNING)


def fit_classifier(
    cfg,  # a dnadiff.classifier_tuning.FinetuneConfig (that package imports this module, not the reverse)
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
    nw = cfg.data.num_workers
    eval_bs = tc.eval_batch_size or tc.batch_size
    data = _FinetuneData(train_set, valid_set, collate, tc.batch_size, eval_bs, seed, nw)
    # the test set is read in a shuffled (fixed) order: class-ordered files must not matter (caduceus#38);
    # the permutation is kept to put each sequence's outcome back in place (paired comparisons of rows)
    test_order = torch.randperm(len(test_set), generator=torch.Generator().manual_seed(seed))
    test_loader = DataLoader(Subset(test_set, test_order.tolist()), batch_size=eval_bs, shuffle=False,
                             collate_fn=collate, num_workers=nw)
    steps_per_epoch = -(-len(train_set) // tc.batch_size)  # the 1-process loader's batches (no drop_last)
    if tc.max_steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, tc.max_steps_per_epoch)
    total = tc.epochs * steps_per_epoch
    warmup = tc.warmup(total)
    module = ClassifierModule(model, lr, tc.weight_decay, tc.betas, warmup, total, noisy=cfg.model.noisy)
    logger = CSVLogger(log_root, name="logs", version=run) if log_root else False
    show_bar = tc.progress and progress_enabled()  # off under -q

    trainer = L.Trainer(
        max_epochs=tc.epochs,
        limit_train_batches=steps_per_epoch,
        gradient_clip_val=tc.grad_clip or None,
        accelerator=tc.accelerator,
        devices=tc.devices,
        use_distributed_sampler=False,  # the loaders deal the batches to the ranks themselves
        precision=resolve_precision(tc.precision),
        deterministic=tc.deterministic,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=show_bar,
        callbacks=[EpochProgressBar(run, tc.epochs, steps_per_epoch)] if show_bar else [],
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=max(1, min(50, steps_per_epoch)),
    )
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        trainer.fit(module, datamodule=data)
    finally:  # Trainer(deterministic=...) flips a process-wide flag: restore it for the caller
        torch.use_deterministic_algorithms(was_deterministic)
    if module.best_state is not None:
        model.load_state_dict(module.best_state)
    device = trainer.strategy.root_device  # Lightning's teardown moves the module back to the CPU
    logits, labels = predict_logits(model, test_loader, device)
    model.cpu()
    test = classification_metrics(labels, logits, model.num_classes)
    correct = torch.zeros(len(test_order), dtype=torch.long)
    correct[test_order] = (logits.argmax(dim=-1) == labels).long()
    return RunResult(
        run=run, seed=seed, lr=lr, best_epoch=module.best_epoch, val_acc=module.best_acc, test=test,
        num_train=len(train_set), num_valid=len(valid_set), steps=int(trainer.global_step),
        wall_s=round(time.time() - t0, 2), history=module.history,
        log_dir=logger.log_dir if logger else None, test_correct=correct.tolist(),
    )
