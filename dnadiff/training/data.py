"""DataModule: genome windows (or text blocks) as a step-indexed stream, so `--resume` is exact.

Training sample g (0, 1, 2, ... over the whole run) is a pure function of (seed, g): a random
crop for genomes, or element g of a per-epoch permutation for fixed data sets. The train loader
starts at the sample after the last one consumed, so a resumed run sees exactly the batches an
uninterrupted run would.

Distributed runs: the stream is cut into micro-batches of `batch_size` samples, global micro-batch
G = (samples G·B .. G·B + B - 1); rank r of W takes G = r, r + W, r + 2W, ... So at each optimizer step
the W ranks together consume exactly the W·B samples that one process with accumulate = W consumes
(the same global batch), and the per-step noise is seeded by G too (module.py): a 2-process run
equals a 1-process run with twice the gradient accumulation.
"""

from __future__ import annotations

import numpy as np
import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from dnadiff.config import RunConfig
from dnadiff.data.fasta import Genome, GenomeWindows, bundled_genome, read_bed
from dnadiff.errors import DnadiffError


class PermutedStream(Dataset):
    """Index g -> base[perm_e[g mod n]] with a fresh permutation per epoch e = g // n."""

    def __init__(self, base: Dataset, length: int, seed: int):
        self.base, self.length, self.seed = base, int(length), int(seed)
        self._perm_epoch, self._perm = -1, None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, g: int):
        n = len(self.base)
        epoch = g // n
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(n)
            self._perm_epoch = epoch
        return self.base[int(self._perm[g % n])]


