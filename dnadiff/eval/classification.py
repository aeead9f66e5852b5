"""Classification metrics (accuracy, MCC, macro-F1, AUROC) and the run summary of tab. 7.

Computed once over the whole evaluation set, never averaged over batches: the reference
Caduceus pipeline averaged per-batch MCC over class-ordered test files (caduceus#38, #48),
which is not the MCC of the test set. Implemented in numpy; tests compare with scikit-learn.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _labels(y) -> np.ndarray:
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    return np.asarray(y).astype(np.int64).reshape(-1)


def _scores(p) -> np.ndarray:
    if hasattr(p, "detach"):
        p = p.detach().float().cpu().numpy()
    return np.asarray(p, dtype=np.float64)


def confusion_matrix(y_true, y_pred, num_classes: int | None = None) -> np.ndarray:
    """C[i, j] = number of examples of true class i predicted as j."""
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    k = num_classes or int(max(y_true.max(initial=0), y_pred.max(initial=0)) + 1)
    return np.bincount(y_true * k + y_pred, minlength=k * k).reshape(k, k)


def accuracy(y_true, y_pred) -> float:
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    return float((y_true == y_pred).mean()) if y_true.size else float("nan")


def mcc(y_true, y_pred, num_classes: int | None = None) -> float:
    """Matthews correlation; multiclass R_K of Gorodkin (2004), as scikit-learn. 0 when undefined."""
    c = confusion_matrix(y_true, y_pred, num_classes).astype(np.float64)
    t_k, p_k = c.sum(axis=1), c.sum(axis=0)  # true / predicted counts per class
    n, correct = c.sum(), np.trace(c)
    cov_tp = correct * n - t_k @ p_k
    cov_pp = n * n - p_k @ p_k
    cov_tt = n * n - t_k @ t_k
    if cov_pp * cov_tt == 0:
        return 0.0
    return float(cov_tp / math.sqrt(cov_tt * cov_pp))


def f1_macro(y_true, y_pred, num_classes: int | None = None) -> float:
    """Unweighted mean over classes of F1 = 2TP / (2TP + FP + FN); a class with 0/0 scores 0 (sklearn).

    Classes are those present in y_true or y_pred (scikit-learn's default label set) unless
    `num_classes` is given.
    """
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    c = confusion_matrix(y_true, y_pred, num_classes).astype(np.float64)
    classes = np.arange(c.shape[0]) if num_classes else np.union1d(y_true, y_pred)
    tp = np.diag(c)[classes]
    denom = 2 * tp + (c.sum(axis=0) - np.diag(c))[classes] + (c.sum(axis=1) - np.diag(c))[classes]
    f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
    return float(f1.mean())


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    # boundaries of tie groups in sorted order
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(x)]
    avg = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def binary_auroc(y_true, score) -> float:
    """Area under the ROC curve = P(score_pos > score_neg) + P(tie)/2 (Mann-Whitney U). NaN if one class."""
    y = _labels(y_true).astype(bool)
    s = _scores(score).reshape(-1)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = _ranks(s)
    u = r[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def auroc(y_true, probs, num_classes: int | None = None) -> float:
    """Binary: AUROC of the class-1 score; multiclass: macro one-vs-rest (sklearn `multi_class='ovr'`)."""
    y = _labels(y_true)
    p = _scores(probs)
    if p.ndim == 1:
        return binary_auroc(y, p)
    k = num_classes or p.shape[1]
    if k == 2:
        return binary_auroc(y, p[:, 1])
    return float(np.mean([binary_auroc(y == c, p[:, c]) for c in range(k)]))


def classification_metrics(y_true, logits_or_probs, num_classes: int | None = None, probs: bool = False) -> dict:
    """accuracy, mcc, f1_macro, auroc from labels and [N, C] logits (softmaxed here) or probabilities."""
    s = _scores(logits_or_probs)
    if not probs:
        s = s - s.max(axis=1, keepdims=True)
        s = np.exp(s)
        s = s / s.sum(axis=1, keepdims=True)
    k = num_classes or s.shape[1]
    y = _labels(y_true)
    pred = s.argmax(axis=1)
    return {
        "accuracy": accuracy(y, pred),
        "mcc": mcc(y, pred, k),
        "f1_macro": f1_macro(y, pred, k),
        "auroc": auroc(y, s, k),
    }


METRICS = ("accuracy", "mcc", "f1_macro", "auroc")


RANGE_LABEL = "range (max−min)"  # the name every table gives the spread over runs


def summarize(values: Sequence[float]) -> dict:
    """Mean and range (max − min) over runs, plus min, max, n.

    The range is the MDLM paper's "±" (tab. 6/7; the Caduceus benchmark protocol, REFERENCE.md
    "Genomic Benchmarks"): the full spread over seeds, not half of it and not a standard error.
    """
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=np.float64)
    if v.size == 0:
        return {"mean": float("nan"), "range": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {
        "mean": float(v.mean()),
        "range": float(v.max() - v.min()),
        "min": float(v.min()),
        "max": float(v.max()),
        "n": int(v.size),
    }


def format_range(summary: dict, digits: int = 3) -> str:
    """`mean ± range`, the ± being max − min over runs as in the paper's tables (label it RANGE_LABEL)."""
    if not summary or summary.get("n", 0) == 0:
        return "n/a"
    spread = summary["max"] - summary["min"]  # from min/max: also right for records written before `range`
    return f"{summary['mean']:.{digits}f} ± {spread:.{digits}f}"
