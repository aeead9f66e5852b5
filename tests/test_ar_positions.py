"""AR and diffusion score the same bases.

N is an input but never a scored base (attention_mask 0). AR used to score target i only when
position i-1 was real too, so every base right after an N dropped out of its bits/base while
MDLM scored it. Now a base is scored whatever its context, and with the [BOS] context (the default
for DNA models) AR scores every real base, exactly the set the diffusion objectives score.
"""

import math

import pytest
import torch
import yaml

from dnadiff.backbones import build_backbone
from dnadiff.checkpoint import load
from dnadiff.config import RunConfig, from_dict
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from helpers.legacy_layout import to_legacy_layout

TOK = DNATokenizer()
V = TOK.vocab_size
BOS = TOK.bos_id


def _bigram_table(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, V, generator=g, dtype=torch.float64).log_softmax(-1)  # (prev, next)


def _bigram(table):
    """An exact causal model: logits at position i depend only on input token i (predict i+1)."""
    def f(x, t):
        return table[x]  # (B, L, V)
    return f


def _batch():
    seqs = ["ACNGT", "GGTAC", "NACGA", "TCA"]
    x0 = torch.full((4, 5), TOK.pad_id)
    real = torch.zeros(4, 5, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids = torch.tensor(TOK.encode(s))
        x0[b, :len(ids)] = ids
        real[b, :len(ids)] = (ids != TOK.n_id).long()  # data's mask_n: N is input, not scored
    return x0, real


def test_bos_ar_scores_every_real_base_exactly():
    table = _bigram_table()
    x0, real = _batch()
    out = build_objective("ar", bos_id=BOS).loss(_bigram(table), x0, real)
    expected = []
    for b in range(4):
        prev, nll = BOS, 0.0
        for i in range(5):
            if real[b, i]:
                nll -= float(table[prev, x0[b, i]])
            prev = int(x0[b, i])  # an N is still the context of the next base
        expected.append(nll)
    torch.testing.assert_close(out.nll, torch.tensor(expected, dtype=out.nll.dtype))
    assert out.num_tokens.tolist() == real.sum(1).float().tolist() == [4.0, 5.0, 4.0, 3.0]


def test_ar_and_mdlm_count_the_same_bases():
    x0, real = _batch()
    ar = build_objective("ar", bos_id=BOS).loss(_bigram(_bigram_table()), x0, real)
    mdlm = build_objective("mdlm", schedule=build_schedule("loglinear"), mask_id=TOK.mask_id, vocab_size=V)
    diff = mdlm.loss(lambda x, t: torch.zeros(*x.shape, V), x0, real)
    assert torch.equal(ar.num_tokens, diff.num_tokens)


def test_without_bos_the_base_after_an_n_is_scored():
    # no [BOS]: each row's first real base is context; every later real base is scored,
    # including the one right after an N (conditioned on the N)
    table = _bigram_table()
    x0, real = _batch()
    out = build_objective("ar").loss(_bigram(table), x0, real)
    row0 = -(table[TOK.a_id, TOK.c_id] + table[TOK.n_id, TOK.g_id] + table[TOK.g_id, TOK.t_id])
    torch.testing.assert_close(out.nll[0], row0.to(out.nll.dtype))
    # row 2 "NACGA": A (first real base) is context, C G A are scored
    assert out.num_tokens.tolist() == [3.0, 4.0, 3.0, 2.0]


def _dir(tmp_path, name, options=None):
    cfg = from_dict(RunConfig, {"model": {"backbone": "mamba", "preset": "tiny"},
                                "objective": {"name": "ar", "options": options or {}}})
    bb = build_backbone("mamba", preset="tiny", vocab_size=V)
    save_model_dir(tmp_path / name, cfg, bb, TOK)
    return tmp_path / name


def test_new_dna_ar_models_use_bos_and_old_dirs_keep_theirs(tmp_path):
    new = _dir(tmp_path, "new")
    assert yaml.safe_load((new / "config.json").read_text())["objective"]["options"]["bos_id"] == BOS  # JSON is YAML
    assert load(new).objective.bos_id == BOS
    old = _dir(tmp_path, "old")
    f = to_legacy_layout(old)  # written before the option existed: the config.yaml layout
    data = yaml.safe_load(f.read_text())
    del data["objective"]["options"]["bos_id"]  # written before the option existed
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load(old).objective.bos_id is None
    off = _dir(tmp_path, "off", {"bos_id": None})
    assert load(off).objective.bos_id is None


def test_ar_sampler_draws_the_first_base_after_bos():
    from dnadiff.samplers.autoregressive import AutoregressiveSampler

    table = torch.full((V, V), -30.0, dtype=torch.float64)
    table[BOS, TOK.g_id] = 0.0  # after [BOS]: always G
    table[TOK.g_id, TOK.t_id] = 0.0  # then T, then A, A, ...
    table[TOK.t_id, TOK.a_id] = 0.0
    table[TOK.a_id, TOK.a_id] = 0.0
    smp = AutoregressiveSampler(bos_id=BOS, first_token_ids=TOK.nucleotide_ids)
    x = smp.generate(_bigram(table), None, TOK.mask_id, (3, 5), generator=torch.Generator().manual_seed(0))
    assert x.tolist() == [TOK.encode("GTAAA")] * 3 and smp.last_nfe == 5
    # a prefix template is kept and conditions what follows
    tpl = torch.full((1, 5), TOK.mask_id)
    tpl[0, 0] = TOK.t_id
    x = smp.generate(_bigram(table), None, TOK.mask_id, (1, 5), template=tpl)
    assert x.tolist() == [TOK.encode("TAAAA")]


@pytest.mark.parametrize("bos", [BOS, None])
def test_ar_nll_is_a_normalised_distribution(bos):
    # exact: Σ_x p(x) = 1 over all 4^3 sequences of bases (no N, no pads) with the scored tokens
    nts = TOK.nucleotide_ids
    g = torch.Generator().manual_seed(3)
    logits = torch.full((V, V), -1e9, dtype=torch.float64)
    logits[:, nts] = torch.randn(V, len(nts), generator=g, dtype=torch.float64)
    table = logits.log_softmax(-1)  # only bases have mass
    xs = torch.tensor([[a, b, c] for a in nts for b in nts for c in nts])
    obj = build_objective("ar", bos_id=bos)
    out = obj.loss(_bigram(table), xs)
    total = torch.exp(-out.nll).sum().item()
    # with [BOS] the 3 bases are modelled jointly; without, the first is context (4 contexts)
    assert math.isclose(total, 1.0 if bos is not None else 4.0, rel_tol=1e-9)


def test_eval_counts_the_same_bases_for_ar_and_mdlm(tmp_path, capsys):
    import json

    from dnadiff.cli import main

    _dir(tmp_path, "ar")
    cfg = from_dict(RunConfig, {"model": {"backbone": "caduceus", "preset": "tiny"}, "objective": {"name": "mdlm"}})
    save_model_dir(tmp_path / "mdlm", cfg, build_backbone("caduceus", preset="tiny", vocab_size=V), TOK)
    res = {}
    for name in ("ar", "mdlm"):
        assert main(["eval", str(tmp_path / name), "--seq-len", "64", "--max-windows", "3",
                     "--out", str(tmp_path / f"{name}.json")]) == 0
        res[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert res["ar"]["num_bases"] == res["mdlm"]["num_bases"] > 0
    assert res["ar"]["ar_scored"].startswith("every real position") and "ar_scored" not in res["mdlm"]
