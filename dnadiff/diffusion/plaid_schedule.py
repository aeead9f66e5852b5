"""Plaid's learned noise schedule: a monotone γ(t) = -log SNR(t) on t ∈ [0, 1] (Gulrajani & Hashimoto 2023,
"Likelihood-Based Diffusion Language Models", arXiv 2305.18619, §3.1 "learned noise schedule", which takes the
schedule of VDM: Kingma et al. 2021, arXiv 2107.00630, §5.1 and app. H "monotonic neural network").

Variance preserving (VDM eq. 3-4): α_t² = sigmoid(-γ_t), σ_t² = sigmoid(γ_t), so α_t² + σ_t² = 1.

    γ̃(t) = l1(t) + l3(sigmoid(l2(l1(t))))         l1: 1→1, l2: 1→H, l3: H→1, every weight softplus(w) > 0
    γ(t)  = γ_0 + (γ_1 - γ_0) (γ̃(t) - γ̃(0)) / (γ̃(1) - γ̃(0)),   γ_1 = γ_0 + softplus(δ)

Monotone by construction: each layer is increasing in its input (positive weights, increasing sigmoid) and
l1's weight is > 0, so γ̃ is strictly increasing and γ goes from γ_0 (t = 0, nearly clean) to γ_1 (t = 1,
nearly pure noise) whatever the parameters (VDM's `DenseMonotone` takes |w|; softplus keeps the slope > 0,
so no parameter update can make it flat). γ_0, δ are learned (VDM's learned endpoints, `gamma_min` /
`gamma_max` at initialisation). The continuous-time bound depends on the end points only (VDM eq. 20): the
interior shape u(t) changes the Monte-Carlo variance, not the value, so the objective trains the end points on
the bound and the shape on the variance of the diffusion term (VDM §4 / app. I.2; diffusion/plaid.py).
The derivative γ'(t), which weighs the diffusion term (VDM eq. 17), is
computed in closed form (the chain rule through the three layers), not by autograd, so that the training
loss stays differentiable in the schedule's parameters through it.

`check_monotone` refuses a schedule whose γ is not finite and strictly increasing on a grid: a loaded
state whose values are NaN / inf, or whose gap softplus(δ) underflows to 0 (a flat schedule).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.errors import DnadiffError


class MonotoneGamma(nn.Module):
    """γ(t) and γ'(t) -> Float[B] each for t Float[B] (module docstring); computed in float64 inside."""

    def __init__(self, gamma_min: float = -10.0, gamma_max: float = 5.0, hidden: int = 64):
        super().__init__()
        if not gamma_min < gamma_max:
            raise DnadiffError(f"plaid schedule: need gamma_min < gamma_max, got {gamma_min}, {gamma_max}")
        # raw weights; the positive weights are softplus(raw). VDM initialises the hidden layer near 0.
        self.w1 = nn.Parameter(torch.tensor([0.5413]))  # softplus(0.5413) = 1
        self.b1 = nn.Parameter(torch.zeros(1))
        self.w2 = nn.Parameter(torch.randn(hidden) * 0.1)
        self.b2 = nn.Parameter(torch.zeros(hidden))
        self.w3 = nn.Parameter(torch.randn(hidden) * 0.1 - 3.0)  # small positive weights: starts near linear
        self.gamma_0 = nn.Parameter(torch.tensor([float(gamma_min)]))
        gap = float(gamma_max - gamma_min)
        self.log_gap = nn.Parameter(torch.tensor([gap + torch.log(-torch.expm1(torch.tensor(-gap))).item()]))

    def _raw(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """(γ̃(t), γ̃'(t)) Float64[B] of the unnormalised monotone network."""
        t = t.double()
        w1, w2, w3 = F.softplus(self.w1.double()), F.softplus(self.w2.double()), F.softplus(self.w3.double())
        h = w1 * t + self.b1.double()  # (B,)
        s = torch.sigmoid(h[:, None] * w2 + self.b2.double())  # (B, H)
        g = h + (s * w3).sum(-1)
        dg = w1 * (1.0 + (s * (1.0 - s) * w2 * w3).sum(-1))  # d/dt through l1, l2, l3
        return g, dg

    def endpoints(self) -> tuple[Tensor, Tensor]:
        """(γ_0, γ_1) Float64 scalars."""
        g0 = self.gamma_0.double()[0]
        return g0, g0 + F.softplus(self.log_gap.double()[0])

    def shape(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """(u(t), u'(t)) Float64[B]: the normalised shape (γ̃(t) - γ̃(0)) / (γ̃(1) - γ̃(0)), 0 at t = 0 and 1 at t = 1,
        which only the interior parameters (not the end points) move."""
        t = t.reshape(-1)
        g, dg = self._raw(t)
        ends, _ = self._raw(torch.tensor([0.0, 1.0], dtype=torch.float64, device=t.device))
        return (g - ends[0]) / (ends[1] - ends[0]), dg / (ends[1] - ends[0])

    def combine(self, u: Tensor, du: Tensor) -> tuple[Tensor, Tensor]:
        """(γ, γ') = (γ_0 + (γ_1 - γ_0) u, (γ_1 - γ_0) u') from a shape."""
        g0, g1 = self.endpoints()
        return g0 + (g1 - g0) * u, (g1 - g0) * du

    def forward(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """(γ(t), γ'(t)) Float64[B] for t Float[B] in [0, 1]."""
        return self.combine(*self.shape(t))


def alpha_sigma(gamma: Tensor) -> tuple[Tensor, Tensor]:
    """(α, σ) of a variance-preserving process at γ = -log SNR (VDM eq. 3-4): α² = sigmoid(-γ), σ² = sigmoid(γ)."""
    return torch.sigmoid(-gamma).sqrt(), torch.sigmoid(gamma).sqrt()


def check_monotone(gamma: MonotoneGamma, where: str = "plaid schedule", points: int = 257) -> None:
    """DnadiffError unless γ is finite and strictly increasing on a grid of [0, 1] (with γ' > 0)."""
    with torch.no_grad():
        t = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
        g, dg = gamma(t)
    if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(dg).all())):
        raise DnadiffError(f"{where}: the noise schedule γ(t) is not finite")
    if not (bool((g[1:] > g[:-1]).all()) and bool((dg > 0).all())):
        bad = int(torch.nonzero(~(g[1:] > g[:-1])).flatten()[0]) if not bool((g[1:] > g[:-1]).all()) else 0
        raise DnadiffError(f"{where}: the noise schedule γ(t) is not strictly increasing "
                           f"(γ({t[bad]:.3g}) = {g[bad]:.6g} >= γ({t[bad + 1]:.3g}) = {g[bad + 1]:.6g})")


__all__ = ["MonotoneGamma", "alpha_sigma", "check_monotone"]
