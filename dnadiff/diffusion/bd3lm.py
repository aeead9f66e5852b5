"""BD3-LM block diffusion (Arriola et al., ICLR 2025, arXiv 2503.09573): autoregressive over blocks of
`block_size` (B′) tokens, masked diffusion inside each block.

The likelihood factorises over blocks (BD3-LM §3.1): log p(x) = Σ_b log p(x^b | x^{<b}), and
L_BD(x) := Σ_b L_diffusion(x^b, x^{<b}) bounds it, each block's term the MDLM NELBO of that block
conditioned on the clean blocks before it (BD3-LM §3; the SUBS continuous-time bound of MDLM eq. 10-11):

    L_BD(x) = Σ_b E_{t ~ U[0,1]} E_{x_t^b ~ q(.|x^b)} [ w(t) Σ_{l in b, x_t^l = m} -log p_θ(x^l | x_t^b, x^{<b}) ]

with w(t) = -α'_t / (1 - α_t) (1/t for log-linear). B′ = 1 is the AR NLL (one token, masked with
probability 1 - α_t, weight w(t): ∫ w (1 - α) dt = 1); B′ = L is the MDLM NELBO. Every block gets its own
time t_b (independent, stratified over the batch as MDLM app. D.3), an unbiased estimate of the sum.

**One forward pass per batch.** A bidirectional network that takes an attention mask (the DiT) gets the
paper's x_t ⊕ x_0 with the block-causal mask (diffusion/bd3lm_attention.py); a causal one the stream
below; `block_layout` chooses (docs/references.md "Block diffusion"). **On causal networks**: the network
is any causal backbone (the Mamba AR family, a causal DiT or HyenaDNA): it reads the stream

    [x_t^1, x_t^1, x^1, x_t^2, x_t^2, x^2, ...]                         (3L tokens)

and block b's predictions are its outputs at the SECOND copy of x_t^b: there it has seen the whole
noisy block (the first copy: bidirectional within the block) and the clean blocks before it; the
earlier noisy copies carry only noise independent of x^b given x^{<b}, so the conditional it
estimates is exactly p(x^b | x_t^b, x^{<b}). The paper's attention version feeds x_t ⊕ x (2L tokens)
with a block-causal mask; this one needs no backbone change and reuses the backbones' decoding
caches (recurrent state, KV cache) for sampling (samplers/block.py). The network is called with t = 0
(block models are not time-conditioned, as BD3-LM's).

**Clipped ("data-driven") schedule** (BD3-LM §4, data-driven noise schedules: [0.45, 0.95] at B′ = 4,
[0.3, 0.8] at 16 on LM1B): `clip=[β, ω]` draws the training times from U[β, ω] (mask rates 1 - α_t in
about [β, ω] for the log-linear schedule) to cut the variance of the gradient estimate. That estimate
is no longer the NELBO; the likelihood is always evaluated with U[t_min, 1]: the clip applies when the
loss is computed with gradients (training), or when `loss(..., clipped=True)` asks for it
(benchmarks/bd3lm_variance.py).

Lengths that are not a multiple of B′: the last block is shorter, and the bound above holds as written
(the sampler likewise ends on a shorter block). A training config must still have `objective.block_size`
dividing `data.seq_len` (config_options.py), so every training block has B′ tokens as in the paper.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.denoiser import network_capabilities
from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective, LossOutput, rand_like_on, real_mask, reduce_loss
from dnadiff.diffusion.bd3lm_attention import attention_logits
from dnadiff.diffusion.subs import subs_masked_nll
from dnadiff.errors import DnadiffError


def block_spans(length: int, block_size: int) -> list[tuple[int, int]]:
    """[(start, end)] of the blocks of a length-`length` sequence; the last one may be shorter."""
    return [(s, min(s + block_size, length)) for s in range(0, length, block_size)]


def stream_index(length: int, block_size: int, device=None) -> tuple[Tensor, Tensor, Tensor]:
    """The training stream layout of a length-L sequence, as index tensors:

    source Long[3L]: stream position -> column of cat([x_t, x0], 1) (Long[B, 2L]) it copies;
    read   Long[L]:  token l -> the stream position whose output predicts it (the second copy of x_t^l);
    block  Long[L]:  token l -> its block index."""
    source, read, block = [], [], []
    for b, (s, e) in enumerate(block_spans(length, block_size)):
        n, at = e - s, len(source)
        cols = list(range(s, e))
        source += cols + cols + [length + c for c in cols]  # [x_t^b, x_t^b, x0^b]
        read += [at + n + j for j in range(n)]
        block += [b] * n
    return tuple(torch.tensor(v, dtype=torch.long, device=device) for v in (source, read, block))


def training_stream(x_t: Tensor, x0: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """(stream Long[B, 3L], read Long[L]): the causal network's input and where block b's outputs are."""
    source, read, _ = stream_index(x0.shape[1], block_size, x0.device)
    return torch.cat([x_t, x0], dim=1)[:, source], read


def network_is_causal(denoiser) -> bool | None:
    """Whether the network under a denoiser (through wrappers' `.denoiser` and a model's `.backbone`) is
    causal; None when it does not say (a plain function). Read by dnadiff/denoiser.py `network_capabilities`."""
    return network_capabilities(denoiser).is_causal


def block_layout(denoiser, where: str = "objective 'bd3lm'") -> str:
    """THE choice of the training/sampling layout (docs/references.md "Block diffusion"), in one place:
    "stream" for a causal network (or a plain function: the stream, module docstring); "attention" for a
    bidirectional network that takes an attention mask and position ids (the DiT: the paper's x_t ⊕ x_0
    with the block-causal mask, diffusion/bd3lm_attention.py); any other bidirectional network is refused."""
    caps = network_capabilities(denoiser)
    if caps.is_causal is False:
        if caps.takes_attn_mask:
            return "attention"
        refuse_bidirectional(denoiser, where)
    return "stream"


def refuse_bidirectional(denoiser, where: str) -> None:
    """The stream [x_t, x_t, x, ...] is only a valid input for a causal network: a bidirectional one would see
    every block's clean copy (the answer) from the noisy one; the attention layout needs an attention mask."""
    caps = network_capabilities(denoiser)
    if caps.is_causal is False and not caps.takes_attn_mask:
        raise DnadiffError(f"{where}: block diffusion needs a causal network (mamba, a causal dit or hyena: "
                           "model.overrides.causal=true, or model.init_from an AR model) or a bidirectional "
                           "dit (attention mask); this one is bidirectional without an attention mask")


