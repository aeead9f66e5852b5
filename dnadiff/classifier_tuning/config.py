"""FinetuneConfig: the `dnadiff finetune` settings (frozen dataclasses, YAML + key=value overrides):
data (the benchmark and its subsamples), model (backbone and classification head), protocol (seeds
or folds) and train (the Lightning fit of one run).

    cfg = load_finetune_config("experiments/tiny_finetune", ["train.epochs=2"])

Defaults follow the Caduceus Genomic Benchmarks recipe (docs/references.md "Genomic Benchmarks"):
10 epochs, AdamW weight decay 0.1, cosine schedule with 1% warmup, gradient clip 1.0, lr grid
{1e-3, 2e-3} chosen on validation, 5 seeds of a 90/10 train/validation split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dnadiff.config import TrainerConfig, _check

PROTOCOLS = ("paper", "kfold")


@dataclass(frozen=True)
class FinetuneTrainConfig(TrainerConfig):
    """The training section: TrainerConfig's shared fields (the ones `dnadiff train` has) with the
    recipe's defaults, plus epochs, the lr grid and warmup as a fraction of the steps."""

    batch_size: int = 256
    weight_decay: float = 0.1
    devices: Any = 1
    epochs: int = 10
    eval_batch_size: Optional[int] = None  # default: batch_size
    lr: Optional[float] = None  # one learning rate (as in `train`); null: sweep lr_grid
    lr_grid: list[float] = field(default_factory=lambda: [1e-3, 2e-3])  # chosen per model on validation accuracy
    warmup_steps: Optional[int] = None  # linear warmup steps (as in `train`); null: warmup_frac of the steps
    warmup_frac: float = 0.01  # linear warmup over this fraction of the steps, then cosine to 0
    max_steps_per_epoch: Optional[int] = None  # cap (quick checks)
    deterministic: bool = True

    def __post_init__(self):
        _check(self.epochs > 0, "train.epochs", f"must be > 0, got {self.epochs}")
        _check(self.eval_batch_size is None or self.eval_batch_size > 0, "train.eval_batch_size", "must be > 0")
        _check(len(self.lr_grid) > 0 and all(lr > 0 for lr in self.lr_grid), "train.lr_grid",
               f"needs one or more positive learning rates, got {self.lr_grid}")
        _check(0.0 <= self.warmup_frac < 1.0, "train.warmup_frac", f"must be in [0, 1), got {self.warmup_frac}")
        _check(self.lr is None or self.lr > 0, "train.lr", f"must be > 0 (or null to sweep lr_grid), got {self.lr}")
        _check(self.max_steps_per_epoch is None or self.max_steps_per_epoch > 0, "train.max_steps_per_epoch",
               "must be > 0 or null")
        super().__post_init__()

    def learning_rates(self) -> list[float]:
        """The learning rates the protocol tries: `lr` alone when set, else `lr_grid`."""
        return [float(self.lr)] if self.lr is not None else [float(x) for x in self.lr_grid]

    def warmup(self, total_steps: int) -> int:
        """Warmup steps of a run of `total_steps`: `warmup_steps` when set, else warmup_frac of them."""
        return int(self.warmup_steps) if self.warmup_steps is not None else int(round(self.warmup_frac * total_steps))


@dataclass(frozen=True)
class FinetuneDataConfig:
    # a folder NAME/{train,test}/CLASS/*.txt (relative: under root), a genomic-benchmarks name, or `dhs` /
    # `dhs[:half_a|:half_b][:valid]`: the DHS table of `dnadiff data dhs` (train: its training split or one
    # half of it, dnadiff/data/dhs.py HALVES; test: its test / validation split)
    dataset: str = "benchmarks/human_chr22_repeats"
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
    # noise-aware classifier (guidance): train on masked inputs z_t, t ~ U(0, 1) (Schiff et al. 2024)
    noisy: bool = False
    # what the saved classifier is for, recorded in OUT/classifier/classifier.json: null (unmarked), reward
    # (guidance and fine-tuning may read it) or evaluation (an oracle that only scores: `--reward
    # classifier:DIR` refuses it; heads/saved.py ROLES)
    role: Optional[str] = None

    def __post_init__(self):
        _check(self.role in (None, "reward", "evaluation"), "model.role",
               f"must be reward, evaluation or null, got {self.role!r}")
        _check(self.pooling in ("mean", "first", "last"), "model.pooling",
               f"must be mean, first or last, got {self.pooling!r}")
        _check(self.conjoin in ("auto", "none", "ph", "ps"), "model.conjoin",
               f"must be auto, none, ph or ps, got {self.conjoin!r}")
        _check(0.0 <= self.dropout < 1.0, "model.dropout", f"must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class ProtocolConfig:
    name: str = "paper"  # paper: one random 90/10 split per seed | kfold: stratified k-fold CV
    # paper: one run each; kfold: seeds[0] shuffles the folds
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
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
    """YAML file (a path or a name under the shipped configs/) + key=value overrides; the option mappings
    checked against the registries (the k-mer LR row: against its own options)."""
    from dnadiff.classifier_tuning.kmer_settings import check_kmer_model
    from dnadiff.config_options import load_config

    return load_config(FinetuneConfig, path, overrides, check_model=check_kmer_model)
