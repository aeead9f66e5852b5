"""Classification metrics equal scikit-learn's on fixed predictions (binary, multiclass, ties)."""

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from dnadiff.eval.classification import (
    accuracy,
    auroc,
    binary_auroc,
    classification_metrics,
    f1_macro,
    format_range,
    mcc,
    summarize,
)


def _case(n, k, seed, ties=False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    if ties:
        logits = np.round(logits)  # many equal scores
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return y, logits, p


@pytest.mark.parametrize("k,ties", [(2, False), (2, True), (3, False), (5, True)])
def test_metrics_match_sklearn(k, ties):
    y, logits, p = _case(300, k, seed=k + 10 * ties, ties=ties)
    pred = p.argmax(1)
    assert accuracy(y, pred) == pytest.approx(skm.accuracy_score(y, pred), abs=1e-12)
    assert mcc(y, pred) == pytest.approx(skm.matthews_corrcoef(y, pred), abs=1e-12)
    assert f1_macro(y, pred) == pytest.approx(skm.f1_score(y, pred, average="macro"), abs=1e-12)
    if k == 2:
        ref = skm.roc_auc_score(y, p[:, 1])
    else:
        ref = skm.roc_auc_score(y, p, multi_class="ovr", average="macro")
    assert auroc(y, p) == pytest.approx(ref, abs=1e-12)
    out = classification_metrics(torch.tensor(y), torch.tensor(logits))  # softmax inside, tensors accepted
    assert out["auroc"] == pytest.approx(ref, abs=1e-6)
    assert out["mcc"] == pytest.approx(skm.matthews_corrcoef(y, pred), abs=1e-12)


def test_degenerate_cases_match_sklearn():
    y = np.array([0, 0, 1, 1, 1])
    const = np.zeros(5, dtype=int)  # one predicted class: MCC undefined -> 0, F1 of class 1 is 0
    assert mcc(y, const) == skm.matthews_corrcoef(y, const) == 0.0
    with np.errstate(all="ignore"):
        ref = skm.f1_score(y, const, average="macro", zero_division=0)
    assert f1_macro(y, const) == pytest.approx(ref)
    assert np.isnan(binary_auroc(np.zeros(4), np.arange(4.0)))  # one class only
    assert binary_auroc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]) == 1.0
    assert binary_auroc([0, 1], [0.5, 0.5]) == 0.5


def test_order_does_not_matter():
    """Whole-set metrics: shuffling (the reference's class-ordered MCC bug) changes nothing."""
    y, logits, _ = _case(200, 2, seed=3)
    perm = np.random.default_rng(0).permutation(200)
    a, b = classification_metrics(y, logits), classification_metrics(y[perm], logits[perm])
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=1e-12)


def test_summary_is_mean_and_range():
    """The paper's "±" (tab. 6/7) is max − min over seeds, reported whole under the name `range`."""
    s = summarize([0.80, 0.90, 0.85, float("nan")])
    assert s["mean"] == pytest.approx(0.85) and s["range"] == pytest.approx(0.10) and s["n"] == 3
    assert "pm" not in s and s["min"] == 0.80 and s["max"] == 0.90
    assert format_range(s) == "0.850 ± 0.100"
