"""Sequence pooling over real (non-pad) positions, and strand helpers for right-padded batches.

The reference Caduceus/HyenaDNA decoders mean-pool over every position, left pads included
(docs/references.md "Genomic Benchmarks"), so a sequence's score depends on the longest sequence of its
batch. Here pads never enter the pooled vector.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.backbones.base import reverse_index  # noqa: F401  (per-row reversal; re-exported here)
from dnadiff.backbones.rcps import reverse_complement_ids
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer

POOLINGS = ("mean", "first", "last")


def _lengths(mask: Tensor) -> Tensor:
    return mask.long().sum(dim=1)  # (B,)


def pool(hidden: Tensor, mask: Tensor | None = None, mode: str = "mean") -> Tensor:
    """hidden (B, L, D), mask (B, L) 1 on real positions (right padding) -> (B, D).

    mean: average over real positions; first: position 0; last: the last real position.
    """
    if mode not in POOLINGS:
        raise DnadiffError(f"pooling: must be one of {', '.join(POOLINGS)}, got {mode!r}")
    if mask is None:
        mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
    if mode == "first":
        return hidden[:, 0]
    if mode == "last":
        idx = (_lengths(mask) - 1).clamp(min=0)  # (B,)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]
    w = mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
    # where(): a NaN/inf in a pad position cannot leak through 0 * x
    total = torch.where(w > 0, hidden, torch.zeros((), dtype=hidden.dtype, device=hidden.device)).sum(dim=1)
    return total / w.sum(dim=1).clamp(min=1.0)  # (B, D)




def reverse_complement_padded(input_ids: Tensor, mask: Tensor | None, complement: Tensor) -> Tensor:
    """RC of each row's real bases; pads stay on the right (the batch keeps its attention_mask)."""
    return reverse_complement_ids(input_ids, complement, None if mask is None else reverse_index(mask))


def complement_tensor(vocab_size: int = 16, device=None) -> Tensor:
    """DNA complement map over ids 0..vocab_size-1 (A7<->T10, C8<->G9, others fixed)."""
    return torch.tensor(DNATokenizer().complement_map(vocab_size), dtype=torch.long, device=device)
