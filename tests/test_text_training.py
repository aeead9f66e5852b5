"""Text training through `train()`: map-style and streaming corpora, resume exact in both."""

import json

import pytest
import torch

import dnadiff
from dnadiff.config import RunConfig, load_config
from dnadiff.data.tokenizer_training import train_tokenizer
from dnadiff.training import train
from dnadiff.weights import read_weights

pytestmark = [pytest.mark.training]

WORDS = "the cat sat on a mat while dogs ran far and wide under skies of blue".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 60), ("valid", 8), ("test", 8)):
        with open(root / f"{split}.jsonl", "w") as fh:
            for i in range(n):
                text = " ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(5 + i % 7))
                fh.write(json.dumps({"text": text}) + "\n")
    tok = train_tokenizer([root / "train.jsonl"], root / "tok", "bert-like", 300, min_frequency=1)
    return root, tok


def _cfg(out, corpus, *extra):
    root, tok = corpus
    return load_config(RunConfig, None, [
        "name=t", f"out_dir={out}", "tokenizer.kind=text", f"tokenizer.path={tok}", "model.backbone=dit",
        "model.preset=tiny", "data.kind=text", "data.seq_len=16", "data.text.dataset=local", f"data.text.path={root}",
        "data.text.wrap=false", "data.text.cache=false", "train.batch_size=4", "train.val_every=2",
        "train.ckpt_every=2",
        "train.val_batches=1", "train.progress=false", "train.ema=0.5", *extra])


@pytest.mark.parametrize("streaming", [False, True])
def test_text_training_and_resume(tmp_path, corpus, streaming):
    flag = f"data.text.streaming={str(streaming).lower()}"
    full = train(_cfg(tmp_path / "a", corpus, flag, "train.max_steps=4"))
    train(_cfg(tmp_path / "b", corpus, flag, "train.max_steps=2"))
    resumed = train(_cfg(tmp_path / "b", corpus, flag, "train.max_steps=4"), resume=True)
    wa, wb = read_weights(full.model_dir / "model.safetensors"), read_weights(resumed.model_dir / "model.safetensors")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    model = dnadiff.load(full.model_dir)
    x = model.generate(2, 16, steps=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (2, 16) and not (x == model.tokenizer.pad_id).any()
