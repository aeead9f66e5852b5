"""Loading a model: the path resolved once into a source, read, and built into a DiffusionModel.

    model = load("runs/tiny/model")     # modelio.resolve -> modelio.read_model -> DiffusionModel

`load(path)` takes a dnadiff model directory, an official Hugging Face-format Caduceus or HyenaDNA
directory, an MDLM text checkpoint (kuleshov-group/mdlm-owt; recognised from its config.json), a Hub id
"org/name" found in the local Hugging Face cache, or a `ModelSource` already resolved (commands resolve
the path once, read its config for their checks, then load from the same source). All reading and
writing is dnadiff/modelio/; this module only assembles the model.
"""

from __future__ import annotations

import os

import torch

from dnadiff.errors import DnadiffError
from dnadiff.model import DiffusionModel
from dnadiff.modelio import ModelSource, read_backbone, read_model, resolve
from dnadiff.modelio.model_dir import naming


def load(path: str | os.PathLike | ModelSource, map_location: str | torch.device = "cpu", *,
         local_files_only: bool = True, revision: str | None = None, cache_dir: str | os.PathLike | None = None,
         tokenizer: str = "gpt2") -> DiffusionModel:
    """A dnadiff model directory, an official Caduceus (objective mlm) / HyenaDNA (objective ar) /
    MDLM (objective mdlm) one, or a Hub id "org/name" found in the local Hugging Face cache
    (`local_files_only=False` downloads it). `tokenizer`: the text tokenizer of an MDLM directory
    that ships none (mdlm-owt: GPT-2)."""
    source = resolve(path, local_files_only=local_files_only, revision=revision, cache_dir=cache_dir)
    parts = read_model(source, map_location, tokenizer)
    try:
        model = DiffusionModel(parts.config, parts.backbone, parts.tokenizer)
    except DnadiffError as exc:  # e.g. objective options that do not fit: name the model
        raise (naming(exc, source.path) if source.official is None else exc) from None
    model.metrics, model.path = parts.metrics, str(parts.path)
    return model


def load_model_dir(path: str | os.PathLike | ModelSource, map_location: str | torch.device = "cpu") -> DiffusionModel:
    """`load` of a dnadiff model directory (a Hub id: config, tokenizer and weights from its cache folder)."""
    source = resolve(path)
    if source.official is not None:  # read it by the dnadiff format, whose errors say it is none
        source = ModelSource(source.given, source.path)
    return load(source, map_location)


def official_kind(path: str | os.PathLike | ModelSource) -> str | None:
    """The registered official format of a model ('caduceus' / 'hyena' / 'mdlm', backbones/formats.py),
    else None (a dnadiff model directory, or neither a folder nor a cached Hub id: the loader says so)."""
    try:
        source = resolve(path)
    except DnadiffError:
        return None
    return source.format if source.official is not None else None


def load_backbone(path: str | os.PathLike | ModelSource, vocab_size: int | None = None,
                  keep_label_embedding: bool = False) -> tuple[str, torch.nn.Module]:
    """(backbone name, backbone) from a dnadiff model directory, an official HF directory, or a Hub id in
    the local Hugging Face cache (modelio.read_backbone)."""
    return read_backbone(resolve(path), vocab_size, keep_label_embedding)


def read_config(path: str | os.PathLike | ModelSource):
    """The model's RunConfig without reading its weights (--print-config): a dnadiff model directory's
    config.json (a corrupt or missing model.safetensors does not matter). An official checkpoint's config is
    built when the checkpoint is read, so that one is loaded."""
    source = resolve(path)
    return source.config if source.official is None else load(source).config


def load_for_inference(path: str | os.PathLike | ModelSource) -> DiffusionModel:
    """`load(path)` on the GPU when there is one (eval, sample, metrics oracle)."""
    return load(path, map_location="cuda" if torch.cuda.is_available() else "cpu")


__all__ = ["load", "load_backbone", "load_for_inference", "load_model_dir", "official_kind", "read_config"]
