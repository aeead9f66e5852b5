"""RMSNorm in plain torch (Zhang & Sennrich 2019), as mamba_ssm's `RMSNorm` without triton.

    y = x / sqrt(mean(x^2) + eps) * weight        (computed in float32, cast back)

Parameter name `weight` (and `bias` when asked for) so official checkpoints load by name.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = False):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        y = y * self.weight.float()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def build_norm(dim: int, eps: float = 1e-5, rms_norm: bool = True) -> nn.Module:
    """RMSNorm (rms_norm=True, the Mamba/Caduceus default) or nn.LayerNorm."""
    return RMSNorm(dim, eps=eps) if rms_norm else nn.LayerNorm(dim, eps=eps)
