"""Rotary position embedding (Su et al. 2021, RoFormer §3.4), "rotate-half" layout.

The channel pairs are (i, i + D/2) rather than interleaved (2i, 2i+1), as in GPT-NeoX and the
MDLM DiT. For position p and pair i the angle is p · base^(−2i/D):

    rope(x)_p = x_p ⊙ cos(θ_p) + rotate_half(x_p) ⊙ sin(θ_p),   rotate_half([a, b]) = [−b, a].

Dot products of rotated queries and keys depend only on the position difference.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rotate_half(x: Tensor) -> Tensor:
    """[a, b] -> [-b, a] on the last dimension (split in two halves)."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Rotary(nn.Module):
    """Caches cos/sin tables for a head dimension `dim` (even) and rotates q/k of shape (B, H, L, D)."""

    def __init__(self, dim: int, base: float = 10_000.0):
        super().__init__()
        if dim % 2:
            raise ValueError(f"rotary head dimension must be even, got {dim}")
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))  # (D/2,)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self._cache: tuple[int, torch.device, Tensor, Tensor] | None = None

    def tables(self, seq_len: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """cos, sin of shape (L, D) in float32."""
        if self._cache is None or self._cache[0] < seq_len or self._cache[1] != device:
            pos = torch.arange(seq_len, device=device, dtype=torch.float32)
            angles = torch.outer(pos, self.inv_freq.to(device))  # (L, D/2)
            emb = torch.cat((angles, angles), dim=-1)  # (L, D)
            self._cache = (seq_len, device, emb.cos(), emb.sin())
        _, _, cos, sin = self._cache
        return cos[:seq_len], sin[:seq_len]

    def forward(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Rotate q and k (B, H, L, D); the math runs in float32, the result keeps the input dtype."""
        cos, sin = self.tables(q.shape[-2], q.device)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    xf = x.float()
    return (xf * cos + rotate_half(xf) * sin).to(x.dtype)
