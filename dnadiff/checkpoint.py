"""Model directories: save / load without Lightning, and import of official checkpoints.

A dnadiff model directory (DESIGN.md §2) is a Hugging Face-style model folder:
    config.json         {"model_type": "dnadiff", "dnadiff_version": ..., <the full RunConfig>};
                        model.overrides holds every backbone field, so the network is rebuilt
                        exactly even if presets change
    model.safetensors   the weights (the EMA weights when EMA is on)
    metrics.json        what training/eval measured
    tokenizer/          (text models) the Hugging Face tokenizer files
Directories written before config.json (a `config.yaml` with the same RunConfig) keep loading.
The `model_type: dnadiff` marker keeps a dnadiff config.json apart from the official ones below.

`load(path)` also accepts an official Hugging Face-format Caduceus or HyenaDNA directory, or an
MDLM text checkpoint (kuleshov-group/mdlm-owt; recognised from its config.json), and a Hub id
"org/name" resolved in the local Hugging Face cache (dnadiff/hub.py). Weights are read only
through safetensors, or for official `.bin` files through torch.load(weights_only=True); nothing
else is ever unpickled.
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

from dnadiff.config import RUNTIME_BACKBONE_KEYS, RunConfig, from_dict, load_config, replace, to_dict, without_runtime
from dnadiff.errors import DnadiffError
from dnadiff.model import DiffusionModel, recorded_config
from dnadiff.utils import os_error, public_mode, write_json

CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, TOKENIZER_DIR = "config.json", "model.safetensors", "metrics.json", "tokenizer"
LEGACY_CONFIG_FILE = "config.yaml"  # model directories written before config.json
MODEL_TYPE = "dnadiff"  # config.json's model_type: what tells a dnadiff directory from official ones
_MARKERS = ("model_type", "dnadiff_version")
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
        write_json(tmp / CONFIG_FILE, config_json(cfg))
        write_weights(tmp / WEIGHTS_FILE, cfg, backbone, state_dict)
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


def config_json(cfg: RunConfig) -> dict[str, Any]:
    """config.json of a model directory: the Hub's `model_type` marker, the writing version, the RunConfig."""
    from dnadiff import __version__

    return {"model_type": MODEL_TYPE, "dnadiff_version": __version__, **to_dict(cfg)}


