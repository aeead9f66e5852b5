"""Text data: LM1B pad layout, OWT wrap layout, cache keys, hold-out, detokenizers, tokenizer training."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dnadiff.data.detokenizers import get_detokenizer
from dnadiff.data.text import (
    TextOptions,
    build_text_datasets,
    cache_key,
    split_sources,
    wrap_texts,
)
from dnadiff.data.tokenizer_training import train_tokenizer
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import TextTokenizer

SENTENCES = [
    "the cat sat on the mat .",
    "a dog ran in the park and the cat sat down .",
    "it was a very long sentence with many many words that goes on and on and on beyond the limit .",
    "short one .",
    "the end of the story is near .",
    "dogs and cats are friends .",
] * 4


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for split, rows in (("train", SENTENCES), ("valid", SENTENCES[:4]), ("test", SENTENCES[2:6])):
        with open(root / f"{split}.jsonl", "w") as fh:
            for r in rows:
                fh.write(json.dumps({"text": r}) + "\n")
    return root


@pytest.fixture(scope="module")
def toks(tmp_path_factory, corpus):
    root = tmp_path_factory.mktemp("toks")
    bert = TextTokenizer(train_tokenizer([corpus / "train.jsonl"], root / "bert", "bert-like", 300, min_frequency=1))
    gpt = TextTokenizer(train_tokenizer([corpus / "train.jsonl"], root / "gpt", "gpt2-like", 300, min_frequency=1))
    gpt_big = TextTokenizer(train_tokenizer([corpus / "train.jsonl"], root / "gpt_big", "gpt2-like", 320,
                                            min_frequency=1))
    return SimpleNamespace(bert=bert, gpt=gpt, gpt_big=gpt_big)


def _cfg(seq_len, **text):
    return SimpleNamespace(kind="text", seq_len=seq_len, text=text)


def test_trained_tokenizers_have_distinct_pad_and_mask(toks):
    for tok in (toks.bert, toks.gpt):
        assert tok.pad_id != tok.mask_id
        assert tok.bos_id is not None and tok.eos_id is not None
    # gpt2-like: one special for BOS and EOS, as GPT-2; mask and pad appended by TextTokenizer
    assert toks.gpt.bos_id == toks.gpt.eos_id
    assert {toks.gpt.mask_id, toks.gpt.pad_id} == {toks.gpt.vocab_size - 2, toks.gpt.vocab_size - 1}
    assert toks.bert.decode(toks.bert.encode("the cat sat")) == "the cat sat"


def test_lm1b_pad_layout_exact(toks, corpus, tmp_path):
    L = 12
    tok = toks.bert
    ds = build_text_datasets(_cfg(L, path=str(corpus), wrap=False, cache_dir=str(tmp_path)), tok)
    train = ds["train"]
    assert len(train) == len(SENTENCES)
    for i, sent in enumerate(SENTENCES[:6]):
        item = train[i]
        ids, mask = item["input_ids"], item["attention_mask"]
        assert ids.dtype == torch.long and mask.dtype == torch.long and ids.shape == (L,)
        words = tok.encode(sent)
        n = min(len(words), L - 2)
        expect = [tok.bos_id] + words[:n] + [tok.eos_id] + [tok.pad_id] * (L - n - 2)
        assert ids.tolist() == expect
        assert mask.tolist() == [1] * (n + 2) + [0] * (L - n - 2)
        assert ids[0] == tok.bos_id and ids[n + 1] == tok.eos_id  # [CLS] first, [SEP] last real token
        assert (ids == tok.mask_id).sum() == 0
    long = train[2]  # truncated: [SEP] sits at the last position, no pads
    assert long["input_ids"][-1] == tok.eos_id and long["attention_mask"].all()
    assert len(ds["valid"]) == 4 and len(ds["test"]) == 4


def test_owt_wrap_layout_exact(toks, corpus, tmp_path):
    L = 16
    tok = toks.gpt
    ds = build_text_datasets(_cfg(L, path=str(corpus), wrap=True, cache_dir=str(tmp_path)), tok)
    stream = []
    for s in SENTENCES:
        stream += tok.encode(s) + [tok.eos_id]  # EOS after every document
    body = L - 2
    n_blocks = len(stream) // body  # the remainder is dropped
    train = ds["train"]
    assert len(train) == n_blocks
    for b in range(n_blocks):
        item = train[b]
        assert item["input_ids"].tolist() == [tok.bos_id] + stream[b * body:(b + 1) * body] + [tok.eos_id]
        assert item["attention_mask"].tolist() == [1] * L
        assert (item["input_ids"] == tok.pad_id).sum() == 0


def test_zero_shot_wrap_has_no_eos_between(toks):
    tok = toks.gpt
    texts = SENTENCES[:6]
    ds = wrap_texts(texts, tok, 10, eos_between=False)
    stream = sum((tok.encode(t) for t in texts), [])
    rows = [ds[i]["input_ids"].tolist() for i in range(len(ds))]
    assert len(rows) == len(stream) // 8
    assert rows == [[tok.bos_id] + stream[i * 8:(i + 1) * 8] + [tok.eos_id] for i in range(len(rows))]


def test_pads_are_never_scored(toks, corpus, tmp_path):
    from dnadiff.diffusion import build_objective, build_schedule

    tok = toks.bert
    ds = build_text_datasets(_cfg(12, path=str(corpus), cache_dir=str(tmp_path)), tok)["train"]
    batch = [ds[i] for i in range(6)]
    x0 = torch.stack([b["input_ids"] for b in batch])
    am = torch.stack([b["attention_mask"] for b in batch])
    obj = build_objective("mdlm", schedule=build_schedule("loglinear"), mask_id=tok.mask_id, vocab_size=tok.vocab_size)
    torch.manual_seed(0)
    base_logits = torch.randn(1, 12, tok.vocab_size)

    def denoiser(poison):
        def f(x_t, t):
            logits = base_logits.expand(x_t.shape[0], -1, -1).clone()
            if poison:
                logits[am == 0] = float("nan")  # anything at a pad must not reach the loss
            return logits
        return f

    outs = []
    for poison in (False, True):
        g = torch.Generator().manual_seed(3)
        outs.append(obj.loss(denoiser(poison), x0, am, generator=g))
    assert torch.isfinite(outs[1].loss)
    assert torch.equal(outs[0].nll, outs[1].nll)
    assert outs[0].num_tokens.tolist() == am.sum(1).float().tolist()


def test_cache_keys_change_with_tokenizer_and_length(toks, corpus, tmp_path):
    opts = TextOptions.from_mapping({"path": str(corpus)})
    src = split_sources(opts)["train"].describe()
    k = cache_key(toks.gpt, 16, opts, src)
    assert k == cache_key(toks.gpt, 16, opts, src)
    assert k != cache_key(toks.gpt, 32, opts, src)  # length
    assert k != cache_key(toks.gpt_big, 16, opts, src)  # same kind and name pattern, other vocabulary
    assert k != cache_key(toks.bert, 16, opts, src)
    assert k != cache_key(toks.gpt, 16, TextOptions.from_mapping({"path": str(corpus), "wrap": True}), src)
    # the cache is used: a second build reads the same arrays from disk (memory-mapped)
    cfg = _cfg(16, path=str(corpus), wrap=True, cache_dir=str(tmp_path))
    first = build_text_datasets(cfg, toks.gpt)["train"]
    second = build_text_datasets(cfg, toks.gpt)["train"]
    assert isinstance(second.input_ids, np.memmap)
    assert np.array_equal(np.asarray(first.input_ids), np.asarray(second.input_ids))
    assert len(list(tmp_path.iterdir())) == 3  # train, valid, test each under their own key


def test_holdout_tail_documents_and_streaming(toks, corpus, tmp_path):
    only_train = tmp_path / "only"
    only_train.mkdir()
    (only_train / "train.txt").write_text("\n".join(SENTENCES[:10]) + "\n")
    cfg = _cfg(12, path=str(only_train), holdout_docs=3, cache=False)
    ds = build_text_datasets(cfg, toks.bert)
    assert len(ds["train"]) == 7 and len(ds["valid"]) == 3 and ds["test"] is ds["valid"]
    assert ds["valid"][0]["input_ids"][1:3].tolist() == toks.bert.encode(SENTENCES[7])[:2]
    streamed = build_text_datasets(_cfg(12, path=str(only_train), holdout_docs=3, streaming=True), toks.bert)
    rows = [r["input_ids"].tolist() for r in streamed["train"]]
    assert rows == [ds["train"][i]["input_ids"].tolist() for i in range(7)]
    with pytest.raises(DnadiffError, match="holdout_docs"):
        build_text_datasets(_cfg(12, path=str(only_train), holdout_docs=10, cache=False), toks.bert)


def test_bad_options_are_clean_errors(toks, corpus):
    with pytest.raises(DnadiffError, match="data.text.colour"):
        build_text_datasets(_cfg(12, path=str(corpus), colour=1), toks.bert)
    with pytest.raises(DnadiffError, match="data.text.path"):
        build_text_datasets(_cfg(12, path=str(corpus / "nope")), toks.bert)
    with pytest.raises(DnadiffError, match="lm1b"):  # no `datasets` package / no local copy: a clean error
        build_text_datasets(_cfg(12, dataset="lm1b", cache=False), toks.bert)
    with pytest.raises(DnadiffError, match="detokenizer"):
        build_text_datasets(_cfg(12, path=str(corpus), detokenizer="klingon"), toks.bert)


def test_detokenizers():
    assert get_detokenizer("ptb")("the company 's N N shares do n't fall") == "the company's 1 1 shares don't fall"
    assert get_detokenizer("wikitext")("a 3 @.@ 5 m @-@ long ( big ) wall , he said . = = Notes = =") == \
        "a 3.5 m-long (big) wall, he said. == Notes =="
    assert get_detokenizer("lm1b")('He said " yes " , then left .') == 'He said "yes", then left.'
    assert get_detokenizer("lambada")("  \u201chi\u201d she said ") == '\n"hi" she said'
    assert get_detokenizer(None) is None


def test_zero_shot_eval_local_sets_and_skips(toks, tmp_path):
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, from_dict
    from dnadiff.eval.zeroshot import zero_shot_eval
    from dnadiff.model import DiffusionModel

    (tmp_path / "ptb").mkdir()
    (tmp_path / "ptb" / "valid.txt").write_text("".join(f" {s} N \n" for s in SENTENCES))
    (tmp_path / "lambada").mkdir()
    (tmp_path / "lambada" / "test.jsonl").write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES))
    tok = toks.gpt
    cfg = from_dict(RunConfig, {"tokenizer": {"kind": "text"}, "model": {"backbone": "dit", "preset": "tiny"},
                                "objective": {"name": "mdlm"}, "data": {"kind": "text", "seq_len": 32}})
    torch.manual_seed(0)
    model = DiffusionModel(cfg, build_backbone("dit", "tiny", vocab_size=tok.vocab_size).eval(), tok)
    res = zero_shot_eval(model, tmp_path, seq_len=32, batch_size=4, log=None)
    assert set(res) == {"ptb", "wikitext2", "wikitext103", "lm1b", "lambada", "ag_news", "pubmed", "arxiv"}
    assert "not present locally" in res["wikitext2"]["skipped"]
    # PTB: detokenised (" N " -> " 1 "), concatenated without EOS, blocks of 30 + [BOS]/[EOS]
    stream = sum((tok.encode(get_detokenizer("ptb")(f" {s} N \n")) for s in SENTENCES), [])
    assert res["ptb"]["blocks"] == len(stream) // 30 and res["ptb"]["tokens"] == 32 * (len(stream) // 30)
    blocks = wrap_texts([get_detokenizer("ptb")(f" {s} N \n") for s in SENTENCES], tok, 32, eos_between=False)
    g = torch.Generator().manual_seed(0)
    tot = n = 0.0
    for start in range(0, len(blocks), 4):
        items = [blocks[i] for i in range(start, min(len(blocks), start + 4))]
        out = model.nll(torch.stack([it["input_ids"] for it in items]),
                        torch.stack([it["attention_mask"] for it in items]),
                        generator=g)
        tot, n = tot + out.nll.sum().item(), n + out.num_tokens.sum().item()
    assert res["ptb"]["ppl"] == pytest.approx(float(np.exp(tot / n)), rel=1e-6)
    assert res["lambada"]["ppl"] > 1.0


def test_tokenizer_training_ids(corpus, tmp_path):
    from transformers import AutoTokenizer

    from dnadiff.data.tokenizer_training import BERT_SPECIALS
    from dnadiff.tokenizers.text import tokenizer_digest

    # byte-level BPE: the same corpus gives the same tokenizer
    digests = {tokenizer_digest(AutoTokenizer.from_pretrained(
        train_tokenizer([corpus / "train.jsonl"], tmp_path / f"gpt{i}", "gpt2-like", 300, min_frequency=1)))
        for i in range(3)}
    assert len(digests) == 1
    # WordPiece: the trainer breaks count ties differently from run to run, so the ids are
    # renumbered canonically: specials first, then (continuation?, length, text)
    vocab = AutoTokenizer.from_pretrained(
        train_tokenizer([corpus / "train.jsonl"], tmp_path / "bert", "bert-like", 300, min_frequency=1)).get_vocab()
    order = sorted(vocab, key=vocab.get)
    assert order[: len(BERT_SPECIALS)] == BERT_SPECIALS
    rest = order[len(BERT_SPECIALS):]
    assert rest == sorted(rest, key=lambda t: (t.startswith("##"), len(t), t))
