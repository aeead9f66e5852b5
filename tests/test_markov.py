"""The Markov baseline: hand-computed Kneser-Ney / Witten-Bell probabilities, exact eval, CLI round trip."""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from dnadiff.backbones.markov import (
    MarkovChain,
    MarkovConfig,
    count_ngrams,
    estimate_discount,
    probability_tables,
    reverse_complement_codes,
)
from dnadiff.diffusion import build_objective
from dnadiff.tokenizers import DNATokenizer
from helpers import progress_wait

TOK = DNATokenizer()
CODE = {"A": 0, "C": 1, "G": 2, "T": 3}


def codes(seq: str) -> np.ndarray:
    return np.array([[CODE.get(b, -1) for b in seq]])


def chain(corpus: list[str], order: int, **kw) -> MarkovChain:
    cfg = MarkovConfig(order=order, **kw)
    counts = None
    for s in corpus:
        counts = count_ngrams(codes(s), order + 1, counts)
    return MarkovChain(cfg).set_counts(counts)


def p(table, ctx: str, w: str) -> float:
    idx = 0
    for b in ctx:
        idx = idx * 4 + CODE[b]
    return float(table[idx, CODE[w]])


# Corpus "AACAAG", D = 1/2 (Chen & Goodman's interpolated KN, worked by hand):
#   unigrams A4 C1 G1 T0 (6, 3 types): T0(w) = max(c-1/2, 0)/6 + (1/2·3/6)·1/4
#   bigrams AA2 AC1 CA1 AG1; continuation unigrams N1+(•w): A2 (AA, CA) C1 G1 T0 (4, 3 types)
#   Q0(w) = max(a-1/2, 0)/4 + (1/2·3/4)·1/4 = A 15/32, C 7/32, G 7/32, T 3/32
#   T1(w|A) = max(c(Aw)-1/2, 0)/4 + (1/2·3/4) Q0(w);  T1(w|C) = max(c(Cw)-1/2, 0)/1 + 1/2 Q0(w)
#   trigrams AAC ACA CAA AAG; continuation bigrams N1+(•h'w): AA1 (C·) AC1 AG1 CA1
#   Q1(w|A) = (1/2)/3·[w in A,C,G] + (1/2·3/3) Q0(w);  T2(w|AA) = max(c(AAw)-1/2, 0)/2 + (1/2·2/2) Q1(w|A)
KN_HAND = {
    0: {("", "A"): F(31, 48), ("", "C"): F(7, 48), ("", "G"): F(7, 48), ("", "T"): F(3, 48)},
    1: {("A", "A"): F(141, 256), ("A", "C"): F(53, 256), ("A", "G"): F(53, 256), ("A", "T"): F(9, 256),
        ("C", "A"): F(47, 64), ("C", "C"): F(7, 64), ("C", "G"): F(7, 64), ("C", "T"): F(3, 64),
        ("G", "A"): F(15, 32), ("T", "T"): F(3, 32)},  # unseen contexts: Q0
    2: {("AA", "A"): F(1, 2) * (F(1, 6) + F(15, 64)), ("AA", "C"): F(1, 4) + F(1, 2) * (F(1, 6) + F(7, 64)),
        ("AA", "G"): F(1, 4) + F(1, 2) * (F(1, 6) + F(7, 64)), ("AA", "T"): F(1, 2) * F(3, 64),
        ("CA", "A"): F(1, 2) + F(1, 2) * (F(1, 6) + F(15, 64)),
        ("GG", "A"): F(15, 32)},  # unseen context GG, unseen lower context G: Q0
}


@pytest.mark.parametrize("order", [0, 1, 2])
def test_kneser_ney_hand_computed(order):
    tables = chain(["AACAAG"], order, discount=0.5, both_strands=False).tables()
    for (ctx, w), want in KN_HAND[order].items():
        assert p(tables[len(ctx)], ctx, w) == pytest.approx(float(want), abs=1e-12), (ctx, w)


