"""`first_hitting`: the first-hitting sampler of Zheng et al. 2024 (arXiv 2409.02908, §3, alg. 1).

Instead of stepping a time grid, draw the exact time at which the next token is unmasked.
Going backwards from t with n masked tokens, each masked token's unmasking time τ has
P(τ ≤ s | τ ≤ t) = (1 - α_s)/(1 - α_t) independently, so the next event is at the largest:

    1 - α_s = (1 - α_t) · u^{1/n},   u ~ U(0, 1)

and the token that unmasks is uniform among the masked positions; its value is drawn from
p_θ(x0 | x_t). One denoiser call per unmasked token: NFE ≤ L (fewer with a template). Exact for
the model (no simultaneous-unmasking factorisation error), at any `steps` (ignored here).

s is found by bisection on the schedule's α (any monotone schedule), in float64, per sequence; a
time-conditioned denoiser receives the time of the state it is shown.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.samplers.base import SAMPLERS, Sampler


def invert_mask_prob(schedule, target: Tensor, iters: int = 60) -> Tensor:
    """t ∈ [0, 1] with 1 - α(t) = target (Float64[B]), by bisection (1 - α increases with t)."""
    lo = torch.zeros_like(target)
    hi = torch.ones_like(target)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        below = (1.0 - schedule.alpha(mid)) < target
        lo = torch.where(below, mid, lo)
        hi = torch.where(below, hi, mid)
    return 0.5 * (lo + hi)


@SAMPLERS.register("first_hitting")
class FirstHittingSampler(Sampler):
    """`build_sampler("first_hitting")`: exact, one token per call; `steps` is not used."""

    name = "first_hitting"

    def __init__(self, steps: int = 1, **options):
        super().__init__(max(int(steps), 1), **options)

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, generator) -> Tensor:
        B = x.shape[0]
        t = torch.ones(B, dtype=torch.float64, device=x.device)
        while True:
            masked = x == mask_id  # (B, L)
            n = masked.sum(dim=1)  # (B,)
            active = n > 0
            if not bool(active.any()):
                return x
            logits = self.denoise_call(denoiser, x, t)
            probs = self.x0_probs(logits, x, mask_id)  # (B, L, V)
            # position: uniform among the masked ones (random keys, argmax over masked)
            keys = torch.rand(x.shape, generator=generator, device=x.device, dtype=torch.float64)
            pos = torch.where(masked, keys, torch.full_like(keys, -1.0)).argmax(dim=1)  # (B,)
            rows = torch.arange(B, device=x.device)
            token = self.draw(probs[rows, pos], generator)  # (B,)
            x = x.clone()
            x[rows[active], pos[active]] = token[active]
            # next time: 1 - α_s = (1 - α_t) u^{1/n}  (Zheng et al. 2024, eq. 9)
            u = torch.rand(B, generator=generator, device=x.device, dtype=torch.float64)
            m_t = 1.0 - schedule.alpha(t)
            m_s = m_t * u.pow(1.0 / n.clamp_min(1).double())
            t = torch.where(active, invert_mask_prob(schedule, m_s), t)
