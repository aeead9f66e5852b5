"""`udlm`: ancestral sampling of uniform-noise diffusion (Schiff et al. 2024, arXiv 2412.10193, §4; the
reference's `_ddpm_denoise` for diffusion == 'uniform'), with the paper's two guidance mechanisms.

    z_1 ~ Cat(1/N) at every free position (the template's mask ids), over the N data tokens;
    for query times t_0 = 1 > t_1 > ... > t_{K-1} = eps (K = steps, linspace) draw every free position from
        p_θ(z_s | z_t) = q(z_s | z_t, x = x̂_θ(z_t, t))       (the §4 posterior, diffusion/udlm.py)
    with s = t_{k+1}, and for the last step s = 0 (α_s = 1): a clean token, drawn ∝ x̂_θ,v q(z_t | v).
One network call a step (K calls; never queried below eps); template positions never change. The first loop
step draws z_1 and makes no call (`model_time` None), so `last_steps` = steps + 1. Temperature and top-p
act on x̂_θ before the posterior is built. Every position stays editable to the end (uniform noise has no
carry-over), so there is no output cache (`cache` is refused) and no noise-removal pass.

Guidance at the posterior level (the step builds log p(z_s | z_t) over Float64[B, L, N], then):
  D-CFG (§3.1): with a class-conditional model, `with_cfg(uncond, gamma)` also calls the unconditional
      denoiser at each step and samples ∝ p(z_s | z_t, y)^γ p(z_s | z_t)^(1-γ) per position (γ = 1 + w for
      the CLI's `--guidance w`, the convention of samplers/wrappers.py: w = 0 is the conditional model).
  D-CBG (§3.2): `add_posterior_guidance(hook)`, `hook(state, log_post) -> log_post` (guidance/uniform_guidance.py:
      p(z_s^l = v | z_t) · p_φ(y | z_t^{l←v})^γ, enumerated over the L × N single-token changes).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from dnadiff.diffusion.subs import NEG_INF
from dnadiff.diffusion.udlm import data_index, data_log_probs, uniform_posterior
from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom, log_of, shape_probs


@SAMPLERS.register("udlm")
class UniformSampler(Sampler):
    """`build_sampler("udlm", steps=128, data_ids=[7, 8, 9, 10])`: the sampler of `udlm` models (their
    `data_ids` come from the model: `defaults_from`)."""

    name = "udlm"
    noise = "uniform"
    posterior_cfg = True  # with_cfg below
    model_options = ("data_ids",)

    @classmethod
    def defaults_from(cls, model) -> dict[str, Any]:
        return {"eps": model.sampling_eps, "data_ids": [int(i) for i in model.objective.data_ids.tolist()]}

    def __init__(self, steps: int = 128, *, data_ids: Optional[list[int]] = None, **options):
        if options.get("cache"):
            raise DnadiffError("sampler 'udlm': no output cache (every position may change at every step)")
        super().__init__(steps, **options)
        self.cache = False
        self.data_ids = None if data_ids is None else torch.tensor(sorted({int(i) for i in data_ids}), dtype=torch.long)
        self.posterior_guidance: list[Callable[[SamplerState, Tensor], Tensor]] = []
        self.cfg: tuple[Any, float] | None = None

    # ---- guidance --------------------------------------------------------------------------------
    def add_posterior_guidance(self, hook: Callable[[SamplerState, Tensor], Tensor]) -> "UniformSampler":
        """Register `hook(state, log_post) -> log_post` (Float64[B, L, N] log p(z_s | z_t) over the data tokens,
        rows of state.x; state.extra holds "alpha_t", "alpha_s"), applied in every step. Returns self."""
        self.posterior_guidance.append(hook)
        return self

    def remove_posterior_guidance(self, hook) -> "UniformSampler":
        self.posterior_guidance.remove(hook)
        return self

    def with_cfg(self, uncond_denoiser, gamma: float) -> "UniformSampler":
        """D-CFG with the unconditional denoiser and weight γ (the loop's denoiser is the conditional one)."""
        self.cfg = (uncond_denoiser, float(gamma))
        return self

    # ---- the step contract -------------------------------------------------------------------------
    def time_grid(self, device) -> Tensor:
        """The K = steps query times linspace(1, eps, K) (float64); the last step goes to t = 0."""
        return torch.linspace(1.0, self.eps, self.steps, dtype=torch.float64, device=device)

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        if self.data_ids is None:
            raise DnadiffError("sampler 'udlm': data_ids (the model's data tokens) are required")
        ts = self.time_grid(x.device)
        B = x.shape[0]
        free = x == mask_id
        return SamplerState(x=x, fixed=~free, mask_id=int(mask_id), step=0, t=torch.ones(B, dtype=torch.float64,
                            device=x.device), done=not bool(free.any()), grid=ts,
                            alphas=schedule.alpha(ts).double(), schedule=schedule, extra={"prior": True})

    def model_time(self, state: SamplerState) -> Tensor | None:
        return None if state.extra.get("prior") else state.t

    def max_steps(self, state: SamplerState) -> int:
        return self.steps + 1

    def evaluate(self, denoiser, state: SamplerState, t: Tensor, need: Tensor | None = None):
        logits, state = super().evaluate(denoiser, state, t, need)
        if self.cfg is not None and self.cfg[1] != 1.0:
            uncond = self.denoise_call(self.cfg[0], state.x, t)  # D-CFG's second call (not in NFE, as `guided`)
            state = state.replace(extra={**state.extra, "uncond_logits": uncond})
        return logits, state

    def log_posterior(self, logits: Tensor, state: SamplerState, alpha_t: Tensor, alpha_s: Tensor) -> Tensor:
        """log p_θ(z_s | z_t) Float64[B, L, N] from raw logits (temperature / top-p on x̂_θ first)."""
        ids = self.data_ids.to(state.x.device)
        x_hat = shape_probs(data_log_probs(logits, ids), self.temperature, self.top_p)  # (B, L, N) float64
        z_idx = data_index(state.x, ids, logits.shape[-1])
        return log_of(uniform_posterior(x_hat, z_idx, alpha_t, alpha_s))

    def step(self, state: SamplerState, logits: Tensor | None, rng: StepRandom) -> SamplerState:
        ids = self.data_ids.to(state.x.device)
        B, L = state.x.shape
        free = ~state.fixed
        grid = state.grid
        if state.extra.get("prior"):  # z_1 ~ Cat(1/N) at the free positions
            draw = ids[rng.categorical(torch.ones(B, L, ids.numel(), dtype=torch.float64, device=state.x.device))]
            extra = {k: v for k, v in state.extra.items() if k != "prior"}
            return state.replace(x=torch.where(free, draw, state.x), step=1, t=grid[0].expand(B), extra=extra)
        k = state.step - 1  # index of the query time t_k
        last = k + 1 >= self.steps
        a_t = state.alphas[k].expand(B)
        a_s = torch.ones_like(a_t) if last else state.alphas[k + 1].expand(B)
        log_post = self.log_posterior(logits, state, a_t, a_s)
        if self.cfg is not None and self.cfg[1] != 1.0:  # D-CFG (§3.1): γ log p(.|y) + (1 - γ) log p(.)
            gamma = self.cfg[1]
            log_u = self.log_posterior(state.extra["uncond_logits"], state, a_t, a_s)
            log_post = (gamma * log_post + (1.0 - gamma) * log_u).clamp_min(NEG_INF).log_softmax(dim=-1)
        if self.posterior_guidance:
            view = state.replace(extra={**state.extra, "alpha_t": a_t, "alpha_s": a_s})
            for hook in self.posterior_guidance:
                log_post = hook(view, log_post)
        draw = ids[rng.categorical(log_post.exp())]
        x = torch.where(free, draw, state.x)
        extra = {k2: v for k2, v in state.extra.items() if k2 != "uncond_logits"}
        t = torch.zeros_like(a_t) if last else grid[k + 1].expand(B)
        return state.replace(x=x, step=state.step + 1, t=t, done=last, extra=extra)

    def finish(self, denoiser, state, rng):
        return state  # the last step already drew clean tokens (s = 0)

    def __repr__(self) -> str:
        return f"UniformSampler(steps={self.steps}, temperature={self.temperature}, top_p={self.top_p})"
