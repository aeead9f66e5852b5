"""Absorbing-state D3PM (Austin et al. 2021) discrete-time bound, for the ablation of tab. 8.

x0-parameterisation of D3PM (their eq. 4): p_θ(z_s | z_t) ∝ Σ_x' q(z_t | z_s) q(z_s | x') x_θ(x'),
with x_θ a softmax over the whole vocabulary, mask included. For the absorbing process
(q(z_t | x) = α_t x + (1 - α_t) m) and a masked z_t this gives, with x_m = x_θ(mask),
    p_θ(z_s = v) = (α_s - α_t) x_θ(v) / Z,   p_θ(z_s = m) = ((1 - α_s)(1 - x_m) + x_m) / Z,
    Z = 1 - α_t + α_t x_m,
and the true posterior puts a = (α_s - α_t)/(1 - α_t) on x0 and b = (1 - α_s)/(1 - α_t) on m, so
    KL = a [log(1 + α_t x_m/(1 - α_t)) - log x_θ(x0)]
       + b [log(1 + α_t x_m/(1 - α_t)) - log(1 + α_s x_m/(1 - α_s))]
(the reference `_d3pm_loss` is this with α = 1 - t). At unmasked z_t the model's step is
forced to copy the token, so the KL is 0 whatever x_θ says there. Full bound:
    -log p(x) <= -log p_θ(x | z_0 = x)  [reconstruction]  + T E_{i ~ U{1..T}} KL_i  (+ prior KL,
0 when α_1 = 0; ignored like the reference).

Switches (tab. 8, "w/o carry-over", "w/o zero masking"):
  zero_masking: x_θ(m) = 0 (SUBS's first half); then the b term vanishes;
  carry_over:   p_θ(x | z_0 = x) = 1 (SUBS's second half); then the reconstruction term is 0.
With both on this is exactly MDLM with the same T.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective, gather_token
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError


def d3pm_log_probs(logits: Tensor, mask_id: int, zero_masking: bool) -> Tensor:
    """log x_θ: log-softmax over the vocabulary; with zero_masking the mask logit gets NEG_INF."""
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits.clone()
    if zero_masking:
        logits[..., mask_id] += NEG_INF
    return logits.log_softmax(dim=-1)  # (B, L, V)


@OBJECTIVES.register("d3pm")
class D3PMObjective(DiffusionObjective):
    """`build_objective("d3pm", schedule=s, mask_id=3, T=1000, carry_over=False, zero_masking=False)`."""

    name = "d3pm"
    discrete_bound = True

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None, t_min=1e-3, stratified=True,
                 carry_over: bool = False, zero_masking: bool = False, pad_policy: str = "reference"):
        if T is None:
            raise DnadiffError("objective 'd3pm' is discrete-time: set T (e.g. T=1000)")
        super().__init__(schedule, mask_id, vocab_size, T, t_min, stratified, pad_policy)
        self.carry_over = bool(carry_over)
        self.zero_masking = bool(zero_masking)

    def token_loss(self, denoiser, x0: Tensor, x_t: Tensor, t: Tensor, real: Tensor) -> Tensor:
        log_x = d3pm_log_probs(denoiser(x_t, t), self.mask_id, self.zero_masking)  # (B, L, V)
        log_x0 = gather_token(log_x, x0)  # (B, L)
        x_m = log_x[..., self.mask_id].exp().double()  # (B, L)
        t64 = t.double()[:, None]  # (B, 1)
        s64 = (t64 - 1.0 / self.T).clamp_min(0.0)
        a_t, a_s = self.schedule.alpha(t64), self.schedule.alpha(s64)
        m_t, m_s = self.schedule.mask_prob(t64), self.schedule.mask_prob(s64)  # 1 - α
        a = (m_t - m_s) / m_t
        b = m_s / m_t
        log_z = torch.log1p(a_t * x_m / m_t)  # log(Z / (1 - α_t))
        # b = 0 on the first step (α_0 = 1): guard the 0/0 in its log term
        term_b = torch.where(b > 0, b * (log_z - torch.log1p(a_s * x_m / m_s.clamp_min(1e-300))), torch.zeros_like(b))
        kl = a * (log_z - log_x0.double()) + term_b  # (B, L)
        return (self.T * kl).to(log_x0.dtype)

    def extra_nll(self, denoiser, x0: Tensor, real: Tensor) -> Tensor | None:
        """Reconstruction -log p_θ(x0 | z_0 = x0), summed over the counted tokens (`real`: the
        pad policy's set); 0 with carry-over."""
        if self.carry_over:
            return None
        t0 = torch.zeros(x0.shape[0], device=x0.device)
        log_x = d3pm_log_probs(denoiser(x0, t0), self.mask_id, self.zero_masking)  # (B, L, V)
        nll_tok = -gather_token(log_x, x0)  # (B, L)
        return torch.where(real, nll_tok, torch.zeros_like(nll_tok)).sum(dim=1)
