"""A tiny explicit data distribution and its exact denoiser, for testing objectives and samplers.

    den = ExactDenoiser.random(length=3, real_ids=(0, 1, 2), mask_id=3, vocab_size=4, seed=0)
    logits = den(x_t, t)            # Float64[B, L, V]: log p(x0^l = v | x_t), exact
    den.log_prob(x0)                # Float64[B]: exact log p(x0)
    den.sample(n, generator)        # Long[n, L]: exact draws from p
    den.as_sedd()                   # logits that make the SEDD score exact (log p + log(V-1))

The distribution puts explicit probabilities on all |real_ids|^L sequences (correlated across
positions, so a per-position model cannot fit it). For a partly masked x_t,
    p(x0^l = v | x_t) = Σ_{x consistent with x_t, x^l = v} p(x) / Σ_{x consistent with x_t} p(x),
where "consistent" means x agrees with x_t at every unmasked position. At unmasked positions
this is a point mass on the observed token. Impossible entries (the mask, ids outside real_ids)
get log-probability `LOG_FLOOR` (finite, so arithmetic stays NaN-free; its mass is e^-69 ≈ 1e-30).
The denoiser ignores t: the true p(x0 | x_t) of a masked diffusion does not depend on t.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import torch
from torch import Tensor

LOG_FLOOR = math.log(1e-30)


class ExactDenoiser:
    """Explicit p over `sequences` (Long[N, L]) with probabilities `probs` (Float[N], sums to 1)."""

    def __init__(self, sequences: Tensor, probs: Tensor, mask_id: int, vocab_size: int):
        probs = probs.double()
        if sequences.ndim != 2 or probs.shape != (sequences.shape[0],):
            raise ValueError("sequences must be [N, L] and probs [N]")
        if not torch.isclose(probs.sum(), torch.tensor(1.0, dtype=torch.float64)):
            raise ValueError("probs must sum to 1")
        self.sequences = sequences.long()
        self.probs = probs
        self.mask_id = int(mask_id)
        self.vocab_size = int(vocab_size)
        self.length = sequences.shape[1]
        self._onehot = torch.nn.functional.one_hot(self.sequences, vocab_size).double()  # (N, L, V)

    @classmethod
    def random(
        cls,
        length: int = 3,
        real_ids: Sequence[int] = (0, 1, 2),
        mask_id: int = 3,
        vocab_size: int = 4,
        seed: int = 0,
        temperature: float = 1.5,
    ) -> "ExactDenoiser":
        """All |real_ids|^length sequences, p ∝ exp(temperature · N(0, 1)) (seeded)."""
        seqs = torch.tensor(list(itertools.product(list(real_ids), repeat=length)), dtype=torch.long)  # (N, L)
        g = torch.Generator().manual_seed(seed)
        energy = torch.randn(seqs.shape[0], generator=g, dtype=torch.float64) * temperature
        return cls(seqs, energy.softmax(0), mask_id, vocab_size)

    # -- the distribution ---------------------------------------------------------------------
    def _index(self, x0: Tensor) -> Tensor:
        """Long[B]: row of each x0 in `sequences` (-1 if absent)."""
        match = (x0.cpu()[:, None, :] == self.sequences[None]).all(-1)  # (B, N)
        idx = torch.where(match.any(1), match.float().argmax(1), torch.full((x0.shape[0],), -1))
        return idx

    def prob(self, x0: Tensor) -> Tensor:
        """Float64[B]: p(x0) (0 for sequences outside the support)."""
        idx = self._index(x0)
        p = torch.where(idx >= 0, self.probs[idx.clamp_min(0)], torch.zeros_like(self.probs[:1]))
        return p.to(x0.device)

    def log_prob(self, x0: Tensor) -> Tensor:
        """Float64[B]: log p(x0)."""
        return self.prob(x0).log()

    def entropy(self) -> float:
        """H(p) in nats."""
        return float(-(self.probs * self.probs.log()).sum())

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """Long[n, L] exact draws from p."""
        idx = torch.multinomial(self.probs, n, replacement=True, generator=generator)
        return self.sequences[idx].clone()

    # -- the denoiser -------------------------------------------------------------------------
    def conditional_probs(self, x_t: Tensor) -> Tensor:
        """Float64[B, L, V]: p(x0^l = v | x_t) (rows sum to 1)."""
        xt = x_t.cpu().long()
        agree = (xt[:, None, :] == self.mask_id) | (xt[:, None, :] == self.sequences[None])  # (B, N, L)
        weight = agree.all(-1).double() * self.probs[None]  # (B, N): p(x) 1[x consistent with x_t]
        total = weight.sum(1, keepdim=True)  # (B, 1)
        if torch.any(total == 0):
            raise ValueError("x_t is inconsistent with every sequence of the distribution")
        cond = torch.einsum("bn,nlv->blv", weight / total, self._onehot)  # (B, L, V)
        return cond.to(x_t.device)

    def __call__(self, x_t: Tensor, t: Tensor | None = None) -> Tensor:
        """Float64[B, L, V] logits = log p(x0^l = v | x_t), floored at LOG_FLOOR."""
        return self.conditional_probs(x_t).clamp_min(1e-30).log()

    def as_sedd(self) -> Callable[[Tensor, Tensor], Tensor]:
        """Denoiser whose logits make SEDD's score exact: log p(v | x_t) + log(V - 1)."""
        shift = math.log(self.vocab_size - 1)
        return lambda x_t, t=None: self(x_t, t) + shift


