"""`remdm`: ReMDM remasking sampler (Wang et al. 2025, arXiv 2503.00307, §3, eq. 6-7 and §4.1).

The reverse step from t to s lets decoded tokens be remasked with probability σ_t:

    z_t = x (unmasked):  q(z_s) = (1 - σ_t) [z_s = x] + σ_t [z_s = mask]
    z_t = mask:          q(z_s = v) = p_θ(v | z_t) (α_s - (1 - σ_t) α_t)/(1 - α_t)
                         q(z_s = mask) = (1 - α_s - σ_t α_t)/(1 - α_t)

with 0 ≤ σ_t ≤ σ_max = min(1, (1 - α_s)/α_t), which keeps the marginals q(z_t | x) of MDLM
(σ_t = 0 is MDLM's ancestral step). Schedules (`schedule`, §4.1; the official code's
`remdm-cap`, `remdm-rescale`, `remdm-conf`, `remdm-loop` in `diffusion.py::_ddpm_caching_update`):
  cap      σ_t = min(eta, σ_max)      (paper: eta_cap, e.g. 0.008)
  rescale  σ_t = eta · σ_max          (paper: eta_rescale, e.g. 0.015)
  conf     per token: σ_t^ℓ = η^ℓ σ_max with η = softmax_ℓ(ψ) over the decoded tokens of a
           sequence, ψ^ℓ = -p_θ(token ℓ) recorded when ℓ was decoded (less confident tokens are
           remasked first); a remasked token's ψ is reset. As in the official code, masked
           positions take σ = 0 (their step is MDLM's); eta is unused.
  loop     three phases on a remapped α (the code's `t_on`, `t_off`, `alpha_on`; paper defaults
           0.55, 0.05, 0.9, eta 0.02): for t > t_on plain MDLM steps with α(t) = α_on (1-t)/(1-t_on)
           (reaching α_on at t_on); for t_off < t ≤ t_on ReMDM steps at constant α = α_on with
           σ = eta (tokens are remasked and re-decoded: the "loop"); for t ≤ t_off MDLM steps
           with α(t) = 1 - (1 - α_on) t / t_off. As in the official code the remapped α replaces
           the model's schedule (the denoiser still sees the grid time t).
Template (fixed) tokens are never remasked. A final noise-removal pass fills leftover masks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, StepRandom

REMASK_SCHEDULES = ("cap", "rescale", "conf", "loop")


def remdm_sigma(alpha_t: Tensor, alpha_s: Tensor, kind: str, eta: float) -> Tensor:
    sigma_max = torch.clamp((1.0 - alpha_s) / alpha_t, max=1.0)
    if kind == "cap":
        return torch.clamp(sigma_max, max=eta)
    return eta * sigma_max


def remdm_step(probs_x0: Tensor, x: Tensor, fixed: Tensor, mask_id: int, alpha_t, alpha_s, sigma) -> Tensor:
    """Weights Float64[B, L, V] of the ReMDM reverse transition (eq. 7).

    sigma: a scalar, or Float64[B, L] per position (the `conf` schedule)."""
    alpha_t = torch.as_tensor(alpha_t, dtype=torch.float64, device=x.device)
    alpha_s = torch.as_tensor(alpha_s, dtype=torch.float64, device=x.device)
    sigma = torch.as_tensor(sigma, dtype=torch.float64, device=x.device)
    sig = sigma.unsqueeze(-1) if sigma.dim() == 2 else sigma  # (B, L, 1) or scalar
    unmask = (alpha_s - (1.0 - sig) * alpha_t) / (1.0 - alpha_t)
    stay = (1.0 - alpha_s - sigma * alpha_t) / (1.0 - alpha_t)
    q = probs_x0 * unmask  # (B, L, V)
    q[..., mask_id] = stay.clamp_min(0.0)
    decoded = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), 1.0) * (1.0 - sig)
    decoded[..., mask_id] += sigma
    onehot = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), 1.0)
    out = torch.where((x != mask_id).unsqueeze(-1), decoded, q)
    return torch.where(fixed.unsqueeze(-1), onehot, out)


def conf_sigma(psi: Tensor, decoded: Tensor, sigma_max: Tensor) -> Tensor:
    """Float64[B, L]: η = softmax over decoded positions of ψ (0 elsewhere), times σ_max."""
    logits = torch.where(decoded, psi, torch.full_like(psi, -float("inf")))
    eta = torch.softmax(logits, dim=-1)  # (B, L)
    eta = torch.where(decoded, eta, torch.zeros_like(eta)).nan_to_num(0.0)  # rows with nothing decoded: 0
    return eta * sigma_max


def loop_alphas(t: float, s: float, t_on: float, t_off: float, alpha_on: float) -> tuple[float, float, bool]:
    """(α_t, α_s, remask phase?) of the `loop` schedule at grid times t > s (ReMDM code)."""
    if t > t_on:
        return alpha_on * (1.0 - t) / (1.0 - t_on), alpha_on * (1.0 - s) / (1.0 - t_on), False
    if t <= t_off:
        return 1.0 - (1.0 - alpha_on) * t / t_off, 1.0 - (1.0 - alpha_on) * s / t_off, False
    return alpha_on, alpha_on, True


@SAMPLERS.register("remdm")
class ReMDMSampler(Sampler):
    """`build_sampler("remdm", steps=1024, schedule="cap", eta=0.008)`; schedule cap|rescale|conf|loop,
    `t_on`, `t_off`, `alpha_on` for loop."""

    name = "remdm"

    def __init__(self, steps: int = 128, *, schedule: str = "cap", eta: float = 0.008, t_on: float = 0.55,
                 t_off: float = 0.05, alpha_on: float = 0.9, **options):
        super().__init__(steps, **options)
        if schedule not in REMASK_SCHEDULES:
            raise DnadiffError(f"sampler 'remdm': schedule must be {'|'.join(REMASK_SCHEDULES)}, got {schedule!r}")
        if not 0.0 <= eta <= 1.0:
            raise DnadiffError(f"sampler 'remdm': eta must be in [0, 1], got {eta}")
        if schedule == "loop":
            if not 0.0 < t_off < t_on < 1.0:
                raise DnadiffError(f"sampler 'remdm': loop needs 0 < t_off < t_on < 1, got t_on={t_on}, t_off={t_off}")
            if not 0.0 < alpha_on < 1.0:
                raise DnadiffError(f"sampler 'remdm': alpha_on must be in (0, 1), got {alpha_on}")
            if eta > (1.0 - alpha_on) / alpha_on:
                raise DnadiffError(f"sampler 'remdm': loop needs eta <= (1 - alpha_on)/alpha_on, got {eta}")
        self.remask_schedule, self.eta = schedule, float(eta)
        self.t_on, self.t_off, self.alpha_on = float(t_on), float(t_off), float(alpha_on)

    def init_state(self, denoiser, schedule, mask_id: int, x: Tensor) -> SamplerState:
        state = super().init_state(denoiser, schedule, mask_id, x)
        psi = torch.full(x.shape, -float("inf"), dtype=torch.float64, device=x.device)  # conf: ψ per position
        return state.replace(done=False, extra={**state.extra, "psi": psi})

    def step(self, state: SamplerState, logits: Tensor, rng: StepRandom) -> SamplerState:
        i, x, mask_id = state.step, state.x, state.mask_id
        probs = self.x0_probs(logits, x, mask_id)  # (B, L, V)
        alphas, grid = state.alphas, state.grid
        a_t, a_s = alphas[i], alphas[i + 1]
        extra = state.extra
        if self.remask_schedule in ("cap", "rescale"):
            sigma = remdm_sigma(a_t, a_s, self.remask_schedule, self.eta)
        elif self.remask_schedule == "conf":
            sigma_max = torch.clamp((1.0 - a_s) / a_t, max=1.0)
            decoded = (x != mask_id) & ~state.fixed
            sigma = conf_sigma(extra["psi"], decoded, sigma_max)  # (B, L); 0 at masked positions
        else:
            lt, ls, remask = loop_alphas(float(grid[i]), float(grid[i + 1]), self.t_on, self.t_off, self.alpha_on)
            a_t = torch.tensor(lt, dtype=torch.float64)
            a_s = torch.tensor(ls, dtype=torch.float64)
            sigma = torch.tensor(self.eta if remask else 0.0, dtype=torch.float64)
        q = remdm_step(probs, x, state.fixed, mask_id, a_t, a_s, sigma)
        x_new = rng.categorical(q)
        if self.remask_schedule == "conf":  # record ψ = -p_θ(token) of new tokens; reset remasked ones
            psi = extra["psi"].clone()
            newly = (x == mask_id) & (x_new != mask_id)
            p_tok = probs.gather(-1, x_new.unsqueeze(-1)).squeeze(-1)  # (B, L)
            psi = torch.where(newly, -p_tok, psi)
            psi = torch.where((x != mask_id) & (x_new == mask_id), torch.full_like(psi, -float("inf")), psi)
            extra = {**extra, "psi": psi}
        return self.advance(state, x_new, stop_when_unmasked=False, extra=extra)