def test_witten_bell_hand_computed():
    # unigrams A4 C1 G1 (6, 3 types): P0(w) = (c + 3/4)/9 ; context A: AA2 AC1 AG1 (4, 3 types)
    tables = chain(["AACAAG"], 1, smoothing="wb", both_strands=False).tables()
    p0 = {"A": F(19, 36), "C": F(7, 36), "G": F(7, 36), "T": F(3, 36)}
    for w, want in p0.items():
        assert p(tables[0], "", w) == pytest.approx(float(want), abs=1e-12)
    for w, c in {"A": 2, "C": 1, "G": 1, "T": 0}.items():
        assert p(tables[1], "A", w) == pytest.approx(float((c + 3 * p0[w]) / 7), abs=1e-12)
    assert p(tables[1], "T", "A") == pytest.approx(float(p0["A"]), abs=1e-12)  # unseen context: lower order


@pytest.mark.parametrize("smoothing,discount", [("kn", -1.0), ("kn", 0.3), ("kn", 1.0), ("wb", -1.0)])
def test_every_conditional_sums_to_one(smoothing, discount):
    rng = np.random.default_rng(0)
    tiles = rng.integers(-1, 4, size=(20, 40))  # breaks included
    tiles[rng.random(tiles.shape) < 0.3] = 0  # skewed: some n-grams frequent, many unseen
    counts = count_ngrams(tiles, 5)
    tables, _ = probability_tables(counts, 4, smoothing, discount)
    for j, t in enumerate(tables):
        assert t.shape == (4**j, 4)
        np.testing.assert_allclose(t.sum(axis=1), 1.0, atol=1e-12)
        assert (t > 0).all()


def test_discount_estimate():
    a = np.array([[1, 1, 2, 5], [1, 0, 2, 2], [3, 0, 0, 0], [0, 0, 0, 0]])
    assert estimate_discount(a) == pytest.approx(3 / (3 + 2 * 3))
    assert estimate_discount(np.array([[5, 7, 0, 9]])) == 0.5  # no singletons: the fallback


def test_counts_skip_breaks_and_tile_edges():
    got = count_ngrams(np.array([[0, 1, -1, 1, 2], [2, 3, 0, -1, -1]]), 3)
    naive: list[dict] = [{}, {}, {}]
    for row in (["A", "C"], ["C", "G"], ["G", "T", "A"]):  # the clean runs
        s = "".join(row)
        for n in range(1, 4):
            for i in range(len(s) - n + 1):
                naive[n - 1][s[i:i + n]] = naive[n - 1].get(s[i:i + n], 0) + 1
    for n in range(1, 4):
        want = np.zeros(4**n)
        for kmer, c in naive[n - 1].items():
            want[int("".join(str(CODE[b]) for b in kmer), 4)] = c
        np.testing.assert_array_equal(got[n - 1], want)
    # reverse complement of GTA is TAC
    rc = count_ngrams(reverse_complement_codes(np.array([[2, 3, 0]])), 3)
    assert rc[2][int("301", 4)] == 1 and rc[2].sum() == 1


def ids(seq: str) -> torch.Tensor:
    return torch.tensor([TOK.encode(seq)])


def test_eval_equals_hand_value():
    """`ar` objective on window ACAG with the k=1 chain: C|A, A|C, G|A are scored (A is context)."""
    model = chain(["AACAAG"], 1, discount=0.5, both_strands=False)
    out = build_objective("ar").loss(lambda x, t: model(x), ids("ACAG"))
    want = -math.log(F(53, 256) * F(47, 64) * F(53, 256))
    assert int(out.num_tokens) == 3
    assert float(out.nll) == pytest.approx(want, rel=1e-6)


def test_n_breaks_the_context_like_the_neural_scoring():
    """Window AANCA, k=2, N masked: scored A|A (pos 1), C from the empty context (pos 3: the chain
    restarts after the N; the `ar` objective scores every real base whatever its context, as the
    reference does) and A|C (pos 4; context C only, after the N); N (pos 2) is not scored."""
    model = chain(["AACAAG"], 2, discount=0.5, both_strands=False)
    x = ids("AANCA")
    mask = (x != TOK.n_id).long()
    out = build_objective("ar").loss(lambda x, t: model(x), x, mask)
    t = model.tables()
    want = -math.log(p(t[1], "A", "A")) - math.log(p(t[0], "", "C")) - math.log(p(t[1], "C", "A"))
    assert int(out.num_tokens) == 3
    assert float(out.nll) == pytest.approx(want, rel=1e-6)


