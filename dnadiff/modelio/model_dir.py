"""The dnadiff model directory: its files, the config it records, writing one and reading it back.

A dnadiff model directory is a Hugging Face-style model folder:
    config.json         {"model_type": "dnadiff", "dnadiff_version": ..., <the full RunConfig>};
                        model.overrides holds every backbone field, so the network is rebuilt
                        exactly even if presets change
    model.safetensors   the weights (the EMA weights when EMA is on)
    metrics.json        what training/eval measured
    tokenizer/          (text models) the Hugging Face tokenizer files
Directories of the unreleased layout before config.json (a `config.yaml` with the same RunConfig) keep
loading: `legacy_config_file` is the one place that knows them.
The `model_type: dnadiff` marker keeps a dnadiff config.json apart from official ones.
Resolving a path or Hub id and telling this format from the official ones is `modelio/source.py`;
reading a whole model is `modelio/read.py`.
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

from dnadiff.config import (
    RUNTIME_BACKBONE_KEYS,
    RunConfig,
    from_dict,
    replace,
    to_dict,
    without_runtime,
)
from dnadiff.data_root import _PATH_KEYS, _TEXT_PATH_KEYS, _resolve_data_paths
from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.utils import local_paths, os_error, portable_paths, public_mode, write_json
from dnadiff.version import __version__
from dnadiff.weights import save_module_weights

CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, TOKENIZER_DIR = "config.json", "model.safetensors", "metrics.json", "tokenizer"
LEGACY_CONFIG_FILE = "config.yaml"  # model directories written before config.json (legacy_config_file)
MODEL_TYPE = "dnadiff"  # config.json's model_type: what tells a dnadiff directory from official ones
_MARKERS = ("model_type", "dnadiff_version")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def resolve_time_input(value: str | None) -> str:
    """`model.time_input` of a new model: sigma unless the config says otherwise."""
    return value or "sigma"


def recorded_config(cfg: RunConfig, tokenizer) -> RunConfig:
    """The config with the defaults that changed over time written out, as a model directory
    records them: `model.time_input`, and the `ar` objective's `bos_id` (load_config_of reads a
    missing one as the behaviour of the directories written before it existed)."""
    cfg = replace(cfg, **{"model.time_input": resolve_time_input(cfg.model.time_input)})
    if tokenizer is None and cfg.tokenizer.kind == "dna":
        from dnadiff.tokenizers import DNATokenizer

        tokenizer = DNATokenizer()
    if cfg.objective.name == "ar" and "bos_id" not in cfg.objective.options and tokenizer is not None:
        cfg = replace(cfg, **{"objective.options": {**cfg.objective.options, "bos_id": tokenizer.ar_context_id}})
    return cfg


def full_backbone_config(backbone) -> dict[str, Any]:
    return dict(dataclasses.asdict(backbone.config))


def save_model_dir(
    path: str | os.PathLike,
    config: RunConfig,
    backbone: torch.nn.Module,
    tokenizer=None,
    metrics: dict[str, Any] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write a model directory atomically (the config as `recorded_config` records it): built in a temporary
    folder, then renamed into place."""
    path = Path(path)
    from dnadiff.backbones.base import BACKBONES

    name = BACKBONES.name_of(backbone) or config.model.backbone  # the family of the weights written
    cfg = without_runtime(replace(recorded_config(config, tokenizer),  # no threads, devices, scan kernel
                                  **{"model.backbone": name, "model.overrides": full_backbone_config(backbone),
                                     "model.init_from": None, "model.adapt_ar": False}))
    cfg = portable_config(cfg)
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


