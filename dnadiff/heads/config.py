"""FinetuneConfig: the `dnadiff finetune` settings (frozen dataclasses, YAML + key=value overrides).

    cfg = load_finetune_config("experiments/tiny_finetune", ["train.epochs=2"])

Defaults follow the Caduceus Genomic Benchmarks recipe (docs/references.md "Genomic Benchmarks"):
10 epochs, AdamW weight decay 0.1, cosine schedule with 1% warmup, gradient clip 1.0, lr grid
{1e-3, 2e-3} chosen on validation, 5 seeds of a 90/10 train/validation split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dnadiff.config import FinetuneTrainConfig, _check, load_config  # the train section lives beside TrainConfig

PROTOCOLS = ("paper", "kfold")


@dataclass(frozen=True)
class FinetuneDataConfig:
    dataset: str = "benchmarks/human_chr22_repeats"  # folder NAME/{train,test}/CLASS/*.txt (relative: under root) or a genomic-benchmarks name
    root: Optional[str] = None  # data root of relative dataset paths (None: $DNADIFF_DATA, else the bundled data)
    download: bool = False  # fetch a named genomic-benchmarks set into its cache (network)
    max_len: Optional[int] = None  # truncate longer sequences (tab. 7 lists each set's max length)
    max_train: Optional[int] = None  # stratified random subsample of the train set (speed; None = all)
    max_test: Optional[int] = None  # stratified random subsample of the test set (speed; None = all)
    subsample_seed: int = 0
    num_workers: int = 0

    def __post_init__(self):
        _check(bool(self.dataset), "data.dataset", "must name a benchmark folder or genomic-benchmarks set")
        for name in ("max_len", "max_train", "max_test"):
            v = getattr(self, name)
            _check(v is None or v > 0, f"data.{name}", f"must be > 0 or null, got {v}")
        _check(self.num_workers >= 0, "data.num_workers", f"must be >= 0, got {self.num_workers}")


@dataclass(frozen=True)
class FinetuneModelConfig:
    init_from: Optional[str] = None  # dnadiff model dir or official Caduceus/HyenaDNA HF dir; None = scratch
    backbone: str = "caduceus"  # scratch: registry name
    preset: str = "tiny"  # scratch: size preset
    overrides: dict[str, Any] = field(default_factory=dict)  # scratch: backbone config fields
    pooling: str = "mean"  # mean (over real positions) | first | last
    conjoin: str = "auto"  # auto | none | ph (post-hoc, both strands) | ps (RCPS strand average)
    conjoin_train: bool = False  # ph: conjoin in training too (default: evaluation only)
    rc_aug: bool = True  # reverse-complement augmentation in training (p = 0.5)
    dropout: float = 0.0
    freeze_backbone: bool = False  # linear probe: train the head only
    noisy: bool = False  # noise-aware classifier (guidance): train on masked inputs z_t, t ~ U(0, 1) (Schiff et al. 2024)

    def __post_init__(self):
        _check(self.pooling in ("mean", "first", "last"), "model.pooling",
               f"must be mean, first or last, got {self.pooling!r}")
        _check(self.conjoin in ("auto", "none", "ph", "ps"), "model.conjoin",
               f"must be auto, none, ph or ps, got {self.conjoin!r}")
        _check(0.0 <= self.dropout < 1.0, "model.dropout", f"must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class ProtocolConfig:
    name: str = "paper"  # paper: one random 90/10 split per seed | kfold: stratified k-fold CV
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])  # paper: one run each; kfold: seeds[0] shuffles the folds
    folds: int = 5  # kfold
    valid_frac: float = 0.1  # paper
    max_runs: Optional[int] = None  # cap the runs (quick checks)

    def __post_init__(self):
        _check(self.name in PROTOCOLS, "protocol.name", f"must be paper or kfold, got {self.name!r}")
        _check(len(self.seeds) > 0, "protocol.seeds", "needs at least one seed")
        _check(self.folds >= 2, "protocol.folds", f"must be >= 2, got {self.folds}")
        _check(0.0 < self.valid_frac < 1.0, "protocol.valid_frac", f"must be in (0, 1), got {self.valid_frac}")
        _check(self.max_runs is None or self.max_runs > 0, "protocol.max_runs", f"must be > 0, got {self.max_runs}")


@dataclass(frozen=True)
class FinetuneConfig:
    name: str = "finetune"
    out_dir: str = "runs/finetune"
    data: FinetuneDataConfig = field(default_factory=FinetuneDataConfig)
    model: FinetuneModelConfig = field(default_factory=FinetuneModelConfig)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    train: FinetuneTrainConfig = field(default_factory=FinetuneTrainConfig)


def load_finetune_config(path, overrides: list[str] | None = None) -> FinetuneConfig:
    """YAML file (a path or a name under the shipped configs/) + key=value overrides."""
    return load_config(FinetuneConfig, path, overrides)
