"""Caduceus (Schiff et al. 2024, arXiv 2403.03234): bidirectional, RC-equivariant Mamba for DNA.

- BiMamba (§3.1): out = mamba_fwd(h) + flip_L(mamba_rev(flip_L(h))) (`add`, or `ew_multiply`); with
  `bidirectional_weight_tie` the two directions share in_proj and out_proj only.
- Block: Add -> RMSNorm -> BiMamba (prenorm residual, mamba_ssm `Block`), final norm_f.
- Caduceus-PH (`rcps=False`): a plain d-wide model; RC symmetry is imposed post hoc by conjoining
  (`conjoined_logits`, the average over both strands, §3.3).
- Caduceus-PS (`rcps=True`, §3.2): RCPS embedding, every mixer and add-norm wrapped in RCPS
  (hidden width 2·d_model with d_model-sized weights), RCPS LM head tied to the embedding:
  logits(RC(x)) = flip_L(logits(x))[..., complement] exactly.
- `fused_add_norm=True` reproduces the official fused add-norm path (the default of the public
  checkpoints): each RCPS block reads the two channel halves of hidden state and residual swapped
  before its add+norm (the final norm_f is not swapped); PH is unaffected. No kernel is fused here.

Module/parameter names mirror the official `modeling_caduceus.py`, under `backbone.` and `lm_head.`
(the HF checkpoint adds the prefix `caduceus.`; see convert_caduceus.py).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone, flip_length, padding_mask, reverse_index, token_shape
from dnadiff.backbones.layers.norms import build_norm
from dnadiff.backbones.mamba import Mamba, MambaConfig, init_mamba_weights, pad_vocab
from dnadiff.backbones.rcps import (
    RCPSEmbedding,
    RCPSLMHead,
    RCPSWrapper,
    complement_table,
    rc_conjoin,
    rcps_add_norm,
    reverse_complement_ids,
    swap_halves,
)
from dnadiff.errors import DnadiffError


@dataclasses.dataclass
class CaduceusConfig(MambaConfig):
    """The official Caduceus config.json fields: Mamba's (ssm_cfg flattened) plus the bidirectional
    and RCPS switches."""

    residual_in_fp32: bool = False
    fused_add_norm: bool = True  # reproduce the official fused path's per-block half swap (PS only)
    bidirectional: bool = True
    bidirectional_strategy: str = "add"  # add | ew_multiply
    bidirectional_weight_tie: bool = True
    rcps: bool = False
    complement_map: list[int] | None = None  # id -> complement id; None: the DNA tokenizer's
    n_residuals_per_layer: int = 1
    # the autoregressive alignment (the shift operation of DiffuLLaMA, arXiv 2410.17891, and Dream): [BOS] is
    # prepended and token i's logits are read at position i - 1, where a causal LM predicts its next token,
    # so a model adapted from an AR (backbones/ar_adapt.py) starts as that AR. PH only (RC breaks the shift)
    ar_shift: bool = False
    bos_id: int = 2  # the DNA tokenizer's [BOS] (its ar_context_id)

    family = "caduceus"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bidirectional_strategy not in ("add", "ew_multiply"):
            raise DnadiffError(
                f"caduceus config: bidirectional_strategy must be add|ew_multiply, got {self.bidirectional_strategy!r}")
        try:
            complement_table(pad_vocab(self.vocab_size, self.pad_vocab_size_multiple), self.complement_map)
        except ValueError as exc:
            raise DnadiffError(f"caduceus config: complement_map: {exc}") from None
        if self.ar_shift and self.rcps:
            raise DnadiffError("caduceus config: ar_shift needs rcps=false (the shift is not RC-equivariant)")
        if self.ar_shift and not 0 <= self.bos_id < self.vocab_size:
            raise DnadiffError(f"caduceus config: bos_id {self.bos_id} is outside the vocabulary "
                               f"(size {self.vocab_size})")


class BiMambaWrapper(nn.Module):
    """Caduceus §3.1 BiMamba: keys `mamba_fwd.*`, `mamba_rev.*` (rev's in/out proj tied to fwd's)."""

    def __init__(self, d_model: int, bidirectional: bool = True, strategy: str = "add", weight_tie: bool = True,
                 **mamba_kwargs):
        super().__init__()
        self.bidirectional, self.strategy = bidirectional, strategy
        self.mamba_fwd = Mamba(d_model, **mamba_kwargs)
        self.mamba_rev = Mamba(d_model, **mamba_kwargs) if bidirectional else None
        if bidirectional and weight_tie:  # in/out projections hold most of the parameters
            self.mamba_rev.in_proj.weight = self.mamba_fwd.in_proj.weight
            self.mamba_rev.in_proj.bias = self.mamba_fwd.in_proj.bias
            self.mamba_rev.out_proj.weight = self.mamba_fwd.out_proj.weight
            self.mamba_rev.out_proj.bias = self.mamba_fwd.out_proj.bias

    def forward(self, hidden: Tensor, rev: Tensor | None = None) -> Tensor:
        """`rev`: per-row reversal index of a right-padded batch (backbones.base.reverse_index), so
        the reverse scan starts at each row's last real token and never runs through its pads."""
        out = self.mamba_fwd(hidden)  # causal: right pads never reach a real position
        if self.mamba_rev is None:
            return out
        out_rev = flip_length(self.mamba_rev(flip_length(hidden, rev)), rev)  # (B, L, d)
        return out + out_rev if self.strategy == "add" else out * out_rev


