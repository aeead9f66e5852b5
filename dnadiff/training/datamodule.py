"""LightningDataModule over the training streams of dnadiff/data/streams.py (exact resume, DDP
ranks taking every W-th micro-batch) and the split data sets of dnadiff/data/datasets.py."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from dnadiff.config import RunConfig
from dnadiff.data.datasets import build_split_dataset
from dnadiff.data.streams import IndexedStream, PermutedStream, RepeatedStream, StreamSampler, rank_batches
from dnadiff.errors import DnadiffError


class StreamDataModule(L.LightningDataModule):
    def __init__(self, cfg: RunConfig, tokenizer):
        super().__init__()
        self.cfg, self.tokenizer = cfg, tokenizer
        self.consumed_samples = 0  # set by the LightningModule from its checkpoint before fit
        t = cfg.train
        self.total_samples = t.max_steps * t.batch_size * t.accumulate
        self.train_set = None
        self.val_set = None
        self.val_sharded = True

    def setup(self, stage: str | None = None) -> None:
        cfg = self.cfg
        world = self.trainer.world_size if self.trainer is not None else 1
        total = self.total_samples * world
        if self.train_set is None:
            if cfg.data.kind == "genome":
                self.train_set = build_split_dataset(cfg, self.tokenizer, "train", "random", num_windows=total)
            else:
                base = build_split_dataset(cfg, self.tokenizer, "train")
                if isinstance(base, IterableDataset):
                    self.train_set = base  # streaming: wrapped per rank in train_dataloader
                else:
                    if len(base) == 0:
                        raise DnadiffError("the training split is empty")
                    self.train_set = PermutedStream(base, total, cfg.train.seed)
            full_val = build_split_dataset(cfg, self.tokenizer, "valid")
            keep = cfg.train.val_batches * cfg.train.batch_size
            if isinstance(full_val, IterableDataset):  # streaming: the first items of the valid stream
                self.val_set = [item for _, item in zip(range(keep), full_val)]
            else:
                keep = min(len(full_val), keep)
                idx = np.linspace(0, len(full_val) - 1, keep).round().astype(int) if keep else []
                self.val_set = torch.utils.data.Subset(full_val, sorted(set(int(i) for i in idx)))

    def train_dataloader(self) -> DataLoader:
        world = self.trainer.world_size if self.trainer is not None else 1
        rank = self.trainer.global_rank if self.trainer is not None else 0
        if isinstance(self.train_set, IterableDataset):
            stream = RepeatedStream(self.train_set, skip=self.consumed_samples * world, rank=rank, world=world,
                                    limit=self.total_samples - self.consumed_samples, block=self.cfg.train.batch_size)
            return DataLoader(stream, batch_size=self.cfg.train.batch_size, drop_last=True,
                              num_workers=self.cfg.data.num_workers)
        sampler = StreamSampler(len(self.train_set), start=self.consumed_samples * world, rank=rank, world=world,
                                block=self.cfg.train.batch_size)
        return DataLoader(IndexedStream(self.train_set), batch_size=self.cfg.train.batch_size, sampler=sampler,
                          num_workers=self.cfg.data.num_workers, drop_last=True,
                          persistent_workers=self.cfg.data.num_workers > 0)

    def val_dataloader(self) -> DataLoader:
        world = self.trainer.world_size if self.trainer is not None else 1
        rank = self.trainer.global_rank if self.trainer is not None else 0
        bs = self.cfg.train.batch_size
        # fewer batches than ranks: every rank evaluates all of them (a rank without batches would
        # never reach the gather); the module then averages instead of summing over ranks
        self.val_sharded = -(-len(self.val_set) // bs) >= world
        batches = (rank_batches(len(self.val_set), bs, rank, world) if self.val_sharded
                   else rank_batches(len(self.val_set), bs, 0, 1))
        return DataLoader(self.val_set, batch_sampler=batches, num_workers=self.cfg.data.num_workers)
