"""`model.init_from` an unconditional network into a class-conditional run (issue 47 §4: the genome-pretrained
chr22 MDLM or MLM as the start of the cell-type-conditional DHS MDLM).

    backbone = add_class_conditioning(backbone, "caduceus", num_classes=4, cond_dim=32)

A class-conditional model is the backbone built with `cond_dim > 0` (its `cond_proj`: Linear(cond_dim, d_model),
no bias, whose output is added to the token embeddings) behind a label embedding (backbones/conditioning.py).
The pretrained network has neither, so the backbone is rebuilt from its own config with cond_dim set, every
pretrained tensor copied into it by name, and the two new parts are the only ones left: `cond_proj` starts at
zero, so the conditional model starts as the pretrained network for every label (the label's effect is learned;
its gradient is not zero, it is ∂L/∂embedding ⊗ label vector), and the label embedding starts as a fresh one
(normal, std 0.02). init_from's line then reports them as new (training/run.py: matched / new / dropped).
"""

from __future__ import annotations

import dataclasses

import torch

from dnadiff.backbones.base import build_backbone_from_config
from dnadiff.backbones.conditioning import ClassConditional
from dnadiff.errors import DnadiffError

DEFAULT_COND_DIM = 32  # what a class-conditional run built from a preset gets (training/run.py)


def check_same_tokenizer(source_config, cfg, given: str) -> None:
    """The pretrained model and the run read the same tokens (kind and vocabulary), else one line."""
    a, b = source_config.tokenizer, cfg.tokenizer
    if (a.kind, a.path) != (b.kind, b.path):
        raise DnadiffError(f"model.init_from: {given} uses the {a.kind} tokenizer{f' {a.path}' if a.path else ''}, "
                           f"this run the {b.kind} tokenizer{f' {b.path}' if b.path else ''}")


def add_class_conditioning(backbone: torch.nn.Module, name: str, num_classes: int,
                           cond_dim: int | None = None) -> ClassConditional:
    """`backbone` (unconditional, pretrained) as a class-conditional network that starts as it (module docstring)."""
    config = dataclasses.asdict(backbone.config)
    if "cond_dim" not in config:
        raise DnadiffError(f"model.init_from: a {name} backbone takes no per-sequence vector (no cond_dim), so no "
                           "class embedding can be added to it")
    if config["cond_dim"] <= 0:
        config["cond_dim"] = int(cond_dim or DEFAULT_COND_DIM)
        rebuilt = build_backbone_from_config(name, config)
        missing, unexpected = rebuilt.load_state_dict(backbone.state_dict(), strict=False)
        if unexpected or any(not key.startswith("cond_proj.") for key in missing):
            raise DnadiffError(f"model.init_from: rebuilding the {name} backbone with cond_dim {config['cond_dim']} "
                               f"changed more than its cond_proj ({', '.join([*missing, *unexpected][:4])})")
        with torch.no_grad():
            rebuilt.cond_proj.weight.zero_()  # the label changes nothing at the start: the pretrained network
        backbone = rebuilt.to(next(backbone.parameters()).device)
    return ClassConditional(backbone, num_classes)


__all__ = ["DEFAULT_COND_DIM", "add_class_conditioning", "check_same_tokenizer"]
