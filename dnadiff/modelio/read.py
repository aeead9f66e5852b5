"""Reading a resolved model source into its parts: config, backbone (weights loaded), tokenizer, metrics.

    parts = read_model(resolve(path))        # ModelParts; dnadiff.checkpoint.load builds the DiffusionModel
    name, backbone = read_backbone(resolve(path))   # what fine-tuning and `init_from` start from

A dnadiff model directory is read by its format (modelio/model_dir.py); an official one by its registered
format (backbones/formats.py: `CHECKPOINT_FORMATS`), whose declarations (`backbone`, `objective`,
`objective_options`, `text_model`) say what it becomes. Weights are read only through safetensors
(dnadiff/weights.py), or for official `.bin` files through torch.load(weights_only=True); nothing else is
ever unpickled.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from dnadiff.backbones.convert_mdlm import extend_vocab, load_mdlm_pretrained, mdlm_tokenizer, read_config
from dnadiff.config import RunConfig, from_dict, replace
from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.modelio.model_dir import (
    WEIGHTS_FILE,
    backbone_from_config,
    full_backbone_config,
    is_model_dir,
    naming,
    read_metrics,
    tokenizer_from_config,
)
from dnadiff.modelio.source import ModelSource
from dnadiff.tokenizers import DNATokenizer
from dnadiff.weights import load_weights_file


@dataclasses.dataclass
class ModelParts:
    """What a model source holds: the RunConfig, the backbone (weights loaded, eval mode), the tokenizer,
    the recorded metrics and the folder it was read from."""

    config: RunConfig
    backbone: torch.nn.Module
    tokenizer: Any
    metrics: dict[str, Any]
    path: Path


def read_model(source: ModelSource, map_location: str | torch.device = "cpu", tokenizer: str = "gpt2") -> ModelParts:
    """The parts of a dnadiff model directory, an official Caduceus (objective mlm) / HyenaDNA (objective
    ar) one, or an MDLM text checkpoint (`tokenizer`: the text tokenizer of one that ships none, mdlm-owt:
    GPT-2)."""
    fmt, path = source.official, source.path
    if fmt is None:
        return _read_dnadiff(source, map_location)
    if fmt.text_model:
        return _read_mdlm(path, map_location, tokenizer)
    backbone = fmt.load(path, None)
    cfg = from_dict(RunConfig, {"name": path.name, "model": {"backbone": fmt.backbone, "init_from": str(path)},
                                "objective": {"name": fmt.objective, "options": dict(fmt.objective_options)}})
    cfg = replace(cfg, **{"model.overrides": full_backbone_config(backbone)})
    return ModelParts(cfg, backbone.to(map_location).eval(), DNATokenizer(), {}, path)


def _read_dnadiff(source: ModelSource, map_location) -> ModelParts:
    path = source.path
    cfg = source.config
    try:
        tokenizer = tokenizer_from_config(cfg, path)
        backbone = backbone_from_config(cfg, tokenizer.vocab_size)
        load_weights_file(backbone, path / WEIGHTS_FILE)
        backbone.to(map_location).eval()
        if backbone.vocab_size != tokenizer.vocab_size:
            raise DnadiffError(f"model vocab_size {backbone.vocab_size} does not match the tokenizer's "
                               f"{tokenizer.vocab_size}")
    except DnadiffError as exc:  # e.g. an unknown backbone or a vocabulary that does not fit: name the model
        raise naming(exc, path) from None
    return ModelParts(cfg, backbone, tokenizer, read_metrics(path), path)


def _read_mdlm(path: Path, map_location, tokenizer_name: str) -> ModelParts:
    """An MDLM text checkpoint: `dit` backbone, text tokenizer, the mdlm objective under the log-linear
    schedule mdlm-owt was trained with (paper §5.1), σ(t) as time input."""
    length = int(read_config(path).get("model_length", 1024))  # the training context (OWT: 1024)
    backbone = load_mdlm_pretrained(path)
    tok = mdlm_tokenizer(path, tokenizer_name, backbone.vocab_size)
    backbone = extend_vocab(backbone, tok.vocab_size, str(path))
    cfg = from_dict(RunConfig, {
        "name": path.name,
        "tokenizer": {"kind": "text", "path": tok.name_or_path},
        "model": {"backbone": "dit", "init_from": str(path), "time_input": "sigma"},
        "schedule": {"name": "loglinear"},
        "objective": {"name": "mdlm"},
        "data": {"kind": "text", "seq_len": length},
        "sample": {"length": length},
    })
    cfg = replace(cfg, **{"model.overrides": full_backbone_config(backbone)})
    return ModelParts(cfg, backbone.to(map_location).eval(), tok, {}, path)


def read_backbone(source: ModelSource, vocab_size: int | None = None, keep_label_embedding: bool = False,
                  objective: str | None = None) -> tuple[str, torch.nn.Module]:
    """(backbone name, backbone) of a source. A class-conditional model gives its plain backbone (what a
    classifier fine-tunes) unless `keep_label_embedding` (continued generative training). `vocab_size`
    widens an MDLM checkpoint's vocabulary to the tokenizer's (see convert_mdlm.extend_vocab); other
    formats ignore it. A model whose objective wraps the backbone (plaid) gives the backbone inside unless
    `objective` (the objective it will be trained with) is its own: see read_backbone_noted."""
    name, backbone, _ = read_backbone_noted(source, vocab_size, keep_label_embedding, objective)
    return name, backbone


def read_backbone_noted(source: ModelSource, vocab_size: int | None = None, keep_label_embedding: bool = False,
                        objective: str | None = None) -> tuple[str, torch.nn.Module, str]:
    """read_backbone, and a note naming what was dropped ("" for nothing): the model's objective network
    (`Objective.unwrap_backbone`: Plaid's embeddings, schedule and input/time maps) when `objective` is not
    the model's own (None: fine-tuning, which keeps no objective's parts)."""
    fmt, path = source.official, source.path
    if fmt is not None:
        return fmt.backbone, fmt.load(path, vocab_size), ""
    if (path / "config.json").is_file() and not is_model_dir(path):
        raise DnadiffError(f"{path}: config.json is neither a dnadiff config nor an official Caduceus, "
                           "HyenaDNA or MDLM config")
    parts = _read_dnadiff(source, "cpu")
    backbone, note = parts.backbone, ""
    if objective != parts.config.objective.name:
        from dnadiff.diffusion import OBJECTIVES

        backbone, note = OBJECTIVES.get(parts.config.objective.name).unwrap_backbone(backbone)
    if capabilities_of(backbone).conditional and not keep_label_embedding:
        backbone = backbone.backbone
    return parts.config.model.backbone, backbone, note


__all__ = ["ModelParts", "read_backbone", "read_backbone_noted", "read_model"]
