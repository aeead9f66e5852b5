"""The data set of one split, as a run's config describes it: genome windows (FASTA + BED), the
labelled sequences of a benchmark folder or of the DHS table (dhs.py), or text blocks. Used by training,
`dnadiff eval` and the demo."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from dnadiff.config import RunConfig
from dnadiff.data.benchmarks import LabelledSequences, load_benchmark_split, resolve_benchmark
from dnadiff.data.dhs import DHSDataset, load_dhs
from dnadiff.data.fasta import Genome, GenomeWindows, bundled_genome, read_bed
from dnadiff.data.splits import holdout_split
from dnadiff.data.text import build_text_datasets
from dnadiff.errors import DnadiffError

VALID_SPLIT_SEED = 12345  # the benchmark validation split of class-conditional training


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
    if cfg.data.kind == "dhs":  # the DHS table in dnadiff's cache (`dnadiff data dhs`); labels = cell types
        return DHSDataset(load_dhs(), split, cfg.data.seq_len, tokenizer)
    if cfg.data.kind == "text":
        return build_text_datasets(cfg.data, tokenizer)[split]
    raise DnadiffError(f"data.kind: training needs 'genome', 'benchmark', 'dhs' or 'text', got {cfg.data.kind!r}")


class LabelledWindows(Dataset):
    """Labelled sequences (genomic-benchmarks layout) cut/padded to seq_len, for class-conditional
    training. Splits: train / valid = the 90/10 `holdout_split` of the benchmark's train set (one
    fixed seed, whatever the training seed, so every run validates on the same sequences), test =
    its test set."""

    def __init__(self, data, tokenizer, seq_len: int):
        self.data, self.tokenizer, self.seq_len = data, tokenizer, seq_len

    @classmethod
    def from_benchmark(cls, cfg: RunConfig, tokenizer, split: str) -> "LabelledWindows":
        if not cfg.data.benchmark:
            raise DnadiffError("data.benchmark: give the benchmark folder (NAME/{train,test}/CLASS/*.txt)")
        root = resolve_benchmark(cfg.data.benchmark)
        data = load_benchmark_split(root, "test" if split == "test" else "train", tokenizer)
        if split != "test":
            train, valid = holdout_split(len(data), seed=VALID_SPLIT_SEED)
            keep = train if split == "train" else valid
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
