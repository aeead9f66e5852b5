"""Classification metrics (accuracy, MCC, macro-F1, AUROC) and the run summary of tab. 7.

Computed once over the whole evaluation set, never averaged over batches: the reference
Caduceus pipeline averaged per-batch MCC over class-ordered test files (caduceus#38, #48),
which is not the MCC of the test set. The metrics are scikit-learn's; this module only fixes the
label set (`num_classes`) and turns the undefined cases into 0 (MCC, F1) or NaN (AUROC).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from sklearn import metrics as skm


def _labels(y) -> np.ndarray:
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    return np.asarray(y).astype(np.int64).reshape(-1)


def _scores(p) -> np.ndarray:
    if hasattr(p, "detach"):
        p = p.detach().float().cpu().numpy()
    return np.asarray(p, dtype=np.float64)


def confusion_matrix(y_true, y_pred, num_classes: int | None = None) -> np.ndarray:
    """C[i, j] = number of examples of true class i predicted as j (classes 0 .. K-1)."""
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    k = num_classes or int(max(y_true.max(initial=0), y_pred.max(initial=0)) + 1)
    return skm.confusion_matrix(y_true, y_pred, labels=np.arange(k))


def accuracy(y_true, y_pred) -> float:
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    return float(skm.accuracy_score(y_true, y_pred)) if y_true.size else float("nan")


def mcc(y_true, y_pred, num_classes: int | None = None) -> float:
    """Matthews correlation; multiclass R_K of Gorodkin (2004). 0 when undefined. Classes absent from
    both label vectors add nothing to R_K, so `num_classes` does not change the value."""
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    with np.errstate(all="ignore"):
        return float(skm.matthews_corrcoef(y_true, y_pred))


def f1_macro(y_true, y_pred, num_classes: int | None = None) -> float:
    """Unweighted mean over classes of F1 = 2TP / (2TP + FP + FN); a class with 0/0 scores 0.

    Classes are those present in y_true or y_pred (scikit-learn's default label set) unless
    `num_classes` is given.
    """
    y_true, y_pred = _labels(y_true), _labels(y_pred)
    return float(skm.f1_score(y_true, y_pred, labels=np.arange(num_classes) if num_classes else None, average="macro",
                              zero_division=0))


def binary_auroc(y_true, score) -> float:
    """Area under the ROC curve = P(score_pos > score_neg) + P(tie)/2. NaN if one class only."""
    y = _labels(y_true).astype(bool)
    s = _scores(score).reshape(-1)
    if y.all() or not y.any():
        return float("nan")
    return float(skm.roc_auc_score(y, s))


def auroc(y_true, probs, num_classes: int | None = None) -> float:
    """Binary: AUROC of the class-1 score; multiclass: macro one-vs-rest (sklearn `multi_class='ovr'`),
    NaN when a class has no example (its one-vs-rest AUROC is undefined)."""
    y = _labels(y_true)
    p = _scores(probs)
    if p.ndim == 1:
        return binary_auroc(y, p)
    k = num_classes or p.shape[1]
    if k == 2:
        return binary_auroc(y, p[:, 1])
    onehot = np.eye(k, dtype=np.int64)[y]  # (N, K): the one-vs-rest targets
    if (onehot.sum(0) == 0).any() or (onehot.sum(0) == len(y)).any():
        return float("nan")
    return float(skm.roc_auc_score(onehot, p[:, :k], average="macro"))


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

    The range is the MDLM paper's "±" (tab. 6/7; the Caduceus benchmark protocol, docs/references.md
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
