"""`remdm`: ReMDM remasking sampler (Wang et al. 2025, arXiv 2503.00307, §3, eq. 6-7).

The reverse step from t to s lets decoded tokens be remasked with probability σ_t:

    z_t = x (unmasked):  q(z_s) = (1 - σ_t) [z_s = x] + σ_t [z_s = mask]
    z_t = mask:          q(z_s = v) = p_θ(v | z_t) (α_s - (1 - σ_t) α_t)/(1 - α_t)
                         q(z_s = mask) = (1 - α_s - σ_t α_t)/(1 - α_t)

with 0 ≤ σ_t ≤ σ_max = min(1, (1 - α_s)/α_t), which keeps the marginals q(z_t | x) of MDLM
(σ_t = 0 is MDLM's ancestral step). Schedules (`schedule`, §3.2):
  cap      σ_t = min(eta, σ_max)      (paper: eta_cap, e.g. 0.008)
  rescale  σ_t = eta · σ_max          (paper: eta_rescale, e.g. 0.015)
Template (fixed) tokens are never remasked. A final noise-removal pass fills leftover masks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, Sampler


def remdm_sigma(alpha_t: Tensor, alpha_s: Tensor, kind: str, eta: float) -> Tensor:
    sigma_max = torch.clamp((1.0 - alpha_s) / alpha_t, max=1.0)
    if kind == "cap":
        return torch.clamp(sigma_max, max=eta)
    return eta * sigma_max


def remdm_step(probs_x0: Tensor, x: Tensor, fixed: Tensor, mask_id: int, alpha_t, alpha_s, sigma) -> Tensor:
    """Weights Float64[B, L, V] of the ReMDM reverse transition (eq. 7)."""
    alpha_t = torch.as_tensor(alpha_t, dtype=torch.float64, device=x.device)
    alpha_s = torch.as_tensor(alpha_s, dtype=torch.float64, device=x.device)
    sigma = torch.as_tensor(sigma, dtype=torch.float64, device=x.device)
    unmask = (alpha_s - (1.0 - sigma) * alpha_t) / (1.0 - alpha_t)
    stay = (1.0 - alpha_s - sigma * alpha_t) / (1.0 - alpha_t)
    q = probs_x0 * unmask  # (B, L, V)
    q[..., mask_id] = stay.clamp_min(0.0)
    decoded = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), float(1.0 - sigma))
    decoded[..., mask_id] += float(sigma)
    onehot = torch.zeros_like(q).scatter_(-1, x.unsqueeze(-1), 1.0)
    out = torch.where((x != mask_id).unsqueeze(-1), decoded, q)
    return torch.where(fixed.unsqueeze(-1), onehot, out)


@SAMPLERS.register("remdm")
class ReMDMSampler(Sampler):
    """`build_sampler("remdm", steps=1024, schedule="cap", eta=0.008)`."""

    name = "remdm"

    def __init__(self, steps: int = 128, *, schedule: str = "cap", eta: float = 0.008, **options):
        super().__init__(steps, **options)
        if schedule not in ("cap", "rescale"):
            raise DnadiffError(f"sampler 'remdm': schedule must be cap|rescale, got {schedule!r}")
        if not 0.0 <= eta <= 1.0:
            raise DnadiffError(f"sampler 'remdm': eta must be in [0, 1], got {eta}")
        self.remask_schedule, self.eta = schedule, float(eta)

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, generator) -> Tensor:
        fixed = x != mask_id  # template positions (never remasked)
        ts = self.time_grid(x.device)
        alphas = schedule.alpha(ts).double()
        for i in range(self.steps):
            logits = self.denoise_call(denoiser, x, ts[i])
            probs = self.x0_probs(logits, x, mask_id)  # (B, L, V)
            sigma = remdm_sigma(alphas[i], alphas[i + 1], self.remask_schedule, self.eta)
            q = remdm_step(probs, x, fixed, mask_id, alphas[i], alphas[i + 1], sigma)
            x = self.draw(q, generator)
        return self.remove_noise(denoiser, x, mask_id, generator)
