"""HyenaDNA (Nguyen et al. 2023) with the Hyena operator (Poli et al. 2023), causal and bidirectional.

Order-2 Hyena operator (docs/references.md "HyenaDNA"; Poli et al. §3):

    x0, x1, v = split(ShortConv_3(in_proj(u)))       # depthwise conv, kernel 3, over 3d channels
    v = v ⊙ x1
    v = LongConv(v, h) + bias ⊙ v                     # FFT convolution with an implicit filter h
    y = out_proj(v ⊙ x0)

Implicit filter (§3.3): h = MLP(z_t) ⊙ (exp(−t·|δ|) + 0.05), where z_t = [t, cos(−f ω_t),
sin(−f ω_t)] is a fixed positional embedding (emb_dim 5 = t plus 2 bands), the MLP is
Linear → Sin → Linear → Sin → Linear → Sin → Linear(no bias) with one shared Sin(freq·x)
(trainable freq, init `activation_freq` = 10), width `filter_order` (64), and δ spaced over
[ln(1e-2)/1.5, ln(1e-2)/0.3] across channels (exponential modulation window).

Causal (the original HyenaDNA, for AR): LongConv is a causal linear convolution (FFT of size 2L).
Bidirectional (for MDLM, `causal=False`): LongConv is a genuine two-sided linear convolution
(layers/fftconv.py): lags ≥ 0 use h from the shared MLP, lags < 0 use a second kernel from the
same MLP with a learned offset `rev_bias` added to its first hidden layer (the direction input),
so the two sides differ while costing only `filter_order` parameters per layer; the short conv
stays causal (the long filter already sees both sides). Not the repo's shifted circular trick.

Block (prenorm, as the HF port): r = u + Drop(Mixer(LN1(u))); out = r + Drop(MLP(LN2(r))), MLP 4d
with tanh-GELU, fp32 residual stream, `embed_dropout` on the embeddings; final LayerNorm `ln_f`;
vocab padded to a multiple of 8; LM head tied to the
embedding (`tie_embeddings=True`, the repo's SequenceLMHeadModel) or a separate `lm_head`
(the HF CausalLM checkpoints). Parameter/buffer names follow `standalone_hyenadna.py` and the HF
port (`backbone.layers.{i}.mixer.filter_fn.implicit_filter.{0..6}` …), so checkpoints map by name.
The positional embedding `z` is a buffer by default (the genomic-benchmark configs use
lr_pos_emb 0; the pretraining code gives it lr 1e-5); `train_pos_emb=True` makes it a parameter.

Optimizer settings as the official HyenaFilter registers them (`_optim` attributes, honoured by
training/optim.py): the implicit filter's MLP (Linear weights and biases, the Sin frequency) and our
`rev_bias` get weight decay `filter_wd` (0) and learning rate `filter_lr` (None = the optimizer's lr,
as the HyenaDNA configs' `lr: ${optimizer.lr}`); a trainable `z` gets `pos_emb_lr` and no decay.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone, padding_mask
from dnadiff.backbones.layers.fftconv import fftconv_bidirectional, fftconv_causal
from dnadiff.errors import DnadiffError


@dataclasses.dataclass
class HyenaConfig:
    vocab_size: int = 12
    d_model: int = 128
    n_layer: int = 2
    d_inner: int = 512
    l_max: int = 1026  # longest sequence (filter length); the official tiny-1k uses 1024 + 2
    hyena_order: int = 2
    filter_order: int = 64
    short_filter_order: int = 3
    emb_dim: int = 5
    num_inner_mlps: int = 2
    activation_freq: float = 10.0
    train_freq: bool = True
    train_pos_emb: bool = False
    modulate: bool = True
    modulation_shift: float = 0.05
    embed_dropout: float = 0.1
    hyena_dropout: float = 0.0
    resid_dropout: float = 0.0
    layer_norm_epsilon: float = 1e-5
    pad_vocab_size_multiple: int = 8
    tie_embeddings: bool = True
    causal: bool = False
    cond_dim: int = 0
    initializer_range: float = 0.02
    filter_lr: float | None = None  # implicit-filter MLP lr (None: the optimizer's lr)
    filter_wd: float = 0.0  # implicit-filter MLP weight decay (HyenaDNA `wd: 0.0`)
    pos_emb_lr: float = 1e-5  # lr of z when train_pos_emb (HyenaDNA `lr_pos_emb`)

    def __post_init__(self) -> None:
        for name in ("filter_lr", "pos_emb_lr"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise DnadiffError(f"hyena config: {name} must be > 0, got {v}")
        if self.filter_wd < 0:
            raise DnadiffError(f"hyena config: filter_wd must be >= 0, got {self.filter_wd}")
        if self.hyena_order != 2:
            raise DnadiffError(f"hyena config: only hyena_order 2 is supported, got {self.hyena_order}")
        if self.emb_dim < 3 or self.emb_dim % 2 == 0:
            raise DnadiffError(f"hyena config: emb_dim must be odd and >= 3, got {self.emb_dim}")
        if self.l_max < 2 or self.d_model < 1 or self.n_layer < 1:
            raise DnadiffError("hyena config: l_max, d_model and n_layer must be positive")

    @property
    def padded_vocab_size(self) -> int:
        m = max(1, self.pad_vocab_size_multiple)
        return ((self.vocab_size + m - 1) // m) * m


class Sin(nn.Module):
    """sin(freq · x) with a per-channel frequency (trainable by default)."""

    def __init__(self, dim: int, w: float, train_freq: bool = True):
        super().__init__()
        freq = w * torch.ones(1, dim)
        if train_freq:
            self.freq = nn.Parameter(freq)
        else:
            self.register_buffer("freq", freq)

    def forward(self, x: Tensor) -> Tensor:
        return torch.sin(self.freq * x)


class PositionalEmbedding(nn.Module):
    """z = [t, cos(−f ω), sin(−f ω)] with t = linspace(0, 1, L), ω = 2π·n/L, f = linspace(1e-4, bands−1)."""

    def __init__(self, emb_dim: int, seq_len: int, trainable: bool = False):
        super().__init__()
        t = torch.linspace(0, 1, seq_len)[None, :, None]  # (1, L, 1)
        bands = (emb_dim - 1) // 2
        w = 2 * math.pi * torch.linspace(0, seq_len - 1, seq_len)[None, :, None] / seq_len  # (1, L, 1)
        f = torch.linspace(1e-4, bands - 1, bands)[None, None]  # (1, 1, bands)
        z = torch.cat([t, torch.cos(-f * w), torch.sin(-f * w)], dim=-1)  # (1, L, emb_dim)
        if trainable:
            self.z = nn.Parameter(z)
        else:
            self.register_buffer("z", z)
        self.register_buffer("t", t)

    def forward(self, L: int) -> tuple[Tensor, Tensor]:
        return self.z[:, :L], self.t[:, :L]


class ExponentialModulation(nn.Module):
    """h ⊙ (exp(−t·|δ|) + shift); δ linearly spaced so channels decay to `target` at 30%…150% of L."""

    def __init__(self, d_model: int, fast_decay_pct: float = 0.3, slow_decay_pct: float = 1.5,
                 target: float = 1e-2, modulate: bool = True, shift: float = 0.05):
        super().__init__()
        self.modulate = modulate
        self.shift = shift
        max_decay = math.log(target) / fast_decay_pct
        min_decay = math.log(target) / slow_decay_pct
        self.register_buffer("deltas", torch.linspace(min_decay, max_decay, d_model)[None, None])  # (1, 1, d)

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        if not self.modulate:
            return x
        return x * (torch.exp(-t * self.deltas.abs()) + self.shift)


class HyenaFilter(nn.Module):
    """Implicit long filter h(t) = Modulation(MLP(z_t)), plus the `bias` skip term of the long conv."""

    def __init__(self, cfg: HyenaConfig):
        super().__init__()
        d = cfg.d_model * (cfg.hyena_order - 1)
        self.d_model = d
        self.bias = nn.Parameter(torch.randn(d))
        self.pos_emb = PositionalEmbedding(cfg.emb_dim, cfg.l_max, cfg.train_pos_emb)
        act = Sin(cfg.filter_order, cfg.activation_freq, cfg.train_freq)  # one module, shared
        layers: list[nn.Module] = [nn.Linear(cfg.emb_dim, cfg.filter_order), act]
        for _ in range(cfg.num_inner_mlps):
            layers += [nn.Linear(cfg.filter_order, cfg.filter_order), act]
        layers.append(nn.Linear(cfg.filter_order, d, bias=False))
        self.implicit_filter = nn.Sequential(*layers)
        self.modulation = ExponentialModulation(d, modulate=cfg.modulate, shift=cfg.modulation_shift)
        # direction input of the backward (negative-lag) kernel, added to the first hidden layer
        self.rev_bias = None if cfg.causal else nn.Parameter(cfg.initializer_range * torch.randn(cfg.filter_order))
        # per-parameter optimizer settings, as the official HyenaFilter / OptimModule.register
        filter_hp = {"weight_decay": cfg.filter_wd, "lr": cfg.filter_lr}
        for p in [*self.implicit_filter.parameters(), *([] if self.rev_bias is None else [self.rev_bias])]:
            p._optim = dict(filter_hp)  # type: ignore[attr-defined]
        if isinstance(self.pos_emb.z, nn.Parameter):
            self.pos_emb.z._optim = {"weight_decay": 0.0, "lr": cfg.pos_emb_lr}  # type: ignore[attr-defined]

    def _filters(self, L: int, offsets: list[Tensor | None]) -> Tensor:
        """(len(offsets), L, d) kernels, one MLP pass; each offset is added to the first hidden layer."""
        z, t = self.pos_emb(L)
        h0 = self.implicit_filter[0](z.to(self.implicit_filter[0].weight.dtype))  # (1, L, order)
        h = torch.cat([h0 if o is None else h0 + o for o in offsets], dim=0)  # (K, L, order)
        for layer in list(self.implicit_filter)[1:]:
            h = layer(h)
        return self.modulation(t, h)  # (K, L, d)

    def filter(self, L: int, reverse: bool = False) -> Tensor:
        """(L, d) filter taps; `reverse=True` gives the backward kernel of the bidirectional variant."""
        return self._filters(L, [self.rev_bias if reverse else None])[0]

    def filter_pair(self, L: int) -> tuple[Tensor, Tensor]:
        """Forward and backward kernels, each (L, d), computed in one batched pass."""
        k = self._filters(L, [None, self.rev_bias])
        return k[0], k[1]


class HyenaOperator(nn.Module):
    def __init__(self, cfg: HyenaConfig):
        super().__init__()
        self.d_model = cfg.d_model
        self.l_max = cfg.l_max
        self.causal = cfg.causal
        inner = cfg.d_model * (cfg.hyena_order + 1)
        self.in_proj = nn.Linear(cfg.d_model, inner)
        self.out_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.short_filter = nn.Conv1d(
            inner, inner, cfg.short_filter_order, padding=cfg.short_filter_order - 1, groups=inner
        )
        self.dropout = nn.Dropout(cfg.hyena_dropout)
        self.filter_fn = HyenaFilter(cfg)

    def forward(self, u: Tensor, keep: Tensor | None = None) -> Tensor:
        """u (B, L, d); `keep` (B, 1, L) 1 at real tokens, 0 at pads (right-padded batch) or None."""
        L = u.shape[-2]
        if L > self.l_max:
            raise DnadiffError(f"hyena: sequence length {L} exceeds the model's l_max {self.l_max}")
        uc = self.short_filter(self.in_proj(u).transpose(1, 2))[..., :L]  # (B, 3d, L), causal
        x0, x1, v = uc.split(self.d_model, dim=1)  # 3 × (B, d, L)
        v = self.dropout(v * x1)
        if keep is not None:  # the two-sided long conv must see zeros, not pads (the short conv is causal)
            v = v * keep
        if self.causal:
            y = fftconv_causal(v, self.filter_fn.filter(L).transpose(0, 1))  # kernel (d, L)
        else:
            k_fwd, k_bwd = self.filter_fn.filter_pair(L)  # 2 × (L, d)
            y = fftconv_bidirectional(v, k_fwd.transpose(0, 1), k_bwd.transpose(0, 1))
        if keep is not None:  # and pads leave it as zeros
            y = y * keep
        v = y + v * self.filter_fn.bias[:, None]  # (B, d, L)
        return self.out_proj((v * x0).transpose(1, 2))  # (B, L, d)

    # ---- incremental decoding (causal only): O(L·d) per token for the long conv ----------------
    def allocate_state(self, batch_size: int, max_length: int, device) -> dict:
        """Short-conv inputs, the long conv's input history and its filter taps (computed once)."""
        inner = self.in_proj.out_features
        k = self.short_filter.kernel_size[0]
        return {"short": torch.zeros(batch_size, inner, k, device=device),
                "v": torch.zeros(batch_size, self.d_model, max_length, device=device),
                "h": self.filter_fn.filter(max_length).transpose(0, 1).float()}  # (d, L) taps, lag 0..L-1

    def step(self, u: Tensor, state: dict, pos: int) -> Tensor:
        """One token u Float[B, d] at position pos -> Float[B, d] (same math as causal forward)."""
        short = state["short"]
        short.copy_(torch.roll(short, shifts=-1, dims=-1))
        short[:, :, -1] = self.in_proj(u).float()
        uc = (short * self.short_filter.weight[:, 0, :].float()).sum(-1) + self.short_filter.bias.float()  # (B, 3d)
        x0, x1, v = uc.split(self.d_model, dim=1)  # 3 × (B, d)
        v = v * x1
        state["v"][:, :, pos] = v
        hist = state["v"][:, :, : pos + 1]  # (B, d, pos + 1) inputs v_0 .. v_pos
        taps = state["h"][:, : pos + 1].flip(-1)  # (d, pos + 1): lag pos .. 0
        y = (hist * taps).sum(-1)  # Σ_j h_j v_{pos-j}
        v = y + v * self.filter_fn.bias.float()
        return self.out_proj((v * x0).to(self.out_proj.weight.dtype))  # (B, d)