class CaduceusBlock(nn.Module):
    """Add -> Norm -> Mixer (prenorm residual); the RCPS form applies norm and mixer to both halves."""

    def __init__(self, cfg: CaduceusConfig):
        super().__init__()
        mixer = BiMambaWrapper(cfg.d_model, cfg.bidirectional, cfg.bidirectional_strategy,
                               cfg.bidirectional_weight_tie, **cfg.mixer_kwargs())
        self.rcps, self.swap = cfg.rcps, cfg.rcps and cfg.fused_add_norm
        self.residual_in_fp32 = cfg.residual_in_fp32
        self.mixer = RCPSWrapper(mixer) if cfg.rcps else mixer
        self.norm = build_norm(cfg.d_model, cfg.norm_epsilon, cfg.rms_norm)

    def forward(self, hidden: Tensor, residual: Tensor | None, rev: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if self.rcps:
            if self.swap:  # official fused path: its "forward" half is the second half of the channels
                hidden = swap_halves(hidden)
                residual = None if residual is None else swap_halves(residual)
            hidden, residual = rcps_add_norm(self.norm, hidden, residual)
        else:
            residual = hidden if residual is None else hidden + residual
            hidden = self.norm(residual.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            residual = residual.float()
        return self.mixer(hidden, rev), residual


class CaduceusEmbeddings(nn.Module):
    def __init__(self, cfg: CaduceusConfig, vocab: int, complement: list[int]):
        super().__init__()
        self.word_embeddings = (RCPSEmbedding(vocab, cfg.d_model, complement) if cfg.rcps
                                else nn.Embedding(vocab, cfg.d_model))

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.word_embeddings(input_ids)


class CaduceusMixerModel(nn.Module):
    """Keys `embeddings.word_embeddings.*`, `layers.{i}.{norm,mixer}.*`, `norm_f.weight`."""

    def __init__(self, cfg: CaduceusConfig, vocab: int, complement: list[int]):
        super().__init__()
        self.rcps = cfg.rcps
        self.embeddings = CaduceusEmbeddings(cfg, vocab, complement)
        self.layers = nn.ModuleList(CaduceusBlock(cfg) for _ in range(cfg.n_layer))
        self.norm_f = build_norm(cfg.d_model, cfg.norm_epsilon, cfg.rms_norm)

    def forward(self, hidden: Tensor, rev: Tensor | None = None) -> Tensor:
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual, rev)
        if self.rcps:  # final RCPS add-norm, never half-swapped
            return rcps_add_norm(self.norm_f, hidden, residual)[0]
        residual = hidden + residual
        return self.norm_f(residual.to(dtype=self.norm_f.weight.dtype))


@BACKBONES.register("caduceus")
class Caduceus(Backbone):
    """Caduceus-PH (`rcps=False`) or -PS (`rcps=True`) masked LM over DNA ids; `t` is ignored."""

    Config = CaduceusConfig
    fsdp_blocks = (CaduceusBlock,)  # BiMamba's tied in/out projections stay inside one unit
    float32_modules = (Mamba,)  # the selective scan
    PRESETS = {
        "tiny": dict(d_model=32, n_layer=2, rcps=True),
        "tiny-ph": dict(d_model=32, n_layer=2, rcps=False),
        # the MDLM paper's DNA model (≈467K; 470,702 parameters): Caduceus-PS, d_model 118 × 4 layers
        "dna-467k": dict(d_model=118, n_layer=4, rcps=True),
        "dna-467k-ph": dict(d_model=118, n_layer=4, rcps=False),
        # the public 131k-context checkpoints (kuleshov-group/caduceus-{ph,ps}_seqlen-131k_d_model-256_n_layer-16)
        "ph-131k": dict(d_model=256, n_layer=16, rcps=False),
        "ps-131k": dict(d_model=256, n_layer=16, rcps=True),
    }

    def __init__(self, config: CaduceusConfig):
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.padded_vocab_size = pad_vocab(config.vocab_size, config.pad_vocab_size_multiple)
        cmap = complement_table(self.padded_vocab_size, config.complement_map)
        self.register_buffer("complement", torch.tensor(cmap, dtype=torch.long), persistent=False)
        self.hidden_size = 2 * config.d_model if config.rcps else config.d_model
        self.backbone = CaduceusMixerModel(config, self.padded_vocab_size, cmap)
        self.cond_proj = nn.Linear(config.cond_dim, config.d_model, bias=False) if config.cond_dim > 0 else None
        if config.rcps:
            self.lm_head = RCPSLMHead(config.d_model, self.padded_vocab_size, cmap)
        else:
            self.lm_head = nn.Linear(config.d_model, self.padded_vocab_size, bias=False)
        init_mamba_weights(self, config.n_layer, config.initializer_range, config.rescale_prenorm_residual,
                           config.n_residuals_per_layer)
        self.tie_weights()

    def tie_weights(self) -> None:
        """LM head shares the embedding table (official `tie_weights`)."""
        emb = self.backbone.embeddings.word_embeddings
        if self.config.rcps:
            self.lm_head.lm_head.weight = emb.embedding.weight
        else:
            self.lm_head.weight = emb.weight

    def embed(self, input_ids: Tensor, cond: Tensor | None = None) -> Tensor:
        hidden = self.backbone.embeddings(input_ids)  # (B, L, d) or (B, L, 2d) for PS
        if cond is not None:
            if self.cond_proj is None:
                raise DnadiffError("caduceus: a cond vector was passed but the model was built with cond_dim=0")
            c = self.cond_proj(cond.to(hidden.dtype))[:, None]  # (B, 1, d)
            if self.config.rcps:  # forward half gets c, the RC half its channel flip: keeps equivariance
                c = torch.cat([c, c.flip(-1)], dim=-1)
            hidden = hidden + c
        return hidden

    @property
    def takes_embeddings(self) -> bool:
        """Caduceus-PH only: RCPS (PS) equivariance is defined on token ids (the RC strand reads complements)."""
        return not self.config.rcps and not self.config.ar_shift

    def features(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                 attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None) -> Tensor:
        if inputs_embeds is not None and not self.takes_embeddings:
            raise DnadiffError("caduceus: only a Caduceus-PH (rcps=false, ar_shift=false) takes inputs_embeds")
        real = padding_mask(token_shape(input_ids, inputs_embeds, "caduceus"), attention_mask)
        if self.config.ar_shift:  # [BOS] + x: position i - 1 of the longer row carries token i's features
            input_ids = torch.cat([torch.full_like(input_ids[:, :1], self.config.bos_id), input_ids], dim=1)
            real = None if real is None else torch.cat([torch.ones_like(real[:, :1]), real], dim=1)
        rev = None if real is None else reverse_index(real)  # (B, L): reverse / RC scans per row
        if inputs_embeds is None:
            hidden = self.embed(input_ids, cond)
        elif cond is None:  # (B, L, d_model) in place of the token lookup
            hidden = inputs_embeds
        else:  # cond added as embed() adds it (PH: no channel flip)
            hidden = inputs_embeds + self.cond_proj(cond.to(inputs_embeds.dtype))[:, None]
        hidden = self.backbone(hidden, rev)  # (B, L(+1), hidden_size)
        return hidden[:, :-1] if self.config.ar_shift else hidden  # (B, L, hidden_size)

    def forward(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None) -> Tensor:
        """inputs_embeds Float[B, L, d_model] (optional, PH only) replaces the token lookup."""
        hidden = self.features(input_ids, t, cond, attention_mask, inputs_embeds)
        return self.lm_head(hidden)[..., : self.vocab_size]  # (B, L, V)

    def reverse_complement(self, input_ids: Tensor) -> Tensor:
        return reverse_complement_ids(input_ids, self.complement)

    def conjoined_logits(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                         attention_mask: Tensor | None = None) -> Tensor:
        """Post-hoc RC conjoining (Caduceus-PH): 0.5 (logits(x) + flip_L(logits(RC(x)))[..., comp])."""
        return rc_conjoin(lambda ids: self(ids, t, cond, attention_mask), input_ids, self.complement,
                          attention_mask=attention_mask)

    def conjoined_features(self, input_ids: Tensor, t: Tensor | None = None, cond: Tensor | None = None,
                           attention_mask: Tensor | None = None) -> Tensor:
        """Features averaged over both strands in forward coordinates (PH; heads pool these)."""
        return rc_conjoin(lambda ids: self.features(ids, t, cond, attention_mask), input_ids, self.complement,
                          permute_last=False, attention_mask=attention_mask)
