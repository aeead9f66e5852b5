"""Paired comparison of two models scored on the same windows: per-window bits/base differences.

    a = evaluate_model(model_a, windows, per_sequence=True)
    b = evaluate_model(markov, windows, per_sequence=True)
    d = paired_difference(a, b)    # d["mean"] ± d["std_error"] bits/base (negative: a is better)

The two tables' means each carry the window-to-window spread of the data (some windows are easy
for every model); a difference of means of means inherits both spreads. Scoring the SAME windows
and differencing per window cancels what the windows share, so the standard error of the mean
difference, sd(d_i) / sqrt(N) (d_i = bits/base of window i under a minus under b), is the right
yardstick: |mean| > 2 SE is the usual two-sided ~95% test of a paired mean.

Windows with no scored token (all N, all padding) carry no bits/base and are left out; the two
runs must have scored the same tokens in every window (the same windows, masks and data
settings), else the comparison is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnadiff.errors import DnadiffError

LN2 = math.log(2.0)


def window_bits(result: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(bits/base of each window, scored tokens of each window) from evaluate_bound(per_sequence=True)."""
    try:
        nats = np.asarray(result["sequence_nats"], dtype=np.float64)
        tokens = np.asarray(result["sequence_tokens"], dtype=np.float64)
    except KeyError:
        raise DnadiffError("paired comparison: the evaluation has no per-window values "
                           "(evaluate with per_sequence=True)") from None
    with np.errstate(divide="ignore", invalid="ignore"):
        bits = np.where(tokens > 0, nats / np.maximum(tokens, 1e-300) / LN2, np.nan)
    return bits, tokens


def paired_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Mean over windows of bits/base(a) − bits/base(b), its standard error and whether |mean| > 2 SE.

    Returns {"mean", "std_error", "n_windows", "beyond_2se", "a_mean", "b_mean", "wins"} where a_mean
    and b_mean are the plain per-window means (not token-weighted), wins the share of windows where
    a is lower."""
    bits_a, tok_a = window_bits(a)
    bits_b, tok_b = window_bits(b)
    if bits_a.shape != bits_b.shape:
        raise DnadiffError(f"paired comparison: {bits_a.size} windows against {bits_b.size} (not the same windows)")
    if not np.array_equal(tok_a, tok_b):
        bad = int(np.flatnonzero(tok_a != tok_b)[0])
        raise DnadiffError(f"paired comparison: window {bad} has {tok_a[bad]:g} scored tokens in one run and "
                           f"{tok_b[bad]:g} in the other (not the same windows or data settings)")
    keep = tok_a > 0
    d = bits_a[keep] - bits_b[keep]
    n = int(d.size)
    if n < 2:
        raise DnadiffError(f"paired comparison: {n} scored window(s); at least 2 are needed for a standard error")
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n))
    return {"mean": mean, "std_error": se, "n_windows": n, "beyond_2se": bool(abs(mean) > 2 * se),
            "a_mean": float(bits_a[keep].mean()), "b_mean": float(bits_b[keep].mean()),
            "wins": float((d < 0).mean())}


def describe_difference(d: dict[str, Any], name_a: str, name_b: str) -> str:
    """One line: `A − B: -0.0123 ± 0.0040 bits/base (paired, N windows; 3.1 SE: A better)`."""
    z = abs(d["mean"]) / d["std_error"] if d["std_error"] > 0 else float("inf")
    if not d["beyond_2se"]:
        verdict = "within 2 SE: no clear difference"
    else:
        verdict = f"{name_a} better" if d["mean"] < 0 else f"{name_b} better"
    return (f"{name_a} − {name_b}: {d['mean']:+.4f} ± {d['std_error']:.4f} bits/base (paired over {d['n_windows']} "
            f"windows, mean ± SE; {z:.1f} SE: {verdict}; {name_a} lower on {100 * d['wins']:.0f}% of windows)")


def paired_accuracy(a_runs: list[dict[str, Any]], b_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy of classifier row a minus row b, paired per test sequence: each row's runs (seeds) scored on
    the same test sequences, `test_correct` 1/0 per sequence in the same order; a sequence's outcome is
    averaged over a row's runs, d_i = mean_a_i − mean_b_i, and the mean of d ± sd(d) / sqrt(N) is returned
    with whether |mean| > 2 SE ({"mean", "std_error", "n_sequences", "beyond_2se", "a_mean", "b_mean",
    "a_only", "b_only"}: the shares of sequences one row gets right more often than the other)."""
    def per_sequence(runs: list[dict[str, Any]], name: str) -> np.ndarray:
        rows = [r.get("test_correct") for r in runs]
        if not rows or any(not c for c in rows):
            raise DnadiffError(f"paired accuracy: row {name} has runs without per-sequence test outcomes "
                               "(test_correct); rerun them with this version")
        if len({len(c) for c in rows}) > 1:
            raise DnadiffError(f"paired accuracy: row {name}'s runs scored different numbers of test sequences")
        return np.asarray(rows, dtype=np.float64).mean(axis=0)

    acc_a, acc_b = per_sequence(a_runs, "a"), per_sequence(b_runs, "b")
    if acc_a.shape != acc_b.shape:
        raise DnadiffError(f"paired accuracy: {acc_a.size} test sequences against {acc_b.size} (not the same test set)")
    d = acc_a - acc_b
    n = int(d.size)
    if n < 2:
        raise DnadiffError(f"paired accuracy: {n} test sequence(s); at least 2 are needed for a standard error")
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    return {"mean": mean, "std_error": se, "n_sequences": n, "beyond_2se": bool(abs(mean) > 2 * se),
            "a_mean": float(acc_a.mean()), "b_mean": float(acc_b.mean()),
            "a_only": float((d > 0).mean()), "b_only": float((d < 0).mean())}


def describe_accuracy_difference(d: dict[str, Any], name_a: str, name_b: str) -> str:
    """One line: `A − B: +0.012 ± 0.009 accuracy (paired over N test sequences; 1.3 SE: no clear difference)`."""
    z = abs(d["mean"]) / d["std_error"] if d["std_error"] > 0 else (float("inf") if d["mean"] else 0.0)
    verdict = ("within 2 SE: no clear difference" if not d["beyond_2se"]
               else f"{name_a} better" if d["mean"] > 0 else f"{name_b} better")
    return (f"{name_a} − {name_b}: {d['mean']:+.3f} ± {d['std_error']:.3f} accuracy (paired over {d['n_sequences']} "
            f"test sequences, each averaged over its runs; {z:.1f} SE: {verdict}; right more often on "
            f"{100 * d['a_only']:.0f}% vs {100 * d['b_only']:.0f}% of sequences)")
