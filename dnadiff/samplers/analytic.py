"""`analytic`: SEDD's Tweedie τ-leaping step (Lou et al. 2024, arXiv 2310.16834, §4.2 / alg. 2).

For the absorbing process with total noise σ(t) = -log α(t) and Δσ = σ_t - σ_s, the Tweedie
denoiser step at a masked position is

    p(x_s = y | x_t) ∝ [exp(Δσ Q) s_θ(x_t)]_y · exp(-Δσ Q)(x_t, y)

which for the absorbing generator reads (the reference's `_staggered_score` and
`_transp_transition`): staggered score  s̃_v = e^{Δσ} s_v  (v ≠ mask),
s̃_mask = e^{Δσ} s_mask + (1 - e^{Δσ}) Σ_v s_v; transposed transition (x_t = mask)
e^{-Δσ}[y = mask] + (1 - e^{-Δσ}). Unmasked positions are copied.

The concrete score s comes from the denoiser through `parameterization`:
  "subs" (default): s_v = p_θ(v | x_t) α_t/(1 - α_t) from the SUBS output, s_mask = 1. The step
          is then algebraically the MDLM ancestral step (a test checks it).
  "sedd": raw logits are SEDD log-scores, log s_v = ℓ_v - log(e^σ - 1) - log(V - 1) with the
          x_t entry 0 (`dnadiff.diffusion.sedd.sedd_log_score`); negative weights from an
          inconsistent score are clipped to 0 before the draw.
Temperature/top-p reshape p_θ ("subs") or the normalised score ("sedd") before the step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.sedd import sedd_log_score
from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom, carry_over, shape_probs


def tweedie_step(score: Tensor, x: Tensor, mask_id: int, dsigma: Tensor) -> Tensor:
    """Weights Float64[B, L, V] of the Tweedie τ-leaping step from concrete scores `score`.

    score: Float64[B, L, V] with s_mask = 1 at masked positions; dsigma: scalar Δσ > 0.
    """
    e = torch.exp(dsigma)
    real = torch.ones(score.shape[-1], dtype=torch.bool, device=x.device)
    real[mask_id] = False
    total = (score * real).sum(dim=-1)  # (B, L): Σ_{v≠mask} s_v
    stag = score * e
    stag[..., mask_id] = e * score[..., mask_id] + (1.0 - e) * (total + score[..., mask_id])
    # transposed transition from x_t = mask: e^{-Δσ} on mask, plus (1 - e^{-Δσ}) everywhere
    trans = torch.full_like(stag, float(1.0 - torch.exp(-dsigma)))
    trans[..., mask_id] += torch.exp(-dsigma)
    q = (stag * trans).clamp_min(0.0)  # (B, L, V)
    return carry_over(q, x, mask_id)


@SAMPLERS.register("analytic")
class AnalyticSampler(Sampler):
    """`build_sampler("analytic", steps=128, parameterization="subs")`."""

    name = "analytic"

    def __init__(self, steps: int = 128, *, parameterization: str = "subs", **options):
        super().__init__(steps, **options)
        if parameterization not in ("subs", "sedd"):
            raise DnadiffError(f"sampler 'analytic': parameterization must be subs|sedd, got {parameterization!r}")
        self.parameterization = parameterization

    def score(self, logits: Tensor, x: Tensor, mask_id: int, alpha_t: Tensor) -> Tensor:
        """Concrete score at masked positions Float64[B, L, V] (s_mask = 1)."""
        ratio = alpha_t / (1.0 - alpha_t)  # α/(1-α) = 1/(e^σ - 1)
        if self.parameterization == "subs":
            probs = self.x0_probs(logits, x, mask_id)  # (B, L, V), no mass on mask
            s = probs * ratio
        else:
            alpha = torch.as_tensor(alpha_t, dtype=torch.float64, device=x.device).expand(x.shape[0])
            log_s = sedd_log_score(logits.double(), x, alpha, mask_id).double()  # α stays float64
            log_s[..., mask_id] = -float("inf")
            total = log_s.logsumexp(dim=-1, keepdim=True)  # log Σ s (kept: an unnormalised score)
            s = shape_probs(log_s, self.temperature, self.top_p) * total.exp()
        s[..., mask_id] = 1.0
        return s

    def step(self, state: SamplerState, logits: Tensor, rng: StepRandom) -> SamplerState:
        i, x, alphas = state.step, state.x, state.alphas  # α in float64 throughout
        s = self.score(logits, x, state.mask_id, alphas[i])
        dsigma = torch.log(alphas[i + 1]) - torch.log(alphas[i])  # σ_t - σ_s > 0, σ = -log α
        return self.advance(state, rng.categorical(tweedie_step(s, x, state.mask_id, dsigma)))


__all__ = ["AnalyticSampler", "tweedie_step"]
