"""Text corpora for the language-modelling runs (LM1B-style sentences, OWT-style wrapped documents).

`build_text_datasets(data_cfg, tokenizer) -> {"train", "valid", "test"}`; every item is
`{"input_ids": Long[L], "attention_mask": Long[L]}` with L = data_cfg.seq_len. Two layouts
(MDLM §5.1 / app. D.1, the reference `dataloader.py`):

  pad  (LM1B, `wrap: false`): one sentence per item,  [BOS] w1 … wn [EOS] [PAD] … [PAD]
       (BERT: BOS = [CLS], EOS = [SEP]); longer sentences are cut to [BOS] w1 … w_{L-2} [EOS];
       attention_mask is 1 on [BOS] … [EOS] and 0 on pads, so pads are never scored.
  wrap (OWT, `wrap: true`): documents tokenised, concatenated with EOS after each one
       (`eos_between: false` for the zero-shot sets, app. D.5), cut into blocks of L-2 tokens,
       each block framed as [BOS] … [EOS]; the remainder is dropped; attention_mask is all 1.

The pad id is the tokenizer's dedicated [PAD] (TextTokenizer guarantees pad != mask; the
reference aliases them for GPT-2).

Where the documents come from (`data.text` options, local files, HF copies): text_sources.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from dnadiff.data.text_sources import SPLITS, DocSource, TextOptions, split_sources
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.text import tokenizer_digest
from dnadiff.utils import cache_dir

CACHE_VERSION = 1


# ----------------------------------------------------------------------------- layouts


def _special_ids(tokenizer, opts: TextOptions) -> tuple[Optional[int], Optional[int]]:
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    need_bos = opts.add_special if not opts.wrapped else opts.block_bos_eos
    need_eos = need_bos or (opts.wrapped and opts.eos_between)
    if need_bos and bos is None:
        raise DnadiffError(f"tokenizer {tokenizer.name_or_path!r}: no BOS/[CLS] token for the text layout")
    if need_eos and eos is None:
        raise DnadiffError(f"tokenizer {tokenizer.name_or_path!r}: no EOS/[SEP] token for the text layout")
    return bos, eos


def pad_layout(ids: list[int], seq_len: int, pad_id: int, bos: Optional[int], eos: Optional[int],
               add_special: bool = True) -> tuple[list[int], list[int]]:
    """One sentence -> ([BOS] ids[:L-2] [EOS] [PAD]*, mask 1…1 0…0), or ids[:L] + pads."""
    body = ([bos] + ids[: seq_len - 2] + [eos]) if add_special else ids[:seq_len]
    n = len(body)
    return body + [pad_id] * (seq_len - n), [1] * n + [0] * (seq_len - n)


class BlockWrapper:
    """Incremental OWT wrapping: feed documents' ids, collect full blocks of length L."""

    def __init__(self, seq_len: int, bos: Optional[int], eos: Optional[int], eos_between: bool = True,
                 block_bos_eos: bool = True):
        self.body = seq_len - 2 if block_bos_eos else seq_len
        if self.body < 1:
            raise DnadiffError(f"data.seq_len: {seq_len} is too short for [BOS] … [EOS] blocks")
        self.bos, self.eos, self.eos_between, self.frame = bos, eos, eos_between, block_bos_eos
        self.buf: list[int] = []

    def add(self, ids: list[int]) -> list[list[int]]:
        self.buf.extend(ids)
        if self.eos_between:
            self.buf.append(self.eos)
        out = []
        while len(self.buf) >= self.body:
            chunk, self.buf = self.buf[: self.body], self.buf[self.body:]
            out.append([self.bos] + chunk + [self.eos] if self.frame else chunk)
        return out


def _encode_batches(tokenizer, docs: Iterator[str], batch: int = 512) -> Iterator[list[int]]:
    """Whole documents' ids, `batch` documents per tokenizer call (windows are cut by the caller)."""
    buf: list[str] = []
    for d in docs:
        buf.append(d)
        if len(buf) == batch:
            yield from tokenizer.encode_documents(buf)
            buf = []
    if buf:
        yield from tokenizer.encode_documents(buf)


def iter_items(source: DocSource, tokenizer, seq_len: int, opts: TextOptions,
               doc_filter: Callable[[int], bool] | None = None) -> Iterator[tuple[list[int], list[int]]]:
    """(input_ids, attention_mask) rows of one split, in order."""
    bos, eos = _special_ids(tokenizer, opts)
    docs = source.docs()
    if doc_filter is not None:
        docs = (d for i, d in enumerate(docs) if doc_filter(i))
    if opts.wrapped:
        wrapper = BlockWrapper(seq_len, bos, eos, opts.eos_between, opts.block_bos_eos)
        ones = [1] * seq_len
        for ids in _encode_batches(tokenizer, docs):
            for block in wrapper.add(list(ids)):
                yield block, ones
    else:
        for ids in _encode_batches(tokenizer, docs):
            yield pad_layout(list(ids), seq_len, tokenizer.pad_id, bos, eos, opts.add_special)


# ----------------------------------------------------------------------------- cache + datasets


