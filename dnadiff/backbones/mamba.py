"""Mamba (Gu & Dao 2023, arXiv 2312.00752): the selective-SSM mixer and a unidirectional Mamba LM.

The mixer `Mamba` has the parameter names and initialisation of mamba_ssm's `Mamba`
(`modules/mamba_simple.py`), so official weights load by name (docs/references.md "Mamba"):

    in_proj: d -> 2E (x, z)      conv1d: depthwise, kernel d_conv, causal      x_proj: E -> R + 2N
    dt_proj: R -> E (bias = softplus^{-1}(dt), dt log-uniform in [dt_min, dt_max])
    A_log = log(1..N) per channel (S4D-real), D = 1, out_proj: E -> d
    y = SelectiveScan(silu(conv(x)), dt, -exp(A_log), B, C, D, z, dt_proj.bias, softplus)   (Alg. 2)

On CUDA the mixer calls the kernels of causal_conv1d and mamba_ssm when they are installed
(`conv_impl`, `scan_impl`; kernels.py says when), in their layout: as mamba_ssm's own mixer it keeps
every activation a (C, B·L) matrix, read as (B, C, L) with unit stride along L (`_forward_kernels`).
Elsewhere it runs the pure PyTorch path, length-major (B, L, C).

`MambaLM` (registry name `mamba`) is the unidirectional language model of mamba_ssm's
`MambaLMHeadModel`: embedding -> n_layer × (Add -> Norm -> Mixer, prenorm residual) -> norm_f ->
LM head tied to the embedding. It is causal (position i sees only j <= i), so it serves as the AR
baseline; the bidirectional DNA model is `caduceus`.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dnadiff.backbones.base import BACKBONES, Backbone, padding_mask, token_shape
from dnadiff.backbones.kernels import conv_kernel, conv_update_kernel, scan_kernel, state_update_kernel, wants_kernel
from dnadiff.backbones.layers.norms import build_norm
from dnadiff.backbones.mamba_chunk import step_many as mamba_step_many
from dnadiff.backbones.scan import SCAN_IMPLS, selective_scan
from dnadiff.errors import DnadiffError


def pad_vocab(vocab_size: int, multiple: int) -> int:
    """Round the vocabulary up to a multiple (Caduceus/Mamba `pad_vocab_size_multiple`)."""
    if multiple <= 1:
        return vocab_size
    return vocab_size + (-vocab_size) % multiple


def resolve_dt_rank(dt_rank, d_model: int) -> int:
    return math.ceil(d_model / 16) if dt_rank == "auto" else int(dt_rank)


def _causal_conv1d(x: Tensor, conv: nn.Conv1d) -> Tensor:
    """Depthwise causal conv + SiLU on (B, E, L) in PyTorch (the kernel's twin: causal_conv1d_fn)."""
    length = x.shape[-1]
    return F.silu(conv(x)[..., :length])


def conv_step(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None = None,
              activation: str | None = "silu") -> Tensor:
    """One token of the depthwise causal conv (+ SiLU): x (B, E), weight (E, W); conv_state (B, E, W), the
    last W inputs, is shifted in place. The PyTorch twin of causal_conv1d_update (same arguments)."""
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
    conv_state[:, :, -1] = x
    out = (conv_state * weight.float()).sum(dim=-1)  # (B, E)
    if bias is not None:
        out = out + bias.float()
    return F.silu(out) if activation in ("silu", "swish") else out


def ssm_step(state: Tensor, x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
             z: Tensor | None = None, dt_bias: Tensor | None = None, dt_softplus: bool = False) -> Tensor:
    """One token of the selective scan (Mamba Alg. 2): h = exp(Δ A) h + Δ B x, y = C·h + D x, y ⊙ silu(z),
    with Δ = softplus(dt + dt_bias); state (B, E, N) updated in place, x, dt, z (B, E), B, C (B, N), A (E, N).
    The PyTorch twin of mamba_ssm's selective_state_update (same arguments)."""
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = F.softplus(dt)
    da = torch.exp(dt.unsqueeze(-1) * A)  # (B, E, N)
    state.mul_(da).add_((dt * x).unsqueeze(-1) * B.unsqueeze(1))
    y = torch.einsum("ben,bn->be", state, C)
    if D is not None:
        y = y + D * x
    if z is not None:
        y = y * F.silu(z)
    return y


def _bcl(m: Tensor, batch: int, length: int) -> Tensor:
    """A (C, B·L) matrix as (B, C, L), unit stride along L: a view (mamba_ssm's "d (b l) -> b d l")."""
    return m.view(m.shape[0], batch, length).transpose(0, 1)


def _matrix(t: Tensor) -> Tensor:
    """(B, C, L) back to (C, B·L): a view when t has that layout (the kernels' outputs do), else a copy."""
    return t.transpose(0, 1).reshape(t.shape[1], -1)


class Mamba(nn.Module):
    """The Mamba mixer (selective SSM block) on (B, L, d) -> (B, L, d)."""

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: int = 2, dt_rank="auto",
                 dt_min: float = 0.001, dt_max: float = 0.1, dt_init: str = "random", dt_scale: float = 1.0,
                 dt_init_floor: float = 1e-4, conv_bias: bool = True, bias: bool = False, scan_impl: str = "auto",
                 conv_impl: str = "auto"):
        super().__init__()
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = expand * d_model
        self.dt_rank = resolve_dt_rank(dt_rank, d_model)
        self.scan_impl, self.conv_impl = scan_impl, conv_impl
        e = self.d_inner
        self.in_proj = nn.Linear(d_model, 2 * e, bias=bias)
        self.conv1d = nn.Conv1d(e, e, kernel_size=d_conv, groups=e, padding=d_conv - 1, bias=conv_bias)
        self.x_proj = nn.Linear(e, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, e, bias=True)
        # dt_proj init (mamba_simple.py): weight ~ U(±R^{-1/2}·dt_scale) (or constant), bias = softplus^{-1}(dt)
        std = self.dt_rank ** -0.5 * dt_scale
        with torch.no_grad():
            if dt_init == "constant":
                nn.init.constant_(self.dt_proj.weight, std)
            elif dt_init == "random":
                nn.init.uniform_(self.dt_proj.weight, -std, std)
            else:
                raise DnadiffError(f"mamba config: dt_init must be 'random' or 'constant', got {dt_init!r}")
            dt = torch.exp(torch.rand(e) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
            dt = dt.clamp(min=dt_init_floor)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.dt_proj.bias._no_reinit = True  # type: ignore[attr-defined]
        # S4D-real init: A = -(1..N) per channel
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(e, 1)  # (E, N)
        self.A_log = nn.Parameter(torch.log(a))
        self.A_log._no_weight_decay = True  # type: ignore[attr-defined]
        self.D = nn.Parameter(torch.ones(e))
        self.D._no_weight_decay = True  # type: ignore[attr-defined]
        self.out_proj = nn.Linear(e, d_model, bias=bias)

    def forward(self, hidden: Tensor) -> Tensor:
        if (wants_kernel(self.conv_impl, "causal_conv1d_fn", hidden)
                or wants_kernel(self.scan_impl, "selective_scan_fn", hidden)):
            return self._forward_kernels(hidden)
        xz = self.in_proj(hidden)  # (B, L, 2E)
        x, z = xz.chunk(2, dim=-1)
        x = _causal_conv1d(x.transpose(1, 2), self.conv1d).transpose(1, 2)  # (B, L, E)
        x_dbl = self.x_proj(x)  # (B, L, R + 2N)
        dt, b, c = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)  # (B, L, E); the bias is added inside the scan
        a = -torch.exp(self.A_log.float())  # (E, N)
        y = selective_scan(x, dt, a, b, c, self.D.float(), z, self.dt_proj.bias.float(), delta_softplus=True,
                           impl=self.scan_impl)
        return self.out_proj(y)  # (B, L, d)

    def _forward_kernels(self, hidden: Tensor) -> Tensor:
        """`forward` through the CUDA kernels, in mamba_ssm's layout (mamba_simple.py): every activation is a
        (C, B·L) matrix, read as (B, C, L) with unit stride along L, as causal_conv1d_fn (channel-first, any
        channel count) and selective_scan_fn take it; the projections are GEMMs on these matrices, so x, z,
        Δ, B, C and y reach the kernels and the next GEMM as views, never transposed copies."""
        b, length, _ = hidden.shape
        e, n = self.d_inner, self.d_state
        h = hidden.reshape(b * length, -1)  # (B·L, d): a view unless hidden's (B, L) axes cannot merge
        w = self.in_proj.weight
        xz = w @ h.t() if self.in_proj.bias is None else torch.addmm(self.in_proj.bias.unsqueeze(1), w, h.t())
        x, z = (_bcl(t, b, length) for t in xz.chunk(2, dim=0))  # (B, E, L) each
        conv = conv_kernel(self.conv_impl, x, self.d_conv)
        if conv is not None:
            x = conv(x, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")  # same layout as x
        else:
            x = _causal_conv1d(x, self.conv1d)
        x_dbl = self.x_proj.weight @ _matrix(x)  # (R + 2N, B·L)
        dt, bm, cm = torch.split(x_dbl, [self.dt_rank, n, n], dim=0)
        dt = self.dt_proj.weight @ dt  # (E, B·L); the bias is added inside the scan
        a = -torch.exp(self.A_log.float())  # (E, N)
        scan = scan_kernel(self.scan_impl, x, n)
        if scan is not None:
            y = scan(x, _bcl(dt, b, length), a, _bcl(bm, b, length), _bcl(cm, b, length), self.D.float(), z=z,
                     delta_bias=self.dt_proj.bias.float(), delta_softplus=True)  # (B, E, L), z's layout
            return self.out_proj(y.transpose(1, 2))  # reads y as (B·L, E) in place
        # a pure scan (scan_impl, or "auto" fell back): its length-major layout
        y = selective_scan(x.transpose(1, 2), dt.t().view(b, length, e), a, bm.t().view(b, length, n),
                           cm.t().view(b, length, n), self.D.float(), z.transpose(1, 2), self.dt_proj.bias.float(),
                           delta_softplus=True, impl=self.scan_impl)
        return self.out_proj(y)

    # ---- incremental decoding (mamba_ssm's `Mamba.step`): O(1) work per token ----------------
    def allocate_state(self, batch_size: int, device=None) -> tuple[Tensor, Tensor]:
        """(conv_state Float[B, E, d_conv], ssm_state Float[B, E, N]), zeros, float32."""
        device = device if device is not None else self.A_log.device
        return (torch.zeros(batch_size, self.d_inner, self.d_conv, device=device),
                torch.zeros(batch_size, self.d_inner, self.d_state, device=device))

    def step(self, hidden: Tensor, conv_state: Tensor, ssm_state: Tensor) -> Tensor:
        """One token hidden Float[B, d] -> Float[B, d]; updates both states in place.

        Same recurrence as `forward` (Alg. 2): the causal conv keeps its last d_conv inputs, the
        scan its state h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t, y_t = C_t·h_t + D x_t. On CUDA (or with
        conv_impl / scan_impl "cuda") causal_conv1d_update and selective_state_update do the two steps."""
        xz = self.in_proj(hidden)  # (B, 2E)
        x, z = xz.float().chunk(2, dim=-1)
        weight = self.conv1d.weight[:, 0, :]  # (E, W)
        conv = conv_update_kernel(self.conv_impl, x, self.d_conv) or conv_step
        x = conv(x, conv_state, weight, self.conv1d.bias, "silu")  # (B, E)
        x_db = self.x_proj(x.to(self.x_proj.weight.dtype)).float()  # (B, R + 2N)
        dt, b, c = torch.split(x_db, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight.float())  # (B, E); bias and softplus inside the step
        a = -torch.exp(self.A_log.float())  # (E, N)
        update = state_update_kernel(self.scan_impl, x, self.d_state) or ssm_step
        y = update(ssm_state, x, dt, a, b, c, self.D.float(), z=z, dt_bias=self.dt_proj.bias.float(), dt_softplus=True)
        return self.out_proj(y.to(self.out_proj.weight.dtype))  # (B, d)


def init_mamba_weights(model: nn.Module, n_layer: int, initializer_range: float = 0.02,
                       rescale_prenorm_residual: bool = True, n_residuals_per_layer: int = 1) -> None:
    """mamba_ssm `_init_weights` (also Caduceus'): Linear biases 0 (except dt_proj), embeddings
    N(0, initializer_range), out_proj kaiming-uniform(a=√5) / √(n_residuals_per_layer · n_layer)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) and module.bias is not None:
                if not getattr(module.bias, "_no_reinit", False):
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=initializer_range)
            if rescale_prenorm_residual and isinstance(module, Mamba):
                nn.init.kaiming_uniform_(module.out_proj.weight, a=math.sqrt(5))
                module.out_proj.weight /= math.sqrt(n_residuals_per_layer * n_layer)


class MambaBlock(nn.Module):
    """mamba_ssm `Block`: residual = hidden + residual; hidden = mixer(norm(residual))."""

    def __init__(self, mixer: nn.Module, norm: nn.Module, residual_in_fp32: bool = True):
        super().__init__()
        self.mixer = mixer
        self.norm = norm
        self.residual_in_fp32 = residual_in_fp32

    def forward(self, hidden: Tensor, residual: Tensor | None) -> tuple[Tensor, Tensor]:
        residual = hidden if residual is None else hidden + residual
        hidden = self.norm(residual.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            residual = residual.float()
        return self.mixer(hidden), residual


@dataclasses.dataclass
class MambaConfig:
    d_model: int = 128
    n_layer: int = 4
    vocab_size: int = 12
    pad_vocab_size_multiple: int = 8
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    dt_rank: int | str = "auto"
    dt_min: float = 0.001
    dt_max: float = 0.1
    dt_init: str = "random"
    dt_scale: float = 1.0
    dt_init_floor: float = 1e-4
    conv_bias: bool = True
    bias: bool = False
    rms_norm: bool = True
    norm_epsilon: float = 1e-5
    residual_in_fp32: bool = True
    initializer_range: float = 0.02
    rescale_prenorm_residual: bool = True
    cond_dim: int = 0
    scan_impl: str = "auto"  # auto | compiled | chunked | ref | cuda (dnadiff.backbones.scan.SCAN_IMPLS)
    conv_impl: str = "auto"  # auto | torch | cuda (causal_conv1d's kernels; kernels.py)

    family = "mamba"  # (class attribute, not a field) names the config in error messages

    def __post_init__(self) -> None:
        if self.d_model < 1 or self.n_layer < 1 or self.vocab_size < 1:
            raise DnadiffError(f"{self.family} config: d_model, n_layer and vocab_size must be positive")
        if self.scan_impl not in SCAN_IMPLS:
            raise DnadiffError(f"{self.family} config: scan_impl must be {'|'.join(SCAN_IMPLS)}, "
                               f"got {self.scan_impl!r}")
        if self.conv_impl not in ("auto", "torch", "cuda"):
            raise DnadiffError(f"{self.family} config: conv_impl must be auto|torch|cuda, got {self.conv_impl!r}")

    def mixer_kwargs(self) -> dict:
        return dict(d_state=self.d_state, d_conv=self.d_conv, expand=self.expand, dt_rank=self.dt_rank,
                    dt_min=self.dt_min, dt_max=self.dt_max, dt_init=self.dt_init, dt_scale=self.dt_scale,
                    dt_init_floor=self.dt_init_floor, conv_bias=self.conv_bias, bias=self.bias,
                    scan_impl=self.scan_impl, conv_impl=self.conv_impl)


class MambaMixerModel(nn.Module):
    """mamba_ssm `MixerModel`: keys `embedding`, `layers.{i}.{norm,mixer}`, `norm_f`."""

    def __init__(self, cfg: MambaConfig, padded_vocab: int):
        super().__init__()
        self.embedding = nn.Embedding(padded_vocab, cfg.d_model)
        self.layers = nn.ModuleList(
            MambaBlock(Mamba(cfg.d_model, **cfg.mixer_kwargs()),
                       build_norm(cfg.d_model, cfg.norm_epsilon, cfg.rms_norm), cfg.residual_in_fp32)
            for _ in range(cfg.n_layer)
        )
        self.norm_f = build_norm(cfg.d_model, cfg.norm_epsilon, cfg.rms_norm)

    def forward(self, hidden: Tensor) -> Tensor:
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        residual = hidden if residual is None else hidden + residual
        return self.norm_f(residual.to(dtype=self.norm_f.weight.dtype))


@BACKBONES.register("mamba")
class MambaLM(Backbone):
    """Unidirectional (causal) Mamba language model; `t` is ignored."""

    Config = MambaConfig
    fsdp_blocks = (MambaBlock,)
    float32_modules = (Mamba,)  # the selective scan
    PRESETS = {
        "tiny": dict(d_model=32, n_layer=2),
        "gb-d128": dict(d_model=128, n_layer=4),  # the Genomic Benchmarks Mamba baseline (d128 × 4)
        # the MDLM paper's tab. 6 AR Mamba ("465K"): d128 × 4, the parameter-parity partner of Caduceus
        # d118 × 4 in the Caduceus HG38 experiments. Exactly 468,608 parameters with the DNA vocabulary (12
        # padded to 16, head tied to the embedding); the paper's counts sit ~3.6K below ours for both models
        # (Caduceus "467K" is 470,702 here), so the same counting convention, not another size.
        "dna-465k": dict(d_model=128, n_layer=4),
        "d256x8": dict(d_model=256, n_layer=8),
    }
    is_causal = True
    takes_embeddings = True

    def __init__(self, config: MambaConfig):
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.hidden_size = config.d_model
        self.padded_vocab_size = pad_vocab(config.vocab_size, config.pad_vocab_size_multiple)
        self.backbone = MambaMixerModel(config, self.padded_vocab_size)
        self.cond_proj = nn.Linear(config.cond_dim, config.d_model, bias=False) if config.cond_dim > 0 else None
        self.lm_head = nn.Linear(config.d_model, self.padded_vocab_size, bias=False)
        init_mamba_weights(self, config.n_layer, config.initializer_range, config.rescale_prenorm_residual)
        self.lm_head.weight = self.backbone.embedding.weight  # tied (MambaLMHeadModel.tie_weights)

    def features(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                 attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None) -> Tensor:
        ids = token_shape(input_ids, inputs_embeds, "mamba")
        padding_mask(ids, attention_mask)  # checked only: a causal scan never sees a row's right pads
        hidden = self.backbone.embedding(input_ids) if inputs_embeds is None else inputs_embeds  # (B, L, d)
        if cond is not None:
            if self.cond_proj is None:
                raise DnadiffError("mamba: a cond vector was passed but the model was built with cond_dim=0")
            hidden = hidden + self.cond_proj(cond.to(hidden.dtype))[:, None]
        return self.backbone(hidden)

    def forward(self, input_ids: Tensor | None, t: Tensor | None = None, cond: Tensor | None = None,
                attention_mask: Tensor | None = None, inputs_embeds: Tensor | None = None) -> Tensor:
        """inputs_embeds Float[B, L, d] (optional) replaces the token embedding lookup (input_ids may be None)."""
        hidden = self.features(input_ids, t, cond, attention_mask, inputs_embeds)
        logits = self.lm_head(hidden.to(self.lm_head.weight.dtype))
        return logits[..., : self.vocab_size]  # (B, L, V)

    # ---- incremental decoding (optional backbone API, see backbones/base.py) -------------------
    def allocate_cache(self, batch_size: int, max_length: int) -> dict:
        """Recurrent state per layer: O(1) memory and work per token, whatever max_length."""
        device = self.backbone.embedding.weight.device
        return {"pos": 0, "layers": [layer.mixer.allocate_state(batch_size, device) for layer in self.backbone.layers]}

    def step(self, input_ids: Tensor, cache: dict, cond: Tensor | None = None) -> Tensor:
        """Next-token logits Float[B, V] after feeding input_ids Long[B] (position cache["pos"]); `cond`
        Float[B, cond_dim] as in features() (added to every token's embedding: a class label's)."""
        hidden = self.backbone.embedding(input_ids)  # (B, d)
        if cond is not None:
            if self.cond_proj is None:
                raise DnadiffError("mamba: a cond vector was passed but the model was built with cond_dim=0")
            hidden = hidden + self.cond_proj(cond.to(hidden.dtype))
        residual = None
        for layer, (conv_state, ssm_state) in zip(self.backbone.layers, cache["layers"]):
            residual = hidden if residual is None else hidden + residual  # MambaBlock, one token
            hidden = layer.norm(residual.to(dtype=layer.norm.weight.dtype))
            if layer.residual_in_fp32:
                residual = residual.float()
            hidden = layer.mixer.step(hidden, conv_state, ssm_state)
        residual = hidden + residual
        h = self.backbone.norm_f(residual.to(dtype=self.backbone.norm_f.weight.dtype))
        cache["pos"] += 1
        return self.lm_head(h.to(self.lm_head.weight.dtype))[..., : self.vocab_size]  # (B, V)

    def step_many(self, input_ids: Tensor, cache: dict, update: bool = True, cond: Tensor | None = None) -> Tensor:
        """Logits Float[B, n, V] after each of input_ids Long[B, n], in one parallel pass from the cache (advanced
        past them when `update`, else unchanged): n `step` calls' numbers (mamba_chunk.py)."""
        if cond is not None and self.cond_proj is None:
            raise DnadiffError("mamba: a cond vector was passed but the model was built with cond_dim=0")
        return mamba_step_many(self, input_ids, cache, update, cond)
