"""`data.text.dataset: lm1b | openwebtext` from a local copy (a cluster without internet): the Hub's
parquet layouts and `save_to_disk` folders, read offline, give the same items as the same documents
in local files, with the reference splits (LM1B: test as validation; OWT: the last documents of
train held out, 100,000 by default) and the tokenised-array cache."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")  # the [text] extra (in [test] too)

from dnadiff.data.text import build_text_datasets  # noqa: E402
from dnadiff.data.tokenizer_training import train_tokenizer  # noqa: E402
from dnadiff.errors import DnadiffError  # noqa: E402
from dnadiff.tokenizers import TextTokenizer  # noqa: E402

WORDS = "the cat sat on a mat while dogs ran in the park and birds sang over green hills near rivers".split()
DOCS = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(4 + i % 7)) + " ." for i in range(14)]
TEST_DOCS = [" ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(3 + i % 4)) + " ." for i in range(5)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    corpus = root / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS + TEST_DOCS))
    return TextTokenizer(train_tokenizer([corpus], root / "gpt", "gpt2-like", 300, min_frequency=1))


def cfg(seq_len=12, **text):
    return SimpleNamespace(kind="text", seq_len=seq_len, text=text)


def arrays(ds) -> np.ndarray:
    return np.asarray(ds.input_ids)


def same_items(a: dict, b: dict, splits=("train", "valid", "test")) -> None:
    for split in splits:
        assert np.array_equal(arrays(a[split]), arrays(b[split])), split
        assert np.array_equal(np.asarray(a[split].attention_mask), np.asarray(b[split].attention_mask)), split


def write_jsonl(path, docs):
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return path


def parquet_copy(root, layout: str, splits: dict[str, list[str]]):
    """The Hub's layouts: `plain_text/SPLIT/0000.parquet` (two shards) or `data/SPLIT-0000i-of-00002.parquet`."""
    for split, docs in splits.items():
        halves = [docs[: len(docs) // 2], docs[len(docs) // 2:]]
        for i, half in enumerate(halves):
            if layout == "plain_text":
                path = root / "plain_text" / split / f"{i:04d}.parquet"
            else:
                path = root / "data" / f"{split}-{i:05d}-of-00002.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_dict({"text": half}).to_parquet(str(path))
    return root


@pytest.mark.parametrize("layout", ["plain_text", "data", "save_to_disk"])
def test_openwebtext_local_copy_holds_out_the_last_train_documents(tok, tmp_path, layout):
    copy = tmp_path / "owt"
    if layout == "save_to_disk":
        datasets.Dataset.from_dict({"text": DOCS}).save_to_disk(str(copy))  # one Dataset: the train split
    else:
        parquet_copy(copy, layout, {"train": DOCS})
    common = dict(holdout_docs=4, cache_dir=str(tmp_path / "cache"), hf_cache_dir=str(tmp_path / "hf"))
    got = build_text_datasets(cfg(dataset="openwebtext", path=str(copy), **common), tok)
    local = tmp_path / "local"
    local.mkdir()
    write_jsonl(local / "train.jsonl", DOCS)
    want = build_text_datasets(cfg(dataset="local", path=str(local), wrap=True, **common), tok)
    same_items(got, want)
    assert got["test"] is got["valid"] and len(got["train"]) > len(got["valid"]) > 0
    # the reference split by default: the last 100,000 documents, more than this copy holds
    with pytest.raises(DnadiffError, match="100000 held-out documents but the training text has only 14"):
        build_text_datasets(cfg(dataset="openwebtext", path=str(copy), cache=False, hf_cache_dir=str(tmp_path / "hf")),
                            tok)


@pytest.mark.parametrize("layout", ["plain_text", "save_to_disk"])
def test_lm1b_local_copy_validates_on_test(tok, tmp_path, layout):
    copy = tmp_path / "lm1b"
    if layout == "save_to_disk":
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": DOCS}),
                              "test": datasets.Dataset.from_dict({"text": TEST_DOCS})}).save_to_disk(str(copy))
    else:
        parquet_copy(copy, layout, {"train": DOCS, "test": TEST_DOCS})
    common = dict(cache_dir=str(tmp_path / "cache"), hf_cache_dir=str(tmp_path / "hf"))
    got = build_text_datasets(cfg(dataset="lm1b", path=str(copy), **common), tok)
    train = write_jsonl(tmp_path / "train.jsonl", DOCS)
    test = write_jsonl(tmp_path / "test.jsonl", TEST_DOCS)
    want = build_text_datasets(cfg(train=str(train), valid=str(test), test=str(test), **common), tok)
    same_items(got, want)
    assert len(got["train"]) == len(DOCS) and len(got["valid"]) == len(TEST_DOCS)  # one sentence per item


def test_local_copy_cache_and_streaming(tok, tmp_path):
    copy = parquet_copy(tmp_path / "owt", "plain_text", {"train": DOCS})
    cache = tmp_path / "cache"
    options = dict(dataset="openwebtext", path=str(copy), holdout_docs=4, cache_dir=str(cache),
                   hf_cache_dir=str(tmp_path / "hf"))
    first = build_text_datasets(cfg(**options), tok)
    second = build_text_datasets(cfg(**options), tok)
    assert isinstance(second["train"].input_ids, np.memmap)  # read back from the cache
    same_items(first, second)
    assert len(list(cache.iterdir())) == 2  # train and valid (test is valid)
    streamed = build_text_datasets(cfg(streaming=True, **options), tok)
    rows = np.stack([r["input_ids"].numpy() for r in streamed["train"]])
    assert np.array_equal(rows, arrays(first["train"]))
    # a changed copy is tokenised anew, not served from the cache
    datasets.Dataset.from_dict({"text": DOCS[3:7][::-1]}).to_parquet(
        str(copy / "plain_text" / "train" / "0000.parquet"))
    changed = build_text_datasets(cfg(**options), tok)
    assert len(list(cache.iterdir())) == 4 and not np.array_equal(arrays(changed["train"]), arrays(first["train"]))


def test_local_copy_errors_name_the_path(tok, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DnadiffError, match=r"data.text.path: .*empty: no parquet files of the 'train' split"):
        build_text_datasets(cfg(dataset="openwebtext", path=str(empty), cache=False), tok)
    only_train = tmp_path / "one"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": DOCS})}).save_to_disk(str(only_train))
    with pytest.raises(DnadiffError, match=r"no 'test' split in this copy of lm1b \(it has train\)"):
        build_text_datasets(cfg(dataset="lm1b", path=str(only_train), cache=False), tok)
    with pytest.raises(DnadiffError, match="is not a folder"):
        build_text_datasets(cfg(dataset="lm1b", path=str(tmp_path / "nope"), cache=False), tok)
