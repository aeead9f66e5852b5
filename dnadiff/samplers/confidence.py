"""`confidence`: MaskGIT / LLaDA-style parallel decoding (Chang et al. 2022; Nie et al. 2025).

At each of `steps` rounds the sampler proposes a token for every masked position from p_θ
(temperature / top-p applied) and commits the k positions it is most sure about; k follows the
noise schedule: after round i, ⌊n₀ (1 - α(t_{i+1}))/(1 - α(1))⌋ positions stay masked
(n₀ = masked at the start; the last round commits all). Scores (`criterion`):
  confidence  max_v p_θ(v)                      (LLaDA "low-confidence remasking", deterministic)
  entropy     -H(p_θ)                            (lowest entropy first)
  margin      p_(1) - p_(2)                      (top-1 minus top-2 probability)
  sampled     p_θ(proposed token)                (MaskGIT; depends on the draw)
  random      uniform                            (MDLM-like order)
Optional `score_noise` adds Gumbel noise × score_noise to the scores (MaskGIT's randomness).

With steps = L (one token per round) and a criterion that depends only on p_θ (confidence,
entropy, margin, random), the chain rule makes sampling exact for the model: the order is
chosen from already revealed tokens only. `sampled` and k > 1 are approximations.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler

CRITERIA = ("confidence", "entropy", "margin", "sampled", "random")


@SAMPLERS.register("confidence")
class ConfidenceSampler(Sampler):
    """`build_sampler("confidence", steps=64, criterion="confidence")`."""

    name = "confidence"

    def __init__(self, steps: int = 128, *, criterion: str = "confidence", score_noise: float = 0.0, **options):
        super().__init__(steps, **options)
        if criterion not in CRITERIA:
            raise DnadiffError(f"sampler 'confidence': criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
        self.criterion = criterion
        self.score_noise = float(score_noise)

    def scores(self, probs: Tensor, proposal: Tensor, generator) -> Tensor:
        """Float64[B, L]: higher = commit first."""
        if self.criterion == "confidence":
            s = probs.max(dim=-1).values
        elif self.criterion == "entropy":
            s = (probs * probs.clamp_min(1e-300).log()).sum(dim=-1)  # -H
        elif self.criterion == "margin":
            top2 = probs.topk(2, dim=-1).values  # (B, L, 2)
            s = top2[..., 0] - top2[..., 1]
        elif self.criterion == "sampled":
            s = probs.gather(-1, proposal.unsqueeze(-1)).squeeze(-1)
        else:
            s = torch.rand(proposal.shape, generator=generator, device=probs.device, dtype=torch.float64)
        if self.score_noise > 0:
            u = torch.rand(s.shape, generator=generator, device=s.device, dtype=torch.float64)
            s = s + self.score_noise * -torch.log(-torch.log(u.clamp(1e-300, 1 - 1e-16)))
        return s

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, generator) -> Tensor:
        ts = self.time_grid(x.device)
        m = (1.0 - schedule.alpha(ts)).double()
        n0 = (x == mask_id).sum(dim=1).double()  # (B,)
        for i in range(self.steps):
            masked = x == mask_id  # (B, L)
            if not bool(masked.any()):
                break
            if i == self.steps - 1:
                keep_masked = torch.zeros_like(n0)
            else:
                keep_masked = torch.floor(n0 * (m[i + 1] / m[0]))
            k = (masked.sum(dim=1).double() - keep_masked).clamp_min(0).long()  # (B,) to commit now
            if not bool((k > 0).any()):
                continue
            logits = self.denoise_call(denoiser, x, ts[i])
            probs = self.x0_probs(logits, x, mask_id)  # (B, L, V)
            proposal = self.draw(probs, generator)  # (B, L)
            s = self.scores(probs, proposal, generator)
            s = torch.where(masked, s, torch.full_like(s, -math.inf))
            order = s.argsort(dim=1, descending=True)  # (B, L)
            rank = torch.empty_like(order).scatter_(1, order, torch.arange(x.shape[1], device=x.device).expand_as(order))
            commit = masked & (rank < k.unsqueeze(1))
            x = torch.where(commit, proposal, x)
        return self.remove_noise(denoiser, x, mask_id, generator)
