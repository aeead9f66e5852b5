"""Train a small local text tokenizer (offline) and save it as a Hugging Face folder.

The paper's text runs use `bert-base-uncased` (LM1B) and the GPT-2 tokenizer (OWT). Offline, on a
small corpus such as `../shared/data/text/fortunes`, we train look-alikes with the `tokenizers`
package so that the whole pipeline runs without a download:

    bert-like:  lower-casing BERT normaliser, BERT pre-tokeniser, WordPiece (`##` continuation),
                specials [PAD] [UNK] [CLS] [SEP] [MASK]; encoding with special tokens gives
                [CLS] ... [SEP] like `bert-base-uncased`.
    gpt2-like:  byte-level BPE (no unknown tokens), one special `<|endoftext|>` that is BOS, EOS
                and UNK as in GPT-2; no mask and no pad (TextTokenizer adds [MASK] and a dedicated
                [PAD] when it loads the folder, so pad != mask).

    path = train_tokenizer(["train.jsonl"], "tok/bert_like", kind="bert-like", vocab_size=4096)
    tok = TextTokenizer(path)

The byte-level BPE is deterministic. The WordPiece trainer breaks count ties differently from run
to run; its ids are renumbered canonically (on the 2.4 MB fortunes corpus at 2,048 pieces that
gives identical tokenizers run after run; on a tiny corpus the learnt pieces themselves may differ).
An existing folder trained with the same settings and corpus
is reused (its `dnadiff_tokenizer.json` records what built it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from dnadiff.data.documents import iter_documents
from dnadiff.data.file_lock import FileLock
from dnadiff.errors import DnadiffError

KINDS = ("bert-like", "gpt2-like")
GPT2_EOS = "<|endoftext|>"
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
STAMP = "dnadiff_tokenizer.json"


def iter_corpus_texts(paths: Sequence[str | os.PathLike], field: str = "text") -> Iterator[str]:
    """Texts of local files: `.jsonl` (one JSON object per line, text under `field`) or plain
    text (one text per non-empty line). A missing file: iter_documents names it."""
    for path in paths:
        yield from iter_documents(path, field)


def _corpus_fingerprint(paths: Sequence[str | os.PathLike]) -> list[dict]:
    out = []
    for p in paths:
        st = os.stat(p)
        out.append({"path": os.path.abspath(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def _build_bert_like(texts: Iterable[str], vocab_size: int, min_frequency: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=BERT_SPECIALS,
        continuing_subword_prefix="##",
        show_progress=False,  # the Rust trainer's bars: off a terminal, a blank stdout line per stage
    )
    tok.train_from_iterator(texts, trainer)
    # The trainer's id order among equal-count pieces varies from run to run (the piece set does
    # not): renumber canonically so that the same corpus always gives the same ids.
    vocab = tok.get_vocab()
    rest = sorted((t for t in vocab if t not in BERT_SPECIALS), key=lambda t: (t.startswith("##"), len(t), t))
    tok.model = models.WordPiece(vocab={t: i for i, t in enumerate(BERT_SPECIALS + rest)}, unk_token="[UNK]",
                                 max_input_chars_per_word=100, continuing_subword_prefix="##")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512,
    )


def _build_gpt2_like(texts: Iterable[str], vocab_size: int, min_frequency: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[GPT2_EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: no unknown tokens
        show_progress=False,  # the Rust trainer's bars: off a terminal, a blank stdout line per stage
    )
    tok.train_from_iterator(texts, trainer)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=GPT2_EOS, eos_token=GPT2_EOS, unk_token=GPT2_EOS, model_max_length=1024,
    )


def train_tokenizer(
    corpus: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    kind: str = "bert-like",
    vocab_size: int = 4096,
    min_frequency: int = 2,
    field: str = "text",
    overwrite: bool = False,
) -> str:
    """Train a `kind` tokenizer on the corpus files and save it to `out_dir`; returns the path.

    An existing folder whose stamp matches (same kind, vocab size, corpus files) is reused.
    """
    if kind not in KINDS:
        raise DnadiffError(f"tokenizer kind {kind!r}: choose one of {', '.join(KINDS)}")
    if vocab_size < 300:
        raise DnadiffError(f"tokenizer vocab_size {vocab_size}: must be at least 300")
    corpus = [str(p) for p in corpus]
    if not corpus:
        raise DnadiffError("train_tokenizer: no corpus files given")
    for p in corpus:
        if not os.path.isfile(p):
            raise DnadiffError(f"{p}: corpus file not found")
    stamp = {
        "kind": kind, "vocab_size": vocab_size, "min_frequency": min_frequency, "field": field,
        "corpus": _corpus_fingerprint(corpus),
    }
    out = Path(out_dir)
    stamp_path = out / STAMP
    if not overwrite and stamp_path.is_file():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                return str(out)
        except json.JSONDecodeError:
            pass
    texts = iter_corpus_texts(corpus, field)
    build = _build_bert_like if kind == "bert-like" else _build_gpt2_like
    hf = build(texts, vocab_size, min_frequency)
    out.mkdir(parents=True, exist_ok=True)
    stamp_path.unlink(missing_ok=True)  # files being rewritten: not complete until the new stamp lands
    hf.save_pretrained(str(out))
    from dnadiff.utils import atomic_write  # local: tests monkeypatch dnadiff.utils.atomic_write

    atomic_write(stamp_path, json.dumps(stamp, indent=1))  # written last: marks a complete tokenizer
    return str(out)


def ensure_tokenizer(cfg) -> None:
    """First use of a run config whose `tokenizer.train` is set: build `tokenizer.path` from the
    local training text of `data.text` (the same files the run trains on), then reuse it.

    A lock file beside the folder makes a second run that starts meanwhile wait for the first one
    and then reuse its tokenizer instead of training (and writing) the same folder at once."""
    tcfg = cfg.tokenizer
    if tcfg.kind != "text" or not tcfg.train:
        return
    if not tcfg.path:
        raise DnadiffError("tokenizer.path: name the folder that tokenizer.train builds "
                           "(e.g. runs/tokenizers/bert-like)")
    out = Path(tcfg.path)
    if out.is_dir() and not (out / STAMP).is_file() and any(out.iterdir()):
        return  # a tokenizer the user made: used as it is
    from dnadiff.data.text_sources import TextOptions, split_sources

    opts = TextOptions.from_mapping(cfg.data.text)
    if opts.dataset != "local":
        raise DnadiffError(f"tokenizer.train: building a tokenizer needs local text (data.text.dataset is "
                           f"{opts.dataset!r}); give tokenizer.path of an existing tokenizer")
    files = split_sources(opts)["train"].files
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(out.parent / f".{out.name}.lock"):  # waits for a run building it now
        fresh = not (out / STAMP).is_file()
        path = train_tokenizer(files, out, kind=tcfg.train, vocab_size=tcfg.train_vocab_size, field=opts.field)
    if fresh:
        import sys

        print(f"built a {tcfg.train} tokenizer ({tcfg.train_vocab_size} pieces) from {', '.join(files)} into {path}",
              file=sys.stderr)