def portable_config(cfg: RunConfig) -> RunConfig:
    """The config as a model directory records it: no path of the machine that wrote it, so the folder can be
    shared or pushed. Data paths relative to the data root, `data.root` unset (`load_config_of` resolves them
    again under the reader's data root; a path outside the data root keeps its file name, said in a warning);
    an absolute `out_dir` its folder name; the provenance of a fine-tuned or distilled model (the pretrained
    model, the teacher, a reward's classifier) as results name paths (`~/...`, `$TMPDIR/...`, relative to the
    checkout: utils.portable_paths); the text data's cache folders left out."""
    from dnadiff.data_root import _relative_data_paths
    from dnadiff.logs import log

    root = cfg.data.root
    cfg, outside = _relative_data_paths(cfg)
    if outside:
        log.warning("the model directory records only the file name of %s (outside the data root %s: set data.root "
                    "or $DNADIFF_DATA to the folder that holds the data)", "; ".join(outside), root)
    changes: dict[str, Any] = {k: portable_paths(getattr(cfg, k)) for k in ("reward_finetune", "distill")
                               if getattr(cfg, k)}
    if os.path.isabs(os.path.expanduser(cfg.out_dir)):
        changes["out_dir"] = os.path.basename(os.path.normpath(cfg.out_dir))
    return replace(cfg, **changes) if changes else cfg


