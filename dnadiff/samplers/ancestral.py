"""Ancestral sampling of MDLM (arXiv 2406.07524, §4.1, eq. 7-8 with SUBS).

On the grid t_0 = 1 > t_1 > ... > t_N = eps (linspace, eps = 1e-5), each step s < t draws
every masked position from

    q(x_s = v | x_t = mask) = p_θ(x0 = v | x_t) (α_s - α_t) / (1 - α_t)     v ≠ mask
    q(x_s = mask | x_t = mask) = (1 - α_s) / (1 - α_t)

and copies unmasked positions (carry-over unmasking). Temperature and nucleus act on p_θ before
the transition is built. After the last step a noise-removal pass fills what is still masked
(`noise_removal`: "argmax" as the reference, "sample" for an exact draw, or "none").

`cache=True` (the `cached` sampler, or the option) evaluates the denoiser only on the sequences
whose tokens changed since their last evaluation and reuses the other rows' outputs (base.py,
`Sampler.evaluate`), which is exact only for models that ignore t: it is switched off for
time-conditioned denoisers (`time_conditioned` option, else the denoiser's own, a bare function
counting as time-conditioned: dnadiff/denoiser.py). The step sees the same logits either way and the draws do not
depend on the cache, so with the same seed both return the same samples; `last_nfe` counts the
real calls, `last_nfe_per_row` each sequence's evaluations.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom, carry_over


def ancestral_step(
    probs_x0: Tensor, x: Tensor, mask_id: int, alpha_t: float | Tensor, alpha_s: float | Tensor
) -> Tensor:
    """The MDLM reverse transition q(x_s | x_t, p_θ) as weights Float64[B, L, V].

    Rows at unmasked positions are one-hot on the observed token (SUBS carry-over).
    """
    alpha_t = torch.as_tensor(alpha_t, dtype=torch.float64, device=x.device)
    alpha_s = torch.as_tensor(alpha_s, dtype=torch.float64, device=x.device)
    unmask = (alpha_s - alpha_t) / (1.0 - alpha_t)
    stay = (1.0 - alpha_s) / (1.0 - alpha_t)
    q = probs_x0 * unmask  # (B, L, V); p_θ has no mass on mask
    q[..., mask_id] = stay
    return carry_over(q, x, mask_id)


@SAMPLERS.register("ancestral")
class AncestralSampler(Sampler):
    """`build_sampler("ancestral", steps=128, temperature=1.0, top_p=1.0, float32_draws=False)`."""

    name = "ancestral"

    def step(self, state: SamplerState, logits: Tensor, rng: StepRandom) -> SamplerState:
        i, x = state.step, state.x
        probs = self.x0_probs(logits, x, state.mask_id)  # (B, L, V)
        alphas = state.alphas
        q = ancestral_step(probs, x, state.mask_id, alphas[i], alphas[i + 1])
        return self.advance(state, rng.categorical(q))
