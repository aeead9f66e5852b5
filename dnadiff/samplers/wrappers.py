"""Denoiser wrappers: reverse-complement-symmetric predictions and classifier-free guidance.

Both take and return denoisers `(x_t: Long[B, L], t: Float[B]) -> logits Float[B, L, V]`, so any
sampler can use them.

rc_symmetric(denoiser, complement_ids, mask_id=None)
    p̄(x_t) = ½ p(x_t) + ½ RC[p(RC(x_t))]   (probabilities, not logits)
    where RC(x) = complement(x) reversed and RC[p] reverses positions and permutes the vocabulary
    by the complement. p̄ is exactly RC-equivariant, p̄(RC x) = RC[p̄(x)], so every sampler whose
    randomness treats positions alike (ancestral, cached, analytic, first_hitting, remdm,
    confidence with a symmetric criterion) gives RC(x) the same probability as x. For an
    RC-equivariant model (Caduceus-PS) it changes nothing; for others it symmetrises. Costs two
    calls of the wrapped model per call. `mask_id` (optional) removes the mask column before the
    softmax, as SUBS does.

guided(cond_denoiser, uncond_denoiser, scale, mask_id=None)
    classifier-free guidance (Ho & Salimans 2022) on log-probabilities, w = scale:
        log p_w = (1 + w) log p(x0 | x_t, c) - w log p(x0 | x_t)      (+ a per-position constant)
    w = 0 is the conditional model, w > 0 sharpens towards the class; the convention is that of
    Nisonoff et al. 2024 / Schiff et al. 2024 for discrete diffusion (p_w ∝ p_c^{1+w} / p_u^{w}).
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.denoiser import DenoiserWrapper, as_denoiser
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError


def _log_probs(logits: Tensor, mask_id: int | None) -> Tensor:
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if mask_id is not None:
        logits = logits.clone()
        logits[..., mask_id] = NEG_INF
    return logits.log_softmax(dim=-1)


class RCSymmetric(DenoiserWrapper):
    """See module docstring; `complement_ids` maps every token id to its complement."""

    forwards_steps = False  # one strand's incremental step is not the strand average

    def __init__(self, denoiser, complement_ids, mask_id: int | None = None):
        self.denoiser = as_denoiser(denoiser)
        self.complement = torch.as_tensor(complement_ids, dtype=torch.long)
        self.mask_id = mask_id

    def __call__(self, x_t: Tensor, t: Tensor, **arch) -> Tensor:
        if arch:  # a chunk under an attention mask / KV cache (block diffusion) has no reverse complement
            raise DnadiffError("RC-symmetric sampling does not apply to a block-diffusion attention model")
        comp = self.complement.to(x_t.device)
        p_fwd = _log_probs(self.denoiser(x_t, t), self.mask_id).exp()  # (B, L, V)
        x_rc = comp[x_t].flip(1)
        p_rc = _log_probs(self.denoiser(x_rc, t), self.mask_id).exp()  # (B, L, V) on the other strand
        V = p_fwd.shape[-1]
        perm = torch.arange(V, device=x_t.device)
        n = min(V, comp.numel())
        perm[:n] = comp[:n]  # ids beyond the map (padded vocabulary) complement to themselves
        p_back = p_rc.flip(1)[..., perm]  # prob of v at i = prob of comp(v) at L-1-i on the RC strand
        p = 0.5 * (p_fwd + p_back)
        out = torch.where(p > 0, p.clamp_min(1e-38).log(), torch.full_like(p, NEG_INF))
        if self.mask_id is not None:
            out[..., self.mask_id] = NEG_INF
        return out


class Guided(DenoiserWrapper):
    """See module docstring."""

    forwards_steps = False  # the guided output mixes two models: no single incremental step

    def __init__(self, cond_denoiser, uncond_denoiser, scale: float, mask_id: int | None = None):
        self.cond, self.uncond = as_denoiser(cond_denoiser), as_denoiser(uncond_denoiser)
        self.denoiser = self.cond
        self.scale, self.mask_id = float(scale), mask_id

    @property
    def time_conditioned(self) -> bool:
        return bool(self.cond.time_conditioned or self.uncond.time_conditioned)

    def __call__(self, x_t: Tensor, t: Tensor, **arch) -> Tensor:
        """arch: a block-diffusion attention model's attn_mask / position_ids, for both models (never a KV cache:
        the two would write one cache; samplers/block_attention.py recomputes under guidance)."""
        if arch.get("kv_cache") is not None:
            raise DnadiffError("guided denoiser: the conditional and unconditional model cannot share a KV cache")
        lp_c = _log_probs(self.cond(x_t, t, **arch), self.mask_id)  # (B, L, V)
        if self.scale == 0.0:
            return lp_c
        lp_u = _log_probs(self.uncond(x_t, t, **arch), self.mask_id)
        out = (1.0 + self.scale) * lp_c - self.scale * lp_u
        out = out.clamp_min(NEG_INF)
        if self.mask_id is not None:
            out[..., self.mask_id] = NEG_INF
        return out


def rc_symmetric(denoiser, complement_ids, mask_id: int | None = None) -> RCSymmetric:
    return RCSymmetric(denoiser, complement_ids, mask_id)


def guided(cond_denoiser, uncond_denoiser, scale: float, mask_id: int | None = None) -> Guided:
    return Guided(cond_denoiser, uncond_denoiser, scale, mask_id)
