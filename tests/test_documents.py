"""dnadiff/data/documents.py: the one reader of local text files (training text, tokenizer
training, zero-shot sets) and the one FASTA writer (data/records.py)."""

import json

import pytest

from dnadiff.data import format_fasta, iter_documents
from dnadiff.errors import DnadiffError


def test_units_of_a_plain_text_file(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("one\ntwo\n\nthree\n  \nfour\n")
    assert list(iter_documents(f)) == ["one", "two", "three", "four"]
    assert list(iter_documents(f, unit="paragraph")) == ["one\ntwo", "three", "four"]
    assert list(iter_documents(f, unit="record")) == ["one\n", "two\n", "\n", "three\n", "  \n", "four\n"]


def test_jsonl_field_and_errors_name_file_and_line(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": "a b", "x": 1}) + "\n\n" + json.dumps({"article": "c"}) + "\n")
    with pytest.raises(DnadiffError, match=r"c.jsonl:3: no 'text' field \(set data.text.field\)"):
        list(iter_documents(f, field_hint="set data.text.field"))
    g = tmp_path / "g.jsonl.txt"  # also JSONL
    g.write_text(json.dumps({"article": "c"}) + "\n{oops\n")
    assert next(iter_documents(g, field="article")) == "c"
    with pytest.raises(DnadiffError, match=r"g.jsonl.txt:2: not valid JSON"):
        list(iter_documents(g, field="article"))
    with pytest.raises(DnadiffError, match="text file not found"):
        list(iter_documents(tmp_path / "nope.txt"))
    with pytest.raises(DnadiffError, match="text unit 'word'"):
        list(iter_documents(f, unit="word"))


def test_the_three_text_readers_agree(tmp_path):
    """Training text, tokenizer training and zero-shot read the same documents from the same file."""
    from dnadiff.data.tokenizer_training import iter_corpus_texts
    from dnadiff.eval.zeroshot import ZERO_SHOT_SETS, read_set

    f = tmp_path / "test.jsonl"
    docs = ["first doc", "second  doc", "third"]
    f.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    assert list(iter_corpus_texts([f])) == docs
    spec = ZERO_SHOT_SETS["lm1b"]
    assert len(read_set(f, spec)) == 3


def test_fasta_writer_wraps_and_splits_id_from_description():
    text = format_fasta([("s1 tiny model steps=4", "A" * 61), ("s2", "ACGT")], line_width=60)
    assert text == ">s1 tiny model steps=4\n" + "A" * 60 + "\nA\n>s2\nACGT\n"
