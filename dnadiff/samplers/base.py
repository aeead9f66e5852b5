"""The shared sampler machinery: API, template handling, NFE counting, p_θ shaping and draws.

Every sampler has the call of DESIGN.md §2:

    x = sampler.generate(denoiser, schedule, mask_id, shape, template=None, generator=None)
    sampler.last_nfe   # network calls of the last generate()

`denoiser(x_t: Long[B, L], t: Float[B]) -> raw logits Float[B, L, V]`; samplers apply SUBS
(MDLM §3.2.3) themselves. `template` is Long[B, L] (or [L], broadcast) holding fixed tokens and
`mask_id` at the free positions: prefix, suffix and infill conditioning are all templates, and a
sampler never changes a fixed token.

Options shared by all samplers (keyword arguments of the constructor):
  temperature  p ∝ p_θ^{1/T} (applied to p_θ(x0 | x_t) before the transition is built)
  top_p        nucleus: keep the smallest set of tokens whose mass reaches top_p, renormalise
  batch_size   generate in chunks of this many rows (None: all at once)
  float32_draws  categorical draws with the reference's float32 exponential noise
               (`1e-10 - log(rand + 1e-10)`, float32) instead of float64 ones. Zheng et al. 2024
               (arXiv 2409.02908, §4) show float32 truncates the noise near 0, which starves the
               low-probability tail (lower diversity); float64 is the default.
  time_conditioned  whether the denoiser reads t (None: `getattr(denoiser, "time_conditioned", True)`).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from dnadiff.diffusion.subs import NEG_INF, subs_log_probs
from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

SAMPLERS = Registry("sampler")

Denoiser = Callable[[Tensor, Tensor], Tensor]


def draw_categorical(probs: Tensor, generator: torch.Generator | None = None, float32: bool = False) -> Tensor:
    """One draw per row of unnormalised non-negative weights `probs` [..., V] -> Long[...].

    Exponential-race (Gumbel-max) sampling: argmax_v p_v / E_v with E_v ~ Exp(1) iid.
    float64 (default): E = -log(U), U uniform with 53-bit resolution.
    float32=True: the MDLM reference's `_sample_categorical` in float32, whose U has 24-bit
    resolution, so E is rounded up near 0 and tokens with p below ~1e-6 lose mass.
    """
    if float32:
        p = probs.float()
        u = torch.rand(p.shape, generator=generator, device=p.device, dtype=torch.float32)
        noise = 1e-10 - (u + 1e-10).log()
        return (p / noise).argmax(dim=-1)
    p = probs.double()
    u = torch.rand(p.shape, generator=generator, device=p.device, dtype=torch.float64)
    noise = (-torch.log1p(-u)).clamp_min_(torch.finfo(torch.float64).tiny)  # Exp(1), never 0
    return (p / noise).argmax(dim=-1)


def carry_over(q: Tensor, x: Tensor, mask_id: int) -> Tensor:
    """Transition rows q [B, L, V] with unmasked positions of x [B, L] kept as point masses (SUBS
    carry-over: a revealed token never changes)."""
    onehot = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), 1.0)
    return torch.where((x != mask_id).unsqueeze(-1), onehot, q)


def shape_probs(log_probs: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """Temperature then nucleus filtering of log p [..., V] -> normalised float64 probabilities."""
    lp = log_probs.double()
    if temperature != 1.0:
        lp = lp / temperature
    probs = (lp - lp.logsumexp(dim=-1, keepdim=True)).exp()  # (..., V)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass strictly above each token
        keep_sorted = before < top_p  # the top token always stays (before = 0)
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class CountingDenoiser:
    """Wraps a denoiser and counts its calls (the NFE)."""

    def __init__(self, denoiser: Denoiser):
        self.denoiser = denoiser
        self.calls = 0

    def __call__(self, x_t: Tensor, t: Tensor) -> Tensor:
        self.calls += 1
        return self.denoiser(x_t, t)


class Sampler:
    """Base class: subclasses implement `_generate(denoiser, schedule, mask_id, x, generator)`.

    `x` arrives as the initial state Long[B, L] (template tokens fixed, mask elsewhere) and the
    subclass returns the final sequences; `denoiser` is already NFE-counting.
    """

    name = "base"

    def __init__(
        self,
        steps: int = 128,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        eps: float = 1e-5,
        noise_removal: bool | str = True,
        float32_draws: bool = False,
        time_conditioned: bool | None = None,
        batch_size: int | None = None,
    ):
        if int(steps) < 1:
            raise DnadiffError(f"sampler {self.name!r}: steps must be >= 1, got {steps}")
        if not temperature > 0:
            raise DnadiffError(f"sampler {self.name!r}: temperature must be > 0, got {temperature}")
        if not 0.0 < top_p <= 1.0:
            raise DnadiffError(f"sampler {self.name!r}: top_p must be in (0, 1], got {top_p}")
        if not 0.0 < eps < 1.0:
            raise DnadiffError(f"sampler {self.name!r}: eps must be in (0, 1), got {eps}")
        if noise_removal is True:
            noise_removal = "argmax"
        elif noise_removal is False or noise_removal is None:
            noise_removal = "none"
        if noise_removal not in ("argmax", "sample", "none"):
            raise DnadiffError(f"sampler {self.name!r}: noise_removal must be argmax|sample|none, got {noise_removal!r}")
        if batch_size is not None and int(batch_size) < 1:
            raise DnadiffError(f"sampler {self.name!r}: batch_size must be >= 1, got {batch_size}")
        self.steps = int(steps)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.eps = float(eps)
        self.noise_removal = noise_removal
        self.float32_draws = bool(float32_draws)
        self.time_conditioned = time_conditioned
        self.batch_size = None if batch_size is None else int(batch_size)
        self.last_nfe = 0

    # ---- public API -------------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        denoiser: Denoiser,
        schedule,
        mask_id: int,
        shape: tuple[int, int],
        template: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Long[B, L] samples; `self.last_nfe` holds the denoiser calls made."""
        B, L = int(shape[0]), int(shape[1])
        if B < 1 or L < 1:
            raise DnadiffError(f"sampler {self.name!r}: shape must be positive, got {tuple(shape)}")
        device = _device_of(denoiser, template, generator)
        x = self.initial_state(mask_id, (B, L), template, device)
        counting = CountingDenoiser(denoiser)
        chunk = self.batch_size or B
        outs = [
            self._generate(counting, schedule, int(mask_id), x[i : i + chunk], generator)
            for i in range(0, B, chunk)
        ]
        self.last_nfe = counting.calls
        return torch.cat(outs, dim=0)

    def initial_state(self, mask_id: int, shape: tuple[int, int], template: Tensor | None, device) -> Tensor:
        B, L = shape
        if template is None:
            return torch.full((B, L), int(mask_id), dtype=torch.long, device=device)
        template = torch.as_tensor(template, device=device).long()
        if template.dim() == 1:
            template = template.unsqueeze(0).expand(B, -1)
        if tuple(template.shape) != (B, L):
            raise DnadiffError(f"sampler {self.name!r}: template shape {tuple(template.shape)} does not match {(B, L)}")
        return template.clone()

    # ---- helpers for subclasses ---------------------------------------------------------------
    def _generate(self, denoiser: Denoiser, schedule, mask_id: int, x: Tensor, generator) -> Tensor:
        raise NotImplementedError

    def is_time_conditioned(self, denoiser) -> bool:
        if self.time_conditioned is not None:
            return bool(self.time_conditioned)
        inner = getattr(denoiser, "denoiser", denoiser)  # see through CountingDenoiser
        return bool(getattr(inner, "time_conditioned", True))

    def time_grid(self, device) -> Tensor:
        """linspace(1, eps, steps + 1) in float64 (the reference's sampling grid, eps = 1e-5)."""
        return torch.linspace(1.0, self.eps, self.steps + 1, dtype=torch.float64, device=device)

    def x0_probs(self, logits: Tensor, x: Tensor, mask_id: int) -> Tensor:
        """p_θ(x0 | x_t) under SUBS with temperature / top-p: Float64[B, L, V]."""
        return shape_probs(subs_log_probs(logits, x, mask_id), self.temperature, self.top_p)

    def draw(self, probs: Tensor, generator) -> Tensor:
        return draw_categorical(probs, generator, float32=self.float32_draws)

    def denoise_call(self, denoiser: Denoiser, x: Tensor, t: float | Tensor) -> Tensor:
        t = torch.as_tensor(t, dtype=torch.float32, device=x.device)
        if t.dim() == 0:
            t = t.expand(x.shape[0])
        return denoiser(x, t.float())

    def remove_noise(self, denoiser: Denoiser, x: Tensor, mask_id: int, generator) -> Tensor:
        """Final pass at t = eps filling any position still masked (argmax, a draw, or nothing)."""
        masked = x == mask_id
        if self.noise_removal == "none" or not bool(masked.any()):
            return x
        logits = self.denoise_call(denoiser, x, self.eps)
        if self.noise_removal == "argmax":
            fill = subs_log_probs(logits, x, mask_id).argmax(dim=-1)
        else:
            fill = self.draw(self.x0_probs(logits, x, mask_id), generator)
        return torch.where(masked, fill, x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(steps={self.steps}, temperature={self.temperature}, top_p={self.top_p})"


def _device_of(denoiser, template, generator) -> torch.device:
    if template is not None and isinstance(template, Tensor):
        return template.device
    if generator is not None:
        return torch.device(generator.device)
    params = getattr(denoiser, "parameters", None)
    if callable(params):
        try:
            return next(params()).device
        except StopIteration:
            pass
    return torch.device("cpu")


def log_of(probs: Tensor) -> Tensor:
    """log with NEG_INF instead of -inf (keeps SUBS-style finite logits)."""
    return torch.where(probs > 0, probs.clamp_min(1e-300).log(), torch.full_like(probs, NEG_INF))


__all__ = [
    "SAMPLERS",
    "Sampler",
    "CountingDenoiser",
    "draw_categorical",
    "shape_probs",
    "log_of",
]
