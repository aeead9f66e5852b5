"""Networks: DiT, Mamba, Caduceus (BiMamba + RCPS), HyenaDNA. They know nothing of masking."""

# Each family registers itself in BACKBONES (every module of this package is imported on the first lookup).
from dnadiff.backbones.base import BACKBONES, Backbone, build_backbone, build_backbone_from_config

__all__ = ["BACKBONES", "Backbone", "build_backbone", "build_backbone_from_config"]
