"""Loading a model: one straight path, resolve -> detect -> read -> build -> load.

`load(path)` takes a dnadiff model directory (dnadiff/model_dir.py), an official Hugging Face-format
Caduceus or HyenaDNA directory, an MDLM text checkpoint (kuleshov-group/mdlm-owt; recognised from its
config.json), or a Hub id "org/name" resolved once in the local Hugging Face cache (dnadiff/hub.py).
Weights are read only through safetensors (dnadiff/weights.py), or for official `.bin` files through
torch.load(weights_only=True); nothing else is ever unpickled.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from dnadiff.backbones.convert_mdlm import extend_vocab, load_mdlm_pretrained, mdlm_tokenizer, read_config
from dnadiff.backbones.formats import CHECKPOINT_FORMATS, detect_format
from dnadiff.config import RunConfig, from_dict, replace
from dnadiff.errors import DnadiffError
from dnadiff.hub import resolve_model_path
from dnadiff.model import DiffusionModel
from dnadiff.model_dir import (
    WEIGHTS_FILE,
    backbone_from_config,
    full_backbone_config,
    is_dnadiff_config,
    is_model_dir,
    load_config_of,
    naming,
    read_metrics,
    tokenizer_from_config,
)
from dnadiff.tokenizers import DNATokenizer
from dnadiff.weights import load_weights_file


def load_model_dir(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> DiffusionModel:
    path = resolve_model_path(path)  # a Hub id: config, tokenizer and weights all from its cache folder
    cfg = load_config_of(path)
    try:
        tokenizer = tokenizer_from_config(cfg, path)
        backbone = backbone_from_config(cfg, tokenizer.vocab_size)
        load_weights_file(backbone, path / WEIGHTS_FILE)
        backbone.to(map_location).eval()
        model = DiffusionModel(cfg, backbone, tokenizer)
    except DnadiffError as exc:  # e.g. an unknown backbone or a vocabulary that does not fit: name the model
        raise naming(exc, path) from None
    model.metrics = read_metrics(path)
    model.path = str(path)
    return model


def official_kind(path: str | os.PathLike) -> str | None:
    """The registered official format of a Hugging Face-format directory ('caduceus' / 'hyena' / 'mdlm',
    backbones/formats.py), else None (a dnadiff config.json, model_type "dnadiff", is never one)."""
    try:
        path = resolve_model_path(path)
    except DnadiffError:
        return None  # neither a folder nor a cached Hub id: the loader says so
    if not (path / "config.json").is_file() or is_dnadiff_config(path):
        return None
    return detect_format(path)


def load_backbone(path: str | os.PathLike, vocab_size: int | None = None,
                  keep_label_embedding: bool = False) -> tuple[str, torch.nn.Module]:
    """(backbone name, backbone) from a dnadiff model directory, an official HF directory, or a
    Hub id in the local Hugging Face cache.

    A class-conditional model gives its plain backbone (what a classifier fine-tunes) unless
    `keep_label_embedding` (continued generative training). `vocab_size` widens an MDLM
    checkpoint's vocabulary to the tokenizer's (see convert_mdlm.extend_vocab); other kinds ignore it."""
    path = resolve_model_path(path)
    kind = official_kind(path)
    if kind is not None:
        fmt = CHECKPOINT_FORMATS.get(kind)
        return fmt.backbone, fmt.load(path, vocab_size)
    if (path / "config.json").is_file() and not is_model_dir(path):
        raise DnadiffError(f"{path}: config.json is neither a dnadiff config nor an official Caduceus, "
                           "HyenaDNA or MDLM config")
    model = load_model_dir(path)
    backbone = model.backbone
    if getattr(backbone, "num_classes", 0) and not keep_label_embedding:
        backbone = backbone.backbone
    return model.config.model.backbone, backbone


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu", *, local_files_only: bool = True,
         revision: str | None = None, cache_dir: str | os.PathLike | None = None,
         tokenizer: str = "gpt2") -> DiffusionModel:
    """A dnadiff model directory, an official Caduceus (objective mlm) / HyenaDNA (objective ar) /
    MDLM (objective mdlm) one, or a Hub id "org/name" found in the local Hugging Face cache
    (`local_files_only=False` downloads it). `tokenizer`: the text tokenizer of an MDLM directory
    that ships none (mdlm-owt: GPT-2)."""
    path = resolve_model_path(path, local_files_only=local_files_only, revision=revision, cache_dir=cache_dir)
    kind = official_kind(path) if path.is_dir() else None
    if kind is None:
        return load_model_dir(path, map_location)
    fmt = CHECKPOINT_FORMATS.get(kind)
    if fmt.text_model:
        return _load_mdlm(path, map_location, tokenizer)

    name, backbone = load_backbone(path)
    objective, options = fmt.objective, dict(fmt.objective_options)
    cfg = from_dict(RunConfig, {"name": path.name, "model": {"backbone": name, "init_from": str(path)},
                                "objective": {"name": objective, "options": options}})
    cfg = replace(cfg, **{"model.overrides": full_backbone_config(backbone)})
    model = DiffusionModel(cfg, backbone.to(map_location).eval(), DNATokenizer())
    model.metrics, model.path = {}, str(path)
    return model


def _load_mdlm(path: Path, map_location, tokenizer_name: str) -> DiffusionModel:
    """An MDLM text checkpoint as a dnadiff model: `dit` backbone, text tokenizer, the mdlm objective
    under the log-linear schedule mdlm-owt was trained with (paper §5.1), σ(t) as time input."""
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
    model = DiffusionModel(cfg, backbone.to(map_location).eval(), tok)
    model.metrics, model.path = {}, str(path)
    return model


def load_for_inference(path: str | os.PathLike) -> DiffusionModel:
    """`load(path)` on the GPU when there is one (eval, sample, metrics oracle)."""
    return load(path, map_location="cuda" if torch.cuda.is_available() else "cpu")


__all__ = ["load", "load_backbone", "load_for_inference", "load_model_dir", "official_kind"]
