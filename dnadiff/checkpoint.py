"""Model directories: save / load without Lightning, and import of official checkpoints.

A dnadiff model directory (DESIGN.md §2) holds
    config.yaml         the full RunConfig; model.overrides holds every backbone field, so the
                        network is rebuilt exactly even if presets change
    model.safetensors   the weights (the EMA weights when EMA is on)
    metrics.json        what training/eval measured
    tokenizer/          (text models) the Hugging Face tokenizer files

`load(path)` also accepts an official Hugging Face-format Caduceus or HyenaDNA directory
(recognised from its config.json). Weights are read only through safetensors, or for official
`.bin` files through torch.load(weights_only=True); nothing else is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from dnadiff.config import RunConfig, from_dict, load_config, replace, save_config, to_dict, without_runtime
from dnadiff.errors import DnadiffError
from dnadiff.model import DiffusionModel, recorded_config
from dnadiff.utils import atomic_path, os_error, public_mode, write_json

CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, TOKENIZER_DIR = "config.yaml", "model.safetensors", "metrics.json", "tokenizer"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def _full_backbone_config(backbone) -> dict[str, Any]:
    return dict(dataclasses.asdict(backbone.config))


def save_model_dir(
    path: str | os.PathLike,
    config: RunConfig,
    backbone: torch.nn.Module,
    tokenizer=None,
    metrics: dict[str, Any] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write a model directory atomically: built in a temporary folder, then renamed into place."""
    path = Path(path)
    from dnadiff.backbones.base import BACKBONES

    name = BACKBONES.name_of(backbone) or config.model.backbone  # the family of the weights written
    cfg = without_runtime(replace(recorded_config(config, tokenizer),  # no threads, devices, scan kernel
                                  **{"model.backbone": name, "model.overrides": _full_backbone_config(backbone),
                                     "model.init_from": None}))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="." + path.name + ".", dir=path.parent))
        os.chmod(tmp, public_mode(directory=True))  # mkdtemp's 0700 would survive the rename: follow the umask
    except OSError as exc:
        raise os_error(exc, path) from None
    try:
        if tokenizer is not None and getattr(tokenizer, "kind", "dna") == "text":
            tokenizer.save(tmp / TOKENIZER_DIR)
            cfg = replace(cfg, **{"tokenizer.path": TOKENIZER_DIR})
        save_config(cfg, tmp / CONFIG_FILE)
        state = state_dict if state_dict is not None else backbone.state_dict()
        # safetensors refuses aliased storage: store each tensor once, contiguous, on the CPU.
        seen: dict[tuple, str] = {}
        tensors, aliases = {}, {}
        for k, v in state.items():
            # the same view of the same storage (tied weights), not merely the same shape
            kid = (v.device.type, v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape), v.stride(), v.dtype)
            if kid in seen and v.numel() > 0:
                aliases[k] = seen[kid]
                continue
            seen[kid] = k
            tensors[k] = v.detach().to("cpu").contiguous().clone()
        (tmp / WEIGHTS_FILE).write_bytes(
            safetensors_bytes(tensors, {"format": "pt", "aliases": json.dumps(aliases, sort_keys=True)}))
        write_json(tmp / METRICS_FILE, metrics or {})
        if path.exists():
            old = path.with_name("." + path.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except OSError as exc:  # full disk, read-only folder: one line naming the model directory
        shutil.rmtree(tmp, ignore_errors=True)
        raise os_error(exc, path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """A safetensors file with a canonical header, so equal weights give byte-identical files.

    safetensors writes its metadata map in a per-process random order; the header (8-byte length,
    then JSON padded with spaces) is re-serialised with sorted keys, keeping its length.
    """
    import safetensors.torch

    data = safetensors.torch.save(tensors, metadata=metadata)
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    canon = json.dumps(header, separators=(",", ":")).encode()
    if len(canon) > n:  # cannot happen (same content, same separators); keep the original then
        return data
    return data[:8] + canon + b" " * (n - len(canon)) + data[8 + n:]


def read_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """safetensors -> state dict, re-creating the aliased (tied) entries."""
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


def _check_dir(path: Path) -> None:
    if not path.exists():
        raise DnadiffError(f"{path}: model directory not found")
    if not path.is_dir():
        raise DnadiffError(f"{path}: expected a model directory, got a file")
    if not (path / CONFIG_FILE).is_file():
        raise DnadiffError(f"{path}: missing {CONFIG_FILE} (not a dnadiff model directory)")
    if not (path / WEIGHTS_FILE).is_file():
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise DnadiffError(
                f"{path}: missing {WEIGHTS_FILE}; refusing to unpickle {pickles[0]} (pickles can run code)"
            )
        raise DnadiffError(f"{path}: missing {WEIGHTS_FILE}")


def _pad_policy_of_old_dirs(config_file: Path) -> list[str]:
    """A model directory saved before `objective.pad_policy` existed was trained and evaluated with
    pads visible (never masked nor scored): keep that, not today's default, when loading it."""
    import yaml

    try:
        data = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []  # load_config reports the problem
    objective = data.get("objective") if isinstance(data, dict) else None
    if isinstance(objective, dict) and "pad_policy" not in objective:
        return ["objective.pad_policy=visible"]
    return []


def load_config_of(path: str | os.PathLike) -> RunConfig:
    path = Path(path)
    _check_dir(path)
    try:
        cfg = load_config(RunConfig, path / CONFIG_FILE, _pad_policy_of_old_dirs(path / CONFIG_FILE),
                          resolve_paths=False)  # paths as the run recorded them
    except DnadiffError as exc:  # name the model's config file when the message does not
        raise _naming(exc, path / CONFIG_FILE) from None
    # defaults that changed: a directory written before they were recorded keeps its behaviour
    if cfg.model.time_input is None:  # saved before model.time_input existed: those models were fed t
        cfg = replace(cfg, **{"model.time_input": "t"})
    if cfg.objective.name == "ar" and "bos_id" not in cfg.objective.options:  # AR without a [BOS] context
        cfg = replace(cfg, **{"objective.options": {**cfg.objective.options, "bos_id": None}})
    return cfg


def _naming(exc: DnadiffError, where: Path) -> DnadiffError:
    return exc if str(where) in str(exc) else DnadiffError(f"{where}: {exc}")


def _build_tokenizer(cfg: RunConfig, model_dir: Path):
    from dnadiff.tokenizers import build_tokenizer

    tok_path = cfg.tokenizer.path
    if tok_path and not os.path.isabs(tok_path) and (model_dir / tok_path).exists():
        tok_path = str(model_dir / tok_path)
    return build_tokenizer(cfg.tokenizer.kind, tok_path, cfg.tokenizer.strict)


def _build_backbone(cfg: RunConfig, vocab_size: int):
    from dnadiff.backbones import BACKBONES, build_backbone, build_backbone_from_config

    cls = BACKBONES.get(cfg.model.backbone)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    overrides = dict(cfg.model.overrides)
    if set(overrides) == fields:  # a saved model: every field present
        backbone = build_backbone_from_config(cfg.model.backbone, overrides)
    else:
        overrides.setdefault("vocab_size", vocab_size)
        backbone = build_backbone(cfg.model.backbone, preset=cfg.model.preset, **overrides)
    return wrap_conditional(cfg, backbone)


def wrap_conditional(cfg: RunConfig, backbone):
    """A class-conditional run puts a label embedding in front of the backbone."""
    if cfg.model.num_classes <= 0:
        return backbone
    from dnadiff.backbones.conditioning import ClassConditional

    return ClassConditional(backbone, cfg.model.num_classes)


def load_state_into(backbone: torch.nn.Module, state: dict[str, torch.Tensor], where: str) -> None:
    own = backbone.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise DnadiffError(f"{where}: weights do not match the model config ({detail})")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise DnadiffError(f"{where}: weight {k} has shape {tuple(v.shape)}, the config needs {tuple(own[k].shape)}")
    backbone.load_state_dict(state)


def load_model_dir(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> DiffusionModel:
    path = Path(path)
    cfg = load_config_of(path)
    try:
        tokenizer = _build_tokenizer(cfg, path)
        backbone = _build_backbone(cfg, tokenizer.vocab_size)
        load_state_into(backbone, read_weights(path / WEIGHTS_FILE), str(path / WEIGHTS_FILE))
        backbone.to(map_location).eval()
        model = DiffusionModel(cfg, backbone, tokenizer)
    except DnadiffError as exc:  # e.g. an unknown backbone or a vocabulary that does not fit: name the model
        raise _naming(exc, path) from None
    model.metrics = read_metrics(path)
    model.path = str(path)
    return model


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    f = Path(path) / METRICS_FILE
    if not f.is_file():
        return {}
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError:
        raise DnadiffError(f"{f}: not valid JSON") from None


def official_kind(path: str | os.PathLike) -> str | None:
    """'caduceus' / 'hyena' for an official Hugging Face-format directory, else None."""
    path = Path(path)
    if not (path / "config.json").is_file():
        return None
    from dnadiff.backbones.convert_caduceus import is_caduceus_dir
    from dnadiff.backbones.convert_hyena import is_hyena_dir

    if is_caduceus_dir(path):
        return "caduceus"
    if is_hyena_dir(path):
        return "hyena"
    return None


def load_backbone(path: str | os.PathLike, vocab_size: int | None = None,
                  keep_label_embedding: bool = False) -> tuple[str, torch.nn.Module]:
    """(backbone name, backbone) from a dnadiff model directory or an official HF directory.

    A class-conditional model gives its plain backbone (what a classifier fine-tunes) unless
    `keep_label_embedding` (continued generative training)."""
    path = Path(path)
    kind = official_kind(path)
    if kind == "caduceus":
        from dnadiff.backbones.convert_caduceus import load_caduceus_pretrained

        return "caduceus", load_caduceus_pretrained(path)
    if kind == "hyena":
        from dnadiff.backbones.convert_hyena import load_hyena_pretrained

        return "hyena", load_hyena_pretrained(path)
    if (path / "config.json").is_file() and not (path / CONFIG_FILE).is_file():
        raise DnadiffError(f"{path}: config.json is neither an official Caduceus nor a HyenaDNA config")
    model = load_model_dir(path)
    backbone = model.backbone
    if getattr(backbone, "num_classes", 0) and not keep_label_embedding:
        backbone = backbone.backbone
    return model.config.model.backbone, backbone


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> DiffusionModel:
    """A dnadiff model directory, or an official Caduceus (objective mlm) / HyenaDNA (objective ar) one."""
    path = Path(path)
    kind = official_kind(path) if path.is_dir() else None
    if kind is None:
        return load_model_dir(path, map_location)
    from dnadiff.tokenizers import DNATokenizer

    name, backbone = load_backbone(path)
    objective = "mlm" if kind == "caduceus" else "ar"
    # official HyenaDNA was trained without a [BOS] in front: its first token is context
    options = {"bos_id": None} if objective == "ar" else {}
    cfg = from_dict(RunConfig, {"name": path.name, "model": {"backbone": name, "init_from": str(path)},
                                "objective": {"name": objective, "options": options}})
    cfg = replace(cfg, **{"model.overrides": _full_backbone_config(backbone)})
    model = DiffusionModel(cfg, backbone.to(map_location).eval(), DNATokenizer())
    model.metrics, model.path = {}, str(path)
    return model


def load_for_inference(path: str | os.PathLike) -> DiffusionModel:
    """`load(path)` on the GPU when there is one (eval, sample, metrics oracle)."""
    return load(path, map_location="cuda" if torch.cuda.is_available() else "cpu")
