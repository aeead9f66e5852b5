"""Load-time check of the per-registry option mappings of a config: `model.overrides`
against the backbone's Config, `objective.options` / `sample.options` against the objective's /
sampler's constructor, `data.text` against data.text.TextOptions. A layer above the registries
(backbones, diffusion, samplers, data) and below the commands, training and finetune, which load
their configs with `load_config` here (config.load_config with this check). Imports torch only
when a mapping is non-empty."""

from __future__ import annotations

import os
from typing import Any, Callable

from dnadiff import config
from dnadiff.config import from_dict, replace


def load_config(cls: type, path: str | os.PathLike | None, overrides: list[str] | None = None,
                resolve_paths: bool = True, check_model: Callable[[Any], bool] | None = None) -> Any:
    """`config.load_config` with the option mappings checked against the registries (`check_options`)."""
    return config.load_config(cls, path, overrides, resolve_paths=resolve_paths,
                              check=lambda obj: check_options(obj, check_model))


def check_options(obj: Any, check_model: Callable[[Any], bool] | None = None) -> Any:
    """`obj` with its option mappings checked and converted to their declared types; a typo fails
    here, at load time, with one line listing the valid keys. `check_model(model) -> True` when it
    checked `model.overrides` itself (finetune's k-mer LR baseline, which is no backbone)."""
    changes: dict[str, Any] = {}
    model = getattr(obj, "model", None)
    if model is not None and check_model is not None and check_model(model):
        pass
    elif getattr(model, "overrides", None) and not model.init_from:  # init_from: checked against the loaded network
        from dnadiff.backbones.base import BACKBONES

        changes["model.overrides"] = BACKBONES.check_options(model.backbone, model.overrides, "model.overrides")
    objective = getattr(obj, "objective", None)
    if getattr(objective, "options", None):
        from dnadiff.diffusion import OBJECTIVES

        changes["objective.options"] = OBJECTIVES.check_options(objective.name, objective.options,
                                                                "objective.options", exclude=("schedule",))
    check_blocks(obj)
    sample = getattr(obj, "sample", None)
    if getattr(sample, "options", None):
        from dnadiff.samplers import SAMPLERS

        changes["sample.options"] = SAMPLERS.check_options(sample.sampler, sample.options, "sample.options")
    data = getattr(obj, "data", None)
    if isinstance(getattr(data, "text", None), dict) and data.text:
        from dnadiff.data.text_sources import TextOptions

        opts = from_dict(TextOptions, data.text, prefix="data.text.")
        changes["data.text"] = {k: getattr(opts, k) for k in data.text}
    return replace(obj, **changes) if changes else obj

def check_blocks(obj: Any) -> None:
    """`objective.block_size` / `objective.clip` only for an objective with blocks (bd3lm), the block size
    dividing `data.seq_len` (every training block has block_size tokens, as in BD3-LM), the clip an interval."""
    objective = getattr(obj, "objective", None)
    block_size, clip = getattr(objective, "block_size", None), getattr(objective, "clip", None)
    if block_size is None and clip is None:
        return
    from dnadiff.diffusion import OBJECTIVES
    from dnadiff.diffusion.bd3lm import check_block_size, check_clip
    from dnadiff.errors import DnadiffError

    name = objective.name
    if name in OBJECTIVES and not getattr(OBJECTIVES.get(name), "has_blocks", False):
        key = "objective.block_size" if block_size is not None else "objective.clip"
        blocks = " or ".join(n for n in OBJECTIVES.names() if getattr(OBJECTIVES.get(n), "has_blocks", False))
        raise DnadiffError(f"{key}: objective {name!r} has no blocks (objective.name={blocks} has)")
    check_clip(clip, "objective.clip")
    check_causal_backbone(getattr(obj, "model", None))
    if block_size is None:
        return
    check_block_size(block_size, "objective.block_size")
    seq_len = getattr(getattr(obj, "data", None), "seq_len", None)
    if seq_len and seq_len % block_size:
        raise DnadiffError(f"objective.block_size: {block_size} does not divide data.seq_len {seq_len} "
                           f"(training blocks all have block_size tokens; e.g. {_divisor_near(seq_len, block_size)})")


def check_causal_backbone(model: Any) -> None:
    """Block diffusion reads a causal network or one that takes an attention mask (the DiT; diffusion/bd3lm.py
    `block_layout`): a backbone built from the config (not init_from, checked when it is loaded) must be one,
    by its class or its Config's `causal` field."""
    if model is None or getattr(model, "init_from", None) or not getattr(model, "backbone", None):
        return
    import dataclasses

    from dnadiff.backbones.base import BACKBONES
    from dnadiff.diffusion.bd3lm import refuse_bidirectional

    if model.backbone not in BACKBONES:
        return  # the registry's own error comes later, naming the valid backbones
    cls = BACKBONES.get(model.backbone)  # a Backbone: it declares is_causal and takes_attn_mask (base.py)
    if cls.takes_attn_mask:
        return  # causal: the stream; bidirectional: the paper's x_t ⊕ x_0 with its mask (bd3lm.block_layout)
    causal = bool(cls.is_causal)
    config = getattr(cls, "Config", None)
    fields = {f.name: f for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else {}
    if "causal" in fields:  # DiT, HyenaDNA: the preset's, then the overrides' value
        settings = {**getattr(cls, "PRESETS", {}).get(model.preset or "", {}), **(model.overrides or {})}
        causal = bool(settings.get("causal", fields["causal"].default))
    if not causal:
        class _Named:
            is_causal = False
        refuse_bidirectional(_Named(), f"model.backbone {model.backbone!r} (preset {model.preset!r})")


def _divisor_near(n: int, k: int) -> int:
    """The divisor of n closest to k (a hint for a block size that fits)."""
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - k), d))


__all__ = ["check_blocks", "check_causal_backbone", "check_options", "load_config"]
