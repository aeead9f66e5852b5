"""Where a model comes from, decided once: `resolve(path_or_id) -> ModelSource`.

    src = resolve("runs/tiny/model")        # a local folder, or "org/name" from the local Hugging Face cache
    src.path, src.format                    # the folder; "dnadiff" or a registered official format
    src.config                              # the dnadiff RunConfig (read once), None for an official format

A Hub id is looked up in the cache once (modelio/hub.py) and the format detected once (a config.json
with the dnadiff marker, else the first registered official format whose `detect` accepts the folder,
else the dnadiff format, whose reader then says what is missing: a run directory gets the hint of its
model/ folder). Every later step (the config, the reader, the loader) takes the source, never the path.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

from dnadiff.backbones.formats import CHECKPOINT_FORMATS, CheckpointFormat, detect_format
from dnadiff.config import RunConfig
from dnadiff.modelio.hub import resolve_model_path
from dnadiff.modelio.model_dir import CONFIG_FILE, is_dnadiff_config, load_config_of

DNADIFF = "dnadiff"  # ModelSource.format of a dnadiff model directory (modelio/model_dir.py)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model path resolved: `given` (as typed), `path` (the local folder: a Hub id's cache snapshot) and
    `format` ("dnadiff", or the name of a registered official format, backbones/formats.py)."""

    given: str
    path: Path
    format: str = DNADIFF

    @property
    def official(self) -> CheckpointFormat | None:
        """The registered official format's class, None for a dnadiff model directory."""
        return None if self.format == DNADIFF else CHECKPOINT_FORMATS.get(self.format)

    @functools.cached_property
    def config(self) -> RunConfig | None:
        """The dnadiff RunConfig the directory records (read once; its errors name the file), None for an
        official checkpoint (its config is built when it is read, modelio/read.py)."""
        return None if self.official is not None else load_config_of(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)


def official_format(path: Path) -> str | None:
    """The registered official format of a local folder with a config.json, else None (a dnadiff config.json,
    model_type "dnadiff", is never one)."""
    if not path.is_dir() or not (path / CONFIG_FILE).is_file() or is_dnadiff_config(path):
        return None
    return detect_format(path)


def resolve(path_or_id: str | os.PathLike | ModelSource, *, local_files_only: bool = True,
            revision: str | None = None, cache_dir: str | os.PathLike | None = None) -> ModelSource:
    """A local folder, or a Hub id "org/name" looked up in the local Hugging Face cache (downloaded first
    only when `local_files_only` is False), with its format detected. A ModelSource is returned as is."""
    if isinstance(path_or_id, ModelSource):
        return path_or_id
    path = resolve_model_path(path_or_id, local_files_only=local_files_only, revision=revision, cache_dir=cache_dir)
    return ModelSource(str(path_or_id), path, official_format(path) or DNADIFF)


__all__ = ["DNADIFF", "ModelSource", "official_format", "resolve"]
