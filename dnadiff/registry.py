"""Name -> constructor registries (backbones, objectives, schedules, samplers).

    SCHEDULES = Registry("schedule")

    @SCHEDULES.register("loglinear")
    class LogLinear: ...

    SCHEDULES.build("loglinear", eps=1e-3)

Entries register by import, at the layer that owns them: a package's __init__ imports each of its
modules that registers one (`dnadiff/samplers/__init__.py` imports `ancestral`, `cached`, ...), and
Python runs a package's __init__ before any of its modules, so `from dnadiff.samplers.base import
SAMPLERS` already sees every sampler. No registry names a module by a string: every dependency is an
import statement that a reader (and tests/test_import_graph.py) can follow.

Each entry has an option schema: the dataclass it declares (`Config` on a backbone, `Options`
elsewhere) or, by default, one derived from its constructor's signature (names, types, defaults;
base-class constructors included). `check_options` validates user options against it (a typo
fails at load time, listing the valid keys); `build` refuses unknown keywords the same way and
lets any other exception through: a TypeError inside a constructor is a bug, not a user error.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, TypeVar

from dnadiff.errors import DnadiffError

T = TypeVar("T")


def _init_params(ctor: Callable[..., Any]) -> tuple[dict[str, tuple[Any, Any]], bool]:
    """({name: (annotation, default)}, open) of a constructor; a class's base-class __init__s are
    included when the subclass passes **options on. `open`: it takes any keyword."""
    params: dict[str, tuple[Any, Any]] = {}
    funcs = [k.__dict__["__init__"] for k in ctor.__mro__ if "__init__" in k.__dict__ and k is not object] \
        if inspect.isclass(ctor) else [ctor]
    for func in funcs:
        try:
            hints = typing.get_type_hints(func)
        except Exception:  # an annotation this module cannot resolve: typed as Any
            hints = {}
        more = False
        for pname, p in inspect.signature(func).parameters.items():
            if pname == "self" or p.kind == p.VAR_POSITIONAL:
                continue
            if p.kind == p.VAR_KEYWORD:
                more = True
                continue
            params.setdefault(pname, (hints.get(pname, Any), p.default))
        if not more:  # this constructor does not pass unknown keywords on: the search stops here
            return params, False
    return params, True


def _omegaconf_type(tp: Any) -> Any:
    """Optional[`tp`] where OmegaConf can type-check it, else Any (tensors, callables, mixed unions)."""
    from omegaconf import OmegaConf

    try:
        tp = typing.Optional[tp]  # only the options given are checked: every field may stay None
        OmegaConf.structured(dataclasses.make_dataclass("_Probe", [("x", tp, dataclasses.field(default=None))]))
        return tp
    except Exception:
        return Any


class Registry:
    """A named collection of constructors; names are unique."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable[..., Any]] = {}
        self._schemas: dict[str, type] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj  # type: ignore[assignment]
            return obj

        return decorator

    def get(self, name: str) -> Callable[..., Any]:
        if name not in self._items:
            raise DnadiffError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}"
            )
        return self._items[name]

    def option_schema(self, name: str) -> type:
        """The dataclass of `name`'s options: declared (`Config` / `Options`) or from its signature."""
        if name not in self._schemas:
            ctor = self.get(name)
            declared = getattr(ctor, "Config", None) or getattr(ctor, "Options", None)
            if dataclasses.is_dataclass(declared):
                self._schemas[name] = declared
            else:
                params, _ = _init_params(ctor)
                fields = [(p, _omegaconf_type(tp), dataclasses.field(default=None)) for p, (tp, _) in params.items()]
                self._schemas[name] = dataclasses.make_dataclass(f"{self.kind}_{name}_options", fields)
        return self._schemas[name]

    def describe(self, name: str, exclude: tuple[str, ...] = ()) -> str:
        """'steps (int, default 128), temperature (float, default 1.0), ...' for messages."""
        ctor = self.get(name)
        schema = self.option_schema(name)
        params, _ = _init_params(ctor)
        out = []
        for f in dataclasses.fields(schema):
            if f.name in exclude:
                continue
            ann, default = params.get(f.name, (f.type, f.default))
            ann = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
            if default is dataclasses.MISSING or default is inspect.Parameter.empty:
                out.append(f"{f.name} ({ann})")
            else:
                out.append(f"{f.name} ({ann}, default {default!r})")
        return ", ".join(out)

    def check_options(self, name: str, options: dict[str, Any], key: str, exclude: tuple[str, ...] = (),
                      sep: str = ".", label: str | None = None) -> dict[str, Any]:
        """`options` checked against `name`'s schema: an unknown key or a wrong type is one line
        naming `key.option` (`key{sep}option`) and the valid options with their types and defaults;
        returns the values converted to their types."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        schema = self.option_schema(name)
        valid = [f.name for f in dataclasses.fields(schema) if f.name not in exclude]
        label = label or f"{self.kind} {name!r}"
        node = OmegaConf.structured(schema)
        OmegaConf.set_readonly(node, False)  # a frozen Config dataclass (e.g. markov's) is read-only otherwise
        out: dict[str, Any] = {}
        for k, v in (options or {}).items():
            if k not in valid:
                raise DnadiffError(f"{key}{sep}{k}: not an option of {label}; "
                                   f"valid options: {self.describe(name, exclude)}")
            try:
                node.merge_with({k: v})
                out[k] = OmegaConf.to_container(node, resolve=True)[k]
            except OmegaConfBaseException:
                tp = _init_params(self.get(name))[0].get(
                    k, ({f.name: f.type for f in dataclasses.fields(schema)}[k],))[0]
                tp = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
                raise DnadiffError(f"{key}{sep}{k}={v!r}: {label} expects {tp}; "
                                   f"valid options: {self.describe(name, exclude)}") from None
        return out

    def build(self, name: str, **kwargs: Any) -> Any:
        ctor = self.get(name)
        params, open_ = _init_params(ctor)
        unknown = [k for k in kwargs if k not in params]
        if unknown and not open_:
            raise DnadiffError(f"{self.kind} {name!r}: unknown option {unknown[0]!r}; "
                               f"valid options: {', '.join(sorted(params))}")
        return ctor(**kwargs)

    def name_of(self, obj: Any) -> str | None:
        """The registered name of the class `obj` is an instance of (None: not registered here)."""
        return next((n for n, ctor in self._items.items() if inspect.isclass(ctor) and type(obj) is ctor), None)

    def names(self) -> list[str]:
        return sorted(self._items)

    def where(self, **declared: Any) -> list[str]:
        """The names whose entry declares every given class attribute value, e.g. `where(autoregressive=True)`."""
        return [n for n in self.names() if all(getattr(self._items[n], k, None) == v for k, v in declared.items())]

    def __contains__(self, name: object) -> bool:
        return name in self._items
