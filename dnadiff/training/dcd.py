"""DUO's discrete consistency distillation (DCD) for uniform-noise (`udlm`) models (Sahoo et al., "The
Diffusion Duality", arXiv 2506.10892, §3 (the duality), §4.2 and Alg. 1 (DCD); code s-sahoo/duo, `algo.py`
`Distillation`). Pure PyTorch on denoiser callables (no Lightning).

The duality (§3). Let w = ν e_x + ε, ε ~ N(0, I_N) over the N data tokens (a Gaussian diffusion latent
α̃ x + σ̃ ε rescaled by 1/σ̃, ν = α̃/σ̃; scaling does not move the argmax). Then z = argmax(w) is distributed as
the uniform-noise marginal q(z | x) = Cat(α x + (1 - α)/N) with
    α = T(ν) = (N·P(ν) - 1)/(N - 1),   P(ν) = P(argmax w = x) = ∫ φ(u) Φ(u + ν)^(N-1) du      (§3, eq. 10's
the "diffusion transformation operator"; the code caches its values per tokenizer in `integral/*.pkl`).
T is increasing from T(0) = 0 to T(∞) = 1, so every α of a dnadiff schedule has one ν = T⁻¹(α)
(`nu_of_alpha`, a monotone table inverted by interpolation; N = 2 has the closed form 2Φ(ν/√2) - 1).

DCD (Alg. 1). One ε per position couples every time: z_t = argmax(ν_t e_x + ε) and z_s = argmax(ν_s e_x + ε)
for s = t - dt lie on one deterministic trajectory (given x and ε). The student's x̂ at (z_t, t) is pulled
toward the (frozen) teacher's x̂ at (z_s, s): "kl-bwd" KL(student ‖ teacher) (the code's default loss_type),
or "kl-fwd"; averaged over the data positions. Rounds as SDTT's: dt = one step of the round's teacher,
doubling each round (the code's dt = 2^round / T), the student becoming the next round's teacher.
Clean sequences x: the paper uses data; `dnadiff distill` draws them from the teacher's own sampler
(training/distill_loop.py), so no data is read.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor

from dnadiff.diffusion.udlm import data_index, data_log_probs
from dnadiff.errors import DnadiffError

DCD_LOSSES = ("kl-bwd", "kl-fwd")
NU_MAX = 60.0  # T(60) = 1 to float64 precision for every vocabulary size in use


def argmax_prob(nu: Tensor, N: int, nodes: int = 4001) -> Tensor:
    """P(ν) = P(argmax(ν e_x + ε) = x) = ∫ φ(u) Φ(u + ν)^(N-1) du (§3), Float64 like ν, by the trapezoid
    rule on u ∈ [-12, 12] (φ below 1e-31 outside); Φ^(N-1) through log Φ, so large N stays exact."""
    nu = torch.as_tensor(nu, dtype=torch.float64)
    u = torch.linspace(-12.0, 12.0, nodes, dtype=torch.float64)
    log_phi = -0.5 * u**2 - 0.5 * math.log(2 * math.pi)
    integrand = torch.exp(log_phi + (N - 1) * torch.special.log_ndtr(u + nu.reshape(-1, 1)))  # (n, nodes)
    return torch.trapezoid(integrand, u, dim=-1).reshape(nu.shape)


def alpha_of_nu(nu: Tensor, N: int) -> Tensor:
    """The diffusion transformation operator α = T(ν) = (N P(ν) - 1)/(N - 1) (§3, eq. 10)."""
    return ((N * argmax_prob(nu, N) - 1.0) / (N - 1)).clamp(0.0, 1.0)


@lru_cache(maxsize=16)
def _table(N: int, points: int = 6001) -> tuple[Tensor, Tensor]:
    """(ν grid, T(ν)) on ν ∈ [0, NU_MAX], denser near 0 (ν = NU_MAX·s², s uniform); T made non-decreasing."""
    s = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    nu = NU_MAX * s**2
    alpha = torch.cummax(alpha_of_nu(nu, N), dim=0).values
    return nu, alpha


def nu_of_alpha(alpha: Tensor, N: int) -> Tensor:
    """ν = T⁻¹(α) (Float64, the shape of α): linear interpolation in the monotone table; α >= the table's
    top (clean, α = 1) gives inf (then argmax(ν e_x + ε) = x)."""
    if N < 2:
        raise DnadiffError(f"the Gaussian-uniform duality needs >= 2 data tokens, got {N}")
    alpha = torch.as_tensor(alpha, dtype=torch.float64)
    nu_grid, a_grid = _table(int(N))
    a = alpha.reshape(-1).clamp_min(0.0).cpu()
    hi = torch.searchsorted(a_grid, a).clamp(1, len(a_grid) - 1)
    lo = hi - 1
    span = (a_grid[hi] - a_grid[lo]).clamp_min(1e-300)
    frac = ((a - a_grid[lo]) / span).clamp(0.0, 1.0)
    nu = nu_grid[lo] + frac * (nu_grid[hi] - nu_grid[lo])
    nu = torch.where(a >= a_grid[-1], torch.full_like(nu, math.inf), nu)
    return nu.reshape(alpha.shape).to(alpha.device)


def coupled_latents(x_idx: Tensor, nus: list[Tensor], N: int, generator: torch.Generator | None = None) -> list[Tensor]:
    """Data indices z = argmax(ν e_x + ε) for each ν in `nus` (Float[B] each) with ONE ε ~ N(0, I_N) per
    position (Alg. 1's coupled trajectory): x_idx Long[B, L] (clean data indices) -> [Long[B, L], ...]."""
    B, L = x_idx.shape
    gen_device = generator.device if generator is not None else x_idx.device
    eps = torch.randn(B, L, N, generator=generator, dtype=torch.float64, device=gen_device).to(x_idx.device)
    onehot = torch.nn.functional.one_hot(x_idx, N).to(torch.float64)
    out = []
    for nu in nus:
        nu = torch.as_tensor(nu, dtype=torch.float64, device=x_idx.device).reshape(B, 1, 1)
        clean = torch.isinf(nu).expand(B, L, 1).squeeze(-1)
        z = (torch.where(torch.isinf(nu), torch.zeros_like(nu), nu) * onehot + eps).argmax(-1)
        out.append(torch.where(clean, x_idx, z))
    return out


def dcd_loss(student, teacher, x0: Tensor, t: Tensor, s: Tensor, schedule, data_ids: Tensor, vocab_size: int,
             generator: torch.Generator | None = None, loss: str = "kl-bwd") -> Tensor:
    """One DCD loss (Alg. 1) on clean sequences x0 Long[B, L] at times t > s (Float[B]): coupled z_t, z_s,
    student x̂(z_t, t) against the teacher's x̂(z_s, s) (no gradient), averaged over data positions. Positions
    whose token is not a data token stay as they are (never noised, never scored: the udlm convention)."""
    if loss not in DCD_LOSSES:
        raise DnadiffError(f"DCD loss {loss!r}: choose {' or '.join(DCD_LOSSES)}")
    data_ids = data_ids.to(x0.device)
    N = int(data_ids.numel())
    x_idx = data_index(x0, data_ids, vocab_size)
    active = x_idx >= 0
    nu_t = nu_of_alpha(schedule.alpha(t.double()), N)
    nu_s = nu_of_alpha(schedule.alpha(s.double()), N)
    z_t, z_s = coupled_latents(x_idx.clamp_min(0), [nu_t, nu_s], N, generator)
    xt = torch.where(active, data_ids[z_t], x0)
    xs = torch.where(active, data_ids[z_s], x0)
    with torch.no_grad():
        log_teacher = data_log_probs(teacher(xs, s.float()), data_ids).double()
    log_student = data_log_probs(student(xt, t.float()), data_ids).double()
    if loss == "kl-bwd":
        per = (log_student.exp() * (log_student - log_teacher)).sum(-1)
    else:
        per = (log_teacher.exp() * (log_teacher - log_student)).sum(-1)
    per = torch.where(active, per, torch.zeros_like(per))
    return (per.sum() / active.sum().clamp_min(1)).float()


__all__ = ["DCD_LOSSES", "alpha_of_nu", "argmax_prob", "coupled_latents", "dcd_loss", "nu_of_alpha"]