def check_block_size(block_size, where: str = "objective 'bd3lm'") -> int:
    if isinstance(block_size, bool) or int(block_size) != block_size or int(block_size) < 1:
        raise DnadiffError(f"{where}: block_size must be an integer >= 1, got {block_size!r}")
    return int(block_size)


def check_clip(clip, where: str = "objective 'bd3lm'") -> tuple[float, float] | None:
    """None, or (β, ω) with 0 <= β < ω <= 1."""
    if clip is None:
        return None
    try:
        lo, hi = (float(v) for v in clip)
    except (TypeError, ValueError):
        raise DnadiffError(f"{where}: clip must be two numbers [beta, omega], got {clip!r}") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise DnadiffError(f"{where}: clip [beta, omega] needs 0 <= beta < omega <= 1, got {clip!r}")
    return lo, hi


@OBJECTIVES.register("bd3lm")
class BD3LMObjective(DiffusionObjective):
    """`build_objective("bd3lm", schedule=s, mask_id=3, vocab_size=12, block_size=4, clip=None)`."""

    name = "bd3lm"
    # needs_time (DiffusionObjective): it draws diffusion times (a given t, e.g. eval's stratified ones, is
    # every block's); the network itself is called with t = 0
    has_blocks = True  # objective.block_size applies (config_options.py refuses it elsewhere)
    default_sampler = "block"
    noise = "block"  # a block model samples only with a sampler of its noise: `block` (samplers/block.py)
    discrete_bound = True

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        o = cfg.objective
        out = {**super().config_kwargs(cfg, tokenizer)}
        if getattr(o, "block_size", None) is not None:
            out["block_size"] = o.block_size
        if getattr(o, "clip", None) is not None:
            out["clip"] = list(o.clip)
        return out

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None, t_min: float = 1e-3,
                 stratified: bool = True, pad_policy: str = "reference", block_size: int = 4,
                 clip: list[float] | None = None):
        super().__init__(schedule, mask_id, vocab_size, T, t_min, stratified, pad_policy)
        self.block_size = check_block_size(block_size)
        self.clip = check_clip(clip)

    # -- times ----------------------------------------------------------------------------------
    def sample_block_t(self, batch: int, blocks: int, generator=None, device=None, clipped: bool = False) -> Tensor:
        """Float[B, nb]: one time per block, each column drawn as MDLM draws its t (stratified over the
        batch), so with one block the draws are MDLM's; `clipped`: from U[β, ω] instead."""
        cols = [self.sample_t(batch, generator=generator, device=device) for _ in range(blocks)]
        t = torch.stack(cols, dim=1)  # (B, nb)
        if clipped and self.clip is not None:
            lo, hi = max(self.clip[0], self.t_min), self.clip[1]  # never below t_min (w(0) = inf)
            u = (t - self.t_min) / (1.0 - self.t_min) if self.T is None else t
            t = lo + (hi - lo) * u  # the same uniforms mapped onto [β, ω]
            t = self.snap(t.reshape(-1)).reshape(t.shape)
        return t

    def block_times(self, t, batch: int, blocks: int, device) -> Tensor:
        """A given t (scalar, Float[B] or Float[B, nb]) as Float[B, nb] on the grid."""
        t = torch.as_tensor(t, dtype=torch.float32, device=device)
        if t.dim() <= 1:
            t = t.reshape(-1, 1).expand(batch, blocks) if t.numel() > 1 else t.reshape(1, 1).expand(batch, blocks)
        if tuple(t.shape) != (batch, blocks):
            raise DnadiffError(f"objective 'bd3lm': t must be a scalar, [B] or [B, {blocks}], got {tuple(t.shape)}")
        return self.snap(t.reshape(-1)).reshape(batch, blocks)

    # -- the bound ------------------------------------------------------------------------------
    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None, clipped: bool | None = None
             ) -> LossOutput:
        """One draw of L_BD per sequence. `t`: None (drawn per block), a scalar, Float[B] or Float[B, nb];
        `clipped`: draw from the clipped interval (None: when gradients are on, i.e. in training)."""
        maskable, counted = self.pad_sets(real_mask(x0, attention_mask))
        B, L = x0.shape
        _, _, block = stream_index(L, self.block_size, x0.device)
        nb = int(block[-1]) + 1 if L else 0
        if t is None:
            clipped = torch.is_grad_enabled() if clipped is None else clipped
            t_blocks = self.sample_block_t(B, nb, generator, x0.device, clipped=bool(clipped))
        else:
            t_blocks = self.block_times(t, B, nb, x0.device)
        # forward process q(x_t^b | x^b) of each block at its own time (MDLM eq. 2), one uniform per position
        dtype = torch.float32 if x0.device.type == "mps" else torch.float64
        p_mask = self.schedule.mask_prob(t_blocks.to(dtype))[:, block]  # (B, L)
        u = rand_like_on((B, L), generator, x0.device, dtype)
        x_t = torch.where((u < p_mask) & maskable, torch.full_like(x0, self.mask_id), x0)
        return self.nll_given(denoiser, x0, x_t, t_blocks, counted)

    def nll_given(self, denoiser, x0: Tensor, x_t: Tensor, t_blocks: Tensor, counted: Tensor | None = None
                  ) -> LossOutput:
        """L_BD's estimate for given noisy blocks x_t Long[B, L] and times t_blocks Float[B, nb]: one
        network call on the stream (module docstring). `counted`: Bool[B, L] tokens the bound covers."""
        B, L = x0.shape
        counted = torch.ones_like(x0, dtype=torch.bool) if counted is None else counted
        if block_layout(denoiser) == "attention":  # x_t ⊕ x_0 (B, 2L), block-causal mask (bd3lm_attention.py)
            logits = attention_logits(denoiser, x_t, x0, self.block_size)  # (B, L, V)
        else:
            stream, read = training_stream(x_t, x0, self.block_size)  # (B, 3L), (L,)
            logits = denoiser(stream, torch.zeros(B, device=x0.device))[:, read]  # (B, L, V)
        nll_tok = subs_masked_nll(logits, x0, self.mask_id)  # (B, L): SUBS, masked positions read only
        _, _, block = stream_index(L, self.block_size, x0.device)
        w = self.weight(t_blocks.reshape(-1)).reshape(t_blocks.shape)[:, block]  # (B, L): eq. 10 (or 8, T set)
        scored = counted & (x_t == self.mask_id)
        return reduce_loss(w.to(nll_tok.dtype) * nll_tok, scored, counted)

    def __repr__(self) -> str:
        return (f"BD3LMObjective(schedule={self.schedule!r}, mask_id={self.mask_id}, block_size={self.block_size}, "
                f"clip={self.clip}, T={self.T}, pad_policy={self.pad_policy!r})")


__all__ = ["BD3LMObjective", "block_layout", "block_spans", "check_block_size", "check_clip", "network_is_causal",
           "refuse_bidirectional", "stream_index", "training_stream"]