def test_forward_matches_tables_position_by_position():
    rng = np.random.default_rng(1)
    model = chain(["".join(rng.choice(list("ACGT"), 300)) for _ in range(3)], 3, both_strands=True)
    seq = "".join(rng.choice(list("ACGTN"), 60, p=[0.23, 0.23, 0.23, 0.23, 0.08]))
    logp = model(ids(seq))[0].log_softmax(-1)  # (L, V)
    t = model.tables()
    for i in range(len(seq)):
        run = ""
        for b in reversed(seq[: i + 1]):
            if b == "N":
                break
            run = b + run
        ctx = run[-3:] if run else ""
        for w in "ACGT":
            assert float(logp[i, TOK.encode(w)[0]]) == pytest.approx(math.log(p(t[len(ctx)], ctx, w)), abs=1e-5)
        assert float(logp[i, TOK.n_id].exp()) == 0.0


def test_model_directory_round_trip_and_sampling(tmp_path):
    import dnadiff
    from dnadiff.config import RunConfig, from_dict
    from dnadiff.modelio.model_dir import save_model_dir

    model = chain(["ACGTTGCAAC" * 5, "GGGTACCA"], 2, both_strands=False)
    cfg = from_dict(RunConfig, {"model": {"backbone": "markov", "preset": "auto"}, "objective": {"name": "ar"}})
    save_model_dir(tmp_path / "m", cfg, model, TOK, {"order": 2})
    loaded = dnadiff.load(tmp_path / "m")
    x = ids("ACGTTGCAGG")
    torch.testing.assert_close(loaded.backbone(x), model(x))
    assert loaded.backbone.order == 2 and loaded.backbone.counts()[2].sum() == model.counts()[2].sum()
    out = loaded.generate(num=3, length=40, generator=torch.Generator().manual_seed(0))
    assert out.shape == (3, 40) and set(out.unique().tolist()) <= set(TOK.nucleotide_ids)


def run_cli(*args, cwd):
    return progress_wait.run([sys.executable, "-m", "dnadiff", *args], cwd=cwd, watch=[cwd])  # waited for by progress


@pytest.mark.subprocess
def test_cli_train_picks_order_on_valid_and_eval_reproduces_it(tmp_path):
    """dnadiff train on the bundled sample: the order is the argmin of the valid bits/base, and
    `dnadiff eval --split valid` gives that number again (same positions as the `ar` objective)."""
    r = run_cli("train", "experiments/tiny_dna_markov", f"out_dir={tmp_path}", "model.overrides.max_order=2",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads((tmp_path / "tiny_dna_markov" / "model" / "metrics.json").read_text())
    by_order = {int(k): v for k, v in metrics["valid_bits_per_base_by_order"].items()}
    assert set(by_order) == {0, 1, 2} and metrics["order"] == min(by_order, key=by_order.get)
    assert by_order[0] > by_order[metrics["order"]]  # real DNA has context
    r = run_cli("eval", str(tmp_path / "tiny_dna_markov" / "model"), "--split", "valid", "--out",
                str(tmp_path / "ev.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    ev = json.loads((tmp_path / "ev.json").read_text())
    assert ev["kind"] == "exact" and ev["num_bases"] == metrics["valid_bases"]
    assert ev["bits_per_base"] == pytest.approx(metrics["val_bits_per_token"], rel=1e-5)


@pytest.mark.subprocess
def test_cli_markov_needs_the_ar_objective(tmp_path):
    r = run_cli("train", "experiments/tiny_dna_markov", f"out_dir={tmp_path}", "objective.name=mdlm", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: objective.name")
    assert not (tmp_path / "tiny_dna_markov").exists()
    r = run_cli("train", "experiments/tiny_dna_markov", f"out_dir={tmp_path}", "model.overrides.smoothing=abc",
                cwd=tmp_path)
    assert r.returncode == 2 and "smoothing" in r.stderr and "Traceback" not in r.stderr


def test_base_codes_agree_for_numpy_and_torch():
    from dnadiff.backbones.markov import BASE_IDS, base_codes

    assert BASE_IDS == tuple(TOK.nucleotide_ids)
    ids = np.array([[TOK.a_id, TOK.c_id, TOK.g_id, TOK.t_id, TOK.n_id, TOK.pad_id, TOK.mask_id, 99]])
    assert base_codes(ids).tolist() == [[0, 1, 2, 3, -1, -1, -1, -1]]
    assert base_codes(torch.as_tensor(ids)).tolist() == base_codes(ids).tolist()
