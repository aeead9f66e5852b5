"""Official checkpoint formats dnadiff reads (Caduceus, HyenaDNA, MDLM), one registered class each in
its converter module: `detect(path)` says whether a folder is one, `read(path) -> (config, state)`
gives its backbone config and its tensors as stored, `load(path, vocab_size)` the dnadiff backbone
with its weights. A new format is one converter module with one registered class (and its test);
`dnadiff.checkpoint.load` finds it through `detect_format`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from dnadiff.registry import Registry

# filled by the imports of dnadiff/backbones/__init__.py (the converters register one each)
CHECKPOINT_FORMATS = Registry("checkpoint format")


class CheckpointFormat:
    """What an official checkpoint becomes: a dnadiff backbone and the objective it was trained with."""

    backbone: ClassVar[str]  # the dnadiff backbone name
    objective: ClassVar[str]  # caduceus: mlm, HyenaDNA: ar, MDLM: mdlm
    objective_options: ClassVar[dict[str, Any]] = {}
    # a text model that brings its tokenizer, schedule and time input (MDLM): checkpoint reads those too
    text_model: ClassVar[bool] = False

    @staticmethod
    def detect(path: Path) -> bool:
        raise NotImplementedError

    @staticmethod
    def read(path: Path) -> tuple[Any, dict]:
        raise NotImplementedError

    @staticmethod
    def load(path: Path, vocab_size: int | None = None):
        raise NotImplementedError


def detect_format(path: Path) -> str | None:
    """The name of the official format `path` holds, or None."""
    return next((name for name in CHECKPOINT_FORMATS.names() if CHECKPOINT_FORMATS.get(name).detect(path)), None)