class RepeatedStream(IterableDataset):
    """An iterable (streaming) data set read round after round; this rank's samples are the stream
    positions of its micro-batches (blocks of `block` positions, every world-th block from `rank`)
    after the first `skip` (so a resumed run continues where the last one stopped, given the same
    source files and worker count)."""

    def __init__(self, base: IterableDataset, skip: int = 0, rank: int = 0, world: int = 1, limit: int | None = None,
                 block: int = 1):
        self.base, self.skip, self.rank, self.world, self.limit = base, skip, rank, world, limit
        self.block = max(1, int(block))

    def __iter__(self):
        position, taken, empty_rounds = 0, 0, 0
        while self.limit is None or taken < self.limit:
            seen_any = False
            for item in self.base:
                seen_any = True
                if position >= self.skip and ((position - self.skip) // self.block) % self.world == self.rank:
                    if isinstance(item, dict):
                        item = {**item, "sample_index": torch.tensor(position)}
                    yield item
                    taken += 1
                    if self.limit is not None and taken >= self.limit:
                        return
                position += 1
            if not seen_any:
                empty_rounds += 1
                if empty_rounds > 1:
                    raise DnadiffError("the streaming training data yields no items")


class StreamSampler(Sampler):
    """Yields this rank's global sample indices: the micro-batches G = r, r + W, ... (G·B .. G·B + B - 1)
    from sample `start` on (a multiple of W·B), below `total`; B = `block` (the batch size)."""

    def __init__(self, total: int, start: int = 0, rank: int = 0, world: int = 1, block: int = 1):
        self.total, self.start, self.rank, self.world, self.block = total, start, rank, world, max(1, int(block))

    def __iter__(self):
        first = self.start // self.block + self.rank  # global micro-batch index
        for g in range(first, self.total // self.block, self.world):
            yield from range(g * self.block, (g + 1) * self.block)

    def __len__(self) -> int:
        # The whole stream's length, also when resuming at `start`: one epoch is the whole run, and on
        # resume Lightning restores its batch index within that epoch and stops at len(loader), so the
        # batches still to come are exactly len - restored index (what the iterator yields from start).
        blocks = self.total // self.block
        return max(0, (blocks - self.rank + self.world - 1) // self.world) * self.block


class IndexedStream(Dataset):
    """A map-style stream whose items also carry their global sample index (`sample_index`)."""

    def __init__(self, base: Dataset):
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, g: int):
        item = self.base[g]
        return {**item, "sample_index": torch.tensor(g)} if isinstance(item, dict) else item


def rank_batches(n: int, batch_size: int, rank: int, world: int) -> list[list[int]]:
    """Validation batches of one rank: the batches b = rank, rank + world, ... of the 1-process
    loader over n items (so the ranks together evaluate each item once, in the same batches)."""
    starts = range(rank * batch_size, n, world * batch_size)
    return [list(range(s, min(s + batch_size, n))) for s in starts]


def genome_paths(cfg: RunConfig) -> tuple[str, str]:
    if (cfg.data.fasta is None) != (cfg.data.bed is None):
        raise DnadiffError("data.fasta and data.bed must be given together (or both left empty for the bundled sample)")
    return (cfg.data.fasta, cfg.data.bed) if cfg.data.fasta else bundled_genome()


def build_split_dataset(cfg: RunConfig, tokenizer, split: str, mode: str = "tile", num_windows: int | None = None):
    """A data set of fixed-length {input_ids, attention_mask} items for one split."""
    if cfg.data.kind == "genome":
        fasta, bed = genome_paths(cfg)
        read_bed(bed)  # a malformed BED fails before the genome is opened (and indexed)
        genome = Genome(fasta)
        intervals = read_bed(bed, genome)
        try:
            return GenomeWindows(
                genome, intervals, split, cfg.data.seq_len, mode=mode, stride=cfg.data.stride,
                rc_prob=cfg.data.rc_prob if mode == "random" else 0.0,
                max_n_frac=cfg.data.max_n_frac if mode == "random" else 1.0,
                mask_n=cfg.data.mask_n, num_windows=num_windows, seed=cfg.train.seed, tokenizer=tokenizer,
            )
        except DnadiffError as exc:
            if "no intervals in split" in str(exc):  # name the BED file
                raise DnadiffError(f"{bed}: {exc}") from None
            raise
    if cfg.data.kind == "benchmark":
        return LabelledWindows.from_benchmark(cfg, tokenizer, split)
    if cfg.data.kind == "text":
        from dnadiff.data.text import build_text_datasets

        return build_text_datasets(cfg.data, tokenizer)[split]
    raise DnadiffError(f"data.kind: training needs 'genome' or 'text', got {cfg.data.kind!r}")


class LabelledWindows(Dataset):
    """Labelled sequences (genomic-benchmarks layout) cut/padded to seq_len, for class-conditional
    training. Splits: train = 90% of the benchmark's train set, valid = the other 10% (fixed seed),
    test = its test set."""

    def __init__(self, data, tokenizer, seq_len: int):
        self.data, self.tokenizer, self.seq_len = data, tokenizer, seq_len

    @classmethod
    def from_benchmark(cls, cfg: RunConfig, tokenizer, split: str) -> "LabelledWindows":
        from dnadiff.data.benchmarks import LabelledSequences, load_benchmark_split, resolve_benchmark

        if not cfg.data.benchmark:
            raise DnadiffError("data.benchmark: give the benchmark folder (NAME/{train,test}/CLASS/*.txt)")
        root = resolve_benchmark(cfg.data.benchmark)
        data = load_benchmark_split(root, "test" if split == "test" else "train", tokenizer)
        if split != "test":
            order = np.random.default_rng(12345).permutation(len(data))
            cut = max(1, len(data) // 10)
            keep = sorted(order[cut:] if split == "train" else order[:cut])
            data = LabelledSequences([data.sequences[i] for i in keep], [data.labels[i] for i in keep],
                                     data.classes, [data.ids[i] for i in keep])
        return cls(data, tokenizer, cfg.data.seq_len)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.tokenizer.encode_array(self.data.sequences[i])[: self.seq_len]
        real = (ids != self.tokenizer.n_id).astype(np.int64)
        pad = self.seq_len - len(ids)
        if pad:
            ids = np.concatenate([ids, np.full(pad, self.tokenizer.pad_id, dtype=np.int64)])
            real = np.concatenate([real, np.zeros(pad, dtype=np.int64)])
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(real),
                "labels": torch.tensor(self.data.labels[i])}


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
        batches = rank_batches(len(self.val_set), bs, rank, world) if self.val_sharded else rank_batches(len(self.val_set), bs, 0, 1)
        return DataLoader(self.val_set, batch_sampler=batches, num_workers=self.cfg.data.num_workers)
