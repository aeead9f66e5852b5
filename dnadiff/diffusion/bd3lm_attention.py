"""BD3-LM's attention layout (Arriola et al., ICLR 2025, arXiv 2503.09573, §3.2 "efficient training" and
app. B.6): one pass of a bidirectional transformer over the 2L tokens x_t ⊕ x_0 with the block-causal mask

    M_full = [[M_BD, M_OBC],        (queries x_t: their own noisy block; the clean blocks before it)
              [0,    M_BC ]]        (queries x_0: the clean blocks up to and including their own)

    M_BD[i, j]  = 1 iff block(i) == block(j)     (block-diagonal)
    M_OBC[i, j] = 1 iff block(j) <  block(i)     (offset block-causal)
    M_BC[i, j]  = 1 iff block(j) <= block(i)     (block-causal)

and the x_0 half at the positions of the x_t half (position ids 0..L-1 twice, so a clean token and its
noisy copy share a rotary position). Block b's predictions are the outputs at x_t^b: they see x_t^b
(bidirectionally) and the clean blocks before it, whose own representations are block-causal, exactly as
when the blocks are generated one after another with a KV cache of the finished clean blocks
(samplers/block_attention.py). The network must take `attn_mask` and `position_ids` (the DiT,
backbones/dit.py); diffusion/bd3lm.py chooses this layout for a bidirectional one (`block_layout`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def block_ids(length: int, block_size: int, device=None, start: int = 0) -> Tensor:
    """Long[length]: block index of each token (the last block may be shorter), blocks counted from `start`."""
    return torch.arange(start, start + length, device=device) // block_size


def block_diff_mask(length: int, block_size: int, device=None) -> Tensor:
    """Bool[2L, 2L]: the M_full of the module docstring (True: the query may attend to the key)."""
    blk = block_ids(length, block_size, device)
    bq, bk = blk[:, None], blk[None, :]
    noisy = torch.cat([bq == bk, bk < bq], dim=1)  # (L, 2L): M_BD | M_OBC
    clean = torch.cat([torch.zeros_like(bq == bk), bk <= bq], dim=1)  # (L, 2L): 0 | M_BC
    return torch.cat([noisy, clean], dim=0)


def prefix_block_mask(n_clean: int, n_noisy: int, block_size: int, device=None) -> Tensor:
    """Bool[n_clean + n_noisy, same]: clean tokens (whole blocks from a block boundary) block-causal among
    themselves and blind to the noisy block; the noisy block sees them all and itself (the sampler's input
    [x^{<b} ; x_t^b], or its pending clean block before the noisy one under a KV cache)."""
    n = n_clean + n_noisy
    mask = torch.ones(n, n, dtype=torch.bool, device=device)
    blk = block_ids(n_clean, block_size, device)
    mask[:n_clean, :n_clean] = blk[None, :] <= blk[:, None]
    mask[:n_clean, n_clean:] = False
    return mask


def attention_logits(denoiser, x_t: Tensor, x0: Tensor, block_size: int) -> Tensor:
    """Float[B, L, V]: block b's predictions p(x^b | x_t^b, x^{<b}) from ONE call of the denoiser on
    x_t ⊕ x_0 (B, 2L) with the block-causal mask and repeated positions (the network is called with t = 0)."""
    B, L = x0.shape
    pos = torch.arange(L, device=x0.device).repeat(2)  # (2L,): x_0 at x_t's positions
    out = denoiser(torch.cat([x_t, x0], dim=1), torch.zeros(B, device=x0.device),
                   attn_mask=block_diff_mask(L, block_size, x0.device), position_ids=pos)  # (B, 2L, V)
    return out[:, :L]


__all__ = ["attention_logits", "block_diff_mask", "block_ids", "prefix_block_mask"]
