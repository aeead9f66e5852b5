"""`block`: block-diffusion sampling (BD3-LM, Arriola et al. 2025, arXiv 2503.09573, §3.3 and alg. 2) for
models trained with the `bd3lm` objective (diffusion/bd3lm.py).

Blocks of `block_size` tokens are generated left to right; inside a block any masked-diffusion sampler
(`inner`: ancestral, first_hitting, remdm, confidence, analytic...) denoises the block given the finished
blocks. The network is the causal one of the objective, reading the stream
[x_t^1, x_t^1, x^1, ..., x_t^b, x_t^b]: block b's predictions are its outputs at the second copy of x_t^b.

**Finished blocks are never recomputed** (`use_cache=True`, when the denoiser offers the incremental API:
Mamba's recurrent state, DiT's and HyenaDNA's caches; dnadiff/denoiser.py). The state after the finished
blocks is carried; each inner call forks it and feeds only the block's 2n tokens. When block b is
finished, [x_t^b, x_t^b, x^b] is appended to the carried stream, with x_t^b drawn fresh from q(x_t | x^b)
at a time drawn as in training (the objective's clip interval when it had one, else U[t_min, 1]), so the
context matches training; those 3n tokens are fed into the carried state at the next block's first call
(one network call does both). A stretch of tokens goes through the network's `step_many` (Mamba: one parallel
pass from the state, backbones/mamba_chunk.py; others: one `step` per token on a fork of the cache). Without
the API (or `use_cache=False`) every call re-runs the whole stream:
the same draws, the same samples up to float rounding (tests/test_block_diffusion.py).

A bidirectional DiT trained on the paper's x_t ⊕ x_0 layout (diffusion/bd3lm_attention.py) is sampled the
paper's way instead: each call runs the noisy block against a KV cache of the finished CLEAN blocks
(samplers/block_attention.py); diffusion/bd3lm.py `block_layout` chooses, as for training.

Any length: `shape[1]` need not be the training length nor a multiple of `block_size` (the last block is
shorter). A network call is one pass over a stretch of the stream (2n tokens, or 3n + 2n after a block):
NFE = the inner sampler's calls summed over blocks (+ one noise-removal call where a block ends masked).
Text: with `eos_id` (a text model's EOS, from the model), generation stops after the block in which every
sequence has produced EOS, and every position after a sequence's first EOS is `pad_id`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from dnadiff.denoiser import IncrementalDenoiser, steps_of
from dnadiff.diffusion.bd3lm import block_layout, block_spans, check_block_size
from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, CompositeSampler, Sampler, SamplerState, greedy_fill
from dnadiff.samplers.block_attention import AttentionBlockContext, FinishedBlocks

_SHARED = ("temperature", "top_p", "eps", "float32_draws", "time_conditioned")


class BlockContext(FinishedBlocks):
    """The finished blocks as the network has seen them: a carried decoding cache plus the tokens not yet fed
    into it (`pending`), or (no cache) the whole stream so far (`prefix`)."""

    def __init__(self, denoiser, rows: int, total: int, use_cache: bool):
        super().__init__(denoiser)
        if use_cache and isinstance(self.net, IncrementalDenoiser):
            self.cache = self.net.allocate_cache(rows, 3 * total)  # None: this network cannot
        self.pending: list[Tensor] = []

    def append(self, tokens: Tensor) -> None:
        """Long[B, m]: stream tokens after the finished ones (fed at the next call)."""
        if self.cache is not None:
            self.pending.append(tokens)
        else:
            self.extend_prefix(tokens)

    def __call__(self, x_blk: Tensor, t: Tensor | None = None) -> Tensor:
        B, n = x_blk.shape
        self.count_call(x_blk)
        if self.cache is None:
            parts = ([] if self.prefix is None else [self.prefix]) + [x_blk, x_blk]
            stream = torch.cat(parts, dim=1)  # (B, S + 2n)
            return self.net(stream, torch.zeros(B, device=x_blk.device))[:, -n:]  # (B, n, V): the second copy
        if self.pending:  # the finished blocks, into the carried state for good
            steps_of(self.net, torch.cat(self.pending, dim=1), self.cache, update=True)
            self.pending = []
        # both copies of the noisy block from the carried state, which stays as it was (a fork, or not written)
        return steps_of(self.net, torch.cat([x_blk, x_blk], dim=1), self.cache, update=False)[:, n:]  # (B, n, V)


@SAMPLERS.register("block")
class BlockSampler(CompositeSampler):
    """`build_sampler("block", block_size=16, inner="ancestral", steps=16, inner_options={...})`; `steps` are the
    inner sampler's per block. Model options (`defaults_from`): the model's block size (a different `block_size` is
    refused), context_t, eos_id, pad_id, eps. Without a model, block_size defaults to 4."""

    name = "block"
    any_length = True
    noise = "block"  # the noise of the bd3lm objective: only block models sample with it
    model_options = ("model_block_size", "context_t", "eos_id", "pad_id")

    @classmethod
    def defaults_from(cls, model) -> dict[str, Any]:
        obj = model.objective
        tok = model.tokenizer
        text = getattr(tok, "kind", "dna") == "text"
        lo = float(obj.clip[0]) if getattr(obj, "clip", None) else obj.t_min
        hi = float(obj.clip[1]) if getattr(obj, "clip", None) else 1.0
        return {"eps": model.sampling_eps, "model_block_size": getattr(obj, "block_size", None),
                "context_t": [max(lo, obj.t_min), hi],
                "eos_id": getattr(tok, "eos_id", None) if text else None,
                "pad_id": tok.pad_id if text else None}

    def __init__(self, steps: int = 16, *, block_size: int | None = None, inner: str = "ancestral",
                 inner_options: dict | None = None, use_cache: bool = True, context_t: list[float] | None = None,
                 eos_id: int | None = None, pad_id: int | None = None, model_block_size: int | None = None,
                 **options):
        super().__init__(steps, **options)
        if block_size is not None and model_block_size is not None and int(block_size) != int(model_block_size):
            raise DnadiffError(f"sampler 'block': block_size {block_size} differs from the {model_block_size} this "
                               "model was trained with (its stream layout): leave block_size unset")
        size = block_size if block_size is not None else model_block_size
        self.block_size = check_block_size(4 if size is None else size, "sampler 'block'")
        if self.cache:
            raise DnadiffError("sampler 'block': the output cache (cache=True) does not apply: finished blocks are "
                               "carried in the network's state (use_cache)")
        if inner not in SAMPLERS:
            SAMPLERS.get(inner)  # the registry's one-line error, listing the names
        cls = SAMPLERS.get(inner)
        if cls.run is not Sampler.run or cls.autoregressive or cls.noise != "mask":
            masked = [n for n in SAMPLERS.names() if SAMPLERS.get(n).run is Sampler.run
                      and not SAMPLERS.get(n).autoregressive and SAMPLERS.get(n).noise == "mask"]
            raise DnadiffError(f"sampler 'block': inner must be a masked-diffusion sampler ({', '.join(masked)}), "
                               f"got {inner!r}")
        lo, hi = context_t if context_t is not None else (1e-3, 1.0)
        if not 0.0 < float(lo) <= float(hi) <= 1.0:
            raise DnadiffError(f"sampler 'block': context_t [low, high] needs 0 < low <= high <= 1, got {context_t!r}")
        self.context_t = (float(lo), float(hi))
        opts = {"steps": steps}
        opts.update({k: v for k, v in options.items() if k in _SHARED})
        opts.update(inner_options or {})
        if opts.get("cache"):
            raise DnadiffError("sampler 'block': inner_options cache=True does not apply (see use_cache)")
        opts["noise_removal"] = "none"  # done here over every row: the carried state is per row
        self.inner = SAMPLERS.build(inner, **opts)
        if self.inner.cache:  # `cached`: its output cache evaluates a subset of rows, the carried state has all
            raise DnadiffError(f"sampler 'block': inner {inner!r} reuses outputs per row (an output cache), which the "
                               "carried state does not allow; use ancestral, first_hitting, remdm, ...")
        self.has_steps = self.inner.has_steps
        self.use_cache = bool(use_cache)
        self.eos_id = None if eos_id is None else int(eos_id)
        self.pad_id = None if pad_id is None else int(pad_id)
        if self.eos_id is not None and self.pad_id is None:
            raise DnadiffError("sampler 'block': eos_id needs pad_id (what follows an EOS)")

    def progress_steps(self, length: int) -> int:
        """The inner loops' steps over `length` tokens: steps per block, or one per token (step-less inner)."""
        return self.inner.steps * len(block_spans(length, self.block_size)) if self.inner.has_steps else length

    def run(self, denoiser, schedule, mask_id: int, x: Tensor, rng) -> SamplerState:
        B, total = x.shape
        attention = block_layout(denoiser, "sampler 'block'") == "attention"  # the layout it was trained on
        if attention:  # clean finished blocks, KV cache (samplers/block_attention.py)
            ctx = AttentionBlockContext(denoiser, self.block_size, self.use_cache)
        else:
            ctx = BlockContext(denoiser, B, total, self.use_cache)
        out, nfe, steps = x.clone(), torch.zeros(B, dtype=torch.long, device=x.device), 0
        ended = torch.zeros(B, dtype=torch.bool, device=x.device)
        spans = block_spans(total, self.block_size)
        for k, (s, e) in enumerate(spans):
            state = self.inner.run(ctx, schedule, mask_id, x[:, s:e].clone(), rng.child(k))
            blk, steps = state.x, steps + state.step
            if state.nfe is not None:
                nfe = nfe + state.nfe
            left = blk == mask_id
            if self.noise_removal != "none" and bool(left.any()):  # noise removal over every row (one call)
                logits = ctx(blk, torch.full((B,), self.eps, device=x.device))
                nfe = nfe + left.any(dim=1).long()
                if self.noise_removal == "argmax":
                    blk = greedy_fill(logits, blk, mask_id)
                else:
                    fill = rng.child(k, 2).at(0).categorical(self.x0_probs(logits, blk, mask_id))
                    blk = torch.where(left, fill, blk)
            out[:, s:e] = blk
            if self.eos_id is not None:
                ended = ended | (blk == self.eos_id).any(dim=1)
                if bool(ended.all()):
                    break
            if k + 1 < len(spans):
                ctx.append(blk if attention else self.context(blk, schedule, mask_id, rng.child(k, 1)))
        if self.eos_id is not None:
            after = (out == self.eos_id).long().cumsum(dim=1) - (out == self.eos_id).long() > 0  # past the first EOS
            unfilled = torch.arange(total, device=x.device)[None] >= e  # blocks never generated (all ended)
            out = torch.where(after | unfilled, torch.full_like(out, self.pad_id), out)
        return SamplerState(x=out, fixed=x != mask_id, mask_id=mask_id, step=steps, nfe=nfe, done=True)

    def context(self, blk: Tensor, schedule, mask_id: int, rng) -> Tensor:
        """Long[B, 3n]: the finished block as training showed it, [x_t, x_t, x] with x_t ~ q(x_t | x) at a
        time t ~ U[context_t] per sequence (diffusion/bd3lm.py)."""
        B, n = blk.shape
        u = rng.at(0).rand((n + 1,))  # (B, n + 1) float64: the time, then one uniform per token
        lo, hi = self.context_t
        t = lo + (hi - lo) * u[:, 0]
        x_t = torch.where(u[:, 1:] < schedule.mask_prob(t)[:, None], torch.full_like(blk, mask_id), blk)
        return torch.cat([x_t, x_t, blk], dim=1)

    def __repr__(self) -> str:
        return f"BlockSampler(block_size={self.block_size}, inner={self.inner!r}, use_cache={self.use_cache})"


__all__ = ["BlockContext", "BlockSampler"]
