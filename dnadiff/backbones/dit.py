"""DiT: the diffusion transformer of MDLM (Sahoo et al. 2024, §3.5.1 and §5.1; Peebles & Xie 2023).

A bidirectional transformer with rotary positions and adaLN-zero conditioning on the diffusion
time, as in the MDLM reference `models/dit.py` (docs/references.md "DiT"):

    c      = SiLU(MLP(sinusoidal_256(t)))                    # width `adaln_dim` (128)
    block:  (shift, scale, gate) × 2 = Linear_zero(c)
            x = x + gate_msa · Drop(Attn(LN(x)·(1+scale_msa) + shift_msa))
            x = x + gate_mlp · Drop(MLP(LN(x)·(1+scale_mlp) + shift_mlp))
    final:  logits = Linear_zero(LN(x)·(1+scale) + shift)

LayerNorm has a weight but no bias; qkv and the attention output have no bias; the MLP is
4H with tanh-GELU; rotary embedding (rotate-half, base 1e4) on q and k; attention through
`F.scaled_dot_product_attention` (no flash-attn dependency), `is_causal=True` in the causal
variant (the AR baseline). With `time_conditioning=False` (the reference default) the model is
fed t = 0, so the adaLN vector is a learned constant. The adaLN linears and the output layer are
zero-initialised, so at initialisation every block is the identity and all logits are 0.

`cond` (config `cond_dim > 0`, shape [B, cond_dim]) goes through `cond_proj` (Linear, no bias)
and is added to the token embeddings, like the other backbones (not into the adaLN vector, so
it works with time conditioning off as well).

Architecture options of `forward` (an attention mask is architecture; the backbone never sees
diffusion masking): `attn_mask` Bool[L, L] or [B, L, L] (True: query i may attend to key j; ANDed
with the padding and causal masks), `position_ids` Long[L] or [B, L] (the rotary positions, default
0..L-1; BD3-LM's x_t ⊕ x_0 input repeats them), and `kv_cache` (a `DiTKVCache`: the input's queries
also attend to every cached key, at the positions the cache was filled with; `cache_tokens=n` appends
the first n input tokens' keys and values to it after the call). Block diffusion uses all three
(diffusion/bd3lm_attention.py).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone, padding_mask, token_shape
from dnadiff.backbones.layers.rotary import Rotary, apply_rotary
from dnadiff.errors import DnadiffError


@dataclasses.dataclass
class DiTConfig:
    vocab_size: int = 12
    hidden_size: int = 768
    n_heads: int = 12
    n_blocks: int = 12
    adaln_dim: int = 128  # the reference's `cond_dim`: width of the time-conditioning vector
    time_freq_dim: int = 256  # sinusoidal embedding width fed to the time MLP
    mlp_ratio: int = 4
    dropout: float = 0.1
    time_conditioning: bool = False
    causal: bool = False
    cond_dim: int = 0  # width of an optional per-sequence vector added to the token embeddings
    rotary_base: float = 10_000.0
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.hidden_size % self.n_heads:
            raise DnadiffError(
                f"dit config: hidden_size {self.hidden_size} is not divisible by n_heads {self.n_heads}"
            )
        if (self.hidden_size // self.n_heads) % 2:
            raise DnadiffError("dit config: the head size hidden_size / n_heads must be even (rotary)")
        if self.vocab_size < 1 or self.n_blocks < 1:
            raise DnadiffError("dit config: vocab_size and n_blocks must be positive")


@dataclasses.dataclass
class DiTKVCache:
    """Keys and values of tokens already seen, per DiT block: (K, V) Float[B, nh, P, hd] each (K rotated at
    its tokens' positions). `append` grows it by the chunk each block computed (torch.cat: a copy, so a
    cache handed out before is never changed)."""

    layers: list[tuple[Tensor, Tensor]] | None = None

    @property
    def length(self) -> int:
        return 0 if not self.layers else int(self.layers[0][0].shape[2])

    def append(self, new: list[tuple[Tensor, Tensor]]) -> None:
        if not self.layers:
            self.layers = list(new)
        else:
            self.layers = [(torch.cat([k, k2], 2), torch.cat([v, v2], 2)) for (k, v), (k2, v2) in zip(self.layers, new)]


def rotary_at(rotary: Rotary, positions: Tensor | None, length: int, device) -> tuple[Tensor, Tensor]:
    """cos, sin at `positions` (Long[L] -> (L, D); Long[B, L] -> (B, 1, L, D)), or at 0..length-1."""
    if positions is None:
        return rotary.tables(length, device)
    cos, sin = rotary.tables(int(positions.max()) + 1, device)
    if positions.dim() == 1:
        return cos[positions], sin[positions]
    return cos[positions][:, None], sin[positions][:, None]


class LayerNormNoBias(nn.Module):
    """LayerNorm with a learned scale and no bias, computed in float32 (reference DiT)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        y = F.layer_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return (y * self.weight.float()).to(x.dtype)


def modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    """adaLN (DiT §3.2): x·(1 + scale) + shift, with shift/scale of shape (B, 1, H)."""
    return x * (1 + scale) + shift


def timestep_embedding(t: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """Sinusoidal embedding [cos(t·f_i), sin(t·f_i)], f_i = max_period^(−i/half) (DiT / ADM)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]  # (B, half)
    emb = torch.cat((torch.cos(args), torch.sin(args)), dim=-1)
    if dim % 2:
        emb = torch.cat((emb, torch.zeros_like(emb[:, :1])), dim=-1)
    return emb  # (B, dim)


class TimestepEmbedder(nn.Module):
    def __init__(self, out_dim: int, freq_dim: int = 256):
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(nn.Linear(freq_dim, out_dim), nn.SiLU(), nn.Linear(out_dim, out_dim))

    def forward(self, t: Tensor) -> Tensor:
        return self.mlp(timestep_embedding(t, self.freq_dim).to(self.mlp[0].weight.dtype))


class DiTBlock(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        h = cfg.hidden_size
        self.n_heads = cfg.n_heads
        self.causal = cfg.causal
        self.norm1 = LayerNormNoBias(h, cfg.layer_norm_eps)
        self.attn_qkv = nn.Linear(h, 3 * h, bias=False)
        self.attn_out = nn.Linear(h, h, bias=False)
        self.dropout1 = nn.Dropout(cfg.dropout)
        self.norm2 = LayerNormNoBias(h, cfg.layer_norm_eps)
        self.mlp = nn.Sequential(
            nn.Linear(h, cfg.mlp_ratio * h), nn.GELU(approximate="tanh"), nn.Linear(cfg.mlp_ratio * h, h)
        )
        self.dropout2 = nn.Dropout(cfg.dropout)
        self.adaLN_modulation = nn.Linear(cfg.adaln_dim, 6 * h)
        nn.init.zeros_(self.adaLN_modulation.weight)  # adaLN-zero (DiT §3.2)
        nn.init.zeros_(self.adaLN_modulation.bias)

    def forward(self, x: Tensor, c: Tensor, rotary: Rotary, key_mask: Tensor | None = None,
                cos_sin: tuple[Tensor, Tensor] | None = None, past: tuple[Tensor, Tensor] | None = None,
                keep: list | None = None) -> Tensor:
        """key_mask: Bool broadcastable to (B, 1, L, P + L), True where a query may attend, or None (all, or causal);
        cos_sin: the rotary tables at the tokens' positions (default 0..L-1); past: cached (K, V) of P earlier
        tokens; keep: a list that receives this call's (K, V) Float[B, nh, L, hd]."""
        B, L, H = x.shape
        mods = self.adaLN_modulation(c)[:, None].chunk(6, dim=-1)  # 6 × (B, 1, H)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mods

        h = modulate(self.norm1(x), shift_msa, scale_msa)
        qkv = self.attn_qkv(h).view(B, L, 3, self.n_heads, H // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, nh, L, hd)
        if cos_sin is None:
            q, k = rotary(q, k)
        else:
            q, k = apply_rotary(q, *cos_sin), apply_rotary(k, *cos_sin)
        if keep is not None:
            keep.append((k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)  # (B, nh, P + L, hd)
        causal = self.causal and key_mask is None and past is None  # else the causal part is in key_mask
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, is_causal=causal)  # (B, nh, L, hd)
        a = a.transpose(1, 2).reshape(B, L, H)
        x = x + gate_msa * self.dropout1(self.attn_out(a))

        h = modulate(self.norm2(x), shift_mlp, scale_mlp)
        x = x + gate_mlp * self.dropout2(self.mlp(h))
        return x

    def step(self, x: Tensor, c: Tensor, rotary: Rotary, kv: tuple[Tensor, Tensor], pos: int) -> Tensor:
        """One token x Float[B, 1, H] at position pos of a causal model, with a KV cache
        kv = (K, V) Float[B, nh, L_max, hd] (written in place): O(pos) attention work."""
        B, _, H = x.shape
        mods = self.adaLN_modulation(c)[:, None].chunk(6, dim=-1)  # 6 × (B, 1, H)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mods
        h = modulate(self.norm1(x), shift_msa, scale_msa)
        qkv = self.attn_qkv(h).view(B, 1, 3, self.n_heads, H // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, nh, 1, hd)
        cos, sin = rotary.tables(pos + 1, x.device)
        q, k = apply_rotary(q, cos[pos:pos + 1], sin[pos:pos + 1]), apply_rotary(k, cos[pos:pos + 1], sin[pos:pos + 1])
        kv[0][:, :, pos:pos + 1] = k
        kv[1][:, :, pos:pos + 1] = v
        a = F.scaled_dot_product_attention(q, kv[0][:, :, : pos + 1], kv[1][:, :, : pos + 1])  # (B, nh, 1, hd)
        a = a.transpose(1, 2).reshape(B, 1, H)
        x = x + gate_msa * self.dropout1(self.attn_out(a))
        h = modulate(self.norm2(x), shift_mlp, scale_mlp)
        return x + gate_mlp * self.dropout2(self.mlp(h))


class DiTFinalLayer(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        h = cfg.hidden_size
        self.norm_final = LayerNormNoBias(h, cfg.layer_norm_eps)
        self.linear = nn.Linear(h, cfg.vocab_size)
        self.adaLN_modulation = nn.Linear(cfg.adaln_dim, 2 * h)
        for lin in (self.linear, self.adaLN_modulation):
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def features(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(c)[:, None].chunk(2, dim=-1)  # 2 × (B, 1, H)
        return modulate(self.norm_final(x), shift, scale)


@BACKBONES.register("dit")
class DiT(Backbone):
    Config = DiTConfig
    fsdp_blocks = (DiTBlock,)
    PRESETS = {
        "tiny": dict(hidden_size=64, n_heads=4, n_blocks=2, adaln_dim=32, dropout=0.0),
        "tiny-causal": dict(hidden_size=64, n_heads=4, n_blocks=2, adaln_dim=32, dropout=0.0, causal=True),
        # the MDLM paper's 110M-class model (92.4M non-embedding parameters)
        "small": dict(hidden_size=768, n_heads=12, n_blocks=12, adaln_dim=128, dropout=0.1),
        "small-causal": dict(hidden_size=768, n_heads=12, n_blocks=12, adaln_dim=128, dropout=0.1, causal=True),
    }

    takes_embeddings = True  # forward(..., inputs_embeds=...) (backbones/base.py)
    takes_attn_mask = True  # forward(..., attn_mask=, position_ids=, kv_cache=, cache_tokens=) (module docstring)

    def __init__(self, config: DiTConfig):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.vocab_size = config.vocab_size
        self.is_causal = config.causal
        self.time_conditioned = config.time_conditioning
        self.vocab_embed = nn.Embedding(config.vocab_size, config.hidden_size)
        # reference EmbeddingLayer: kaiming-uniform(a=√5) of a (V, H) matrix
        nn.init.kaiming_uniform_(self.vocab_embed.weight, a=math.sqrt(5))
        self.cond_proj = nn.Linear(config.cond_dim, config.hidden_size, bias=False) if config.cond_dim > 0 else None
        if self.cond_proj is not None:
            nn.init.normal_(self.cond_proj.weight, std=0.02)
        self.sigma_map = TimestepEmbedder(config.adaln_dim, config.time_freq_dim)
        self.rotary = Rotary(config.hidden_size // config.n_heads, config.rotary_base)
        self.blocks = nn.ModuleList(DiTBlock(config) for _ in range(config.n_blocks))
        self.output_layer = DiTFinalLayer(config)

    def _condition(self, input_ids: Tensor, t: Tensor | None) -> Tensor:
        B = input_ids.shape[0]
        if self.time_conditioned:
            if t is None:
                raise DnadiffError("dit: this model is time-conditioned (time_conditioning=True); pass t")
            t = t.reshape(-1).expand(B) if t.numel() == 1 else t.reshape(B)
        else:
            t = torch.zeros(B, device=input_ids.device)  # the reference feeds t = 0
        return F.silu(self.sigma_map(t))  # (B, adaln_dim)

    def _trunk(self, input_ids: Tensor | None, t: Tensor | None, cond: Tensor | None,
               attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None,
               attn_mask: Tensor | None = None, position_ids: Tensor | None = None,
               kv_cache: DiTKVCache | None = None, cache_tokens: int = 0) -> tuple[Tensor, Tensor]:
        ids = token_shape(input_ids, inputs_embeds, "dit")  # (B, L): ids, or a stand-in of the embeddings' shape
        key_mask = self._key_mask(ids, attention_mask, attn_mask, kv_cache)
        x = self.vocab_embed(input_ids) if inputs_embeds is None else inputs_embeds  # (B, L, H)
        if cond is not None:
            if self.cond_proj is None:
                raise DnadiffError("dit: a cond vector was passed but the model was built with cond_dim=0")
            x = x + self.cond_proj(cond.to(x.dtype))[:, None]
        c = self._condition(ids, t)
        cos_sin = None
        if position_ids is not None or kv_cache is not None:
            if position_ids is None:  # after the cache: its positions continue
                position_ids = torch.arange(kv_cache.length, kv_cache.length + ids.shape[1], device=ids.device)
            cos_sin = rotary_at(self.rotary, position_ids.to(ids.device), ids.shape[1], ids.device)
        past = kv_cache.layers if kv_cache is not None and kv_cache.layers else [None] * len(self.blocks)
        kept: list | None = [] if kv_cache is not None and cache_tokens else None
        for block, p in zip(self.blocks, past):
            x = block(x, c, self.rotary, key_mask, cos_sin, p, kept)
        if kept is not None:
            kv_cache.append([(k[:, :, :cache_tokens], v[:, :, :cache_tokens]) for k, v in kept])
        return x, c

    def _key_mask(self, ids: Tensor, attention_mask: Tensor | None, attn_mask: Tensor | None,
                  kv_cache: DiTKVCache | None) -> Tensor | None:
        """Bool (B | 1, 1, L, P + L) or None: padding (keys), the caller's attn_mask, causality and the cached
        prefix (every query sees all P cached keys), in one mask for scaled_dot_product_attention."""
        B, L = ids.shape
        P = kv_cache.length if kv_cache is not None else 0
        real = padding_mask(ids, attention_mask)
        if attn_mask is None and not P:  # the original paths: key padding only (causal: right pads unseen)
            if real is None or self.is_causal:
                return None
            real = real | ~real.any(dim=1, keepdim=True)  # an all-pad row attends everywhere (no 0/0)
            return real[:, None, None, :]  # (B, 1, 1, L)
        if P and real is not None:
            raise DnadiffError("dit: attention_mask (padding) cannot be combined with a kv_cache")
        allowed = torch.ones(1, 1, L, L, dtype=torch.bool, device=ids.device)
        if attn_mask is not None:
            m = attn_mask.to(device=ids.device, dtype=torch.bool)
            if m.shape[-2:] != (L, L) or m.dim() not in (2, 3):
                raise DnadiffError(f"dit: attn_mask must be [L, L] or [B, L, L] with L = {L}, got {tuple(m.shape)}")
            allowed = m[None, None] if m.dim() == 2 else m[:, None]
        if self.is_causal:
            allowed = allowed & torch.ones(L, L, dtype=torch.bool, device=ids.device).tril()
        if real is not None:
            allowed = allowed & real[:, None, None, :]
        if P:
            allowed = torch.cat([allowed.new_ones(*allowed.shape[:-1], P), allowed], dim=-1)  # (·, 1, L, P + L)
        return allowed | ~allowed.any(dim=-1, keepdim=True)  # a query with no key attends everywhere (no 0/0)

    def features(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                 attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None, **arch) -> Tensor:
        """arch: attn_mask, position_ids, kv_cache, cache_tokens (module docstring)."""
        x, c = self._trunk(input_ids, t, cond, attention_mask, inputs_embeds, **arch)
        return self.output_layer.features(x, c)  # (B, L, H)

    def forward(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None, **arch) -> Tensor:
        """inputs_embeds Float[B, L, H] (optional) replaces the token embedding lookup (input_ids may be None);
        arch: attn_mask, position_ids, kv_cache, cache_tokens (module docstring)."""
        feats = self.features(input_ids, t, cond, attention_mask, inputs_embeds, **arch)
        return self.output_layer.linear(feats)  # (B, L, V)

    def new_kv_cache(self) -> DiTKVCache:
        """An empty cache for forward(..., kv_cache=, cache_tokens=) (block diffusion's clean blocks)."""
        return DiTKVCache()

    # ---- incremental decoding (optional backbone API, see backbones/base.py; causal only) ------
    def allocate_cache(self, batch_size: int, max_length: int) -> dict:
        """A KV cache per block (B, nh, max_length, hd) and the (t-free) adaLN condition."""
        if not self.is_causal or self.time_conditioned:
            raise DnadiffError("dit: incremental decoding needs a causal, time-unconditioned model")
        w = self.vocab_embed.weight
        nh = self.config.n_heads
        hd = self.config.hidden_size // nh
        kv = [(w.new_zeros(batch_size, nh, max_length, hd), w.new_zeros(batch_size, nh, max_length, hd))
              for _ in self.blocks]
        c = self._condition(torch.zeros(batch_size, 1, dtype=torch.long, device=w.device), None)  # (B, adaln)
        return {"pos": 0, "kv": kv, "c": c}

    def step(self, input_ids: Tensor, cache: dict) -> Tensor:
        """Next-token logits Float[B, V] after feeding input_ids Long[B] (position cache["pos"])."""
        pos, c = cache["pos"], cache["c"]
        x = self.vocab_embed(input_ids)[:, None]  # (B, 1, H)
        for block, kv in zip(self.blocks, cache["kv"]):
            x = block.step(x, c, self.rotary, kv, pos)
        cache["pos"] = pos + 1
        return self.output_layer.linear(self.output_layer.features(x, c))[:, 0]  # (B, V)
