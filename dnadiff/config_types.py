"""The wording of a config value of the wrong type: `train.lr: expected a number, got 'fast'`.

YAML 1.1 (PyYAML, so every config file and `key=value` override) reads yes, no, on, off, true and
false as booleans: `train.ema=yes` reaches a number field as True. Its message says so in the words
the user typed, and what the field wants, instead of "got True". No torch here (dnadiff.config uses it).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

# what a number field means, for the message of a boolean given to it (a field whose 0 disables something)
NUMBER_MEANINGS = {
    "train.ema": "the EMA decay, e.g. 0.9999; 0 disables EMA",
    "train.grad_clip": "the gradient-norm limit, e.g. 1.0; 0 disables clipping",
}


def expected(tp: Any) -> str:
    """'an integer', 'true/false', ... for annotation `tp`."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return expected(args[0]) if len(args) == 1 else " or ".join(expected(a) for a in args)
    if dataclasses.is_dataclass(tp) or origin is dict:
        return "a mapping"
    if origin is tuple and typing.get_args(tp) and typing.get_args(tp)[-1] is not Ellipsis:
        return f"a list of {len(typing.get_args(tp))} values"
    if origin in (list, tuple):
        return "a list"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def wrong_type(key: str, tp: Any, value: Any) -> str:
    """The one-line message (without `error: `) for `value` that field `key` (annotation `tp`) refuses."""
    want = expected(tp)
    if isinstance(value, bool):
        meaning = NUMBER_MEANINGS.get(key)
        words = "yes/on/true" if value else "no/off/false"
        return (f"{key}: expected {want}{f' ({meaning})' if meaning else ''}, got {words}, which YAML reads "
                f"as the boolean {str(value).lower()}")
    return f"{key}: expected {want}, got {value!r}"
