"""Best-of-N: draw N unguided samples per output and keep the one with the highest reward.

The baseline every guidance method must beat at equal compute: N is chosen so that N unguided
samples cost the denoiser rows the guided method spent per sequence (`budget_n`). The candidates
of output r are rows r·N .. r·N + N - 1 of one expanded random stream, so with an int seed the
result does not depend on the batch layout.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS, GuidedMethod


def budget_n(nfe_per_sequence: float, unguided_nfe_per_sequence: float) -> int:
    """The N of best-of-N spending (at most, rounded to nearest) a given per-sequence denoiser budget."""
    if unguided_nfe_per_sequence <= 0:
        raise DnadiffError("best-of-N budget: the unguided sampler made no denoiser call")
    return max(1, int(math.floor(nfe_per_sequence / unguided_nfe_per_sequence + 0.5)))


@METHODS.register("best_of_n")
class BestOfN(GuidedMethod):
    """`BestOfN(sampler, reward, n=8)`."""

    name = "best_of_n"

    def __init__(self, sampler, reward, n: int = 8):
        super().__init__(sampler, reward)
        if int(n) < 1:
            raise DnadiffError(f"best_of_n: n must be >= 1, got {n}")
        self.n = int(n)

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, stream):
        B, N = x.shape[0], self.n
        cand_stream = stream.expand(N, 11)
        xs = x.repeat_interleave(N, dim=0)  # (B·N, L): candidates of output r are rows r·N..r·N+N-1
        smp = self.sampler
        state = smp.run(denoiser, schedule, mask_id, xs, cand_stream)
        values = self.score(state.x).view(B, N)  # (B, N)
        best = values.argmax(dim=1)  # (B,)
        pick = torch.arange(B, device=x.device) * N + best
        return state.x[pick], state.step


__all__ = ["BestOfN", "budget_n"]
