"""The tokenizer registry: `tokenizer.kind` names a class that builds itself from the config's
`tokenizer.path` / `tokenizer.strict` (its `from_config`). A new kind is one new module here."""

from __future__ import annotations

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

TOKENIZERS = Registry("tokenizer", package="dnadiff.tokenizers")


def kinds_text() -> str:
    """'dna or text': the registered kinds, for messages."""
    return " or ".join(TOKENIZERS.names())


def build_tokenizer(kind: str = "dna", path: str | None = None, strict: bool = False):
    """`dna` -> DNATokenizer; `text` -> TextTokenizer(path) (local folder or HF cache)."""
    if kind not in TOKENIZERS:
        raise DnadiffError(f"tokenizer.kind: unknown kind {kind!r} ({kinds_text()})")
    return TOKENIZERS.get(kind).from_config(path=path, strict=strict)


__all__ = ["TOKENIZERS", "build_tokenizer", "kinds_text"]
