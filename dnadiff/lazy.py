"""Lazy package exports: `from dnadiff.eval import evaluate_model` imports only the module that
defines it, so a light import (`dnadiff eval`, `dnadiff --help`) never pulls in Lightning or
scikit-learn through a package's __init__. `moved_package`: a package kept under its old name only as an
alias of the one it was renamed to (users' imports keep working, with a DeprecationWarning)."""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` resolving each exported name from its submodule (name -> submodule)."""
    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__


def moved_package(old: str, new: str, submodules: dict[str, str]) -> Callable[[str], object]:
    """The module `__getattr__` of the package `old`, renamed `new`: importing `old` warns once
    (DeprecationWarning naming `new`), its names are the new package's own objects, and each old submodule
    `old.NAME` is the module `submodules[NAME]` itself (registered in sys.modules, so `import old.NAME`,
    `from old.NAME import x` and monkeypatch targets "old.NAME.x" reach the same objects)."""
    warnings.warn(f"{old} was renamed {new}; import from {new} (the old name is a deprecated alias)",
                  DeprecationWarning, stacklevel=3)
    package = importlib.import_module(new)
    for name, target in submodules.items():
        module = importlib.import_module(target)
        sys.modules[f"{old}.{name}"] = module
        setattr(sys.modules[old], name, module)

    def __getattr__(name: str):
        return getattr(package, name)

    return __getattr__
