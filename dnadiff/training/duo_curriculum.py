"""DUO's Gaussian-guided curriculum for the uniform-noise `udlm` objective (Sahoo et al., "The Diffusion
Duality", arXiv 2506.10892, §4.1 "curriculum learning"; code s-sahoo/duo, `algo.py` `DUO.nll`, mode "simple",
configs/algo/duo.yaml). Pure PyTorch on denoiser callables (no Lightning); the settings are the objective's
options (diffusion/udlm.py `_set_curriculum`), the global step comes from the training loop (`training_loss`).

The duality (§3, training/dcd.py): with w_t = α̃_t e_x + σ̃_t ε, ε ~ N(0, I_N) over the N data tokens, the
variance-preserving Gaussian latent (α̃² + σ̃² = 1, ν_t = α̃_t/σ̃_t), z_t = argmax(w_t) has the uniform-noise
marginal Cat(α_t x + (1 - α_t)/N) with α_t = T(ν_t). So the discrete z_t of the udlm objective can be drawn
through a Gaussian latent: ν_t = T⁻¹(α_t) (dcd.nu_of_alpha) for the run's schedule.

The curriculum (§4.1). During the first `curriculum_steps` training steps the denoiser is fed the tempered
softmax of the latent, softmax(w_t/τ) (the reference scales w_t by 1/τ and its embedding layer takes the
softmax of a real-valued input: the input is a convex mix of token embeddings) instead of one_hot(z_t); the
loss is the udlm NELBO integrand (diffusion/udlm.py, the UDLM paper's §4 continuous-time bound) evaluated at
the discrete z_t = argmax(w_t) with x̂_θ computed from the soft input: DUO's curriculum objective, the NELBO
with argmax replaced by softmax(·/τ) inside the network only (§4.1; `nll_per_token(log_x_theta(softmax(w/τ)),
xt=argmax(w), ...)` in the reference). As τ -> 0 the soft input becomes one_hot(z_t): the loss is the plain
udlm estimate at the same draws (tests/test_duo_curriculum.py). In value softmax(w/τ) = softmax((ν e_x +
ε)/(τ √(1 + ν²))): DUO's τ acts on the variance-preserving latent, not on the rescaled ν e_x + ε.

τ schedule (the reference's `_compute_gumbel_tau_inverse`): log10 τ = log10 `curriculum_tau` until step
`curriculum_anneal_start`, then linear in the step to log10 `curriculum_tau_end` at `curriculum_steps`
(reference defaults: 10^-1, 10^-2, start 100k, end 200k); after it, plain udlm training (the reference
returns to the discrete NELBO once global_step > end; here from step `curriculum_steps` on).

Noise range ("low-variance" training, §4.1). The reference draws t ~ U[t_min, 1] and maps it linearly to the
Gaussian γ_t = -log SNR = γ_min + t (γ_max - γ_min), α̃² = sigmoid(-γ), σ̃² = sigmoid(γ), so ν = e^(-γ/2), and
uses α_t = T(ν_t), α'_t = T'(ν_t) dν/dt in the integrand (γ ∈ [-3.5, -1.75] for GPT-2's 50k tokens: ν ∈
[2.40, 5.75]). With `curriculum_gamma_min/max` set the curriculum does the same (no prior term then: the
restricted range is a training surrogate, not a bound); unset (the default: that range is nearly clean for
DNA's N = 4), the curriculum keeps the run's schedule and its prior term, so its logged loss is the udlm NELBO
estimate with a relaxed input. Validation is always the plain discrete NELBO (the reference's eval too).

The soft input reaches the backbone through its token embedding (diffusion/soft_input.call_soft): the
relaxed one-hot lives in the N data columns of the V-wide vocabulary; positions that are not noised (pads,
N, specials) keep the one-hot of their token. Backbones see token ids and never learn about the noise.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.diffusion.base import LossOutput, real_mask
from dnadiff.diffusion.soft_input import call_soft
from dnadiff.diffusion.udlm import data_index
from dnadiff.training.dcd import alpha_of_nu, nu_of_alpha


def curriculum_tau(step: int, steps: int, tau: tuple[float, float], anneal_start: int) -> float | None:
    """τ at optimizer step `step` (the reference's schedule, module docstring), None once the curriculum is over
    (step >= steps; steps = 0: never)."""
    if step >= steps:
        return None
    lo, hi = math.log10(tau[0]), math.log10(tau[1])
    if step < anneal_start or steps == anneal_start:
        return 10.0**lo
    return 10.0 ** (lo + (step - anneal_start) / (steps - anneal_start) * (hi - lo))


def vp_latent(x_idx: Tensor, nu: Tensor, N: int, generator: torch.Generator | None = None) -> Tensor:
    """The variance-preserving Gaussian latent w = α̃ e_x + σ̃ ε (α̃ = ν/√(1+ν²), σ̃ = 1/√(1+ν²); ν = inf: w = e_x),
    Float64[B, L, N], for clean data indices x_idx Long[B, L] (>= 0) and ν Float[B]."""
    B, L = x_idx.shape
    gen_device = generator.device if generator is not None else x_idx.device
    eps = torch.randn(B, L, N, generator=generator, dtype=torch.float64, device=gen_device).to(x_idx.device)
    nu = torch.as_tensor(nu, dtype=torch.float64, device=x_idx.device).reshape(B, 1, 1)
    inf = torch.isinf(nu)
    finite = torch.where(inf, torch.zeros_like(nu), nu)
    a = torch.where(inf, torch.ones_like(nu), finite / torch.sqrt(1 + finite**2))
    s = torch.where(inf, torch.zeros_like(nu), 1 / torch.sqrt(1 + finite**2))
    return a * torch.nn.functional.one_hot(x_idx, N).to(torch.float64) + s * eps


def dalpha_dnu(nu: Tensor, N: int, nodes: int = 4001) -> Tensor:
    """T'(ν) = N/(N-1) · P'(ν), P'(ν) = (N-1) ∫ φ(u) φ(u+ν) Φ(u+ν)^(N-2) du (the derivative of dcd.argmax_prob
    under the integral; same trapezoid on u ∈ [-12, 12]) -> Float64 like ν."""
    nu = torch.as_tensor(nu, dtype=torch.float64)
    u = torch.linspace(-12.0, 12.0, nodes, dtype=torch.float64)
    v = u + nu.reshape(-1, 1)
    log_c = -0.5 * math.log(2 * math.pi)
    integrand = torch.exp(2 * log_c - 0.5 * u**2 - 0.5 * v**2 + (N - 2) * torch.special.log_ndtr(v))
    return (N * torch.trapezoid(integrand, u, dim=-1)).reshape(nu.shape)


def gamma_alpha(t: Tensor, gamma: tuple[float, float], N: int) -> tuple[Tensor, Tensor, Tensor]:
    """DUO's curriculum range: γ_t = γ_min + t (γ_max - γ_min), ν_t = e^(-γ_t/2) -> (ν_t, α_t = T(ν_t),
    α'_t = T'(ν_t) · (-ν_t/2) · (γ_max - γ_min)), Float64[B] each."""
    t = t.double()
    g = gamma[0] + t * (gamma[1] - gamma[0])
    nu = torch.exp(-0.5 * g)
    dalpha = dalpha_dnu(nu.cpu(), N).to(t.device) * (-0.5 * nu) * (gamma[1] - gamma[0])
    return nu, alpha_of_nu(nu.cpu(), N).to(t.device), dalpha


def soft_vocab(soft: Tensor, x: Tensor, active: Tensor, data_ids: Tensor, vocab_size: int) -> Tensor:
    """The V-wide relaxed one-hot: `soft` Float[B, L, N] in the data columns at active positions, one_hot(x)
    elsewhere -> Float[B, L, V] (differentiable in `soft`)."""
    hard = torch.nn.functional.one_hot(x, vocab_size).to(soft.dtype)
    placed = torch.zeros_like(hard).index_copy(-1, data_ids.to(x.device), soft)
    return torch.where(active.unsqueeze(-1), placed, hard)


def curriculum_loss(objective, denoiser, x0: Tensor, attention_mask: Tensor | None, tau: float,
                    t: Tensor | None = None, generator: torch.Generator | None = None,
                    return_inputs: bool = False):
    """DUO's curriculum estimate (module docstring) for a udlm `objective`: t as objective.loss draws it, one ε
    per position, z_t = argmax(w_t), the denoiser fed softmax(w_t/τ) through `call_soft`, the udlm integrand at
    z_t. Returns a LossOutput (and, with return_inputs, (z_t ids Long[B, L], soft input Float[B, L, V]))."""
    data_ids = objective.data_ids.to(x0.device)
    N, V = objective.N, int(objective.vocab_size or 0)
    x0_idx = data_index(x0, data_ids, V)
    active = real_mask(x0, attention_mask) & (x0_idx >= 0)
    if t is None:
        t = objective.sample_t(x0.shape[0], generator=generator, device=x0.device)
    else:
        t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).expand(x0.shape[0])
    alpha_dalpha = None
    if objective.curriculum_gamma is not None:
        nu, alpha, dalpha = gamma_alpha(t, objective.curriculum_gamma, N)
        alpha_dalpha = (alpha, dalpha)
    else:
        nu = nu_of_alpha(objective.schedule.alpha(t.double()), N)
    w = vp_latent(x0_idx.clamp_min(0), nu, N, generator)  # (B, L, N)
    z_t = torch.where(active, data_ids[w.argmax(-1)], x0)
    soft = soft_vocab(torch.softmax(w / tau, dim=-1), z_t, active, data_ids, max(V, int(x0.max()) + 1))
    logits = call_soft(denoiser, z_t, soft.float(), t)
    out = objective.nelbo(logits, x0_idx, z_t, t, active, alpha_dalpha=alpha_dalpha,
                          prior=objective.curriculum_gamma is None)
    return (out, (z_t, soft)) if return_inputs else out


def training_loss(objective, denoiser, x0: Tensor, attention_mask: Tensor | None, step: int) -> LossOutput:
    """The training step's loss at optimizer step `step`: DUO's curriculum estimate while the objective's
    curriculum runs (`curriculum_steps` > step), else exactly `objective.loss` (the same draws)."""
    steps = getattr(objective, "curriculum_steps", 0)
    tau = curriculum_tau(step, steps, objective.curriculum_tau, objective.curriculum_anneal_start) if steps else None
    if tau is None:
        return objective.loss(denoiser, x0, attention_mask)
    return curriculum_loss(objective, denoiser, x0, attention_mask, tau)


__all__ = ["curriculum_loss", "curriculum_tau", "dalpha_dnu", "gamma_alpha", "soft_vocab", "training_loss",
           "vp_latent"]
