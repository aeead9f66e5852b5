"""Checks a command makes before any heavy work (loading a model, starting Lightning).

A wrong sampler name, an unknown or ill-typed `--option`, a missing data file or tokenizer is
reported in one line that lists what is valid (a sampler's real options and their types), never
as Python internals ("__init__() got an unexpected keyword argument").
"""

from __future__ import annotations

import os
from typing import Any

from dnadiff.errors import DnadiffError

# ------------------------------------------------------------------------------------ samplers


def check_sampler_options(name: str | None, options: dict[str, Any], model_sets: bool = False) -> None:
    """Refuse unknown option names and values of the wrong type against the sampler's declared
    option schema (registry.py), naming the valid options, their types and defaults.
    `model_sets`: `name` is the model's own sampler (AR decoding), whose `model_options` come from
    the model, not the user."""
    from dnadiff.samplers import SAMPLERS

    if model_sets:
        SAMPLERS.check_options(name, options, "--option", exclude=SAMPLERS.get(name).model_options, sep=" ",
                               label=f"{name} sampling")
    else:
        SAMPLERS.check_options(name or "ancestral", options, "--option", sep=" ")


# ------------------------------------------------------------------------------------ training inputs


def _need_file(path: str | None, key: str, what: str) -> None:
    if path and not os.path.exists(path):
        raise DnadiffError(f"{key}: {path}: {what} not found")


def check_train_inputs(cfg) -> None:
    """Data files, tokenizer and init_from of a RunConfig exist (before Lightning starts)."""
    from dnadiff.commands.preflight import check_data_files

    check_data_files(cfg)  # the files' headers, a missing file's data root: as `dnadiff train` checks first
    data = cfg.data
    if data.kind == "genome":
        from dnadiff.data.datasets import genome_paths  # the data layer's own path resolution

        fasta, bed = genome_paths(cfg)
        _need_file(fasta, "data.fasta", "genome FASTA")
        _need_file(bed, "data.bed", "BED file")
    elif data.kind == "benchmark":
        from dnadiff.data.benchmarks import resolve_benchmark

        resolve_benchmark(data.benchmark or "")
    elif data.kind == "dhs":
        from dnadiff.data.dhs import store_dir, stored_meta

        if stored_meta() is None:
            raise DnadiffError(f"data.kind=dhs: the DHS table is not in {store_dir()}; run `dnadiff data dhs` "
                               "(offline: `dnadiff data dhs --from dnadiffusion-0.0.0.dev0-py3-none-any.whl`)")
    elif data.kind != "text":
        raise DnadiffError(f"data.kind: must be genome, text, benchmark or dhs, got {data.kind!r}")
    from dnadiff.tokenizers.base import TOKENIZERS, kinds_text

    if cfg.tokenizer.kind not in TOKENIZERS:
        raise DnadiffError(f"tokenizer.kind: must be {kinds_text()}, got {cfg.tokenizer.kind!r}")
    if cfg.model.init_from:  # a local folder, or a Hub id that must be in the local Hugging Face cache
        from dnadiff.modelio.hub import resolve_model_path

        try:
            path = resolve_model_path(cfg.model.init_from)
        except DnadiffError as exc:
            raise DnadiffError(f"model.init_from: {exc}") from None
        _need_file(str(path), "model.init_from", "model directory")
        check_init_from_causal(cfg)
    import dnadiff.backbones  # noqa: F401  (registers the backbones)
    from dnadiff.backbones.base import BACKBONES
    from dnadiff.diffusion import OBJECTIVES, SCHEDULES
    from dnadiff.samplers import SAMPLERS

    if not cfg.model.init_from:
        BACKBONES.get(cfg.model.backbone)
    OBJECTIVES.get(cfg.objective.name)
    SCHEDULES.get(cfg.schedule.name)
    SAMPLERS.get(cfg.sample.sampler)  # the run's default sampler: a typo here fails now, not after training


def check_init_from_causal(cfg) -> None:
    """Block diffusion (an objective with blocks) from `model.init_from`: the network it names must be causal
    (diffusion/bd3lm.py), read from its config before any weights load."""
    from dnadiff.diffusion import OBJECTIVES

    name = cfg.objective.name
    if name not in OBJECTIVES or not getattr(OBJECTIVES.get(name), "has_blocks", False):
        return
    from dataclasses import replace as dc_replace

    from dnadiff.config_options import check_causal_backbone
    from dnadiff.modelio.source import resolve

    source = resolve(cfg.model.init_from)
    if source.official is not None:
        model = dc_replace(cfg.model, init_from=None, backbone=source.official.backbone, overrides={})
    else:
        model = dc_replace(source.config.model, init_from=None)
    try:
        check_causal_backbone(model)
    except DnadiffError as exc:
        raise DnadiffError(f"model.init_from {cfg.model.init_from}: {exc}") from None


# ------------------------------------------------------------------------------------ outputs


def check_writable(path: str | None, flag: str = "--out") -> None:
    """The folder that will hold `path` exists or can be made, and files can be written in it:
    checked before the work (minutes of sampling) rather than when the results are written.

    The nearest existing folder above `path` must be a directory and writable (os.access, then a
    probe file created and removed there: root passes access() but not a read-only mount)."""
    import tempfile

    if path is None or path == "-":
        return
    if os.path.isdir(path):
        raise DnadiffError(f"{flag} {path}: is a directory, expected a file name")
    folder = os.path.dirname(os.path.abspath(path))
    existing = folder
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        raise DnadiffError(f"{flag} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DnadiffError(f"{flag} {path}: cannot write in {existing} (permission denied)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dnadiff-write-check.", suffix=".tmp", dir=existing)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise DnadiffError(f"{flag} {path}: cannot write in {existing} ({why})") from None
    os.close(fd)
    os.remove(probe)
