"""The tokenizer registry and the interface every tokenizer has.

`tokenizer.kind` names a registered class that builds itself from the config's `tokenizer.path` /
`tokenizer.strict` (`from_config`). A new kind is one new module in this package:

    @TOKENIZERS.register("kmer")
    class KmerTokenizer(Tokenizer):
        kind = "kmer"
        ...

What the rest of dnadiff reads from a tokenizer:
    vocab_size, mask_id, pad_id, bos_id, special_ids    ids (DNATokenizer: class attributes)
    encode(text) -> list[int], decode(ids) -> str
    content_ids        the real tokens: MLM's random replacements, an AR model's free first token
    never_sampled_ids  ids a sampler never produces (DiffusionModel.banned_ids)
    ar_context_id      the `ar` objective's context token for a new model (None: the first token is context)
"""

from __future__ import annotations

from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

TOKENIZERS = Registry("tokenizer")  # filled by the imports of dnadiff/tokenizers/__init__.py


class Tokenizer:
    """Base of the tokenizers: the declarations models take from them, with the defaults of a
    general-purpose vocabulary (every non-special id is content, only [PAD] is never sampled)."""

    kind = "base"

    @classmethod
    def from_config(cls, path: str | None = None, strict: bool = False) -> "Tokenizer":
        raise NotImplementedError

    @property
    def content_ids(self) -> list[int]:
        specials = set(self.special_ids)
        return [i for i in range(self.vocab_size) if i not in specials]

    @property
    def never_sampled_ids(self) -> list[int]:
        return [self.pad_id]

    @property
    def ar_context_id(self) -> int | None:
        return None


def kinds_text() -> str:
    """'dna or text': the registered kinds, for messages."""
    return " or ".join(TOKENIZERS.names())


def build_tokenizer(kind: str = "dna", path: str | None = None, strict: bool = False):
    """`dna` -> DNATokenizer; `text` -> TextTokenizer(path) (local folder or HF cache)."""
    if kind not in TOKENIZERS:
        raise DnadiffError(f"tokenizer.kind: unknown kind {kind!r} ({kinds_text()})")
    return TOKENIZERS.get(kind).from_config(path=path, strict=strict)


__all__ = ["TOKENIZERS", "Tokenizer", "build_tokenizer", "kinds_text"]