def mask_patterns(length: int) -> Tensor:
    """Bool[2^L, L]: every subset of positions."""
    return torch.tensor(list(itertools.product([False, True], repeat=length)), dtype=torch.bool)


def expected_token_loss(objective, denoiser, x0: Tensor, t) -> Tensor:
    """Float64[B] (or [K, B] for K times): E_{x_t ~ q(.|x0, t)}[Σ_l token_loss] exactly, by
    enumerating the 2^L mask patterns in one batched call (x0 without pads; `objective` a
    DiffusionObjective with `token_loss`)."""
    ts = torch.as_tensor(t, dtype=torch.float64).reshape(-1)  # (K,)
    B, L = x0.shape
    pats = mask_patterns(L)[1:]  # (P, L), the empty pattern contributes 0
    K, P = len(ts), len(pats)
    k = pats.sum(1).double()  # (P,)
    m = objective.schedule.mask_prob(ts)[:, None]  # (K, 1)
    p_pat = m**k * (1.0 - m) ** (L - k)  # (K, P)
    x_t = torch.where(pats[:, None], torch.full_like(x0, objective.mask_id), x0)  # (P, B, L)
    xt_all = x_t[None].expand(K, P, B, L).reshape(-1, L)
    x0_all = x0[None, None].expand(K, P, B, L).reshape(-1, L)
    t_all = ts.float()[:, None, None].expand(K, P, B).reshape(-1)
    real = torch.ones_like(x0_all, dtype=torch.bool)
    per_tok = objective.token_loss(denoiser, x0_all, xt_all, t_all, real).double()  # (KPB, L)
    per_tok = per_tok.reshape(K, P, B, L)
    sel = pats[None, :, None, :]  # (1, P, 1, L)
    seq = torch.where(sel, per_tok, torch.zeros_like(per_tok)).sum(-1)  # (K, P, B)
    out = (p_pat[..., None] * seq).sum(1)  # (K, B)
    return out[0] if torch.as_tensor(t).ndim == 0 else out


def exact_discrete_bound(objective, denoiser, x0: Tensor) -> Tensor:
    """Float64[B]: the exact expected discrete-time bound Σ_i KL_i (+ reconstruction) of a
    discrete objective (T set): mean over the T grid points of the T-scaled term, all masks."""
    T = objective.T
    grid = [i / T for i in range(1, T + 1)]
    total = expected_token_loss(objective, denoiser, x0, grid).mean(0)
    extra = objective.extra_nll(denoiser, x0, torch.ones_like(x0, dtype=torch.bool))
    return total + (0.0 if extra is None else extra.double())


def masked_ce_table(den: ExactDenoiser) -> tuple[Tensor, Tensor]:
    """(S Float64[N, P], k Float64[P]) over all support sequences x0 and mask patterns:
    S = Σ over masked positions of -log p(x0^l | x_t) (SUBS), k = number of masked positions.
    The exact denoiser ignores t, so S does not depend on t."""
    from dnadiff.diffusion.subs import subs_log_probs

    pats = mask_patterns(den.length)  # (P, L)
    x0 = den.sequences  # (N, L)
    S = torch.zeros(x0.shape[0], pats.shape[0], dtype=torch.float64)
    for j, pat in enumerate(pats):
        x_t = torch.where(pat[None], torch.full_like(x0, den.mask_id), x0)
        lp = subs_log_probs(den(x_t), x_t, den.mask_id).gather(-1, x0[..., None]).squeeze(-1)  # (N, L)
        S[:, j] = torch.where(pat[None], -lp, torch.zeros_like(lp)).sum(1)
    return S, pats.sum(1).double()


def nelbo_moments(den: ExactDenoiser, schedule, t_min: float, n_nodes: int = 200) -> tuple[Tensor, Tensor]:
    """Exact mean and variance (Float64[N] each, per support sequence) of the continuous MDLM
    estimator Z = w(t) Σ_masked -log p(x0^l | x_t) with t ~ U[t_min, 1] (the objective's
    convention: no (1 - t_min) rescaling) and x_t ~ q(. | x0, t): masks enumerated, t integrated
    by Gauss-Legendre in u = log t (the natural scale of the 1/t weight)."""
    import numpy as np

    S, k = masked_ce_table(den)  # (N, P), (P,)
    L = den.length
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    lo = math.log(t_min)
    u = torch.tensor(0.5 * (nodes + 1) * (0.0 - lo) + lo, dtype=torch.float64)
    t = u.exp()
    dens = torch.tensor(0.5 * weights * (0.0 - lo), dtype=torch.float64) * t / (1.0 - t_min)  # dt / (1 - t_min)
    m = schedule.mask_prob(t)  # (Q,)
    w = schedule.loss_weight(t)  # (Q,)
    p_pat = m[:, None] ** k[None] * (1 - m[:, None]) ** (L - k[None])  # (Q, P)
    m1 = torch.einsum("q,q,qp,np->n", dens, w, p_pat, S)
    m2 = torch.einsum("q,q,qp,np->n", dens, w**2, p_pat, S**2)
    return m1, m2 - m1**2
