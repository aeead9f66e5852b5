"""Classifier-based guidance for uniform-noise diffusion (D-CBG, Schiff et al. 2024, arXiv 2412.10193, §3.2;
the reference's `_cbg_denoise` for diffusion == 'uniform'), as posterior hooks of the `udlm` sampler.

The guided reverse step, per position l and data token v,

    p^γ(z_s^l = v | z_t, y) ∝ p_θ(z_s^l = v | z_t) · p_φ(y | z_t^{l←v})^γ,

where z_t^{l←v} is z_t with position l set to v (v = z_t^l: z_t itself). Unlike masked diffusion every free
position is reweighted at every step (uniform noise can still change it). For the exact version the
classifier scores all L × N single-token changes (`exact_uniform_tilt`; N = 4 for DNA); the first-order one
replaces log p_φ(y | z_t^{l←v}) - log p_φ(y | z_t) by ∂f/∂onehot[l, v] - ∂f/∂onehot[l, z_t^l] with
f = reward.soft(onehot(z_t)) (`gradient_uniform_tilt`, Nisonoff et al. 2024 §4.1). With an exact
noise-aware classifier p(y | z_t) and γ = 1 the guided process samples p(x | y) as the steps grow
(tests/test_udlm_exact.py).

A reward that declares `takes_time = True` is called as reward(x, t) with the rows' current times t (a
noise-aware classifier p_φ(y | z_t, t), as the reference's classifier, which is called at σ(t)); any other
reward as reward(x) (then the tilt is exp(γ r) of the noisy sequence). A time-taking reward is still called
as reward(x) on the finished, clean designs (their score): t None there means t = 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.subs import NEG_INF
from dnadiff.guidance.rewards import reward_capabilities


def _reward_rows(reward, x: Tensor, t: Tensor | None, chunk: int) -> Tensor:
    timed = reward_capabilities(reward).takes_time
    out = []
    for i in range(0, x.shape[0], chunk):
        part = x[i : i + chunk]
        r = reward(part, t[i : i + chunk]) if timed else reward(part)
        out.append(torch.as_tensor(r, dtype=torch.float64, device=x.device).reshape(-1))
    return torch.cat(out)


def exact_uniform_tilt(log_post: Tensor, x: Tensor, free: Tensor, data_ids: Tensor, reward, scale: float,
                       t: Tensor | None = None, chunk: int = 4096) -> tuple[Tensor, int]:
    """(guided log p(z_s | z_t) Float64[B, L, N], reward rows used). log_post: Float64[B, L, N] over the data
    tokens; x: Long[B, L] = z_t; free: Bool[B, L] positions the sampler may change (others untouched);
    t: Float[B] the rows' times (for a reward with `takes_time`)."""
    ids = data_ids.to(x.device)
    N = ids.numel()
    b, l = free.nonzero(as_tuple=True)  # (P,)
    if b.numel() == 0:
        return log_post, 0
    cand = x[b].repeat_interleave(N, dim=0)  # (P·N, L)
    cand[torch.arange(cand.shape[0], device=x.device), l.repeat_interleave(N)] = ids.repeat(b.numel())
    rows_t = None if t is None else t[b].repeat_interleave(N)
    scores = _reward_rows(reward, cand, rows_t, chunk).view(-1, N)  # (P, N): log p(y | z_t^{l←v})
    shift = torch.zeros_like(log_post)
    shift[b, l] = scale * (scores - scores.max(dim=1, keepdim=True).values)  # a per-position constant drops out
    return (log_post + shift).clamp_min(NEG_INF).log_softmax(dim=-1), int(cand.shape[0])


def gradient_uniform_tilt(log_post: Tensor, x: Tensor, free: Tensor, data_ids: Tensor, reward, scale: float,
                          vocab_size: int) -> Tensor:
    """Guided log p(z_s | z_t) Float64[B, L, N] with the first-order shift ∂f/∂onehot[l, v] - ∂f/∂onehot[l, z_t^l]."""
    ids = data_ids.to(x.device)
    with torch.enable_grad():
        onehot = torch.nn.functional.one_hot(x, vocab_size).double().requires_grad_(True)  # (B, L, V)
        (grad,) = torch.autograd.grad(reward.soft(onehot).sum(), onehot)
    g = grad[..., ids]  # (B, L, N)
    cur = grad.gather(-1, x.unsqueeze(-1))  # (B, L, 1): the current token's entry
    shift = torch.where(free.unsqueeze(-1), scale * (g - cur), torch.zeros_like(g))
    return (log_post + shift).clamp_min(NEG_INF).log_softmax(dim=-1)


__all__ = ["exact_uniform_tilt", "gradient_uniform_tilt"]
