"""A small text corpus of a few words and a word-piece tokenizer trained on it, in one folder: what the text
block-diffusion tests train on (train/valid/test.jsonl, rows of 3 to 6 words), with the overrides that make
a text DiT small enough to train in seconds on one core."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = "the cat sat on a mat while dogs ran far and wide under skies of blue".split()


def word_corpus(folder: Path) -> Path:
    """Writes folder/{train,valid,test}.jsonl (60, 8, 8 rows) and returns the tokenizer trained on train."""
    from dnadiff.data.tokenizer_training import train_tokenizer

    for split, n in (("train", 60), ("valid", 8), ("test", 8)):
        with open(folder / f"{split}.jsonl", "w") as fh:
            for i in range(n):
                fh.write(json.dumps({"text": " ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(3 + i % 4))})
                         + "\n")
    return train_tokenizer([folder / "train.jsonl"], folder / "tok", "bert-like", 300, min_frequency=1)


def tiny_text_dit(folder: Path, tok: Path) -> list[str]:
    """Overrides of a text/cpu_fortunes_* config: a 2-block DiT of width 32 on 16-token windows of `folder`."""
    return [f"tokenizer.path={tok}", "tokenizer.train=null", "model.overrides.hidden_size=32",
            "model.overrides.n_blocks=2", "model.overrides.n_heads=2", "model.overrides.adaln_dim=16",
            "data.seq_len=16", f"data.text.path={folder}", "data.text.cache=false", "train.batch_size=8",
            "train.lr=3e-3", "train.val_every=100", "train.val_batches=1", "train.progress=false",
            "train.warmup_steps=2"]
