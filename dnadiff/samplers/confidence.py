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
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom

CRITERIA = ("confidence", "entropy", "margin", "sampled", "random")


@SAMPLERS.register("confidence")
class ConfidenceSampler(Sampler):
    """`build_sampler("confidence", steps=64, criterion="confidence")`."""

    name = "confidence"

    def __init__(self, steps: int = 128, *, criterion: str = "confidence", score_noise: float = 0.0, **options):
        super().__init__(steps, **options)
        if criterion not in CRITERIA:
            raise DnadiffError(f"sampler 'confidence': criterion must be one of {', '.join(CRITERIA)}, "
                               f"got {criterion!r}")
        self.criterion = criterion
        self.score_noise = float(score_noise)

    def scores(self, probs: Tensor, proposal: Tensor, rng: StepRandom) -> Tensor:
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
            s = rng.rand(tuple(proposal.shape[1:]))  # (B, L)
        if self.score_noise > 0:
            u = rng.rand(tuple(s.shape[1:]))
            s = s + self.score_noise * -torch.log(-torch.log(u.clamp(1e-300, 1 - 1e-16)))
        return s

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        state = super().init_state(denoiser, schedule, mask_id, x)
        n0 = (x == mask_id).sum(dim=1).double()  # (B,) masked at the start
        return state.replace(extra={**state.extra, "n0": n0})

    def commit_counts(self, state: SamplerState) -> Tensor:
        """Long[B]: positions to commit at this step (schedule-driven, see module docstring)."""
        i, n0 = state.step, state.extra["n0"]
        m = 1.0 - state.alphas  # (steps + 1,) mask probability on the grid, float64
        if i == self.steps - 1:
            keep_masked = torch.zeros_like(n0)
        else:
            keep_masked = torch.floor(n0 * (m[i + 1] / m[0]))
        return (state.masked.sum(dim=1).double() - keep_masked).clamp_min(0).long()  # (B,)

    def model_time(self, state: SamplerState) -> Tensor | None:
        return state.t if bool((self.commit_counts(state) > 0).any()) else None  # nothing to commit: no call

    def step(self, state: SamplerState, logits: Tensor | None, rng: StepRandom) -> SamplerState:
        x = state.x
        if logits is None:
            return self.advance(state, x)
        masked = state.masked  # (B, L)
        k = self.commit_counts(state)
        probs = self.x0_probs(logits, x, state.mask_id)  # (B, L, V)
        proposal = rng.categorical(probs)  # (B, L)
        s = self.scores(probs, proposal, rng)
        s = torch.where(masked, s, torch.full_like(s, -math.inf))
        order = s.argsort(dim=1, descending=True)  # (B, L)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(x.shape[1], device=x.device).expand_as(order))
        commit = masked & (rank < k.unsqueeze(1))
        return self.advance(state, torch.where(commit, proposal, x))
