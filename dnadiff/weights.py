"""Weights I/O: safetensors files read, written canonically, checked against a network and loaded.

Weights are read only through safetensors; nothing here unpickles. Tied (shared) tensors are stored
once by `safetensors.torch.save_model` and re-tied through the module on load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from dnadiff.errors import DnadiffError
from dnadiff.utils import public_mode


def save_module_weights(file: Path, module: torch.nn.Module) -> None:
    """A CPU module's weights as safetensors with a canonical header (equal weights, equal bytes)."""
    import safetensors.torch


    safetensors.torch.save_model(module, str(file), metadata={"format": "pt"})
    file.write_bytes(canonical_safetensors(file.read_bytes()))
    os.chmod(file, public_mode())  # safetensors creates its files 0600 whatever the umask


def canonical_safetensors(data: bytes) -> bytes:
    """A safetensors file with a canonical header: safetensors writes its metadata map in a
    per-process random order; the header (8-byte length, then JSON padded with spaces) is
    re-serialised with sorted keys, keeping its length."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    canon = json.dumps(header, separators=(",", ":")).encode()
    if len(canon) > n:  # cannot happen (same content, same separators); keep the original then
        return data
    return data[:8] + canon + b" " * (n - len(canon)) + data[8 + n:]


def read_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """safetensors -> state dict, re-creating the tied entries the file names under "aliases" (model
    dirs written before `save_model`; its own dropped keys are loaded by `load_weights_file`)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = str(path)
    try:
        state = load_file(path)
        with safe_open(path, framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as exc:
        raise DnadiffError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0][:120]})") from None
    for alias, target in json.loads(meta.get("aliases", "{}")).items():
        state[alias] = state[target]
    return state


def load_weights_file(backbone: torch.nn.Module, file: Path) -> None:
    """A model directory's weights into its backbone: `safetensors.torch.load_model` (tied tensors,
    stored once by `save_model`, are re-tied through the module), after checking every stored shape.
    Directories written before `save_model` (an "aliases" metadata entry) load as before."""
    from safetensors import safe_open
    from safetensors.torch import load_model

    where = str(file)
    try:
        with safe_open(where, framework="pt") as fh:
            meta = fh.metadata() or {}
            shapes = {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}
    except Exception as exc:
        raise DnadiffError(f"{where}: not a readable safetensors file ({str(exc).splitlines()[0][:120]})") from None
    if "aliases" in meta:
        load_state_into(backbone, read_weights(file), where)
        return
    own = backbone.state_dict()
    for k, shape in shapes.items():
        if k in own and shape != tuple(own[k].shape):
            raise DnadiffError(f"{where}: weight {k} has shape {shape}, the config needs {tuple(own[k].shape)}")
    missing, unexpected = load_model(backbone, where, strict=False)
    if missing or unexpected:
        detail = f"missing {sorted(missing)[:3]}" if missing else f"unexpected {sorted(unexpected)[:3]}"
        raise DnadiffError(f"{where}: weights do not match the model config ({detail})")


def load_state_into(backbone: torch.nn.Module, state: dict[str, torch.Tensor], where: str) -> None:
    own = backbone.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise DnadiffError(f"{where}: weights do not match the model config ({detail})")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise DnadiffError(f"{where}: weight {k} has shape {tuple(v.shape)}, "
                               f"the config needs {tuple(own[k].shape)}")
    backbone.load_state_dict(state)
