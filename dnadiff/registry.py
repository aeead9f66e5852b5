"""Name -> constructor registries (backbones, objectives, schedules, samplers).

    SCHEDULES = Registry("schedule")

    @SCHEDULES.register("loglinear")
    class LogLinear: ...

    SCHEDULES.build("loglinear", eps=1e-3)
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from dnadiff.errors import DnadiffError

T = TypeVar("T")


class Registry:
    """A named collection of constructors; names are unique."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable[..., Any]] = {}

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

    def build(self, name: str, **kwargs: Any) -> Any:
        ctor = self.get(name)
        try:
            return ctor(**kwargs)
        except TypeError as exc:  # wrong keyword for this constructor
            raise DnadiffError(f"{self.kind} {name!r}: {exc}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
