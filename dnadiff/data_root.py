"""The data root: the folder a config's relative data paths resolve against (`data.root`, else
$DNADIFF_DATA, else the data bundled in the package). No torch here; dnadiff.config re-exports it."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

DATA_ENV = "DNADIFF_DATA"
BUNDLED_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
_PATH_KEYS = ("fasta", "bed", "benchmark", "dataset")  # data.* keys holding a file or folder
_TEXT_PATH_KEYS = ("path", "train", "valid", "test")  # data.text.* keys holding files or folders
_TEXT_CACHE_KEYS = ("cache_dir", "hf_cache_dir")  # data.text.* caches of this machine: not in a model directory


def bundled_data_root() -> str:
    """The data shipped inside the package: chr22_sample/ and benchmarks/ (small real sets)."""
    return BUNDLED_DATA


def data_root(root: str | os.PathLike | None = None) -> str:
    """The folder a config's relative data paths resolve against, as an absolute path:
    `data.root` when set, else the environment variable DNADIFF_DATA, else the bundled data.

    The shipped configs name their data with the layout of the project's data folder
    (hg19_chr22_subset/, benchmarks/NAME, text/fortunes), so DNADIFF_DATA=/path/to/that/folder
    makes every shipped config use it, from any current directory. A relative root is taken
    from the current directory."""
    chosen = root or os.environ.get(DATA_ENV) or BUNDLED_DATA
    return os.path.abspath(os.path.expanduser(str(chosen)))


def data_root_hint(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """For a not-found message: how a missing path under a data root came about, and the fix.

    `root`: the data root the config resolved against (its `data.root`), when known. Without
    DNADIFF_DATA a shipped config's paths land in the data bundled with the package, which holds
    only the small samples: the message says the variable is unset and how to set it."""
    def full(folder) -> str:
        return os.path.abspath(os.path.expanduser(str(folder)))

    p = full(path)
    env = os.environ.get(DATA_ENV)
    candidates = [(full(env), f"${DATA_ENV} ({env})")] if env else []
    if root is not None and full(root) not in (full(env) if env else None, full(BUNDLED_DATA)):
        candidates.append((full(root), f"data.root ({root})"))
    candidates.append((full(BUNDLED_DATA), "the data bundled with the package"))
    for base, how in candidates:
        if not p.startswith(base + os.sep):
            continue
        top = os.path.relpath(p, base).split(os.sep)[0]
        holds = f"the folder that holds {top}/" if top != os.path.basename(p) else "the folder that holds it"
        if base == full(BUNDLED_DATA) and not env:
            return (f" (a config's relative data paths resolve against ${DATA_ENV} or data.root; {DATA_ENV} is "
                    f"not set, so the data bundled with the package was used, small samples only: "
                    f"`export {DATA_ENV}=/path/to/data` or add data.root=/path/to/data, {holds})")
        return (f" (a config's relative data paths resolve against the data root, here {how}; point {DATA_ENV} "
                f"or data.root=DIR at {holds})")
    return ""


def missing_data(data: dict[str, Any]) -> list[str]:
    """One message per data file or folder that a resolved config's `data` section names and that
    does not exist (`--print-config` prints them as warnings). Bare benchmark names (a Genomic
    Benchmarks set, not a path) and unset keys are skipped."""
    found = []
    for key in _PATH_KEYS:
        value = data.get(key)
        if not isinstance(value, str) or not value or (key == "dataset" and os.sep not in value and "/" not in value):
            continue
        found.append((f"data.{key}", value))
    text = data.get("text")
    if isinstance(text, dict):
        for key in _TEXT_PATH_KEYS:
            for value in text.get(key) if isinstance(text.get(key), list) else [text.get(key)]:
                if isinstance(value, str) and value:
                    found.append((f"data.text.{key}", value))
    root = data.get("root")
    return [f"{key}: {value} not found{data_root_hint(value, root)}" for key, value in found
            if not os.path.exists(os.path.expanduser(value))]


def _under(root: str, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_under(root, v) for v in value]
    if not isinstance(value, str) or not value:
        return value
    value = os.path.expanduser(value)
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(root, value))


def _resolve_data_paths(obj: Any, given: dict[str, Any]) -> Any:
    """Relative data paths not given on the command line -> absolute paths under the data root."""
    data = getattr(obj, "data", None)
    if not dataclasses.is_dataclass(data) or not hasattr(data, "root"):
        return obj
    typed = given.get("data") if isinstance(given.get("data"), dict) else {}
    root = data_root(data.root)
    changes: dict[str, Any] = {"root": root}
    for key in _PATH_KEYS:
        value = getattr(data, key, None)
        if value is None or key in typed:
            continue
        if key == "dataset" and "/" not in value and os.sep not in value:
            continue  # a bare name is a Genomic Benchmarks set (~/.genomic_benchmarks/NAME)
        changes[key] = _under(root, value)
    text = getattr(data, "text", None)
    if isinstance(text, dict) and text:
        typed_text = typed.get("text") if isinstance(typed.get("text"), dict) else {}
        changes["text"] = {k: (_under(root, v) if k in _TEXT_PATH_KEYS and k not in typed_text else v)
                           for k, v in text.items()}
    return dataclasses.replace(obj, data=dataclasses.replace(data, **changes))


def _relative_data_paths(obj: Any) -> tuple[Any, list[str]]:
    """The inverse of `_resolve_data_paths`, for a config that leaves this machine (a model directory's
    config.json): the data paths relative to the data root and `data.root` unset, so that loading the
    model resolves them again under the reader's data root. A path outside the data root keeps its file
    name only (a model directory names no folder of the machine that made it); the second value lists
    those, as `data.KEY: PATH`."""
    data = getattr(obj, "data", None)
    if not dataclasses.is_dataclass(data) or not hasattr(data, "root"):
        return obj, []
    root = data_root(data.root)
    outside: list[str] = []

    def relative(key: str, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [relative(key, v) for v in value]
        if not isinstance(value, str) or not value:
            return value
        path = os.path.abspath(os.path.expanduser(value))
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, root)
        if not os.path.isabs(os.path.expanduser(value)) and not os.path.exists(path):
            return value  # a name, not a path of this machine (a split or data set name)
        outside.append(f"{key}: {value}")
        return os.path.basename(path.rstrip(os.sep))

    changes: dict[str, Any] = {"root": None}
    for key in _PATH_KEYS:
        value = getattr(data, key, None)
        if value is not None and not (key == "dataset" and "/" not in value and os.sep not in value):
            changes[key] = relative(f"data.{key}", value)
    text = getattr(data, "text", None)
    if isinstance(text, dict) and text:
        changes["text"] = {k: relative(f"data.text.{k}", v) if k in _TEXT_PATH_KEYS else v
                           for k, v in text.items() if k not in _TEXT_CACHE_KEYS}
    return dataclasses.replace(obj, data=dataclasses.replace(data, **changes)), outside


__all__ = ["DATA_ENV", "BUNDLED_DATA", "bundled_data_root", "data_root", "data_root_hint", "missing_data"]
