"""Checks a command makes before any heavy work (loading a model, starting Lightning).

A wrong sampler name, an unknown or ill-typed `--option`, a missing data file or tokenizer is
reported in one line that lists what is valid (a sampler's real options and their types), never
as Python internals ("__init__() got an unexpected keyword argument").
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from dnadiff.errors import DnadiffError

# ------------------------------------------------------------------------------------ samplers


def _annotation(param: inspect.Parameter) -> str:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return type(param.default).__name__ if param.default not in (None, inspect.Parameter.empty) else "any"
    return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))


def sampler_options(name: str) -> dict[str, tuple[str, Any]]:
    """{option: (type as written in the signature, default)} of a registered sampler, base class included."""
    from dnadiff.samplers import SAMPLERS

    cls = SAMPLERS.get(name)  # unknown names: one line listing the registered samplers
    return _init_options(cls)


def _init_options(cls: type) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for klass in getattr(cls, "__mro__", (cls,)):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for pname, param in inspect.signature(init).parameters.items():
            if pname == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL) or pname in out:
                continue
            out[pname] = (_annotation(param), param.default)
    return out


def autoregressive_options() -> dict[str, tuple[str, Any]]:
    from dnadiff.samplers.autoregressive import AutoregressiveSampler

    opts = _init_options(AutoregressiveSampler)
    opts.pop("first_token_ids", None)  # set from the tokenizer, not by the user
    return opts


def _value_fits(value: Any, annotation: str) -> bool:
    kinds = {k.strip() for k in annotation.replace("Optional[", "").replace("]", "").replace("|", ",").split(",")}
    if "any" in kinds or "Any" in kinds:
        return True
    checks = {
        "None": lambda v: v is None,
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "dict": lambda v: isinstance(v, dict),
        "list": lambda v: isinstance(v, list),
    }
    known = [checks[k] for k in kinds if k in checks]
    if not known:  # a type this check does not know: the sampler validates it itself
        return True
    return any(check(value) for check in known)


def describe_options(opts: dict[str, tuple[str, Any]]) -> str:
    return ", ".join(f"{k} ({ann}, default {default!r})" for k, (ann, default) in opts.items())


def check_sampler_options(name: str | None, options: dict[str, Any], autoregressive: bool = False) -> None:
    """Refuse unknown option names and values of the wrong type, naming the valid options and types."""
    if autoregressive:
        opts, label = autoregressive_options(), "autoregressive sampling"
    else:
        opts, label = sampler_options(name or "ancestral"), f"sampler {name!r}"
    for key, value in options.items():
        if key not in opts:
            raise DnadiffError(f"--option {key}: not an option of {label}; valid options: {describe_options(opts)}")
        ann = opts[key][0]
        if not _value_fits(value, ann):
            raise DnadiffError(f"--option {key}={value!r}: {label} expects {ann}; valid options: {describe_options(opts)}")


# ------------------------------------------------------------------------------------ training inputs


def _need_file(path: str | None, key: str, what: str) -> None:
    if path and not os.path.exists(path):
        raise DnadiffError(f"{key}: {path}: {what} not found")


def check_train_inputs(cfg) -> None:
    """Data files, tokenizer and init_from of a RunConfig exist (before Lightning starts)."""
    data = cfg.data
    if data.kind == "genome":
        from dnadiff.training.data import genome_paths  # the data layer's own path resolution

        fasta, bed = genome_paths(cfg)
        _need_file(fasta, "data.fasta", "genome FASTA")
        _need_file(bed, "data.bed", "BED file")
    elif data.kind == "benchmark":
        from dnadiff.data.benchmarks import resolve_benchmark

        resolve_benchmark(data.benchmark or "")
    elif data.kind != "text":
        raise DnadiffError(f"data.kind: must be genome, text or benchmark, got {data.kind!r}")
    if cfg.tokenizer.kind not in ("dna", "text"):
        raise DnadiffError(f"tokenizer.kind: must be dna or text, got {cfg.tokenizer.kind!r}")
    if cfg.model.init_from:
        from dnadiff.hub import looks_like_repo_id

        if not (looks_like_repo_id(cfg.model.init_from) and not os.path.exists(cfg.model.init_from)):
            _need_file(cfg.model.init_from, "model.init_from", "model directory")
        else:  # a Hub id: it must be in the local Hugging Face cache
            from dnadiff.hub import resolve_model_path

            try:
                resolve_model_path(cfg.model.init_from)
            except DnadiffError as exc:
                raise DnadiffError(f"model.init_from: {exc}") from None
    import dnadiff.backbones  # noqa: F401  (registers the backbones)
    from dnadiff.backbones.base import BACKBONES
    from dnadiff.diffusion import OBJECTIVES, SCHEDULES
    from dnadiff.samplers import SAMPLERS

    if not cfg.model.init_from:
        BACKBONES.get(cfg.model.backbone)
    OBJECTIVES.get(cfg.objective.name)
    SCHEDULES.get(cfg.schedule.name)
    SAMPLERS.get(cfg.sample.sampler)  # the run's default sampler: a typo here fails now, not after training
