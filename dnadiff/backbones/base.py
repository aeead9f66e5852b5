"""Backbone registry and the shared contract.

Every backbone is an nn.Module registered under a name (`dit`, `mamba`, `caduceus`, `hyena`)
with named size presets, and obeys:

    forward(input_ids: Long[B, L], t: Float[B] | None = None, cond: Float[B, C] | None = None)
        -> logits Float[B, L, vocab_size]       (padded vocab columns are dropped)
    features(input_ids, t=None, cond=None) -> Float[B, L, hidden_size]   (after the final norm)

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

from torch import nn

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

BACKBONES = Registry("backbone")


class Backbone(nn.Module):
    """Mixin for presets: subclasses set `Config` (a dataclass) and `PRESETS` (name -> dict)."""

    Config: type
    PRESETS: dict[str, dict[str, Any]] = {}
    is_causal: bool = False
    time_conditioned: bool = False

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
    import dnadiff.backbones  # noqa: F401  (registers the families)

    return BACKBONES.get(name).from_preset(preset, **overrides)


def build_backbone_from_config(name: str, config: dict[str, Any]) -> Backbone:
    """Rebuild from a saved config dict (the dataclass fields), as written beside the weights."""
    import dnadiff.backbones  # noqa: F401

    cls = BACKBONES.get(name)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    unknown = sorted(set(config) - fields)
    if unknown:
        raise DnadiffError(f"backbone {name!r}: unknown config key(s) {', '.join(unknown)}")
    return cls(cls.Config(**config))
