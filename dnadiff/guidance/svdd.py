"""SVDD: soft value-based decoding (Li et al. 2024, arXiv 2408.08252, alg. 1, SVDD-PM).

At every step of the wrapped sampler, for each sequence:
  1. draw M candidate next states x_s^(1..M) ~ p_θ(x_s | x_t) (the sampler's own step, M copies);
  2. value of each: v_m = r(x̂0(x_s^(m))), the reward of its predicted clean sequence (masked
     positions filled by argmax p_θ(x0 | x_s^(m)): the posterior-mean approximation of §4.2);
  3. keep one: m ~ softmax(v / α) (α = 0: argmax, first on ties).
The denoiser output computed on the kept candidate is the next step's model output, so a step
costs M denoiser rows and M reward rows per sequence. The last state's leftover masks are filled
by the argmax of that output (the sampler's argmax noise removal).
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS, GuidedMethod
from dnadiff.samplers.base import greedy_fill
from dnadiff.samplers.rng import StepRandom


def select_candidates(values: Tensor, alpha: float, rng: StepRandom | None) -> Tensor:
    """Long[B]: one index per row of values Float[B, M], drawn from softmax(values / α) (α = 0: argmax)."""
    if alpha == 0.0:
        return values.argmax(dim=-1)
    w = ((values - values.max(dim=-1, keepdim=True).values) / alpha).exp()  # (B, M), max 1
    return rng.categorical(w)


@METHODS.register("svdd")
class SVDD(GuidedMethod):
    """`SVDD(sampler, reward, candidates=8, alpha=0.0)`."""

    name = "svdd"

    def __init__(self, sampler, reward, candidates: int = 8, alpha: float = 0.0):
        super().__init__(sampler, reward)
        if int(candidates) < 1:
            raise DnadiffError(f"svdd: candidates must be >= 1, got {candidates}")
        if not alpha >= 0:
            raise DnadiffError(f"svdd: alpha must be >= 0, got {alpha}")
        self.m, self.alpha = int(candidates), float(alpha)

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, stream):
        smp, M, B = self.sampler, self.m, x.shape[0]
        cand_stream = stream.expand(M, 21)  # candidate m of sequence r: row r·M + m
        pick_stream = stream.child(22)
        state = smp.init_state(denoiser, schedule, mask_id, x)
        logits = None if state.done else self.logits_of(denoiser, state)  # (B, L, V)
        rows = torch.arange(B, device=x.device)
        while not state.done:
            expand = rows.repeat_interleave(M)  # (B·M,)
            cands = smp.step(state.select(expand), logits[expand], cand_stream.at(state.step))
            # the next step needs a model output while the sampler runs (ReMDM keeps stepping with
            # nothing masked); a finished state needs one only to fill leftover masks
            needed = not cands.done or bool(cands.masked.any())
            c_logits = self.logits_of(denoiser, cands) if needed else None
            x_hat = cands.x if c_logits is None else greedy_fill(c_logits, cands.x, mask_id)
            values = self.score(x_hat).view(B, M)  # (B, M)
            keep = rows * M + select_candidates(values, self.alpha, pick_stream.at(state.step))
            state = cands.select(keep)
            logits = None if c_logits is None else c_logits[keep]
        return self.finish(state, logits), state.step


__all__ = ["SVDD", "select_candidates"]
