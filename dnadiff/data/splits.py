"""Index splits of labelled or unlabelled data sets, all on scikit-learn's splitters.

- `holdout_split`: THE 90/10 train/validation split of dnadiff (Genomic Benchmarks protocol,
  class-conditional training on a benchmark, anything that carves a validation set out of a
  train set): train_test_split with random_state=seed.
- `paper_splits`: one holdout split per seed (the published "5-fold CV", docs/references.md).
- `kfold_splits`: stratified k-fold cross-validation.
- `stratified_subsample`: at most n indices with the class proportions kept.
Every function returns sorted index arrays, so data sets keep their file order.
"""

from __future__ import annotations

import warnings

import numpy as np

from dnadiff.errors import DnadiffError

VALID_FRAC = 0.1  # the 90/10 split


def holdout_split(n: int, seed: int, valid_frac: float = VALID_FRAC) -> tuple[np.ndarray, np.ndarray]:
    """(train, valid) indices of 0..n-1: a random round(valid_frac·n) (at least 1, at most n-1) for
    validation, the rest for training (train_test_split, random_state=seed); both sorted."""
    from sklearn.model_selection import train_test_split

    if n < 2:
        raise DnadiffError(f"the train set needs at least 2 examples for a validation split, got {n}")
    if not 0.0 < valid_frac < 1.0:
        raise DnadiffError(f"valid_frac must be in (0, 1), got {valid_frac}")
    n_valid = min(n - 1, max(1, int(round(valid_frac * n))))
    train, valid = train_test_split(np.arange(n), test_size=n_valid, random_state=int(seed), shuffle=True)
    return np.sort(train), np.sort(valid)


def paper_splits(n: int, seeds: list[int], valid_frac: float = VALID_FRAC) -> list[tuple[np.ndarray, np.ndarray]]:
    """One `holdout_split` per seed."""
    return [holdout_split(n, seed, valid_frac) for seed in seeds]


def kfold_splits(labels, k: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified k folds (scikit-learn's StratifiedKFold, shuffled with random_state=seed): per class,
    fold counts differ by at most one, and so do fold sizes. Returns k (train, valid) index pairs."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels)
    if k < 2:
        raise DnadiffError(f"protocol.folds must be >= 2, got {k}")
    if len(labels) < k:
        raise DnadiffError(f"{k}-fold CV needs at least {k} train examples, got {len(labels)}")
    folds = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # a class rarer than k: sklearn warns, the folds are still valid
        warnings.simplefilter("ignore", UserWarning)
        return [(np.sort(tr), np.sort(va)) for tr, va in folds.split(np.zeros(len(labels)), labels)]


def stratified_subsample(labels, n: int | None, seed: int = 0) -> np.ndarray:
    """At most n indices with the class proportions kept (train_test_split with stratify=labels,
    random_state=seed), sorted; all indices if n is None or covers the data set."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    if n is None or n >= len(labels):
        return np.arange(len(labels))
    classes = np.unique(labels)
    if n < len(classes) or len(labels) - n < len(classes):
        raise DnadiffError(f"a stratified subsample of {n} from {len(labels)} examples of {len(classes)} classes "
                           f"needs at least one example per class on both sides")
    try:
        keep, _ = train_test_split(np.arange(len(labels)), train_size=int(n), stratify=labels, random_state=int(seed),
                                   shuffle=True)
    except ValueError as exc:  # e.g. a class with a single example
        raise DnadiffError(f"stratified subsample of {n}: {exc}") from None
    return np.sort(keep)
