"""Tokenizers: DNA characters with Caduceus-compatible ids, and Hugging Face text tokenizers."""

from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.tokenizers.text import TextTokenizer


def build_tokenizer(kind: str = "dna", path: str | None = None, strict: bool = False):
    """`dna` -> DNATokenizer; `text` -> TextTokenizer(path) (local folder or HF cache)."""
    from dnadiff.errors import DnadiffError

    if kind == "dna":
        return DNATokenizer(strict=strict)
    if kind == "text":
        if not path:
            raise DnadiffError("tokenizer.path: a text tokenizer needs a local path or cached name")
        return TextTokenizer(path)
    raise DnadiffError(f"tokenizer.kind: unknown kind {kind!r} (dna or text)")


__all__ = ["DNATokenizer", "TextTokenizer", "build_tokenizer"]
