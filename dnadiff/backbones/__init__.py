"""Networks: DiT, Mamba, Caduceus (BiMamba + RCPS), HyenaDNA. They know nothing of masking."""

# registration by import: each family registers itself in BACKBONES (markov: the order-k Markov chain,
# a count model obeying the causal contract; markov_classes: one chain per class), each converter its
# format in formats.CHECKPOINT_FORMATS
from dnadiff.backbones import (  # noqa: F401
    caduceus,
    convert_caduceus,
    convert_hyena,
    convert_mdlm,
    dit,
    hf_mlm,
    hyena,
    mamba,
    markov,
    markov_classes,
)
from dnadiff.backbones.base import BACKBONES, Backbone, build_backbone, build_backbone_from_config

__all__ = ["BACKBONES", "Backbone", "build_backbone", "build_backbone_from_config"]
