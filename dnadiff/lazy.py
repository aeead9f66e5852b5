"""Lazy package exports: `from dnadiff.eval import evaluate_model` imports only the module that
defines it, so a light import (`dnadiff eval`, `dnadiff --help`) never pulls in Lightning or
scikit-learn through a package's __init__."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` resolving each exported name from its submodule (name -> submodule)."""
    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
