"""Exact conditional p(hidden | visible) of an order-k Markov chain, by forward–backward over the hidden bases.

    from dnadiff.eval.markov_infill import conditional_nll, sample_hidden
    nats = conditional_nll(chain, codes, hidden)        # -log p(x_H | x_V), both flanks, exact
    filled = sample_hidden(chain, codes, hidden, rng, num=8)   # Int64[8, L]: draws from p(x_H | x_V)

`chain` is the shipped interpolated Kneser–Ney (or Witten–Bell) chain (backbones/markov.py), `codes` Int64[L]
2-bit bases (A0 C1 G2 T3, -1 = N: a break, as in the chain), `hidden` Bool[L] (a span or scattered positions).

The joint is the chain's, as `dnadiff eval` of a DNA AR model directory scores it (a [BOS] context): every
A/C/G/T base i contributes P(x_i | the run of bases since the last break, at most k), the first base of the
window and the base after an N with the shorter contexts. A hidden position is always a base (it ranges over
A/C/G/T); an N stays a visible break.

Why not 4^k states everywhere: the chain's state at position i is its last k bases, but only the hidden bases
among them are unknown, so the lattice branches only at hidden positions. The forward pass walks the positions
whose factor P(x_i | context) involves a hidden base (i hidden, or a hidden base within i's context) and keeps
α over the joint values of the *active* hidden bases (those inside the context of some later position: at most
k of them). At position i:
  1. the hidden bases that left the context (position < i - context length) are summed out of α (they never
     appear in a later factor: the context start i - ctx(i) never decreases);
  2. α(s) *= P(x_i | context(s)) at a visible base, or α(s, v) = α(s) · P(v | context(s)) at a hidden one
     (a new active base);
  3. α is rescaled (the log of the scale is kept).
Z = Σ α at the end is Σ_{x_H} Π (factors that involve x_H), and
    -log p(x_H | x_V) = -Σ log(those factors at the true x_H) + log Z
(the factors without a hidden base cancel). Cost: O(Σ_i 4^{m_i}) over the walked positions, m_i ≤ k the active
hidden bases: a span of n bases costs about (n + k) · 4^{min(n, k)}·4 operations (k = 9: 262,144 states, about a
second per 96-bp span in numpy); scattered positions cost 4^{the hidden bases within any k consecutive positions}.
Memory O(4^k) for the likelihood; sampling (forward filtering, backward sampling) keeps each summed-out table,
O(n_hidden · 4^m) floats.
"""

from __future__ import annotations

import math

import numpy as np

from dnadiff.errors import DnadiffError


def chain_tables(chain) -> tuple[int, list[np.ndarray]]:
    """(k, [T_0, ..., T_k]) of a MarkovChain (Float64[4^j, 4] conditionals); taken once, reused per window."""
    order = int(getattr(chain, "order", -1))
    if order < 0:
        raise DnadiffError("markov infill: the chain's order is not chosen yet (order -1)")
    return order, [np.asarray(t, dtype=np.float64) for t in chain.tables()]


