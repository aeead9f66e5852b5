"""SSD-LM: semi-autoregressive simplex diffusion (Han, Kumar & Tsvetkov, "SSD-LM: Semi-autoregressive
Simplex-based Diffusion Language Model for Text Generation and Modular Control", ACL 2023, arXiv 2210.17432),
the continuous-diffusion row of the MDLM paper's semi-AR generation table (tab. 5: gen. PPL 35.43 at 2,473.9 s
per 2,048-token sequence vs MDLM 27.18 at 89.3 s).

Representation (§3.1, eq. 1): a token x is the almost-one-hot logit vector w̃_x ∈ {±K}^V, +K at x and -K
elsewhere (K = `simplex_value`, 5 by default as the paper).

Forward process (§3.2, eq. 2): s_t = √ᾱ_t w̃ + √(1 - ᾱ_t) ε, ε ~ N(0, K² I), with the cosine schedule of
Nichol & Dhariwal 2021 (eq. 17 there, s = 0.008) in continuous time t ∈ [0, 1]:
ᾱ(t) = f(t)/f(0), f(t) = cos²(π/2 · (t + s)/(1 + s)), so ᾱ(0) = 1 and ᾱ(1) = 0.

Model (§3.3): the noisy logits go to the simplex by softmax(s_t), and the network reads softmax(s_t) @ Emb (the
relaxed one-hot through its own token embedding: diffusion/soft_input.call_soft), with the time t; it
predicts the clean tokens' logits.

Training (§3.4, eq. 5): a context length c is drawn uniformly in [0, L - B] per batch; the first c tokens are
given clean (one-hot), the next B = `block_size` (25) tokens are noised, the sequence is cut at c + B (the
network never sees what follows, as in decoding), and the loss is the cross-entropy of the clean block tokens
under the prediction (nats, summed over the block's real tokens). It is a denoising loss, NOT a likelihood
bound (`has_bound = False`: `dnadiff eval` refuses; SSD-LM is scored by the generative perplexity of its
samples, as in the paper's table 5).

Decoding: samplers/ssdlm.py (blocks of B tokens left to right, each denoised from pure noise in its own number
of steps, conditioned on the finished blocks).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, LossOutput, Objective, real_mask
from dnadiff.diffusion.soft_input import call_soft
from dnadiff.errors import DnadiffError

COSINE_S = 0.008  # Nichol & Dhariwal 2021, eq. 17


def cosine_alpha_bar(t: Tensor) -> Tensor:
    """ᾱ(t) of the cosine schedule (module docstring), Float64 like t, 1 at t = 0 and 0 at t = 1."""
    t = t.double()
    f = torch.cos(0.5 * math.pi * (t + COSINE_S) / (1 + COSINE_S)) ** 2
    f0 = math.cos(0.5 * math.pi * COSINE_S / (1 + COSINE_S)) ** 2
    return (f / f0).clamp(0.0, 1.0)


def simplex_logits(x: Tensor, vocab_size: int, k: float) -> Tensor:
    """w̃_x: Float[B, L, V] with +k at x and -k elsewhere (§3.1, eq. 1)."""
    return k * (2.0 * F.one_hot(x, vocab_size).float() - 1.0)


def noisy_logits(w: Tensor, alpha_bar: Tensor, k: float, noise: Tensor) -> Tensor:
    """s_t = √ᾱ w̃ + √(1-ᾱ) k ε (§3.2, eq. 2): w Float[B, n, V], alpha_bar Float[B], noise ε ~ N(0, I) like w."""
    a = alpha_bar.double().to(w.device)[:, None, None]
    return (a.sqrt() * w.double() + (1 - a).sqrt() * k * noise.double()).to(w.dtype)


@OBJECTIVES.register("ssdlm")
class SSDLMObjective(Objective):
    """`build_objective("ssdlm", vocab_size=V, block_size=25, simplex_value=5.0)`."""

    name = "ssdlm"
    needs_time = True
    noise = "simplex"  # Gaussian noise on ±K logits: only the ssdlm sampler samples it
    default_sampler = "ssdlm"
    has_bound = False  # a denoising cross-entropy, not a likelihood bound (module docstring)

    @classmethod
    def kwargs_for(cls, cfg, tokenizer) -> dict:
        return {"vocab_size": tokenizer.vocab_size, **cfg.objective.options}

    def __init__(self, schedule=None, mask_id: int | None = None, vocab_size: int | None = None,
                 block_size: int = 25, simplex_value: float = 5.0):
        if vocab_size is None or int(vocab_size) < 2:
            raise DnadiffError(f"objective 'ssdlm': vocab_size (>= 2) is required, got {vocab_size}")
        if int(block_size) != block_size or block_size < 1:
            raise DnadiffError(f"objective 'ssdlm': block_size must be a positive integer, got {block_size!r}")
        if not (isinstance(simplex_value, (int, float)) and math.isfinite(simplex_value) and simplex_value > 0):
            raise DnadiffError(f"objective 'ssdlm': simplex_value must be a number > 0, got {simplex_value!r}")
        self.schedule = schedule  # unused: SSD-LM's noise follows its own cosine schedule
        self.vocab_size = int(vocab_size)
        self.block_size = int(block_size)
        self.simplex_value = float(simplex_value)
        self.t_min = 0.0

    def sample_t(self, batch: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        gen_device = generator.device if generator is not None else "cpu"
        u = torch.rand(batch, generator=generator, dtype=torch.float64, device=gen_device)
        return u.to(device=device or "cpu", dtype=torch.float32)

    def loss(self, denoiser, x0: Tensor, attention_mask: Tensor | None = None, t: Tensor | None = None,
             generator: torch.Generator | None = None) -> LossOutput:
        B, L = x0.shape
        real = real_mask(x0, attention_mask)
        gen_device = generator.device if generator is not None else "cpu"
        n = min(self.block_size, L)
        c = int(torch.randint(L - n + 1, (1,), generator=generator, device=gen_device))  # context length
        if t is None:
            t = self.sample_t(B, generator=generator, device=x0.device)
        else:
            t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).expand(B)
        block = x0[:, c:c + n]
        eps = torch.randn((B, n, self.vocab_size), generator=generator, device=gen_device).to(x0.device)
        s_t = noisy_logits(simplex_logits(block, self.vocab_size, self.simplex_value), cosine_alpha_bar(t),
                           self.simplex_value, eps)  # (B, n, V)
        soft_block = torch.softmax(s_t, dim=-1)
        ids = torch.cat([x0[:, :c], soft_block.argmax(-1)], dim=1)  # (B, c + n): what the lookup is hooked on
        soft = torch.cat([F.one_hot(x0[:, :c], self.vocab_size).float(), soft_block], dim=1)
        logits = call_soft(denoiser, ids, soft, t)[:, c:c + n].float()  # (B, n, V)
        ce = F.cross_entropy(logits.flatten(0, 1), block.flatten(), reduction="none").view(B, n)
        scored = real[:, c:c + n]
        ce = torch.where(scored, ce, torch.zeros_like(ce))
        nll, num_tokens = ce.sum(dim=1), scored.sum(dim=1).float()
        return LossOutput(nll.sum() / num_tokens.sum().clamp_min(1.0), nll, num_tokens)

    def __repr__(self) -> str:
        return f"SSDLMObjective(block_size={self.block_size}, simplex_value={self.simplex_value})"


__all__ = ["SSDLMObjective", "cosine_alpha_bar", "noisy_logits", "simplex_logits"]
