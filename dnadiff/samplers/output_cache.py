"""The per-row cache of denoiser outputs that lets a sampler skip rows whose tokens did not change.

MDLM (Sahoo et al. 2024, arXiv 2406.07524, §4.1, "caching"): with the SUBS parameterisation and a
denoiser that ignores t, p_θ(x0 | x_t) is a function of x_t alone, so a sequence whose tokens did
not change since its last evaluation would get the same output again. The reference applies the
trick to the whole batch (it skips a call only when no sequence changed); here it is applied per
row: the loop (base.py, `Sampler.evaluate`) sends the denoiser only the stale rows and fills the
others from this cache. A row's output must depend on that row alone (true of every dnadiff
denoiser and wrapper: rc_symmetric, guided, token suppression), so the merged batch equals what a
full call would return and the samples are those of the uncached sampler.

    cache = OutputCache.empty(B, device)            # nothing valid yet: every row is stale
    stale = cache.stale(x)                          # Bool[B]: never evaluated, or tokens changed
    cache = cache.store(x, rows, logits_rows)       # after evaluating `rows` (Long[B']) of x
    cache.logits                                    # Float[B, L, V] (None before the first store)
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor


@dataclasses.dataclass(frozen=True)
class OutputCache:
    """Denoiser outputs per row and the tokens they were computed on.

    x       Long[B, L]|None       tokens each cached row was evaluated on
    logits  Float[B, L, V]|None   the outputs (after guidance hooks), rows aligned with x
    valid   Bool[B]               rows whose entry holds a real output (False: never evaluated,
                                  or a placeholder left by a call that did not need the row)
    """

    x: Tensor | None
    logits: Tensor | None
    valid: Tensor

    @classmethod
    def empty(cls, rows: int, device) -> OutputCache:
        return cls(x=None, logits=None, valid=torch.zeros(rows, dtype=torch.bool, device=device))

    def stale(self, x: Tensor) -> Tensor:
        """Bool[B]: rows of x (Long[B, L]) that need a fresh output."""
        if self.x is None or self.x.shape != x.shape:
            return torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        return ~self.valid | (x != self.x).any(dim=1)

    def merged(self, rows: Tensor, new: Tensor | None) -> Tensor | None:
        """Float[B, L, V]: the cached outputs with rows `rows` (Long[B']) replaced by `new`
        (Float[B', L, V]; None: nothing evaluated). Rows never evaluated and not in `rows` hold
        zeros, placeholders the caller must not use."""
        if new is None:
            return self.logits
        if self.logits is None:
            base = torch.zeros((self.valid.shape[0], *new.shape[1:]), dtype=new.dtype, device=new.device)
        else:
            base = self.logits.to(new.dtype)
        return base.index_copy(0, rows, new)  # out of place: the old cache is untouched

    def store(self, x: Tensor, rows: Tensor, logits: Tensor) -> OutputCache:
        """The cache after evaluating `rows` of x, given the merged outputs `logits` [B, L, V]:
        those rows become valid for their current tokens; rows that kept their entry stay valid
        only if their tokens are unchanged."""
        keep = ~self.stale(x)
        valid = keep.clone()
        valid[rows] = True
        return OutputCache(x=x, logits=logits, valid=valid)

    def select(self, rows: Tensor) -> OutputCache:
        """The cache of sequences `rows` (Long[B']; repeats allowed), as `SamplerState.select`."""
        return OutputCache(x=None if self.x is None else self.x[rows],
                           logits=None if self.logits is None else self.logits[rows], valid=self.valid[rows])


__all__ = ["OutputCache"]
