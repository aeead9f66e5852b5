"""Masking schedules α(t) of MDLM (arXiv 2406.07524, §3.1, tab. 9 / app. E.1).

α(t) is the probability that a token is still *unmasked* at time t ∈ [0, 1]
(α(0) ≈ 1, α(1) ≈ 0). The continuous-time NELBO (eq. 10-11) weighs the masked-token
cross-entropy by  w(t) = -α'(t) / (1 - α(t))  (positive).

The four schedules follow the reference code's `noise_schedule.py` (σ = -log α):
  loglinear  α = 1 - (1-ε) t                      w = 1/t exactly
  linear     α = exp(-(σ_min + t (σ_max - σ_min)))  σ_min=0, σ_max=10
  cosine     α = ε + (1-ε) cos(πt/2)
  cosine2    α = ε + (1-ε) cos²(πt/2)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

SCHEDULES = Registry("schedule")


class Schedule:
    """Base class: subclasses give `alpha(t)` and `dalpha(t)` = dα/dt."""

    name: str = "base"

    def __init__(self, eps: float = 1e-3):
        if not 0.0 <= eps < 1.0:
            raise DnadiffError(f"schedule eps must be in [0, 1), got {eps}")
        self.eps = float(eps)

    def alpha(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def dalpha(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def mask_prob(self, t: Tensor) -> Tensor:
        """1 - α(t): the probability that a token is masked at time t (subclasses give
        cancellation-free forms, so float32 times near 0 keep full relative precision)."""
        return 1.0 - self.alpha(t)

    def loss_weight(self, t: Tensor) -> Tensor:
        """w(t) = -α'(t) / (1 - α(t)) of eq. 10 (positive)."""
        return -self.dalpha(t) / self.mask_prob(t)

    def sample_t(
        self,
        batch: int,
        *,
        t_min: float = 1e-3,
        stratified: bool = True,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """Training/eval times in [t_min, 1].

        stratified: low-discrepancy sampler of app. D.3, one uniform per stratum,
        t_i = (u_i + i) / B, which lowers the variance of the batch-mean loss.
        """
        # draw on the generator's device (a CUDA generator cannot fill a CPU tensor)
        gen_device = generator.device if generator is not None else "cpu"
        u = torch.rand(batch, generator=generator, dtype=torch.float64, device=gen_device)
        if stratified:
            u = (u + torch.arange(batch, dtype=torch.float64, device=gen_device)) / batch
        t = t_min + (1.0 - t_min) * u
        return t.to(device=device or "cpu", dtype=torch.float32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eps={self.eps})"


@SCHEDULES.register("loglinear")
class LogLinearSchedule(Schedule):
    """α = 1 - (1-ε)t, i.e. σ(t) = -log(1 - (1-ε)t); the MDLM default."""

    name = "loglinear"

    def alpha(self, t: Tensor) -> Tensor:
        return 1.0 - (1.0 - self.eps) * t

    def dalpha(self, t: Tensor) -> Tensor:
        return torch.full_like(t, -(1.0 - self.eps))

    def mask_prob(self, t: Tensor) -> Tensor:
        return (1.0 - self.eps) * t  # exact; 1 - α would round in float32 at small t

    def loss_weight(self, t: Tensor) -> Tensor:
        return 1.0 / t  # -α'/(1-α) = (1-ε) / ((1-ε) t), exact (avoids 0/0 rounding)


@SCHEDULES.register("linear")
class LinearSchedule(Schedule):
    """σ(t) = σ_min + t (σ_max - σ_min), α = exp(-σ)."""

    name = "linear"

    def __init__(self, eps: float = 1e-3, sigma_min: float = 0.0, sigma_max: float = 10.0):
        super().__init__(eps)
        self.sigma_min, self.sigma_max = float(sigma_min), float(sigma_max)

    def sigma(self, t: Tensor) -> Tensor:
        return self.sigma_min + t * (self.sigma_max - self.sigma_min)

    def alpha(self, t: Tensor) -> Tensor:
        return torch.exp(-self.sigma(t))

    def dalpha(self, t: Tensor) -> Tensor:
        return -(self.sigma_max - self.sigma_min) * self.alpha(t)

    def mask_prob(self, t: Tensor) -> Tensor:
        return -torch.expm1(-self.sigma(t))

    def loss_weight(self, t: Tensor) -> Tensor:
        # σ' e^{-σ} / (1 - e^{-σ}) = σ' / expm1(σ): stable for small σ
        return (self.sigma_max - self.sigma_min) / torch.expm1(self.sigma(t))


@SCHEDULES.register("cosine")
class CosineSchedule(Schedule):
    """α = ε + (1-ε) cos(πt/2)."""

    name = "cosine"

    def alpha(self, t: Tensor) -> Tensor:
        return self.eps + (1.0 - self.eps) * torch.cos(t * math.pi / 2)

    def dalpha(self, t: Tensor) -> Tensor:
        return -(1.0 - self.eps) * (math.pi / 2) * torch.sin(t * math.pi / 2)

    def mask_prob(self, t: Tensor) -> Tensor:
        # 1 - cos x = 2 sin²(x/2): no cancellation at small t (float32 would lose it all)
        return (1.0 - self.eps) * 2.0 * torch.sin(t * math.pi / 4) ** 2

    def loss_weight(self, t: Tensor) -> Tensor:
        # (π/2) sin(πt/2) / (1 - cos(πt/2)) = (π/2) cot(πt/4); ε cancels
        return (math.pi / 2) / torch.tan(t * math.pi / 4)


@SCHEDULES.register("cosine2")
class CosineSquaredSchedule(Schedule):
    """α = ε + (1-ε) cos²(πt/2)."""

    name = "cosine2"

    def alpha(self, t: Tensor) -> Tensor:
        return self.eps + (1.0 - self.eps) * torch.cos(t * math.pi / 2) ** 2

    def dalpha(self, t: Tensor) -> Tensor:
        # d/dt cos²(πt/2) = -(π/2) sin(πt)
        return -(1.0 - self.eps) * (math.pi / 2) * torch.sin(t * math.pi)

    def mask_prob(self, t: Tensor) -> Tensor:
        return (1.0 - self.eps) * torch.sin(t * math.pi / 2) ** 2  # 1 - cos² = sin², stable

    def loss_weight(self, t: Tensor) -> Tensor:
        # (π/2) sin(πt) / sin²(πt/2) = π cot(πt/2); ε cancels
        return math.pi / torch.tan(t * math.pi / 2)


def build_schedule(name: str = "loglinear", **kwargs) -> Schedule:
    """`build_schedule("loglinear", eps=1e-3)`; names: loglinear, linear, cosine, cosine2."""
    return SCHEDULES.build(name, **kwargs)
