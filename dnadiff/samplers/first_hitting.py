"""`first_hitting`: the first-hitting sampler of Zheng et al. 2024 (arXiv 2409.02908, §3, alg. 1).

Instead of stepping a time grid, draw the exact time at which the next token is unmasked.
Going backwards from t with n masked tokens, each masked token's unmasking time τ has
P(τ ≤ s | τ ≤ t) = (1 - α_s)/(1 - α_t) independently, so the next event is at the largest:

    1 - α_s = (1 - α_t) · u^{1/n},   u ~ U(0, 1)

and the token that unmasks is uniform among the masked positions; its value is drawn from
p_θ(x0 | x_t). One denoiser call per unmasked token: NFE ≤ L (fewer with a template). Exact for
the model (no simultaneous-unmasking factorisation error). It has no step count: `steps` is
ignored here and rejected by the CLI (`--steps`); the calls made = the free tokens.

s is found by bisection on the schedule's α (any monotone schedule), in float64, per sequence; a
time-conditioned denoiser receives the time of the state it is shown.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom


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
    """`build_sampler("first_hitting")`: exact, one token per call. It has no step count: the
    `steps` argument is accepted for a uniform Python call and ignored (`dnadiff sample --steps`
    and `DiffusionModel.generate(steps=...)` reject it); `last_steps` reports the loop steps
    actually made (one per generated token). A time-conditioned denoiser is queried at
    max(τ, eps): never below the training t_min."""

    name = "first_hitting"
    has_steps = False

    def __init__(self, steps: int = 1, **options):
        super().__init__(1, **options)  # `steps` is ignored (see the class docstring)

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        B = x.shape[0]
        return SamplerState(x=x, fixed=x != mask_id, mask_id=int(mask_id),
                            t=torch.ones(B, dtype=torch.float64, device=x.device),
                            done=not bool((x == mask_id).any()), schedule=schedule)

    def model_time(self, state: SamplerState) -> Tensor:
        return state.t.clamp_min(self.eps)

    def max_steps(self, state: SamplerState) -> int:
        return int(state.masked.sum(dim=1).max())

    def next_position(self, masked: Tensor, rng: StepRandom) -> Tensor:
        """Long[B]: the position to unmask, uniform among the masked ones (random keys, argmax over masked)."""
        keys = rng.rand((masked.shape[1],))  # (B, L) float64
        return torch.where(masked, keys, torch.full_like(keys, -1.0)).argmax(dim=1)

    def step(self, state: SamplerState, logits: Tensor, rng: StepRandom) -> SamplerState:
        x, schedule = state.x, state.schedule
        B = x.shape[0]
        masked = state.masked  # (B, L)
        n = masked.sum(dim=1)  # (B,)
        active = n > 0
        probs = self.x0_probs(logits, x, state.mask_id)  # (B, L, V)
        pos = self.next_position(masked, rng)  # (B,)
        rows = torch.arange(B, device=x.device)
        token = rng.categorical(probs[rows, pos])  # (B,)
        x = x.clone()
        x[rows[active], pos[active]] = token[active]
        # next time: 1 - α_s = (1 - α_t) u^{1/n}  (Zheng et al. 2024, eq. 9)
        u = rng.rand(())  # (B,)
        m_t = 1.0 - schedule.alpha(state.t)
        m_s = m_t * u.pow(1.0 / n.clamp_min(1).double())
        t = torch.where(active, invert_mask_prob(schedule, m_s), state.t)
        return state.replace(x=x, t=t, step=state.step + 1, done=not bool((x == state.mask_id).any()))

    def finish(self, denoiser, state, rng):
        return state  # every token is drawn exactly: nothing is left to remove
