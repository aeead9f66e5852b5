"""Text tokenizer: a thin wrapper over Hugging Face `AutoTokenizer` with the DNA tokenizer's interface.

Loads from a local path or the HF cache only (offline). Guarantees a mask token and a pad id that
differs from the mask id (the reference MDLM code aliases them for GPT-2; we add a dedicated [PAD]).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Sequence

import torch

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.base import TOKENIZERS, Tokenizer


def _not_found(name_or_path: str) -> str:
    """One line saying what to run; the Hugging Face loader's own message (hub URLs) is left out."""
    looks_like_path = os.sep in name_or_path or name_or_path.startswith(".") or os.path.exists(name_or_path)
    if looks_like_path or name_or_path.count("/") > 1:
        return (f"tokenizer {name_or_path!r}: no tokenizer folder there; set tokenizer.train=bert-like (or gpt2-like) "
                "to build it from the training text on first use, or give the folder of an existing tokenizer")
    return (f"tokenizer {name_or_path!r}: not found locally (not a folder, not in the Hugging Face cache); fetch it "
            f"once with: python -c \"from transformers import AutoTokenizer; "
            f"AutoTokenizer.from_pretrained('{name_or_path}')\"")


@TOKENIZERS.register("text")
class TextTokenizer(Tokenizer):
    """Content: every non-special id; never sampled: [PAD]; AR context: none (a text sequence starts
    with its own [CLS]/BOS token)."""

    kind = "text"

    @classmethod
    def from_config(cls, path: str | None = None, strict: bool = False) -> "TextTokenizer":
        if not path:
            raise DnadiffError("tokenizer.path: a text tokenizer needs a local path or cached name")
        return cls(path)

    def __init__(self, name_or_path: str, hf_tokenizer=None):
        if hf_tokenizer is None:
            from transformers import AutoTokenizer

            try:
                hf_tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
            except (OSError, ValueError):
                raise DnadiffError(_not_found(name_or_path)) from None
        self.name_or_path = name_or_path
        self.hf = hf_tokenizer
        added = {}
        if self.hf.mask_token is None:
            added["mask_token"] = "[MASK]"
        if self.hf.pad_token is None or self.hf.pad_token == self.hf.mask_token:
            added["pad_token"] = "[PAD]"
        if added:
            self.hf.add_special_tokens(added)
        if self.hf.pad_token_id == self.hf.mask_token_id:
            raise DnadiffError(f"tokenizer {name_or_path!r}: pad and mask ids are equal")

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    @property
    def mask_id(self) -> int:
        return int(self.hf.mask_token_id)

    @property
    def pad_id(self) -> int:
        return int(self.hf.pad_token_id)

    @property
    def bos_id(self) -> int | None:
        tid = self.hf.bos_token_id if self.hf.bos_token_id is not None else self.hf.cls_token_id
        return None if tid is None else int(tid)

    @property
    def eos_id(self) -> int | None:
        tid = self.hf.eos_token_id if self.hf.eos_token_id is not None else self.hf.sep_token_id
        return None if tid is None else int(tid)

    @property
    def special_ids(self) -> list[int]:
        return sorted(set(int(i) for i in self.hf.all_special_ids))

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=add_special_tokens, verbose=False))

    def encode_documents(self, texts: list[str]) -> list[list[int]]:
        """Ids of whole documents (no special tokens), of any length: the data pipeline packs or cuts
        them into windows of data.seq_len afterwards. verbose=False: transformers' "Token indices
        sequence length is longer than the specified maximum sequence length" compares a document
        with the tokenizer's model_max_length, which no window here reaches."""
        return self.hf(texts, add_special_tokens=False, verbose=False)["input_ids"]

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special: bool = False) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self.hf.decode(list(ids), skip_special_tokens=skip_special)

    def save(self, directory: str | os.PathLike) -> None:
        self.hf.save_pretrained(str(directory))

    def __repr__(self) -> str:
        return f"TextTokenizer({self.name_or_path!r}, vocab_size={self.vocab_size})"


def tokenizer_digest(hf_tokenizer) -> str:
    """A short hash of a Hugging Face tokenizer's identity: its vocabulary (token -> id, added
    tokens included) and its special tokens. Two tokenizers with equal digests map text to
    the same ids for all practical purposes (normaliser settings aside)."""
    vocab = sorted(hf_tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    specials = {k: str(v) for k, v in sorted(hf_tokenizer.special_tokens_map.items())}
    h = hashlib.sha256()
    h.update(json.dumps(vocab, ensure_ascii=False).encode())
    h.update(json.dumps(specials, sort_keys=True).encode())
    h.update(type(hf_tokenizer).__name__.encode())
    return h.hexdigest()[:16]