def cache_key(tokenizer, seq_len: int, opts: TextOptions, source_description: dict) -> str:
    """Hash of everything the tokenised arrays depend on: tokenizer identity (name and a digest of
    its vocabulary and specials), length, layout switches and the source documents."""
    payload = {
        "version": CACHE_VERSION,
        "tokenizer": {"name": str(tokenizer.name_or_path), "digest": tokenizer_digest(tokenizer.hf),
                      "pad": tokenizer.pad_id, "bos": tokenizer.bos_id, "eos": tokenizer.eos_id},
        "seq_len": int(seq_len),
        "wrap": opts.wrapped,
        "layout": {"eos_between": opts.eos_between, "block_bos_eos": opts.block_bos_eos,
                   "add_special": opts.add_special, "max_docs": opts.max_docs},
        "source": source_description,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


class TokenBlockDataset(Dataset):
    """Fixed-length rows held as int32/uint8 arrays (memory-mapped when loaded from the cache)."""

    def __init__(self, input_ids: np.ndarray, attention_mask: np.ndarray, pad_id: int):
        if input_ids.shape != attention_mask.shape or input_ids.ndim != 2:
            raise DnadiffError(f"text data: bad array shapes {input_ids.shape} / {attention_mask.shape}")
        self.input_ids, self.attention_mask, self.pad_id = input_ids, attention_mask, pad_id

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": torch.from_numpy(np.asarray(self.input_ids[i], dtype=np.int64)),  # (L,)
            "attention_mask": torch.from_numpy(np.asarray(self.attention_mask[i], dtype=np.int64)),  # (L,)
        }

    def num_real_tokens(self) -> int:
        return int(np.asarray(self.attention_mask, dtype=np.int64).sum())


class StreamingTextDataset(IterableDataset):
    """Tokenises on the fly; DataLoader workers take every n-th document."""

    def __init__(self, source: DocSource, tokenizer, seq_len: int, opts: TextOptions):
        self.source, self.tokenizer, self.seq_len, self.opts = source, tokenizer, seq_len, opts
        self.pad_id = tokenizer.pad_id

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        filt = None if info is None else (lambda i, n=info.num_workers, k=info.id: i % n == k)
        for ids, mask in iter_items(self.source, self.tokenizer, self.seq_len, self.opts, filt):
            yield {"input_ids": torch.tensor(ids, dtype=torch.long),
                   "attention_mask": torch.tensor(mask, dtype=torch.long)}


_MEMO: dict[str, TokenBlockDataset] = {}


def tokenize_split(source: DocSource, tokenizer, seq_len: int, opts: TextOptions) -> TokenBlockDataset:
    """Tokenise one split into arrays, through the on-disk cache when enabled."""
    key = cache_key(tokenizer, seq_len, opts, source.describe())
    if not opts.cache and key in _MEMO:  # no disk cache: tokenise once per process (the DataModule
        return _MEMO[key]                 # asks for each split separately)
    folder = Path(opts.cache_dir or cache_dir("text")) / key
    ids_path, mask_path = folder / "input_ids.npy", folder / "attention_mask.npy"
    if opts.cache and ids_path.is_file() and mask_path.is_file():
        return TokenBlockDataset(np.load(ids_path, mmap_mode="r"), np.load(mask_path, mmap_mode="r"), tokenizer.pad_id)
    ds = _tokenize_uncached(source, tokenizer, seq_len, opts, key, folder)
    if not opts.cache:
        if len(_MEMO) >= 8:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = ds
    return ds


def _tokenize_uncached(source: DocSource, tokenizer, seq_len: int, opts: TextOptions, key: str,
                       folder: Path) -> TokenBlockDataset:
    rows, masks = [], []
    for ids, mask in iter_items(source, tokenizer, seq_len, opts):
        rows.append(np.asarray(ids, dtype=np.int32))
        masks.append(np.asarray(mask, dtype=np.uint8))
    if not rows:
        raise DnadiffError(
            f"text data: no {seq_len}-token item could be made from {source.describe().get('files') or source.hf}"
        )
    ids_arr, mask_arr = np.stack(rows), np.stack(masks)  # (N, L) each
    if opts.cache:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        np.save(tmp / "input_ids.npy", ids_arr)
        np.save(tmp / "attention_mask.npy", mask_arr)
        (tmp / "meta.json").write_text(json.dumps(
            {"key": key, "rows": int(ids_arr.shape[0]), "seq_len": seq_len, "tokenizer": str(tokenizer.name_or_path),
             "source": source.describe(), "wrap": opts.wrapped}, indent=1, default=str))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return TokenBlockDataset(ids_arr, mask_arr, tokenizer.pad_id)


def build_text_datasets(data_cfg, tokenizer) -> dict[str, Dataset]:
    """{"train", "valid", "test"} datasets of fixed-length items for `data_cfg.kind == "text"`."""
    opts = TextOptions.from_mapping(getattr(data_cfg, "text", None))
    seq_len = int(data_cfg.seq_len)
    if tokenizer.pad_id == tokenizer.mask_id:
        raise DnadiffError("tokenizer: pad id equals mask id (pads would be confused with masked tokens)")
    sources = split_sources(opts)
    out: dict[str, Dataset] = {}
    built: dict[int, Dataset] = {}
    for split in SPLITS:
        src = sources[split]
        if id(src) in built:  # test == valid
            out[split] = built[id(src)]
            continue
        if opts.streaming:
            ds: Dataset = StreamingTextDataset(src, tokenizer, seq_len, opts)
        else:
            ds = tokenize_split(src, tokenizer, seq_len, opts)
        built[id(src)] = out[split] = ds
    return out


def wrap_texts(texts: list[str], tokenizer, seq_len: int, eos_between: bool = False,
               block_bos_eos: bool = True) -> TokenBlockDataset:
    """Wrap a list of texts (no cache) — the zero-shot layout: concatenated, no EOS between (app. D.5)."""
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    wrapper = BlockWrapper(seq_len, bos, eos, eos_between, block_bos_eos)
    rows = []
    for ids in _encode_batches(tokenizer, iter(t for t in texts if t.strip())):
        rows.extend(wrapper.add(list(ids)))
    if not rows:
        raise DnadiffError(f"zero-shot data: fewer than {seq_len} tokens in total")
    arr = np.asarray(rows, dtype=np.int32)
    return TokenBlockDataset(arr, np.ones_like(arr, dtype=np.uint8), tokenizer.pad_id)
