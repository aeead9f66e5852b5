"""A causal stream denoiser for block diffusion (dnadiff/diffusion/bd3lm.py) built from any per-block rule.

    den = BlockStream(length=4, block_size=2, rule=exact_rule(ExactDenoiser...))
    logits = den(stream, t)              # Float[B, S, V] over the bd3lm stream [x_t^1, x_t^1, x^1, x_t^2, x_t^2]
    cache = den.allocate_cache(B, S); den.step(ids, cache)    # the same outputs one token at a time

At the second copy of block b (span [s, e)) the output is `rule(clean Long[B, s], noisy Long[B, n], s, e)`
-> Float[B, n, V], the clean blocks before b and the block's first (noisy) copy; elsewhere 0. The output
at a position depends only on the stream up to it (causal), and the earlier noisy copies are ignored, so
with `exact_rule` it is the exact conditional p(x^b | x_t^b, x^{<b}) of a known joint.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.bd3lm import block_spans


def exact_rule(bidirectional, length: int, mask_id: int):
    """Block b's exact conditional from an exact MDLM denoiser of the joint (logits for a partly masked
    length-L sequence): query [x^{<b}, x_t^b, masks] and keep block b's positions."""
    def rule(clean: Tensor, noisy: Tensor, s: int, e: int) -> Tensor:
        rest = torch.full((clean.shape[0], length - e), mask_id, dtype=torch.long)
        return bidirectional(torch.cat([clean, noisy, rest], dim=1), None)[:, s:e]
    return rule


class BlockStream:
    """A causal network on the bd3lm stream of a length-`length` sequence (module docstring)."""

    time_conditioned = False

    def __init__(self, length: int, block_size: int, rule, vocab_size: int):
        self.spans = block_spans(length, block_size)
        self.rule, self.vocab_size = rule, vocab_size
        self.calls = 0

    def __call__(self, stream: Tensor, t: Tensor | None = None) -> Tensor:
        self.calls += 1
        B, S = stream.shape
        out = torch.zeros(B, S, self.vocab_size, dtype=torch.float64)
        for s, e in self.spans:
            n, at = e - s, 3 * s
            if at + n >= S:
                break
            clean = torch.cat([stream[:, 3 * a + 2 * (b - a): 3 * a + 3 * (b - a)] for a, b in self.spans if b <= s],
                              dim=1) if s else stream[:, :0]
            logits = self.rule(clean, stream[:, at: at + n], s, e).double()  # (B, n, V)
            upto = min(S, at + 2 * n) - (at + n)  # the second copy's positions present so far
            out[:, at + n: at + n + upto] = logits[:, :upto]
        return out

    # incremental API (dnadiff/denoiser.py): the history is the cache
    def allocate_cache(self, batch_size: int, max_length: int) -> dict:
        return {"tokens": []}

    def step(self, input_ids: Tensor, cache: dict) -> Tensor:
        cache["tokens"].append(input_ids.clone())
        return self(torch.stack(cache["tokens"], dim=1))[:, -1]  # (B, V)
