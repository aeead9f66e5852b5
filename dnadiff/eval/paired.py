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
