"""Hugging Face Hub ids resolved to local folders: the first step of loading a model.

    model = dnadiff.load("org/name")            # the local HF cache only (no network)
    model = dnadiff.load("org/name", local_files_only=False)   # download when missing

Publishing (`model.push_to_hub`) is modelio/push.py; `modelio.resolve` calls `resolve_model_path` once
per load. Cache lookups go through
`huggingface_hub.snapshot_download`, which
honours HF_HOME / HF_HUB_CACHE like every other Hugging Face library.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dnadiff.errors import DnadiffError

# "org/name" as the Hub spells repository ids (no leading dot or dash, one slash)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def looks_like_repo_id(name: str) -> bool:
    return bool(_REPO_ID.match(name)) and ".." not in name


def resolve_model_path(path_or_id: str | os.PathLike, local_files_only: bool = True, revision: str | None = None,
                       cache_dir: str | os.PathLike | None = None) -> Path:
    """A local path as given; a Hub id "org/name" that is not a local path -> its snapshot folder in the
    Hugging Face cache (downloaded first only when `local_files_only` is False)."""
    path = Path(path_or_id)
    name = str(path_or_id)
    if path.exists() or not looks_like_repo_id(name):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(name, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only)
    except LocalEntryNotFoundError:
        raise DnadiffError(
            f"{name}: no such local directory, and not in the Hugging Face cache; download it with "
            f"`hf download {name}` or dnadiff.load({name!r}, local_files_only=False)") from None
    except Exception as exc:  # network, auth, unknown repository: one line, no Hub traceback
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise DnadiffError(f"{name}: could not get it from the Hugging Face Hub ({first})") from None
    return Path(folder)