def save_model_files(path: str | os.PathLike, config: RunConfig, backbone: torch.nn.Module, tokenizer=None,
                     metrics: dict[str, Any] | None = None, state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """Write the files of a model directory into an existing folder that holds other things too (a
    run directory with its checkpoints: `dnadiff design-finetune`): built by `save_model_dir` beside
    it, then each entry renamed into place, config.json last (a folder is never a model with the
    new config and the old weights)."""
    path = Path(path)
    tmp = save_model_dir(path.with_name("." + path.name + ".model"), config, backbone, tokenizer, metrics, state_dict)
    try:
        names = sorted((p.name for p in tmp.iterdir()), key=lambda n: n == CONFIG_FILE)
        for name in names:
            target = path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(tmp / name, target)
    except OSError as exc:
        raise os_error(exc, path) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def save(model: Any, path: str | os.PathLike) -> Path:
    """A loaded model (anything with `config`, `backbone`, `tokenizer` and optional `metrics`, e.g. a
    DiffusionModel) as a dnadiff model directory: what `model.save_pretrained(path)` calls."""
    return save_model_dir(path, model.config, model.backbone, model.tokenizer, getattr(model, "metrics", None))


def config_json(cfg: RunConfig) -> dict[str, Any]:
    """config.json of a model directory: the Hub's `model_type` marker, the writing version, the RunConfig."""
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
    return path.is_dir() and (is_dnadiff_config(path) or legacy_config_file(path) is not None)


def legacy_config_file(path: Path) -> Path | None:
    """The migration of the unreleased layout before config.json: a model directory holding its RunConfig as
    config.yaml (no markers) beside its weights (model.safetensors, or a pickle that _check_dir refuses).
    Returns that file, or None when `path` is not such a directory: it has a config.json, or no config.yaml,
    or no weights (a run directory's config.yaml, its weights in model/). load_config_of reads the file as
    the RunConfig of a config.json; push_to_hub uploads the directory as a config.json folder. Nothing is
    rewritten in place."""
    file = path / LEGACY_CONFIG_FILE
    if (path / CONFIG_FILE).is_file() or not file.is_file():
        return None
    weights = (path / WEIGHTS_FILE).is_file() or any(p.suffix in PICKLE_SUFFIXES for p in path.iterdir())
    return file if weights else None


def write_weights(file: Path, cfg: RunConfig, backbone: torch.nn.Module,
                  state_dict: dict[str, torch.Tensor] | None = None) -> None:
    """The backbone's weights (or `state_dict` in its layout, e.g. the EMA weights or a gathered
    sharded state) as safetensors.

    `safetensors.torch.save_model` stores tied (shared) tensors once and names the dropped keys in
    the metadata; `load_model` re-ties them through the module. Weights given apart from a plain CPU
    module are loaded first into the network `load` builds from `cfg` (on the CPU, whatever wrapped
    the trained one: DDP, FSDP, EMA), so the file holds exactly what loading expects. The header is
    then made canonical, so equal weights give byte-identical files."""
    module = backbone
    if state_dict is not None or any(v.device.type != "cpu" for v in backbone.state_dict().values()):
        module = backbone_from_config(cfg, vocab_size=None)  # cfg records every backbone field
        state = state_dict if state_dict is not None else backbone.state_dict()
        module.load_state_dict({k: v.detach().to("cpu") for k, v in state.items()})
    save_module_weights(file, module)


def _check_dir(path: Path) -> None:
    if not path.exists():
        raise DnadiffError(f"{path}: model directory not found")
    if not path.is_dir():
        raise DnadiffError(f"{path}: expected a model directory, got a file")
    if not (path / CONFIG_FILE).is_file() and legacy_config_file(path) is None:
        raise DnadiffError(f"{path}: missing {CONFIG_FILE} (not a dnadiff model directory{what_it_is(path)})")
    if not (path / WEIGHTS_FILE).is_file():
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise DnadiffError(
                f"{path}: missing {WEIGHTS_FILE}; refusing to unpickle {pickles[0]} (pickles can run code)"
            )
        raise DnadiffError(f"{path}: missing {WEIGHTS_FILE}")


def what_it_is(path: Path) -> str:
    """For a folder that is not a model directory, what it is when dnadiff wrote it: a run directory
    (`dnadiff train`: its model is RUN/model), a classifier directory or a `dnadiff finetune` output
    folder (classifiers of sequences, not generative models). Empty when it is none of these."""
    if is_model_dir(path / "model"):
        return f"; it is a run directory, its model directory is {path / 'model'}"
    if (path / "classifier.json").is_file():
        return ("; it is a classifier directory written by `dnadiff finetune`: it scores sequences (`dnadiff "
                "design --reward classifier:DIR`, `dnadiff metrics --classifier DIR`) but cannot generate them")
    if (path / "classifier" / "classifier.json").is_file():
        return (f"; it is a `dnadiff finetune` output folder: its classifier is {path / 'classifier'} (it scores "
                "sequences but cannot generate them)")
    return ""


def _config_from_data(data: dict[str, Any]) -> RunConfig:
    """The RunConfig a model directory records. One saved before `objective.pad_policy` existed was
    trained and evaluated with pads visible (never masked nor scored): keep that, not today's default."""
    if not data:  # an emptied file is a mistake, not "all defaults"
        raise DnadiffError("empty config (no keys)")
    objective = data.get("objective")
    if isinstance(objective, dict) and "pad_policy" not in objective:
        data = {**data, "objective": {**objective, "pad_policy": "visible"}}
    return from_dict(RunConfig, data)


def _load_json_config(file: Path) -> RunConfig:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DnadiffError(f"{file}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict) or data.get("model_type") != MODEL_TYPE:
        raise DnadiffError(f"{file}: not a dnadiff config (model_type is not {MODEL_TYPE!r})")
    return _config_from_data({k: v for k, v in data.items() if k not in _MARKERS})


def load_config_of(path: str | os.PathLike) -> RunConfig:
    """The RunConfig of a local dnadiff model directory (a Hub id goes through `modelio.resolve` first)."""
    path = Path(path)
    _check_dir(path)
    legacy = legacy_config_file(path)
    file = legacy or path / CONFIG_FILE
    try:
        if legacy is None:
            cfg = _load_json_config(file)
        else:
            from dnadiff.config import _read_yaml  # the bounded reader every config goes through

            cfg = _config_from_data(_read_yaml(str(legacy)))
    except DnadiffError as exc:  # name the model's config file when the message does not
        raise naming(exc, file) from None
    # data paths (relative to the data root: portable_config) under this machine's data root, as a config
    # file's are (directories written before then recorded absolute paths and the root: kept as they are)
    if cfg.data.root is None:
        cfg = _with_run_data(cfg, path)
    cfg = _resolve_data_paths(cfg, {})
    provenance = {k: local_paths(getattr(cfg, k)) for k in ("reward_finetune", "distill") if getattr(cfg, k)}
    cfg = replace(cfg, **provenance) if provenance else cfg  # `$TMPDIR/...`, `~/...` of this machine again
    # defaults that changed: a directory written before they were recorded keeps its behaviour
    if cfg.model.time_input is None:  # saved before model.time_input existed: those models were fed t
        cfg = replace(cfg, **{"model.time_input": "t"})
    if cfg.objective.name == "ar" and "bos_id" not in cfg.objective.options:  # AR without a [BOS] context
        cfg = replace(cfg, **{"objective.options": {**cfg.objective.options, "bos_id": None}})
    return cfg


# the config a run directory records beside (or around) its model directory, on the machine that trained it:
# `dnadiff train` (RUN/config.yaml, the model in RUN/model), design-finetune and distill (in the model's folder)
RUN_CONFIG_FILES = (("..", "config.yaml"), (".", "finetune_config.yaml"), (".", "distill_config.yaml"))


def run_data(path: Path) -> dict[str, Any] | None:
    """The `data` section of the run that wrote the model directory `path`, when its run directory is still
    around it (the machine that trained it: there the model reads the data it was trained on, whatever
    $DNADIFF_DATA says now; a run records absolute paths); None elsewhere (a shared or pushed copy: the reader's
    data root)."""
    from dnadiff.config import _read_yaml

    for folder, name in RUN_CONFIG_FILES:
        file = path / folder / name
        if not file.is_file():
            continue
        try:
            data = _read_yaml(str(file)).get("data") or {}
        except (DnadiffError, AttributeError):
            continue
        root = data.get("root") if isinstance(data, dict) else None
        if isinstance(root, str) and os.path.isabs(root) and os.path.isdir(root):
            return data
    return None


def _with_run_data(cfg: RunConfig, path: Path) -> RunConfig:
    """`cfg` (a portable config.json) with the data root of the run around it, and, for a data path the model
    directory records by its file name only (it lay outside the data root), the run's own absolute path."""
    data = run_data(path)
    if data is None:
        return cfg
    changes: dict[str, Any] = {"data.root": data["root"]}
    for key in _PATH_KEYS:
        mine, theirs = getattr(cfg.data, key, None), data.get(key)
        if _by_name(mine, theirs):
            changes[f"data.{key}"] = theirs
    text, run_text = cfg.data.text, data.get("text")
    if isinstance(text, dict) and isinstance(run_text, dict):
        merged = {k: (run_text[k] if k in _TEXT_PATH_KEYS and _by_name(v, run_text.get(k)) else v)
                  for k, v in text.items()}
        if merged != text:
            changes["data.text"] = merged
    return replace(cfg, **changes)


def _by_name(recorded: Any, run_value: Any) -> bool:
    """Whether `recorded` is the file name `portable_config` kept of the run's absolute path `run_value`."""
    return (isinstance(recorded, str) and isinstance(run_value, str) and os.path.isabs(run_value)
            and os.path.basename(run_value.rstrip(os.sep)) == recorded)


def naming(exc: DnadiffError, where: Path) -> DnadiffError:
    return exc if str(where) in str(exc) else DnadiffError(f"{where}: {exc}")


def tokenizer_from_config(cfg: RunConfig, model_dir: Path):
    from dnadiff.tokenizers import build_tokenizer

    tok_path = cfg.tokenizer.path
    if tok_path and not os.path.isabs(tok_path) and (model_dir / tok_path).exists():
        tok_path = str(model_dir / tok_path)
    return build_tokenizer(cfg.tokenizer.kind, tok_path, cfg.tokenizer.strict)


def backbone_from_config(cfg: RunConfig, vocab_size: int | None):
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
    """A class-conditional run puts a label embedding in front of the backbone (not in front of one that
    takes labels itself: `takes_labels`, e.g. the per-class Markov chains); then the objective's own
    wrapper goes around it (`Objective.wrap_backbone`: plaid's embeddings and learned schedule)."""
    from dnadiff.diffusion import OBJECTIVES

    wrap = OBJECTIVES.get(cfg.objective.name).wrap_backbone
    if cfg.model.num_classes <= 0 or capabilities_of(backbone).takes_labels:
        return wrap(backbone, cfg)
    from dnadiff.backbones.conditioning import ClassConditional

    return wrap(ClassConditional(backbone, cfg.model.num_classes), cfg)


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    f = Path(path) / METRICS_FILE
    if not f.is_file():
        return {}
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError:
        raise DnadiffError(f"{f}: not valid JSON") from None
