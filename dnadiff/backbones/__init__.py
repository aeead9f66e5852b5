"""Networks: DiT, Mamba, Caduceus (BiMamba + RCPS), HyenaDNA. They know nothing of masking."""

# Each family registers itself in BACKBONES on import.
from dnadiff.backbones import caduceus, dit, hf_mlm, hyena, mamba  # noqa: F401
from dnadiff.backbones.base import BACKBONES, Backbone, build_backbone, build_backbone_from_config

__all__ = ["BACKBONES", "Backbone", "build_backbone", "build_backbone_from_config"]
