"""Conditional NLL of hidden bases given the rest of a window: the infilling scores of issue 47.

    hidden = hidden_mask("span32", real)                               # Bool[B, L]: what is hidden
    nats, n = conditional_nelbo(denoiser, objective, x0, hidden)       # MDLM: the conditional bound
    nats, n = ordered_conditional_nll(denoiser, x0, hidden, mask_id)   # MDLM: exact, one decoding order
    nats, n = ar_left_nll(denoiser, ar_objective, x0, hidden)          # AR: the span given its left flank
    nats, n = markov_conditional_nll(chain, x0, hidden)                # Markov-k: exact, both flanks

Each returns (nats Float64[B], hidden bases Float64[B]) per window, the per-window keys eval/paired.py pairs.

MDLM conditional NELBO. The masked-diffusion bound (MDLM, Sahoo et al. 2024, eq. 10-11: NELBO = E_t E_q
[w(t) Σ_{masked l} -log p_θ(x0^l | x_t)], w(t) = -α'_t / (1 - α_t)) with the forward process run on the hidden
positions only: the visible bases are clean at every t, as they are in the reverse process that fills the gap
(the sampler's template). The derivation of eq. 10-11 goes through unchanged for that process (its prior at
t = 1 is "hidden all masked, visible given"), so the estimate bounds -log p_θ(x_H | x_V) of that sampler, and
with an exact denoiser and ε → 0 it equals -log p(x_H | x_V) (the random-order AO-ARM identity of Ou et al.
2024, arXiv 2406.03736, on the hidden set; tests/test_infill_nll.py checks both by enumeration). It is the
objective's own loss with the hidden positions as the only maskable and counted ones (pad_policy "visible",
diffusion/base.py), so the weights and schedule are those of `dnadiff eval`; the times are drawn per window
(stratified over its `num_samples` draws), so each window's value is an unbiased estimate, not only their mean.

Block diffusion (bd3lm) conditional NELBO: the same call on a bd3lm model. Its bound is a sum over blocks, each
block's term conditioned on the clean blocks before it, so with the hidden positions as the only maskable ones it
bounds Σ_b -log p_θ(x_{H∩b} | x^{<b}, x_{V∩b}): each block's hidden bases given everything to its left and the
visible bases of its own block (the block sampler with the visible bases as a template). Visible bases in later
blocks are not read: B = L is MDLM's two-flank conditional, B = 1 the AR's left-only NLL of the hidden bases
(tests/test_block_diffusion.py checks the identity by enumeration).

MDLM ordered conditional NLL. Decoding the hidden positions in a fixed order (left to right over the hidden
set by default) with the same conditionals is a normalised distribution whose exact NLL eval/ordered_nll.py
computes: one denoiser call per hidden base (the visible ones are never masked).

AR left-only. A left-to-right model cannot read the right flank: -Σ_{i ∈ span} log p(x_i | x_<i), what an AR
user gets for a contiguous span (for scattered masks it is no conditional of the hidden set: not offered).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.eval.ordered_nll import ordered_nll

MASKS = ("span8", "span32", "span96", "random15", "random50")
CONTIGUOUS = ("span8", "span32", "span96")
INFILL_MASKS, CONTIGUOUS_MASKS = MASKS, CONTIGUOUS  # the names dnadiff.eval exports


def hidden_mask(kind: str, real: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Bool[B, L]: the hidden positions of each window (`real`: Bool[B, L] its A/C/G/T positions; an N is never
    hidden). spanN: the N positions centred in the window (L//2 - N//2 ...), minus any N base in them;
    randomP: round(P % of the window's real bases), drawn uniformly without replacement."""
    real = real.bool()
    B, L = real.shape
    if kind.startswith("span") and kind[4:].isdigit():
        n = int(kind[4:])
        if not 0 < n <= L:
            raise DnadiffError(f"mask {kind}: the span must fit the window of {L}")
        start = L // 2 - n // 2
        hidden = torch.zeros_like(real)
        hidden[:, start : start + n] = True
        return hidden & real
    if kind.startswith("random") and kind[6:].isdigit():
        frac = int(kind[6:]) / 100.0
        if not 0 < frac < 1:
            raise DnadiffError(f"mask {kind}: the percentage must be in 1..99")
        keys = torch.rand(B, L, generator=generator, dtype=torch.float64).to(real.device)
        keys = torch.where(real, keys, torch.full_like(keys, math.inf))  # N: never drawn
        ranks = keys.argsort(dim=1).argsort(dim=1)
        want = torch.round(real.sum(dim=1).double() * frac).long()  # (B,)
        return real & (ranks < want[:, None])
    raise DnadiffError(f"mask {kind!r}: expected spanN or randomP (e.g. {', '.join(MASKS)})")


