"""Several tokens at once from a Mamba decoding cache (`MambaLM.step_many`): the outputs after each of n new
tokens given the recurrent state, in one parallel pass instead of n `step` calls (block diffusion feeds 2n-token
stretches from a carried state: samplers/block.py).

Per layer, with the cache's conv state (the last d_conv inputs) and SSM state h_0 (Mamba Alg. 2):
  conv   the depthwise causal conv over [the state's last d_conv - 1 inputs, the n new ones] (no padding);
  scan   h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t from h_0 splits into the scan from zero (the chunked scan of
         backbones/scan.py) plus the decayed initial state exp(A Σ_{s<=t} Δ_s) ⊙ h_0 (A diagonal), so
         y_t = C_t·h_t + D x_t = y_t(zero start) + C_t·(exp(A cumΔ_t) ⊙ h_0), then gated by silu(z_t).
The same numbers as n `step` calls up to float rounding (tests/test_block_diffusion.py). `update=False`
leaves the cache as it was (nothing to copy: the new states are simply not written).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dnadiff.backbones.scan import selective_scan_chunked


def mixer_many(mixer, hidden: Tensor, conv_state: Tensor, ssm_state: Tensor, update: bool) -> Tensor:
    """hidden Float[B, n, d] -> Float[B, n, d] through one Mamba mixer from (conv_state Float[B, E, W],
    ssm_state Float[B, E, N]); both written in place with the states after the n tokens when `update`."""
    xz = mixer.in_proj(hidden)  # (B, n, 2E)
    x, z = xz.float().chunk(2, dim=-1)
    weight = mixer.conv1d.weight[:, 0, :].float()  # (E, W)
    seq = torch.cat([conv_state[:, :, 1:], x.transpose(1, 2)], dim=-1)  # (B, E, W - 1 + n)
    bias = None if mixer.conv1d.bias is None else mixer.conv1d.bias.float()
    xc = F.silu(F.conv1d(seq, weight.unsqueeze(1), bias, groups=weight.shape[0]))  # (B, E, n)
    xc = xc.transpose(1, 2)  # (B, n, E)
    x_db = mixer.x_proj(xc.to(mixer.x_proj.weight.dtype)).float()  # (B, n, R + 2N)
    dt, b, c = torch.split(x_db, [mixer.dt_rank, mixer.d_state, mixer.d_state], dim=-1)
    delta = F.softplus(F.linear(dt, mixer.dt_proj.weight.float()) + mixer.dt_proj.bias.float())  # (B, n, E)
    a = -torch.exp(mixer.A_log.float())  # (E, N)
    y, last = selective_scan_chunked(xc, delta, a, b, c, mixer.D.float(), None, None, False, return_last_state=True)
    decay = torch.exp(delta.cumsum(dim=1)[..., None] * a)  # (B, n, E, N): exp(A Σ_{s<=t} Δ_s)
    y = y + torch.einsum("bten,ben,btn->bte", decay, ssm_state, c)  # the initial state's share
    y = y * F.silu(z)
    if update:
        ssm_state.copy_(decay[:, -1] * ssm_state + last)
        conv_state.copy_(seq[:, :, -conv_state.shape[-1]:])
    return mixer.out_proj(y.to(mixer.out_proj.weight.dtype))  # (B, n, d)


def step_many(lm, input_ids: Tensor, cache: dict, update: bool = True, cond: Tensor | None = None) -> Tensor:
    """Logits Float[B, n, V] after each of input_ids Long[B, n] fed from `cache` (MambaLM.allocate_cache); the
    cache advanced past them when `update` (as n `step` calls), else unchanged."""
    hidden = lm.backbone.embedding(input_ids)  # (B, n, d)
    if cond is not None:
        hidden = hidden + lm.cond_proj(cond.to(hidden.dtype))[:, None]
    residual = None
    for layer, (conv_state, ssm_state) in zip(lm.backbone.layers, cache["layers"]):
        residual = hidden if residual is None else hidden + residual  # MambaBlock
        hidden = layer.norm(residual.to(dtype=layer.norm.weight.dtype))
        if layer.residual_in_fp32:
            residual = residual.float()
        hidden = mixer_many(layer.mixer, hidden, conv_state, ssm_state, update)
    residual = hidden + residual
    h = lm.backbone.norm_f(residual.to(dtype=lm.backbone.norm_f.weight.dtype))
    if update:
        cache["pos"] += input_ids.shape[1]
    return lm.lm_head(h.to(lm.lm_head.weight.dtype))[..., : lm.vocab_size]  # (B, n, V)


__all__ = ["mixer_many", "step_many"]
