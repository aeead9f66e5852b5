"""Load-time check of the per-registry option mappings of a config: `model.overrides`
against the backbone's Config, `objective.options` / `sample.options` against the objective's /
sampler's constructor, `data.text` against data.text.TextOptions. Kept apart from config.py
because it reaches into the registries (and so imports torch, only when a mapping is non-empty)."""

from __future__ import annotations

from typing import Any

from dnadiff.config import OPTION_CHECKS, from_dict, replace


@OPTION_CHECKS.register("registries")
def check_options(obj: Any) -> Any:
    """`obj` with its option mappings checked and converted to their declared types; a typo fails
    here, at load time, with one line listing the valid keys."""
    changes: dict[str, Any] = {}
    model = getattr(obj, "model", None)
    if getattr(model, "backbone", None) == "kmer_lr":  # the k-mer LR baseline is no network: its own options
        from dnadiff.finetune.kmer_lr import kmer_options

        kmer_options(dict(model.overrides))  # a typo fails at load time, listing the known options
    elif getattr(model, "overrides", None) and not model.init_from:  # init_from: checked against the loaded network
        from dnadiff.backbones.base import BACKBONES

        changes["model.overrides"] = BACKBONES.check_options(model.backbone, model.overrides, "model.overrides")
    objective = getattr(obj, "objective", None)
    if getattr(objective, "options", None):
        from dnadiff.diffusion import OBJECTIVES

        changes["objective.options"] = OBJECTIVES.check_options(objective.name, objective.options,
                                                                "objective.options", exclude=("schedule",))
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
