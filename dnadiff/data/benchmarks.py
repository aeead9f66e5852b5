"""Genomic-benchmarks folder layout: NAME/{train,test}/CLASS/*.txt, one sequence per file.

Class labels are the *sorted* class folder names (the reference pipeline used the unsorted
directory listing, so train and test could disagree). Train and test must hold the same class
set and no class may be empty. A name instead of a path looks in the genomic-benchmarks cache
(~/.genomic_benchmarks/NAME) and downloads there only when `download=True`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset

from dnadiff.data_root import data_root_hint
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer


@dataclass
class LabelledSequences:
    """One split of a benchmark: sequences, integer labels and the class names (label order)."""

    sequences: list[str]
    labels: list[int]
    classes: list[str]
    ids: list[str]

    def __len__(self) -> int:
        return len(self.sequences)

    def counts(self) -> dict[str, int]:
        out = {c: 0 for c in self.classes}
        for y in self.labels:
            out[self.classes[y]] += 1
        return out


def cache_dir() -> Path:
    try:
        from genomic_benchmarks.utils.paths import CACHE_PATH

        return Path(CACHE_PATH)
    except Exception:  # pragma: no cover - package layout changed
        return Path.home() / ".genomic_benchmarks"


def resolve_benchmark(name_or_path: str | os.PathLike, download: bool = False) -> Path:
    """A folder path as is; a bare name from the genomic-benchmarks cache (downloaded only on request)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if os.sep in str(name_or_path) or str(name_or_path).startswith("."):
        raise DnadiffError(f"{name_or_path}: benchmark folder not found{data_root_hint(name_or_path)}")
    cached = cache_dir() / str(name_or_path)
    if cached.is_dir():
        return cached
    if not download:
        raise DnadiffError(
            f"benchmark {name_or_path!r}: not a folder and not in {cache_dir()} "
            "(pass a path, or allow the download with --download)"
        )
    try:  # network: only when the user asked for it
        from genomic_benchmarks.loc2seq import download_dataset

        download_dataset(str(name_or_path), dest_path=cache_dir())
    except Exception as exc:
        raise DnadiffError(f"benchmark {name_or_path!r}: download failed ({exc})") from None
    return cached


def _classes(split_dir: Path) -> list[str]:
    if not split_dir.is_dir():
        raise DnadiffError(f"{split_dir}: split folder not found (expected NAME/train and NAME/test)")
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir())


def load_benchmark_split(
    root: str | os.PathLike, split: str, tokenizer: DNATokenizer | None = None
) -> LabelledSequences:
    """Read NAME/split/CLASS/*.txt; labels from sorted class names shared by train and test."""
    root = Path(root)
    train_classes, test_classes = _classes(root / "train"), _classes(root / "test")
    if train_classes != test_classes:
        raise DnadiffError(
            f"{root}: train classes {train_classes} differ from test classes {test_classes}"
        )
    if len(train_classes) < 2:
        raise DnadiffError(f"{root}: a benchmark needs at least 2 classes, found {train_classes}")
    tokenizer = tokenizer or DNATokenizer()
    seqs, labels, ids = [], [], []
    for label, cls in enumerate(train_classes):
        files = sorted((root / split / cls).glob("*.txt"), key=lambda p: (len(p.stem), p.stem))
        if not files:
            raise DnadiffError(f"{root / split / cls}: class {cls!r} has no sequences (*.txt)")
        for f in files:
            seq = f.read_text(encoding="utf-8", errors="replace").strip().replace("\r", "").replace("\n", "")
            if not seq:
                raise DnadiffError(f"{f}: empty sequence")
            tokenizer.encode_array(seq, where=str(f))
            seqs.append(seq.upper())
            labels.append(label)
            ids.append(f"{cls}/{f.stem}")
    return LabelledSequences(seqs, labels, train_classes, ids)


class SequenceClassificationDataset(Dataset):
    """Tokenised (sequence, label) pairs; `collate` pads per batch on the right with [PAD]."""

    def __init__(self, data: LabelledSequences, tokenizer: DNATokenizer | None = None, max_len: int | None = None):
        self.data = data
        self.tokenizer = tokenizer or DNATokenizer()
        self.max_len = max_len
        self._ids = [self.tokenizer.encode_array(s) for s in data.sequences]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self._ids[i][: self.max_len] if self.max_len else self._ids[i]
        return {"input_ids": torch.from_numpy(ids), "label": torch.tensor(self.data.labels[i])}

    def collate(self, items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        return pad_batch(items, self.tokenizer.pad_id)


def pad_batch(items: list[dict[str, torch.Tensor]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad variable-length `input_ids` to the longest in the batch; attention_mask 0 on pads."""
    length = max(len(it["input_ids"]) for it in items)
    ids = torch.full((len(items), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), length), dtype=torch.long)
    for i, it in enumerate(items):
        n = len(it["input_ids"])
        ids[i, :n] = it["input_ids"]
        mask[i, :n] = 1
    out = {"input_ids": ids, "attention_mask": mask}
    if "label" in items[0]:
        out["labels"] = torch.stack([it["label"] for it in items])
    return out
