"""Pad policies of the diffusion objectives, checked exactly.

Two sentences "a EOS PAD" and "a b EOS", p = 1/2 each, and the exact posterior denoiser of that
padded distribution. Every mask pattern is enumerated (the forward process's uniforms are
replaced by 0 / 1 per position) and t is integrated by Gauss-Legendre, so the expectations below
are exact (log-linear schedule with ε = 0: the integrands are polynomials in t).

  score      pads masked, scored, counted: NELBO = -log p = ln 2 for each sequence;
  reference  pads masked, only real tokens scored (official MDLM): ln 2 / 2 and ln 2, mean ¾ ln 2;
  visible    pads never masked: the visible PAD gives the first sentence away (0 and ln 2), a
             "bound" of ½ ln 2, below the data's entropy ln 2.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import dnadiff.diffusion.base as dbase
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.errors import DnadiffError
from helpers.cli_model import tiny_model_dir
from helpers.exact_denoiser import ExactDenoiser
from helpers.legacy_layout import to_legacy_layout

A, B_, EOS, PAD, MASK, V = 0, 1, 2, 3, 4, 5
LN2 = math.log(2.0)
X0 = torch.tensor([[A, EOS, PAD], [A, B_, EOS]])
AM = torch.tensor([[1, 1, 0], [1, 1, 1]])


@pytest.fixture(scope="module")
def den():
    return ExactDenoiser(X0.clone(), torch.tensor([0.5, 0.5]), mask_id=MASK, vocab_size=V)


def objective(name: str, policy: str | None, **kw):
    if policy is not None:
        kw["pad_policy"] = policy
    return build_objective(name, schedule=build_schedule("loglinear", eps=0.0), mask_id=MASK, vocab_size=V, **kw)


def exact_nll(obj, denoiser, monkeypatch, t_nodes: int = 8):
    """(E_t E_{x_t}[nll] Float64[B], num_tokens Float64[B]) through obj.loss itself: all 2^L
    patterns of 'u < 1 - α(t)' with their probabilities, t by Gauss-Legendre on [0, 1]."""
    B, L = X0.shape
    nodes, weights = np.polynomial.legendre.leggauss(t_nodes)
    total = torch.zeros(B, dtype=torch.float64)
    num_tokens = None
    for x, w in zip(nodes, weights):
        t = 0.5 * (x + 1.0)
        m = float(obj.schedule.mask_prob(torch.tensor(t, dtype=torch.float64)))
        for pat in itertools.product([0, 1], repeat=L):
            pat_t = torch.tensor(pat, dtype=torch.bool)
            prob = m ** int(pat_t.sum()) * (1.0 - m) ** int((~pat_t).sum())
            u = torch.where(pat_t, 0.0, 1.0).double().expand(B, L)  # u < m exactly on the pattern
            monkeypatch.setattr(dbase, "rand_like_on", lambda shape, gen, dev, dtype=torch.float32, u=u: u.to(dtype))
            out = obj.loss(denoiser, X0, AM, t=torch.full((B,), t, dtype=torch.float32))
            total += 0.5 * w * prob * out.nll.double()
            num_tokens = out.num_tokens.double()
    monkeypatch.undo()
    return total, num_tokens


@pytest.mark.parametrize("name", ["mdlm", "sedd"])
def test_score_policy_is_exact_nll_of_padded_sequence(den, monkeypatch, name):
    f = den.as_sedd() if name == "sedd" else den
    nll, tok = exact_nll(objective(name, "score"), f, monkeypatch)
    torch.testing.assert_close(nll, torch.full((2,), LN2, dtype=torch.float64), rtol=0, atol=2e-5)
    assert tok.tolist() == [3.0, 3.0]  # pads counted


@pytest.mark.parametrize("name", ["mdlm", "sedd"])
@pytest.mark.parametrize("policy", ["reference", None])  # None: the default is the reference protocol
def test_reference_policy_three_quarters_ln2(den, monkeypatch, name, policy):
    f = den.as_sedd() if name == "sedd" else den
    nll, tok = exact_nll(objective(name, policy), f, monkeypatch)
    torch.testing.assert_close(nll, torch.tensor([LN2 / 2, LN2], dtype=torch.float64), rtol=0, atol=2e-5)
    assert abs(float(nll.mean()) - 0.75 * LN2) < 2e-5
    assert tok.tolist() == [2.0, 3.0]  # only real tokens counted


def test_visible_policy_falls_below_entropy(den, monkeypatch):
    nll, tok = exact_nll(objective("mdlm", "visible"), den, monkeypatch)
    torch.testing.assert_close(nll, torch.tensor([0.0, LN2], dtype=torch.float64), rtol=0, atol=2e-5)
    assert float(nll.mean()) < den.entropy() - 0.3  # the visible PAD leaks the answer
    assert tok.tolist() == [2.0, 3.0]


@pytest.mark.parametrize("policy", ["reference", "score", "visible"])
def test_d3pm_with_subs_switches_equals_discrete_mdlm(den, monkeypatch, policy):
    """d3pm with carry-over and zero masking is MDLM with the same T, under every pad policy."""
    a, _ = exact_nll(objective("d3pm", policy, T=4, carry_over=True, zero_masking=True), den, monkeypatch)
    b, _ = exact_nll(objective("mdlm", policy, T=4), den, monkeypatch)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("policy,expected", [("score", [3, 3]), ("reference", [2, 3]), ("visible", [2, 3])])
def test_d3pm_reconstruction_covers_the_counted_tokens(monkeypatch, policy, expected):
    """Nothing masked: the d3pm nll is its reconstruction term, ln V per counted token (uniform logits)."""
    obj = objective("d3pm", policy, T=4)
    monkeypatch.setattr(dbase, "rand_like_on",
                        lambda shape, gen, dev, dtype=torch.float32: torch.ones(shape, dtype=dtype))
    out = obj.loss(lambda x, t: torch.zeros(*x.shape, V), X0, AM, t=torch.full((2,), 0.5))
    torch.testing.assert_close(out.nll, torch.tensor(expected, dtype=torch.float32) * math.log(V))


@pytest.mark.parametrize("policy", ["reference", "score"])
def test_pads_are_masked_unless_visible(policy):
    """reference / score: the forward process masks pads too (all masked at t = 1, ε = 0)."""
    obj = objective("mdlm", policy)
    seen = {}

    def f(x, t):
        seen["x"] = x.clone()
        return torch.zeros(*x.shape, V)

    obj.loss(f, X0, AM, t=torch.ones(2))
    assert torch.all(seen["x"] == MASK)
    objective("mdlm", "visible").loss(f, X0, AM, t=torch.ones(2))
    assert seen["x"][0, 2] == PAD and torch.all(seen["x"][AM == 1] == MASK)


def test_no_mask_all_policies_agree(den):
    """Without pads the policies coincide draw for draw (DNA windows without padding keep their numbers)."""
    x0 = den.sample(8, torch.Generator().manual_seed(0))
    outs = [objective("mdlm", p).loss(den, x0, torch.ones_like(x0), generator=torch.Generator().manual_seed(3))
            for p in ("reference", "score", "visible")]
    for o in outs[1:]:
        torch.testing.assert_close(o.nll, outs[0].nll, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["mdlm", "d3pm", "sedd"])
def test_bad_pad_policy_is_a_dnadiff_error(name):
    kw = {"T": 4} if name == "d3pm" else {}
    with pytest.raises(DnadiffError, match="pad_policy"):
        objective(name, "hidden", **kw)


def test_config_key_reaches_the_objective():
    from dnadiff.config import RunConfig, load_config
    from dnadiff.model import build_objective_for
    from dnadiff.tokenizers.dna import DNATokenizer

    tok = DNATokenizer()
    cfg = load_config(RunConfig, None, ["objective.name=sedd", "objective.pad_policy=score"])
    assert build_objective_for(cfg, tok)[1].pad_policy == "score"
    assert build_objective_for(load_config(RunConfig, None, []), tok)[1].pad_policy == "reference"
    with pytest.raises(DnadiffError, match="pad_policy"):
        load_config(RunConfig, None, ["objective.pad_policy=nope"])


def _tiny_model_dir(tmp_path, overrides):
    """An untrained tiny Caduceus on the default config (not the tiny experiment's), seq_len 16."""
    return tiny_model_dir(tmp_path, seq_len=16, base=None,
                          overrides=["model.backbone=caduceus", "model.preset=tiny", *overrides])


def test_eval_json_and_table_name_the_pad_policy(tmp_path, capsys):
    import json

    from dnadiff.cli import main
    from dnadiff.data.records import write_fasta

    model_dir = _tiny_model_dir(tmp_path, ["objective.pad_policy=score"])
    fa = tmp_path / "x.fa"
    write_fasta(fa, [("r1", "ACGTACGTAC"), ("r2", "ACGTTTGCAACGTAGGCAT")])  # tails padded to 16
    assert main(["eval", str(model_dir), "--records", str(fa), "--out", str(tmp_path / "e.json")]) == 0
    res = json.loads((tmp_path / "e.json").read_text())
    assert res["pad_policy"] == "score"
    assert res["num_windows"] == 3 and res["num_bases"] == 48  # score: 29 bases + 19 pads, all counted
    assert "pad_policy" in capsys.readouterr().out


def test_old_model_dirs_keep_visible_pads(tmp_path):
    """A config.yaml written before the option existed (no objective.pad_policy) loads as
    `visible`, the behaviour it was trained and evaluated with; a new one keeps its own."""
    import yaml

    import dnadiff

    model_dir = _tiny_model_dir(tmp_path, [])
    assert dnadiff.load(model_dir).objective.pad_policy == "reference"
    legacy = to_legacy_layout(model_dir)  # the config.yaml layout those directories have
    cfg = yaml.safe_load(legacy.read_text())
    del cfg["objective"]["pad_policy"]
    legacy.write_text(yaml.safe_dump(cfg))
    assert dnadiff.load(model_dir).objective.pad_policy == "visible"


def test_shipped_configs_pad_policies():
    """DNA window experiments keep visible pads (their numbers unchanged); padded text (LM1B layout)
    follows the reference protocol of the paper's tab. 1."""
    from dnadiff.config import RunConfig, load_config

    for name in ("tiny_dna_mdlm", "cpu_dna_mdlm", "paper_dna_mdlm", "tiny_cfg_leptospira"):
        assert load_config(RunConfig, f"experiments/{name}", []).objective.pad_policy == "visible", name
    for name in ("lm1b_mdlm", "lm1b_sedd", "cpu_fortunes_mdlm"):
        assert load_config(RunConfig, f"text/{name}", []).objective.pad_policy == "reference", name