def _read_json_config(file: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def is_dnadiff_config(path: str | os.PathLike) -> bool:
    """True when the directory's config.json carries the dnadiff marker."""
    data = _read_json_config(Path(path) / CONFIG_FILE)
    return data is not None and data.get("model_type") == MODEL_TYPE


def is_model_dir(path: str | os.PathLike) -> bool:
    """A dnadiff model directory: a marked config.json, or the config.yaml of older versions."""
    path = Path(path)
    return path.is_dir() and (is_dnadiff_config(path) or (path / LEGACY_CONFIG_FILE).is_file())


def write_weights(file: Path, cfg: RunConfig, backbone: torch.nn.Module,
                  state_dict: dict[str, torch.Tensor] | None = None) -> None:
    """The backbone's weights (or `state_dict` in its layout, e.g. the EMA weights or a gathered
    sharded state) as safetensors.

    `safetensors.torch.save_model` stores tied (shared) tensors once and names the dropped keys in
    the metadata; `load_model` re-ties them through the module. Weights given apart from a plain CPU
    module are loaded first into the network `load` builds from `cfg` (on the CPU, whatever wrapped
    the trained one: DDP, FSDP, EMA), so the file holds exactly what loading expects. The header is
    then made canonical, so equal weights give byte-identical files."""
    import safetensors.torch

    module = backbone
    if state_dict is not None or any(v.device.type != "cpu" for v in backbone.state_dict().values()):
        module = _build_backbone(cfg, vocab_size=None)  # cfg records every backbone field
        state = state_dict if state_dict is not None else backbone.state_dict()
        module.load_state_dict({k: v.detach().to("cpu") for k, v in state.items()})
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


def _check_dir(path: Path) -> None:
    if not path.exists():
        raise DnadiffError(f"{path}: model directory not found")
    if not path.is_dir():
        raise DnadiffError(f"{path}: expected a model directory, got a file")
    if not (path / CONFIG_FILE).is_file() and not (path / LEGACY_CONFIG_FILE).is_file():
        raise DnadiffError(f"{path}: missing {CONFIG_FILE} (not a dnadiff model directory)")
    if not (path / WEIGHTS_FILE).is_file():
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise DnadiffError(
                f"{path}: missing {WEIGHTS_FILE}; refusing to unpickle {pickles[0]} (pickles can run code)"
            )
        raise DnadiffError(f"{path}: missing {WEIGHTS_FILE}")


def _pad_policy_of_old_dirs(data: Any) -> list[str]:
    """A model directory saved before `objective.pad_policy` existed was trained and evaluated with
    pads visible (never masked nor scored): keep that, not today's default, when loading it."""
    objective = data.get("objective") if isinstance(data, dict) else None
    if isinstance(objective, dict) and "pad_policy" not in objective:
        return ["objective.pad_policy=visible"]
    return []


def _legacy_yaml(config_file: Path) -> Any:
    from dnadiff.config import _read_yaml  # the bounded reader every config goes through

    try:
        return _read_yaml(str(config_file))
    except DnadiffError:
        return None  # load_config reports the problem


def _load_json_config(file: Path) -> RunConfig:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DnadiffError(f"{file}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict) or data.get("model_type") != MODEL_TYPE:
        raise DnadiffError(f"{file}: not a dnadiff config (model_type is not {MODEL_TYPE!r})")
    data = {k: v for k, v in data.items() if k not in _MARKERS}
    if _pad_policy_of_old_dirs(data):
        data["objective"] = {**data["objective"], "pad_policy": "visible"}
    return from_dict(RunConfig, data)


def load_config_of(path: str | os.PathLike) -> RunConfig:
    from dnadiff.hub import resolve_model_path

    path = resolve_model_path(path)  # a Hub id: its folder in the local Hugging Face cache
    _check_dir(path)
    file = path / CONFIG_FILE if (path / CONFIG_FILE).is_file() else path / LEGACY_CONFIG_FILE
    try:
        if file.name == CONFIG_FILE:
            cfg = _load_json_config(file)
        else:
            cfg = load_config(RunConfig, file, _pad_policy_of_old_dirs(_legacy_yaml(file)),
                              resolve_paths=False)  # paths as the run recorded them
    except DnadiffError as exc:  # name the model's config file when the message does not
        raise _naming(exc, file) from None
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


def _build_backbone(cfg: RunConfig, vocab_size: int | None):
    from dnadiff.backbones import BACKBONES, build_backbone, build_backbone_from_config

    cls = BACKBONES.get(cfg.model.backbone)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    overrides = dict(cfg.model.overrides)
    # a saved model: every field present but the runtime ones `without_runtime` left out (their
    # defaults fill in), so the network never depends on a preset's current definition
    if fields - set(RUNTIME_BACKBONE_KEYS) <= set(overrides) <= fields:
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
            raise DnadiffError(f"{where}: weight {k} has shape {tuple(v.shape)}, the config needs {tuple(own[k].shape)}")
    backbone.load_state_dict(state)


def load_model_dir(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> DiffusionModel:
    from dnadiff.hub import resolve_model_path

    path = resolve_model_path(path)  # a Hub id: config, tokenizer and weights all from its cache folder
    cfg = load_config_of(path)
    try:
        tokenizer = _build_tokenizer(cfg, path)
        backbone = _build_backbone(cfg, tokenizer.vocab_size)
        load_weights_file(backbone, path / WEIGHTS_FILE)
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
    """'caduceus' / 'hyena' / 'mdlm' for an official Hugging Face-format directory, else None
    (a dnadiff config.json, marked model_type "dnadiff", is never taken for an official one)."""
    from dnadiff.hub import resolve_model_path

    try:
        path = resolve_model_path(path)
    except DnadiffError:
        return None  # neither a folder nor a cached Hub id: the loader says so
    if not (path / "config.json").is_file() or is_dnadiff_config(path):
        return None
    from dnadiff.backbones.convert_caduceus import is_caduceus_dir
    from dnadiff.backbones.convert_hyena import is_hyena_dir
    from dnadiff.backbones.convert_mdlm import is_mdlm_dir

    if is_caduceus_dir(path):
        return "caduceus"
    if is_hyena_dir(path):
        return "hyena"
    if is_mdlm_dir(path):
        return "mdlm"
    return None


def load_backbone(path: str | os.PathLike, vocab_size: int | None = None,
                  keep_label_embedding: bool = False) -> tuple[str, torch.nn.Module]:
    """(backbone name, backbone) from a dnadiff model directory, an official HF directory, or a
    Hub id in the local Hugging Face cache.

    A class-conditional model gives its plain backbone (what a classifier fine-tunes) unless
    `keep_label_embedding` (continued generative training). `vocab_size` widens an MDLM
    checkpoint's vocabulary to the tokenizer's (see convert_mdlm.extend_vocab); other kinds ignore it."""
    from dnadiff.hub import resolve_model_path

    path = resolve_model_path(path)
    kind = official_kind(path)
    if kind == "caduceus":
        from dnadiff.backbones.convert_caduceus import load_caduceus_pretrained

        return "caduceus", load_caduceus_pretrained(path)
    if kind == "hyena":
        from dnadiff.backbones.convert_hyena import load_hyena_pretrained

        return "hyena", load_hyena_pretrained(path)
    if kind == "mdlm":  # `vocab_size`: the tokenizer's (our text tokenizer adds a [PAD] after [MASK])
        from dnadiff.backbones.convert_mdlm import extend_vocab, load_mdlm_pretrained

        backbone = load_mdlm_pretrained(path)
        return "dit", extend_vocab(backbone, vocab_size, str(path)) if vocab_size else backbone
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
    from dnadiff.hub import resolve_model_path

    path = resolve_model_path(path, local_files_only=local_files_only, revision=revision, cache_dir=cache_dir)
    kind = official_kind(path) if path.is_dir() else None
    if kind is None:
        return load_model_dir(path, map_location)
    if kind == "mdlm":
        return _load_mdlm(path, map_location, tokenizer)
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


def _load_mdlm(path: Path, map_location, tokenizer_name: str) -> DiffusionModel:
    """An MDLM text checkpoint as a dnadiff model: `dit` backbone, text tokenizer, the mdlm objective
    under the log-linear schedule mdlm-owt was trained with (paper §5.1), σ(t) as time input."""
    from dnadiff.backbones.convert_mdlm import extend_vocab, load_mdlm_pretrained, mdlm_tokenizer, read_config

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
    cfg = replace(cfg, **{"model.overrides": _full_backbone_config(backbone)})
    model = DiffusionModel(cfg, backbone.to(map_location).eval(), tok)
    model.metrics, model.path = {}, str(path)
    return model


def load_for_inference(path: str | os.PathLike) -> DiffusionModel:
    """`load(path)` on the GPU when there is one (eval, sample, metrics oracle)."""
    return load(path, map_location="cuda" if torch.cuda.is_available() else "cpu")


__all__ = ["load", "load_backbone", "load_for_inference", "load_config_of", "load_model_dir",
           "save_model_dir", "official_kind", "read_metrics", "is_model_dir"]
