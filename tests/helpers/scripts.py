"""Load a script of the repository (benchmarks/, tests/ drivers) as a module, by its path.

Scripts are not packages: importing them by name needs their folder on sys.path. The pipelines are
imported by name (pytest puts pipelines/ on sys.path: pyproject.toml); the other scripts are loaded
by path here, which leaves sys.path and sys.modules alone.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(path: str | Path, name: str | None = None):
    """The module of the script at `path` (relative paths are from the repository root), freshly executed."""
    path = Path(path)
    if not path.is_absolute():
        path = REPO / path
    spec = importlib.util.spec_from_file_location(name or f"script_{path.parent.name}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