class HyenaMlp(nn.Module):
    def __init__(self, d_model: int, d_inner: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner)
        self.fc2 = nn.Linear(d_inner, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class HyenaBlock(nn.Module):
    def __init__(self, cfg: HyenaConfig):
        super().__init__()
        self.mixer = HyenaOperator(cfg)
        self.norm1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)
        self.mlp = HyenaMlp(cfg.d_model, cfg.d_inner)
        self.norm2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)
        self.dropout1 = nn.Dropout(cfg.resid_dropout)
        self.dropout2 = nn.Dropout(cfg.resid_dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        x = x.float() + self.dropout1(self.mixer(self.norm1(x), keep).float())  # fp32 residual
        return x + self.dropout2(self.mlp(self.norm2(x)).float())


class HyenaEmbeddings(nn.Module):
    def __init__(self, vocab: int, d_model: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d_model)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.word_embeddings(input_ids)


class HyenaLMBackbone(nn.Module):
    def __init__(self, cfg: HyenaConfig):
        super().__init__()
        self.embeddings = HyenaEmbeddings(cfg.padded_vocab_size, cfg.d_model)
        self.dropout = nn.Dropout(cfg.embed_dropout)  # on the embeddings, as the repo's first block
        self.layers = nn.ModuleList(HyenaBlock(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)


@BACKBONES.register("hyena")
class HyenaDNA(Backbone):
    Config = HyenaConfig
    fsdp_blocks = (HyenaBlock,)
    float32_modules = (HyenaFilter,)  # the long-filter FFT convolution
    _TINY = dict(d_model=32, n_layer=2, d_inner=128, filter_order=16, l_max=1026)
    _TINY_1K = dict(d_model=128, n_layer=2, d_inner=512, filter_order=64, l_max=1026)
    PRESETS = {
        "tiny": dict(_TINY),
        "tiny-causal": dict(_TINY, causal=True),
        # HyenaDNA tiny-1k (LongSafari/hyenadna-tiny-1k-seqlen): 436,096 parameters causal
        "tiny-1k": dict(_TINY_1K),
        "tiny-1k-causal": dict(_TINY_1K, causal=True),
    }

    def __init__(self, config: HyenaConfig):
        super().__init__()
        self.config = config
        self.hidden_size = config.d_model
        self.vocab_size = config.vocab_size
        self.is_causal = config.causal
        self.time_conditioned = False
        self.backbone = HyenaLMBackbone(config)
        self.cond_proj = nn.Linear(config.cond_dim, config.d_model, bias=False) if config.cond_dim > 0 else None
        self.lm_head = (None if config.tie_embeddings
                        else nn.Linear(config.d_model, config.padded_vocab_size, bias=False))
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2 style init of the repo: Linear/Embedding N(0, 0.02), biases 0, out_proj/fc2 scaled by 1/√(2n)."""
        std = self.config.initializer_range
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
        for layer in self.backbone.layers:
            for w in (layer.mixer.out_proj.weight, layer.mlp.fc2.weight):
                nn.init.normal_(w, std=std / math.sqrt(2 * self.config.n_layer))
            if layer.mixer.filter_fn.rev_bias is not None:
                nn.init.normal_(layer.mixer.filter_fn.rev_bias, std=std)

    def features(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                 attention_mask: Tensor | None = None) -> Tensor:
        if input_ids.dim() != 2:
            raise DnadiffError(f"hyena: input_ids must be [B, L], got shape {tuple(input_ids.shape)}")
        real = padding_mask(input_ids, attention_mask)
        x = self.backbone.embeddings(input_ids)  # (B, L, d)
        keep = None if real is None else real[:, None, :].to(x.dtype)  # (B, 1, L)
        if cond is not None:
            if self.cond_proj is None:
                raise DnadiffError("hyena: a cond vector was passed but the model was built with cond_dim=0")
            x = x + self.cond_proj(cond.to(x.dtype))[:, None]
        x = self.backbone.dropout(x)
        for layer in self.backbone.layers:
            x = layer(x, keep)
        ln_f = self.backbone.ln_f
        return ln_f(x.to(ln_f.weight.dtype))  # (B, L, d)

    def forward(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                attention_mask: Tensor | None = None) -> Tensor:
        h = self.features(input_ids, t, cond, attention_mask)
        w = self.backbone.embeddings.word_embeddings.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, w[: self.vocab_size])  # (B, L, V): padded columns dropped

    # ---- incremental decoding (optional backbone API, see backbones/base.py; causal only) ------
    def allocate_cache(self, batch_size: int, max_length: int) -> dict:
        if not self.is_causal:
            raise DnadiffError("hyena: incremental decoding needs a causal model (causal=True)")
        if max_length > self.config.l_max:
            raise DnadiffError(f"hyena: length {max_length} exceeds the model's l_max {self.config.l_max}")
        device = self.backbone.embeddings.word_embeddings.weight.device
        return {"pos": 0, "layers": [layer.mixer.allocate_state(batch_size, max_length, device)
                                     for layer in self.backbone.layers]}

    def step(self, input_ids: Tensor, cache: dict) -> Tensor:
        """Next-token logits Float[B, V] after feeding input_ids Long[B] (position cache["pos"])."""
        pos = cache["pos"]
        x = self.backbone.dropout(self.backbone.embeddings(input_ids))  # (B, d)
        for layer, state in zip(self.backbone.layers, cache["layers"]):  # HyenaBlock, one token
            x = x.float() + layer.dropout1(layer.mixer.step(layer.norm1(x), state, pos).float())
            x = x + layer.dropout2(layer.mlp(layer.norm2(x)).float())
        h = self.backbone.ln_f(x.to(self.backbone.ln_f.weight.dtype))
        cache["pos"] = pos + 1
        w = self.backbone.embeddings.word_embeddings.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, w[: self.vocab_size])  # (B, V)