def _prepare(tables, codes, hidden) -> tuple[int, list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    k, tabs = tables if isinstance(tables, tuple) else chain_tables(tables)
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    hidden = np.asarray(hidden, dtype=bool).reshape(-1)
    if codes.shape != hidden.shape:
        raise DnadiffError(f"markov infill: codes {codes.shape} and hidden {hidden.shape} differ in shape")
    base = (codes >= 0) | hidden  # hidden positions are bases whatever they hold
    L = codes.shape[0]
    ctx = np.zeros(L, dtype=np.int64)  # bases of context of position i (since the last break, at most k)
    run = 0
    for i in range(L):
        ctx[i] = min(run, k)
        run = run + 1 if base[i] else 0
    return k, tabs, codes, hidden, ctx


def _walk(k, tabs, codes, hidden, ctx, keep: bool):
    """The forward pass: (log Z, drops, final (positions, α)); `drops` (keep=True) lists (summed positions,
    the rest, α Float64[4^d, 4^rest] before summing) for backward sampling."""
    L = codes.shape[0]
    hid_pos = np.flatnonzero(hidden)
    if hid_pos.size == 0:
        return 0.0, [], ([], np.ones(1))
    active: list[int] = []
    alpha = np.ones(1)  # over the active hidden bases, oldest most significant digit
    log_scale = 0.0
    drops = []
    for i in range(int(hid_pos[0]), L):
        start = i - ctx[i]
        d = sum(1 for p in active if p < start)  # the oldest d leave the context for good
        if d:
            table = alpha.reshape(4**d, -1)
            if keep:
                drops.append((active[:d], active[d:], table.copy()))
            alpha = table.sum(axis=0)
            active = active[d:]
        if not hidden[i] and (codes[i] < 0 or not active):
            if not active and i > hid_pos[-1]:
                break  # every hidden base is summed out: the remaining factors do not involve one
            continue  # an N (no factor), or a factor of visible bases only (it cancels)
        const = 0
        for q in range(start, i):  # the visible bases of the context, newest least significant
            if not hidden[q]:
                const += int(codes[q]) * 4 ** (i - 1 - q)
        var = np.zeros(1, dtype=np.int64)
        for p in active:  # the row offset of each joint value of the active bases
            var = (var[:, None] + (np.arange(4, dtype=np.int64) * 4 ** (i - 1 - p))[None, :]).reshape(-1)
        probs = tabs[ctx[i]][var + const]  # (S, 4)
        if hidden[i]:
            alpha = (alpha[:, None] * probs).reshape(-1)
            active.append(i)
        else:
            alpha = alpha * probs[:, codes[i]]
        total = alpha.sum()
        if not total > 0:
            raise DnadiffError(f"markov infill: the visible bases have probability 0 under the chain at position {i}")
        log_scale += math.log(total)
        alpha = alpha / total
    return log_scale + math.log(alpha.sum()), drops, (active, alpha)


def _true_log_factors(k, tabs, codes, hidden, ctx) -> float:
    """Σ log P(x_i | context) over the positions whose factor involves a hidden base, at the true bases."""
    if bool((codes[hidden] < 0).any()):
        raise DnadiffError("markov infill: a hidden position holds no A/C/G/T base to score")
    hid = np.flatnonzero(hidden)
    total = 0.0
    for i in range(int(hid[0]) if hid.size else codes.shape[0], codes.shape[0]):
        start = i - ctx[i]
        if codes[i] < 0 or not (hidden[i] or hidden[start:i].any()):
            continue
        row = sum(int(codes[q]) * 4 ** (i - 1 - q) for q in range(start, i))
        total += math.log(tabs[ctx[i]][row, codes[i]])
    return total


def conditional_nll(chain, codes, hidden) -> float:
    """-log p(x_H | x_V) in nats, exact (module docstring); `chain` a MarkovChain or `chain_tables(chain)`."""
    k, tabs, codes, hidden, ctx = _prepare(chain, codes, hidden)
    if not hidden.any():
        return 0.0
    log_z, _, _ = _walk(k, tabs, codes, hidden, ctx, keep=False)
    return log_z - _true_log_factors(k, tabs, codes, hidden, ctx)


def _draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per column of probs Float64[K, n] (unnormalised) -> Int64[n]."""
    cdf = np.cumsum(probs, axis=0)
    u = rng.random(probs.shape[1]) * cdf[-1]
    return np.minimum((cdf < u[None, :]).sum(axis=0), probs.shape[0] - 1)


def _digits(index: np.ndarray, m: int) -> np.ndarray:
    """Int64[n] joint indices of m bases (oldest most significant) -> Int64[n, m] base codes."""
    return (index[:, None] // 4 ** np.arange(m - 1, -1, -1)[None, :]) % 4


def sample_hidden(chain, codes, hidden, rng: np.random.Generator | None = None, num: int = 1) -> np.ndarray:
    """Int64[num, L]: `codes` with the hidden positions drawn from the chain's exact p(x_H | x_V)
    (forward filtering, backward sampling: the final α, then each summed-out table given the later bases)."""
    rng = rng if rng is not None else np.random.default_rng()
    k, tabs, codes, hidden, ctx = _prepare(chain, codes, hidden)
    out = np.repeat(codes[None, :], num, axis=0)
    if not hidden.any():
        return out
    _, drops, (active, alpha) = _walk(k, tabs, codes, hidden, ctx, keep=True)
    if active:
        out[:, active] = _digits(_draw(np.repeat(alpha[:, None], num, axis=1), rng), len(active))
    for gone, rest, table in reversed(drops):  # the rest were drawn already (later drops or the final α)
        col = np.zeros(num, dtype=np.int64)
        for p in rest:
            col = col * 4 + out[:, p]
        out[:, gone] = _digits(_draw(table[:, col], rng), len(gone))
    return out


def model_chain(model, label: int | str | None = None):
    """The MarkovChain of a loaded Markov model directory (`markov`, or `markov_classes` with its class `label`,
    None: the pooled chain)."""
    from dnadiff.backbones.markov import MarkovChain
    from dnadiff.backbones.markov_classes import ClassMarkovChains

    backbone = model.backbone
    if isinstance(backbone, MarkovChain):
        if label is not None:
            raise DnadiffError("this Markov chain is not class-conditional")
        return backbone
    if not isinstance(backbone, ClassMarkovChains):
        raise DnadiffError("markov infill needs a Markov chain model (backbone markov or markov_classes)")
    chains = backbone.chains
    if label is None:
        return chains[-1]
    from dnadiff.data.class_names import class_position

    names = list(model.config.model.class_names)
    position = class_position(label, names) if isinstance(label, str) else None  # hESC or hESCT0
    index = position if position is not None else int(label)
    if not 0 <= index < len(chains) - 1:
        raise DnadiffError(f"class {label!r}: this model has classes {', '.join(names) or len(chains) - 1}")
    return chains[index]


__all__ = ["chain_tables", "conditional_nll", "model_chain", "sample_hidden"]
