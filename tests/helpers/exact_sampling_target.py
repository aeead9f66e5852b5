"""A tiny known distribution over short sequences and its exact conditional denoiser.

x0 ~ p over all sequences of length L over `n_real` real tokens (ids 0..n_real-1); the mask id is
n_real. The exact denoiser returns, at every position i,

    logits[b, i, v] = log p(x0_i = v | the unmasked tokens of x_t[b])

computed by enumerating all n_real^L sequences (the mask column gets -1e6). It ignores t
(`time_conditioned = False`) and counts its calls. With it, an exact sampler reproduces p.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from torch import Tensor


def all_sequences(n_real: int, length: int) -> Tensor:
    """Long[n_real^L, L] in lexicographic order (index = base-n_real number)."""
    return torch.tensor(list(itertools.product(range(n_real), repeat=length)), dtype=torch.long)


def seq_index(x: Tensor, n_real: int) -> Tensor:
    """Row index of each sequence of Long[B, L] in `all_sequences` order."""
    L = x.shape[1]
    powers = n_real ** torch.arange(L - 1, -1, -1, device=x.device)
    return (x * powers).sum(dim=1)


def random_joint(n_real: int, length: int, seed: int = 0, concentration: float = 0.7) -> Tensor:
    """A correlated (non-product) distribution: Dirichlet weights over all sequences."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(n_real**length, concentration))
    p = np.maximum(p, 1e-3)  # every cell has some mass, so chi-square cells are not empty
    return torch.tensor(p / p.sum(), dtype=torch.float64)


def product_joint(marginals: list[list[float]]) -> Tensor:
    """Independent positions with the given per-position marginals."""
    p = torch.tensor([1.0])
    for m in marginals:
        p = torch.outer(p, torch.tensor(m, dtype=torch.float64)).flatten()
    return p.double() / p.sum()


def markov_joint(init: list[float], trans: list[list[float]], length: int) -> Tensor:
    """p(x) = init[x0] prod trans[x_{i-1}, x_i] over all sequences of the given length."""
    n = len(init)
    seqs = all_sequences(n, length)
    init_t = torch.tensor(init, dtype=torch.float64)
    trans_t = torch.tensor(trans, dtype=torch.float64)
    p = init_t[seqs[:, 0]]
    for i in range(1, length):
        p = p * trans_t[seqs[:, i - 1], seqs[:, i]]
    return p / p.sum()


class ExactDenoiser:
    """Exact p(x0_i | unmasked tokens of x_t) for the joint `probs` over `all_sequences`."""

    time_conditioned = False

    def __init__(self, probs: Tensor, n_real: int, length: int):
        self.probs = probs.double()
        self.n_real, self.length = n_real, length
        self.mask_id = n_real
        self.vocab_size = n_real + 1
        self.seqs = all_sequences(n_real, length)  # (N, L)
        self.calls = 0

    def posterior(self, x_t: Tensor) -> Tensor:
        """Float64[B, N]: p(x0 = seq_n | x_t) over all sequences."""
        visible = x_t != self.mask_id  # (B, L)
        agree = (x_t.unsqueeze(1) == self.seqs.unsqueeze(0)) | ~visible.unsqueeze(1)  # (B, N, L)
        w = self.probs.unsqueeze(0) * agree.all(dim=-1)  # (B, N)
        return w / w.sum(dim=-1, keepdim=True)

    def exact_logits(self, x_t: Tensor) -> Tensor:
        """Float64[B, L, V] log p(x0_i = v | x_t) by enumeration (mask column -1e6)."""
        post = self.posterior(x_t)  # (B, N)
        onehot = torch.nn.functional.one_hot(self.seqs, self.vocab_size).double()  # (N, L, V)
        marg = torch.einsum("bn,nlv->blv", post, onehot)  # (B, L, V)
        logits = torch.where(marg > 0, marg.clamp_min(1e-300).log(), torch.full_like(marg, -1e6))
        logits[..., self.mask_id] = -1e6
        return logits

    def _table(self) -> Tensor:
        """Logits of every possible x_t ((n_real+1)^L states), computed once."""
        if getattr(self, "_cache", None) is None:
            states = all_sequences(self.vocab_size, self.length)  # includes the mask id
            self._cache = self.exact_logits(states).float()  # (S, L, V)
        return self._cache

    def __call__(self, x_t: Tensor, t: Tensor) -> Tensor:
        self.calls += 1
        if self.vocab_size**self.length <= 50_000:
            return self._table()[seq_index(x_t, self.vocab_size)]
        return self.exact_logits(x_t).float()


