"""Networks: DiT, Mamba, Caduceus (BiMamba + RCPS), HyenaDNA. They know nothing of masking."""

import importlib

from dnadiff.backbones.base import BACKBONES, Backbone, build_backbone, build_backbone_from_config

# Each family registers itself on import; a family whose file is not there yet is skipped.
for _mod in ("dit", "mamba", "caduceus", "hyena", "hf_mlm"):
    try:
        importlib.import_module(f"dnadiff.backbones.{_mod}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"dnadiff.backbones.{_mod}":
            raise
importlib.import_module("dnadiff.baselines.markov")  # the classical order-k baseline, registered as "markov"

__all__ = ["BACKBONES", "Backbone", "build_backbone", "build_backbone_from_config"]
