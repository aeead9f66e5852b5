"""`ssdlm`: SSD-LM's semi-autoregressive simplex decoding (Han, Kumar & Tsvetkov, ACL 2023, arXiv 2210.17432,
§3.5 and alg. 2; the objective is diffusion/ssdlm.py).

The sequence is written left to right in blocks of `block_size` tokens (25, the paper's). Each block starts from
pure noise s_1 = K ε (ε ~ N(0, I), K = `simplex_value`) and takes `steps` steps down the grid t_0 = 1 > ... > t_N
= 0; at each step the network reads [the finished blocks as one-hot | softmax(s_t) of this block] (cut after
the block: it never sees what follows) and the time t, and its logits for the block are projected back to an
almost-one-hot logit vector (§3.5 "logits projection"):

    v = a draw from softmax(logits / temperature), nucleus-filtered by top_p   (`projection: sample`)
      or argmax(logits)                                                         (`projection: argmax`)
    s_{t'} = √ᾱ(t') w̃_v + √(1 - ᾱ(t')) K ε        (w̃_v: +K at v, -K elsewhere; the forward process of eq. 2)

After the last step the block's tokens are the argmax of the last logits (alg. 2 returns argmax of the final
prediction) and the block joins the context of the next one.

A length that `block_size` does not divide: the last block is shorter (L mod block_size tokens), decoded the same
way; nothing is padded or dropped. Templates: fixed tokens are one-hot inputs in their block and kept as given.
NFE = steps per block (per sequence: steps × number of blocks). The model's never-sampled tokens (SuppressTokens)
and the mask id get no mass. Draws come from per-row streams: samples do not depend on the batch layout.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from dnadiff.denoiser import CountingDenoiser
from dnadiff.diffusion.soft_input import call_soft
from dnadiff.diffusion.ssdlm import cosine_alpha_bar, noisy_logits, simplex_logits
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError
from dnadiff.logs import progress_bar
from dnadiff.samplers.base import SAMPLERS, Sampler, SamplerState, shape_probs


@SAMPLERS.register("ssdlm")
class SSDLMSampler(Sampler):
    """`build_sampler("ssdlm", steps=1000, block_size=25, simplex_value=5.0, projection="sample", top_p=1.0)`;
    `steps` counts per block (the MDLM paper's SSD-LM row: 1000 per block of 25); `context`: at most that many
    finished tokens before a block are read (None: all of them; a model trained on L-token windows saw at most
    L - block_size)."""

    name = "ssdlm"
    noise = "simplex"
    guidable = False  # guidance acts on masked states
    model_options = ("vocab_size", "block_size", "simplex_value")

    @classmethod
    def defaults_from(cls, model) -> dict:
        obj = model.objective
        return {"vocab_size": model.tokenizer.vocab_size, "block_size": getattr(obj, "block_size", 25),
                "simplex_value": getattr(obj, "simplex_value", 5.0)}

    def __init__(self, steps: int = 1000, *, vocab_size: int | None = None, block_size: int = 25,
                 simplex_value: float = 5.0, projection: str = "sample", context: int | None = None, **options):
        super().__init__(steps, **options)
        if context is not None and (int(context) != context or context < 0):
            raise DnadiffError(f"sampler 'ssdlm': context must be an integer >= 0 (or unset: all), got {context!r}")
        self.context = None if context is None else int(context)
        if vocab_size is not None and int(vocab_size) < 2:
            raise DnadiffError(f"sampler 'ssdlm': vocab_size (the simplex width) must be >= 2, got {vocab_size!r}")
        self.vocab_size = None if vocab_size is None else int(vocab_size)  # a model sets it (defaults_from)
        if int(block_size) != block_size or block_size < 1:
            raise DnadiffError(f"sampler 'ssdlm': block_size must be a positive integer, got {block_size!r}")
        if not (isinstance(simplex_value, (int, float)) and math.isfinite(simplex_value) and simplex_value > 0):
            raise DnadiffError(f"sampler 'ssdlm': simplex_value must be a number > 0, got {simplex_value!r}")
        if projection not in ("sample", "argmax"):
            raise DnadiffError(f"sampler 'ssdlm': projection must be sample or argmax, got {projection!r}")
        self.block_size, self.simplex_value, self.projection = int(block_size), float(simplex_value), projection

    def blocks(self, length: int) -> list[tuple[int, int]]:
        """[(start, end)] of the blocks of a `length`-token sequence; the last one shorter when block_size
        does not divide length."""
        return [(a, min(a + self.block_size, length)) for a in range(0, length, self.block_size)]

    def progress_steps(self, length: int) -> int:
        return self.steps * len(self.blocks(length))

    def run(self, denoiser, schedule, mask_id: int, x: Tensor, rng) -> SamplerState:
        B, L = x.shape
        fixed = x != mask_id
        out = x.clone()
        # call_soft looks inside the model (its token embedding, or a `forward_soft`): past the loop's counter
        counter = denoiser if isinstance(denoiser, CountingDenoiser) else None
        inner = denoiser.denoiser if counter is not None else denoiser
        K = self.simplex_value
        grid = torch.linspace(1.0, 0.0, self.steps + 1, dtype=torch.float64, device=x.device)
        V = self.vocab_size
        if V is None:
            raise DnadiffError("sampler 'ssdlm': vocab_size (the width of the simplex) is required: sample a model "
                               "(it sets it) or pass vocab_size")
        nblocks = len(self.blocks(L))
        bar = progress_bar(total=self.steps * nblocks, desc="sampling (ssdlm)", unit="step", leave=False) \
            if self.progress else None
        for k, (a, b) in enumerate(self.blocks(L)):
            n = b - a
            c = 0 if self.context is None else max(0, a - self.context)  # the context's first position
            block_rng = rng.child(k)
            keep = fixed[:, a:b]  # (B, n)
            s = K * block_rng.at(0).normal((n, V)).float()  # s_1 = K ε (ᾱ(1) = 0)
            for i in range(self.steps):
                t = grid[i].expand(B).float()
                probs = torch.softmax(s, dim=-1)
                probs = torch.where(keep[..., None], F.one_hot(out[:, a:b], V).float(), probs)
                ids = torch.cat([out[:, c:a], probs.argmax(-1)], dim=1)  # (B, b - c): the ids the lookup is hooked on
                soft = torch.cat([F.one_hot(out[:, c:a], V).float(), probs], dim=1)
                logits = call_soft(inner, ids, soft, t)[:, a - c:].float()  # (B, n, V)
                if 0 <= mask_id < V:  # the mask id is no data token (the model's banned ids are suppressed already)
                    logits[..., mask_id] = NEG_INF
                if counter is not None:
                    counter.calls += 1
                    counter.rows += B
                if i + 1 < self.steps:
                    tok = self._project(logits, block_rng.at(i + 1))
                    w = simplex_logits(torch.where(keep, out[:, a:b], tok), V, K)
                    s = noisy_logits(w, cosine_alpha_bar(grid[i + 1].expand(B)), K,
                                     block_rng.at(i + 1, 1).normal((n, V)))
                if bar is not None:
                    bar.update(1)
            out[:, a:b] = torch.where(keep, out[:, a:b], logits.argmax(-1))
        if bar is not None:
            bar.close()
        nfe = torch.full((B,), self.steps * nblocks, dtype=torch.long, device=x.device)
        return SamplerState(x=out, fixed=fixed, mask_id=mask_id, step=self.steps * nblocks, nfe=nfe, done=True)

    def _project(self, logits: Tensor, rng) -> Tensor:
        """Long[B, n]: the token each position's almost-one-hot is built on (§3.5 logits projection)."""
        if self.projection == "argmax":
            return logits.argmax(-1)
        return rng.categorical(shape_probs(logits.log_softmax(-1), self.temperature, self.top_p))
