"""The `block` sampler's context for a bidirectional attention network trained on BD3-LM's x_t ⊕ x_0 layout
(diffusion/bd3lm_attention.py; BD3-LM §3.3, alg. 2, with a KV cache): block b is denoised given the
CLEAN finished blocks, which the network saw block-causally in training.

`use_cache=True`: the keys and values of the finished clean blocks are kept (the network's `new_kv_cache()`,
the DiT's `DiTKVCache`); every inner call runs only the current noisy block, attending to the cache and to
itself bidirectionally. A block, once finished, is fed at the next block's first call, in front of the
noisy block ([x^{b-1} ; x_t^b], the clean tokens blind to the noisy ones, prefix_block_mask), and its keys
and values are appended to the cache: no separate call, no recomputation. `use_cache=False` re-runs
[x^{<b} ; x_t^b] with the same mask at every call: the same logits up to float rounding, so the same
samples (tests/test_block_diffusion_attention.py).

Under classifier-free guidance (samplers/wrappers.py `Guided`: two models, whose keys and values differ) the
context recomputes (use_cache=False) whatever use_cache says.

Positions: token l is at rotary position l, the training layout's. Rotary positions have no upper limit, so
any length runs (the cache grows by one block's keys and values per block); past the training window the
network meets relative distances it was not trained on — no sliding window: an error-free extrapolation,
as BD3-LM's own variable-length generation with a rotary DiT.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.denoiser import CountingDenoiser, network_capabilities
from dnadiff.diffusion.bd3lm_attention import prefix_block_mask


class FinishedBlocks:
    """Base of the `block` sampler's contexts (samplers/block.py BlockContext, AttentionBlockContext below): the
    network under the run's call counter, the finished tokens (`prefix`, when no cache holds them), and the
    count of one network call per inner call, however many tokens that call feeds. A context is the denoiser
    an inner sampler sees: x_blk Long[B, n] -> logits Float[B, n, V] for the block given the finished ones."""

    def __init__(self, denoiser):
        self.counter = denoiser if isinstance(denoiser, CountingDenoiser) else None
        self.net = denoiser.denoiser if self.counter is not None else denoiser  # calls counted here, per pass
        self.cache = None
        self.prefix: Tensor | None = None  # (B, S): every finished token (no cache)
        self.time_conditioned = False  # the block network ignores t (bd3lm calls it with t = 0)

    def extend_prefix(self, tokens: Tensor) -> None:
        self.prefix = tokens if self.prefix is None else torch.cat([self.prefix, tokens], dim=1)

    def count_call(self, x_blk: Tensor) -> None:
        if self.counter is not None:
            self.counter._count(x_blk)  # one network call (its progress hook too), however many tokens it feeds


class AttentionBlockContext(FinishedBlocks):
    """The finished clean blocks as the network sees them: a KV cache plus the block not yet in it (`pending`),
    or (no cache) all of them (`prefix`)."""

    def __init__(self, denoiser, block_size: int, use_cache: bool):
        super().__init__(denoiser)
        self.block_size = block_size
        caps = network_capabilities(denoiser)  # new_kv_cache: the network's empty KV cache (DiT: DiTKVCache)
        # under CFG (caps.guided): two models, two caches: recompute instead
        self.cache = caps.new_kv_cache() if use_cache and caps.new_kv_cache is not None and not caps.guided else None
        self.pending: Tensor | None = None  # (B, m): finished, not yet in the cache

    def append(self, blk: Tensor) -> None:
        """Long[B, n]: a finished block (its clean tokens), fed at the next call."""
        if self.cache is not None:
            self.pending = blk if self.pending is None else torch.cat([self.pending, blk], dim=1)
        else:
            self.extend_prefix(blk)

    def __call__(self, x_blk: Tensor, t: Tensor | None = None) -> Tensor:
        B, n = x_blk.shape
        self.count_call(x_blk)
        clean = self.pending if self.cache is not None else self.prefix
        m = 0 if clean is None else clean.shape[1]
        start = self.cache.length if self.cache is not None else 0  # position of the first token fed
        inp = x_blk if clean is None else torch.cat([clean, x_blk], dim=1)  # (B, m + n)
        kw = dict(attn_mask=prefix_block_mask(m, n, self.block_size, x_blk.device),
                  position_ids=torch.arange(start, start + m + n, device=x_blk.device))
        if self.cache is not None:
            kw.update(kv_cache=self.cache, cache_tokens=m)  # the pending clean block joins the cache
            self.pending = None
        return self.net(inp, torch.zeros(B, device=x_blk.device), **kw)[:, m:]  # (B, n, V)


__all__ = ["AttentionBlockContext", "FinishedBlocks"]
