"""Backbone registry and the shared contract.

Every backbone is an nn.Module registered under a name (`dit`, `mamba`, `caduceus`, `hyena`)
with named size presets, and obeys:

    forward(input_ids: Long[B, L], t: Float[B] | None = None, cond: Float[B, C] | None = None,
            attention_mask: Long/Bool[B, L] | None = None)
        -> logits Float[B, L, vocab_size]       (padded vocab columns are dropped)
    features(input_ids, t=None, cond=None, attention_mask=None) -> Float[B, L, hidden_size]   (after the final norm)

`attention_mask` (1 on real tokens, 0 on pads; rows right-padded) makes a batch pad-invariant:
the outputs at a row's real positions equal (to float rounding) those of the unpadded row run
alone, whatever the pads hold; outputs at pad positions are unspecified. Each family does what
its mixing needs (bidirectional scans and RC strands start at the row's last real token, the
two-sided Hyena conv sees zeros at pads, attention has a key padding mask; causal models need
nothing for right padding). Left-padded or holed masks are refused (DnadiffError).

Backbones that declare `takes_embeddings` (DiT, Mamba, Caduceus-PH) also take
`inputs_embeds: Float[B, L, hidden]` in forward/features instead of the token lookup (input_ids may then be
None): what continuous-space objectives (plaid: Gaussian diffusion of embeddings) feed them.
Backbones that declare `takes_attn_mask` (DiT) take the architecture options `attn_mask` (Bool[L, L] or
[B, L, L]), `position_ids` and a KV cache (`kv_cache`, `cache_tokens`, `new_kv_cache()`) in forward/features:
block diffusion's x_t ⊕ x_0 layout (diffusion/bd3lm_attention.py).

`t` is ignored unless the model is time-conditioned. `cond` is an optional per-sequence vector
(e.g. a class-label embedding, width `cond_dim`) added to the token embeddings; backbones built
with cond_dim=0 reject it. Attributes: `config` (a dataclass, saved beside the weights),
`hidden_size`, `vocab_size`, `is_causal`, `time_conditioned`.
Backbones know nothing of masking or losses.

Optional incremental-decoding API (causal backbones: `mamba`, causal `hyena`, causal `dit`), used
by the `autoregressive` sampler instead of re-running the prefix for every token:

    cache = backbone.allocate_cache(batch_size, max_length)    # opaque; cache["pos"] = tokens fed
    logits = backbone.step(input_ids: Long[B], cache)          # -> Float[B, V] for the NEXT position

Feeding tokens x_0 .. x_i one by one gives the logits that `forward(x)[:, i]` gives (a test checks
it per family). Costs per token: Mamba O(1) (conv + SSM state, as mamba_ssm's `step`), HyenaDNA
O(L) (the long conv over the kept inputs), DiT O(L) (a KV cache).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

BACKBONES = Registry("backbone")  # filled by the imports of dnadiff/backbones/__init__.py


def padding_mask(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
    """Bool[B, L] (True at real tokens) of a right-padded batch, or None when nothing is padding
    (then a backbone runs exactly as it does without a mask)."""
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise DnadiffError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape "
                           f"{tuple(input_ids.shape)}")
    real = attention_mask.to(device=input_ids.device).bool()
    if bool(real.all()):
        return None
    if bool((real[:, 1:] & ~real[:, :-1]).any()):
        raise DnadiffError("attention_mask: rows must be right-padded (real tokens first, then pads)")
    return real


def token_shape(input_ids: Tensor | None, inputs_embeds: Tensor | None, family: str) -> Tensor:
    """Long[B, L]: `input_ids`, or (inputs_embeds Float[B, L, H] given instead) a stand-in of that shape and
    device, for the shape checks and masks that read only the ids' shape."""
    if inputs_embeds is not None:
        if inputs_embeds.dim() != 3:
            raise DnadiffError(f"{family}: inputs_embeds must be [B, L, H], got shape {tuple(inputs_embeds.shape)}")
        return torch.zeros(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
    if input_ids is None or input_ids.dim() != 2:
        got = None if input_ids is None else tuple(input_ids.shape)
        raise DnadiffError(f"{family}: input_ids must be [B, L], got {got}")
    return input_ids


def reverse_index(real: Tensor) -> Tensor:
    """Long[B, L] gather index that reverses the real prefix of each right-padded row and keeps the
    pads in place (an involution): the per-row version of flip over the length."""
    length = real.shape[1]
    pos = torch.arange(length, device=real.device).expand(real.shape[0], length)  # (B, L)
    n = real.long().sum(dim=1, keepdim=True)  # (B, 1)
    return torch.where(pos < n, n - 1 - pos, pos)


def flip_length(x: Tensor, rev: Tensor | None) -> Tensor:
    """x (B, L, ...) reversed along L: plainly (rev None) or per row's real prefix (rev from reverse_index)."""
    if rev is None:
        return x.flip(1)
    index = rev.view(*rev.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class Backbone(nn.Module):
    """Mixin for presets: subclasses set `Config` (a dataclass) and `PRESETS` (name -> dict)."""

    Config: type
    PRESETS: dict[str, dict[str, Any]] = {}
    # the optional capabilities, absent unless a family declares them (read by dnadiff.denoiser.capabilities_of)
    is_causal: bool = False
    time_conditioned: bool = False
    takes_embeddings: bool = False  # forward/features accept inputs_embeds (module docstring)
    takes_attn_mask: bool = False  # forward/features accept attn_mask, position_ids and a KV cache (module docstring)
    # a network (forward/backward, features); False: a count model (the Markov baseline), which `dnadiff train`
    # fits with the function registered under its name in baselines.COUNT_FITS (no Lightning)
    neural: bool = True
    # FSDP (training/strategy.py): the repeated block classes wrapped as units (empty: no FSDP), and
    # the modules whose parameters and compute stay float32 under mixed precision
    fsdp_blocks: tuple[type[nn.Module], ...] = ()
    float32_modules: tuple[type[nn.Module], ...] = ()

    @classmethod
    def from_preset(cls, preset: str = "tiny", **overrides: Any) -> "Backbone":
        if preset not in cls.PRESETS:
            raise DnadiffError(
                f"unknown preset {preset!r} for {cls.__name__}; choose one of: {', '.join(sorted(cls.PRESETS))}"
            )
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise DnadiffError(f"{cls.__name__}: unknown config key(s) {', '.join(unknown)}")
        values = {**cls.PRESETS[preset], **overrides}
        return cls(cls.Config(**values))

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)


def build_backbone(name: str, preset: str = "tiny", **overrides: Any) -> Backbone:
    """`build_backbone("caduceus", preset="tiny", vocab_size=12)`."""
    return BACKBONES.get(name).from_preset(preset, **overrides)


def build_backbone_from_config(name: str, config: dict[str, Any]) -> Backbone:
    """Rebuild from a saved config dict (the dataclass fields), as written beside the weights."""
    cls = BACKBONES.get(name)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    unknown = sorted(set(config) - fields)
    if unknown:
        raise DnadiffError(f"backbone {name!r}: unknown config key(s) {', '.join(unknown)}")
    return cls(cls.Config(**config))