def chi_square_pvalue(samples: Tensor, probs: Tensor, n_real: int, min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness of fit of sequences Long[S, L] to `probs`; small cells pooled."""
    from scipy.stats import chi2

    idx = seq_index(samples, n_real)
    counts = torch.bincount(idx, minlength=probs.numel()).double()
    expected = probs * samples.shape[0]
    if bool((counts[expected == 0] > 0).any()):
        return 0.0  # a sample the distribution cannot produce
    big = expected >= min_expected
    small = (~big) & (expected > 0)
    obs, exp = counts[big], expected[big]
    if bool(small.any()):
        obs = torch.cat([obs, counts[small].sum().view(1)])
        exp = torch.cat([exp, expected[small].sum().view(1)])
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = obs.numel() - 1
    return float(chi2.sf(stat, dof)) if dof > 0 else 1.0


def conditional(probs: Tensor, n_real: int, length: int, template: Tensor, mask_id: int) -> Tensor:
    """p restricted to the sequences agreeing with the fixed tokens of `template` [L], renormalised."""
    seqs = all_sequences(n_real, length)
    fixed = template != mask_id
    ok = ((seqs == template) | ~fixed).all(dim=1)
    p = probs * ok
    return p / p.sum()


def mdlm_kernel(marg: Tensor, states: Tensor, mask_id: int, a_t: float, a_s: float) -> Tensor:
    """Per-position next-state probabilities [S, L, V] of the MDLM reverse step (eq. 7, SUBS)."""
    K = marg * (a_s - a_t) / (1 - a_t)
    K[..., mask_id] = (1 - a_s) / (1 - a_t)
    onehot = torch.nn.functional.one_hot(states, marg.shape[-1]).double()
    return torch.where((states != mask_id).unsqueeze(-1), onehot, K)


def remdm_kernel(kind: str, eta: float):
    """ReMDM (arXiv 2503.00307, eq. 7) kernel factory, written independently of the sampler."""

    def kernel(marg, states, mask_id, a_t, a_s):
        smax = min(1.0, (1 - a_s) / a_t)
        sig = min(eta, smax) if kind == "cap" else eta * smax
        K = marg * (a_s - (1 - sig) * a_t) / (1 - a_t)
        K[..., mask_id] = (1 - a_s - sig * a_t) / (1 - a_t)
        onehot = torch.nn.functional.one_hot(states, marg.shape[-1]).double()
        dec = onehot * (1 - sig)
        dec[..., mask_id] += sig
        return torch.where((states != mask_id).unsqueeze(-1), dec, K)

    return kernel


def chain_distribution(den: "ExactDenoiser", alphas: list[float], kernel=mdlm_kernel) -> Tensor:
    """Exact law of the final state of a grid sampler (all (n_real+1)^L states enumerated).

    Starting from the all-mask state, applies per-position independent transitions
    kernel(marg, states, mask_id, α_t, α_s) with the exact marginals; returns probabilities over
    `all_sequences(n_real, L)` after a final argmax fill of leftover masks (mass ~ 1e-5).
    """
    V, L, m = den.vocab_size, den.length, den.mask_id
    states = all_sequences(V, L)  # (S, L)
    marg = den.exact_logits(states).exp()  # (S, L, V)
    marg[..., m] = 0.0
    dist = torch.zeros(states.shape[0], dtype=torch.float64)
    dist[seq_index(torch.full((1, L), m), V)] = 1.0
    for a_t, a_s in zip(alphas[:-1], alphas[1:]):
        K = kernel(marg.clone(), states, m, float(a_t), float(a_s))  # (S, L, V)
        T = torch.ones(states.shape[0], states.shape[0], dtype=torch.float64)
        for i in range(L):
            T = T * K[:, i, states[:, i]]  # (S, S')
        dist = dist @ T
    fill = torch.where(states == m, marg.argmax(dim=-1), states)  # argmax noise removal
    out = torch.zeros(den.n_real**L, dtype=torch.float64)
    out.index_add_(0, seq_index(fill, den.n_real), dist)
    return out


__all__ = [
    "mdlm_kernel",
    "remdm_kernel",
    "chain_distribution",
    "ExactDenoiser",
    "all_sequences",
    "seq_index",
    "random_joint",
    "product_joint",
    "markov_joint",
    "chi_square_pvalue",
    "conditional",
]
