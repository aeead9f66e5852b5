"""Ancestral sampling of MDLM (arXiv 2406.07524, §4.1, eq. 7-8 with SUBS).

On the grid t_0 = 1 > t_1 > ... > t_N = eps (linspace, eps = 1e-5), each step s < t draws
every masked position from

    q(x_s = v | x_t = mask) = p_θ(x0 = v | x_t) (α_s - α_t) / (1 - α_t)     v ≠ mask
    q(x_s = mask | x_t = mask) = (1 - α_s) / (1 - α_t)

and copies unmasked positions (carry-over unmasking). Temperature and nucleus act on p_θ before
the transition is built. After the last step a noise-removal pass fills what is still masked
(`noise_removal`: "argmax" as the reference, "sample" for an exact draw, or "none").

`cache=True` (the `cached` sampler) reuses p_θ while no token changed anywhere in the batch,
which is exact only for models that ignore t: it is switched off for time-conditioned
denoisers (`time_conditioned` option, else `getattr(denoiser, "time_conditioned", True)`).
Both variants consume the generator identically, so with the same seed they return the same
samples; `last_nfe` counts the real calls.
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
    cache = False

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        state = super().init_state(denoiser, schedule, mask_id, x)
        use_cache = self.cache and not self.is_time_conditioned(denoiser)
        return state.replace(extra={**state.extra, "use_cache": use_cache, "changed_steps": 0})

    def step(self, state: SamplerState, logits: Tensor | None, rng: StepRandom) -> SamplerState:
        i, x = state.step, state.x
        probs = state.probs if logits is None else self.x0_probs(logits, x, state.mask_id)  # (B, L, V)
        alphas = state.alphas
        q = ancestral_step(probs, x, state.mask_id, alphas[i], alphas[i + 1])
        x_new = rng.categorical(q)
        changed = bool((x_new != x).any())
        keep = state.extra["use_cache"] and not changed  # p_θ(x_s) = p_θ(x_t) for a t-free model
        extra = {**state.extra, "changed_steps": state.extra["changed_steps"] + int(changed)}
        return self.advance(state, x_new, probs=probs if keep else None, extra=extra)

    def run(self, denoiser, schedule, mask_id, x, rng):
        state = super().run(denoiser, schedule, mask_id, x, rng)
        self.last_changed_steps = state.extra.get("changed_steps", 0)  # steps at which some token changed
        return state
