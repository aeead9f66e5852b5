"""Generative perplexity under a tiny random GPT-2 equals a direct computation; first-EOS masking."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from dnadiff.data.tokenizer_training import train_tokenizer
from dnadiff.errors import DnadiffError
from dnadiff.eval.genppl import (
    decode_samples,
    first_eos_mask,
    generative_perplexity,
    load_scorer,
    unigram_entropy,
)
from dnadiff.tokenizers import TextTokenizer

TEXTS = ["the cat sat on the mat and looked at the dog", "a dog ran in the park", "hello world, the end"]


@pytest.fixture(scope="module")
def scorer_dir(tmp_path_factory):
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("scorer")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 3) + "\n")
    train_tokenizer([corpus], root, "gpt2-like", vocab_size=300, min_frequency=1)
    tok = AutoTokenizer.from_pretrained(str(root))
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                     bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(str(root))
    return root


def _direct_nll(model, ids, bos):
    """Σ -log p(x_i | BOS, x_<i) with one forward pass, no batching."""
    seq = torch.tensor([[bos] + ids])
    with torch.no_grad():
        logp = F.log_softmax(model(seq).logits[0, :-1].float(), -1)  # (n, V)
    return -logp[torch.arange(len(ids)), torch.tensor(ids)]  # (n,)


def test_first_eos_mask_keeps_up_to_first_eos():
    tokens = torch.tensor([[5, 6, 0, 7, 0, 8], [5, 6, 7, 8, 9, 9], [0, 1, 2, 3, 4, 5]])
    am = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1] * 6])
    got = first_eos_mask(tokens, eos_id=0, attention_mask=am).long().tolist()
    assert got == [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0]]
    # the reference's mask (tokens != eos) would have scored 7 and 8 after the first EOS
    assert (tokens[0] != 0).long().tolist() != got[0]


def test_unigram_entropy():
    assert unigram_entropy([1, 1, 1]) == 0.0
    assert unigram_entropy([1, 2, 3, 4]) == pytest.approx(math.log(4))
    assert unigram_entropy([]) == 0.0


def test_genppl_equals_direct_computation(scorer_dir):
    model, tok = load_scorer(str(scorer_dir))
    eos = tok.eos_token_id
    texts = [TEXTS[0], TEXTS[1] + tok.eos_token + " junk after the end of the sample", TEXTS[2]]
    res = generative_perplexity(texts, model, tokenizer=tok, batch_size=2)
    json.dumps(res)  # JSON-able
    assert eos in tok(texts[1], add_special_tokens=False)["input_ids"]
    total, count = 0.0, 0
    for text, ps in zip(texts, res["per_sample"]):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if eos in ids:  # score up to and including the first EOS only
            ids = ids[: ids.index(eos) + 1]
        nll = _direct_nll(model, ids, eos)
        assert ps["tokens"] == len(ids)
        assert ps["nll"] == pytest.approx(nll.sum().item(), rel=1e-5)
        total += nll.sum().item()
        count += len(ids)
    assert res["num_tokens"] == count
    assert res["gen_ppl"] == pytest.approx(math.exp(total / count), rel=1e-5)
    # without the first-EOS stop every token is scored, EOS included
    ids = tok(texts[1], add_special_tokens=False)["input_ids"]
    every = generative_perplexity(texts[1:2], model, tokenizer=tok, stop_at_first_eos=False)
    assert every["num_tokens"] == len(ids) > res["per_sample"][1]["tokens"]
    assert every["per_sample"][0]["nll"] == pytest.approx(_direct_nll(model, ids, eos).sum().item(), rel=1e-5)
    # batching (padding) does not change anything
    single = generative_perplexity(texts, str(scorer_dir), batch_size=1)
    assert single["gen_ppl"] == pytest.approx(res["gen_ppl"], rel=1e-5)


def test_long_samples_are_scored_in_sliding_windows_with_context(scorer_dir):
    """Windows of 8 every 4 tokens: each token scored once, after the first window with >= 4 tokens
    of context (before: windows overlapped by one token, so a token could see only 1 token)."""
    model, tok = load_scorer(str(scorer_dir))
    eos = tok.eos_token_id
    text = " ".join(TEXTS)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > 16
    res = generative_perplexity([text], model, tokenizer=tok, max_length=8)
    assert res["window"] == 8 and res["stride"] == 4
    full = [eos] + ids
    per_token = [None] * len(full)
    # token i: the window starting at the largest multiple of 4 with i in its last 4 (or the first)
    for i in range(1, len(full)):
        start = 0 if i < 8 else 4 * ((i - 8) // 4 + 1)
        win = full[start:i + 1]
        assert len(win) >= (i + 1 if i < 8 else 5)  # at least stride tokens of context
        per_token[i] = _direct_nll(model, win[1:], win[0])[-1].item()
    assert res["num_tokens"] == len(ids)
    assert res["per_sample"][0]["nll"] == pytest.approx(sum(per_token[1:]), rel=1e-5)
    with pytest.raises(DnadiffError, match="stride"):
        generative_perplexity([text], model, tokenizer=tok, max_length=8, stride=5)
    one = generative_perplexity([text], model, tokenizer=tok, max_length=8, stride=1)
    assert one["num_tokens"] == len(ids)


def test_decode_samples_maps_generator_eos(tmp_path):
    path = train_tokenizer_small(tmp_path)
    gen = TextTokenizer(path)
    ids = [gen.bos_id] + gen.encode("the cat sat") + [gen.eos_id] + gen.encode("a dog") + [gen.pad_id, gen.mask_id]
    (text,) = decode_samples(torch.tensor([ids]), gen, eos_text="<|endoftext|>")
    assert text == "the cat sat<|endoftext|>a dog"


def train_tokenizer_small(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    return train_tokenizer([corpus], tmp_path / "bert", "bert-like", vocab_size=300, min_frequency=1)


def test_missing_scorer_is_a_clean_error(tmp_path):
    with pytest.raises(DnadiffError, match="not found locally"):
        generative_perplexity(["hello"], str(tmp_path / "missing"))


def test_whole_samples_are_tokenised_without_the_max_length_note(scorer_dir):
    """A sample longer than the scorer tokenizer's model_max_length is scored in windows on purpose:
    transformers' "Token indices sequence length is longer than the specified maximum" is not raised."""
    model, tok = load_scorer(str(scorer_dir))
    tok.model_max_length = 8
    text = " ".join(TEXTS)
    assert len(tok(text, add_special_tokens=False, verbose=False)["input_ids"]) > 8
    generative_perplexity([text], model, tokenizer=tok, max_length=8)
    assert not tok.deprecation_warnings.get("sequence-length-is-longer-than-the-specified-maximum")