def _check(x0: Tensor, hidden: Tensor) -> Tensor:
    if hidden.shape != x0.shape:
        raise DnadiffError(f"hidden mask shape {tuple(hidden.shape)} != windows {tuple(x0.shape)}")
    return hidden.to(device=x0.device, dtype=torch.bool)


def conditional_nelbo(denoiser, objective, x0: Tensor, hidden: Tensor, num_samples: int = 1,
                      generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """(nats Float64[B], hidden Float64[B]): the MDLM conditional NELBO of each window's hidden bases (module
    docstring), averaged over `num_samples` independent (t, mask) draws of the objective's own sampler."""
    if objective.noise not in ("mask", "block") or not objective.needs_time:  # declared by every Objective
        raise DnadiffError(f"a conditional NELBO needs a masked (or block) diffusion objective, not "
                           f"{objective.name!r}")
    if num_samples < 1:
        raise DnadiffError(f"num_samples must be >= 1, got {num_samples}")
    hidden = _check(x0, hidden)
    visible_policy = copy.copy(objective)
    visible_policy.pad_policy = "visible"  # the hidden set is the only maskable and counted one
    nats = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
    gen_device = generator.device if generator is not None else "cpu"
    for k in range(num_samples):
        # each window's own times, stratified over its num_samples draws (app. D.3's sampler, per window): the
        # objective's batch-stratified draw would give window i the stratum i/B every time, an unbiased batch
        # mean but a biased per-window value, and the windows are what eval/paired.py pairs
        u = (torch.rand(x0.shape[0], generator=generator, dtype=torch.float64, device=gen_device) + k) / num_samples
        t = u if objective.T is not None else objective.t_min + (1.0 - objective.t_min) * u  # snapped by loss
        out = visible_policy.loss(denoiser, x0, hidden.long(), t=t.to(x0.device), generator=generator)
        nats += out.nll.double()
    return nats / num_samples, hidden.sum(dim=1).double()


def ordered_conditional_nll(denoiser, x0: Tensor, hidden: Tensor, mask_id: int, order: str = "left_to_right",
                            generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """(nats Float64[B], hidden Float64[B]): exact -log p_σ(x_H | x_V) of decoding the hidden set in `order`."""
    return ordered_nll(denoiser, x0, mask_id, _check(x0, hidden).long(), order, generator)


def ar_left_nll(denoiser, objective, x0: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
    """(nats Float64[B], hidden Float64[B]): -Σ_{i hidden} log p(x_i | x_<i) of a left-to-right model (with its
    [BOS] context: every hidden base is scored); a contiguous span: the span given its left flank."""
    if not objective.autoregressive:
        raise DnadiffError(f"a left-only NLL needs an autoregressive model, not {objective.name!r}")
    if getattr(objective, "bos_id", None) is None:
        raise DnadiffError("a left-only NLL needs an AR model with a [BOS] context (every base scored)")
    hidden = _check(x0, hidden)
    out = objective.loss(denoiser, x0, hidden.long())
    return out.nll.double(), hidden.sum(dim=1).double()


def markov_conditional_nll(chain, x0: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
    """(nats Float64[B], hidden Float64[B]): the chain's exact -log p(x_H | x_V) (eval/markov_infill.py) per window;
    `chain` a MarkovChain or its `chain_tables(chain)` (building the tables of an order-9 chain takes seconds:
    callers scoring many batches pass them)."""
    from dnadiff.backbones.markov import base_codes
    from dnadiff.eval.markov_infill import chain_tables, conditional_nll

    hidden = _check(x0, hidden)
    tables = chain if isinstance(chain, tuple) else chain_tables(chain)
    codes = base_codes(x0.cpu().numpy())
    mask = hidden.cpu().numpy()
    nats = np.array([conditional_nll(tables, codes[b], mask[b]) for b in range(x0.shape[0])])
    return torch.as_tensor(nats, dtype=torch.float64), hidden.sum(dim=1).double().cpu()


__all__ = [
    "CONTIGUOUS",
    "CONTIGUOUS_MASKS",
    "INFILL_MASKS",
    "MASKS",
    "ar_left_nll",
    "conditional_nelbo",
    "hidden_mask",
    "markov_conditional_nll",
    "ordered_conditional_nll",
]
