"""DNA sample-quality metrics on inputs with known answers, and the `dnadiff metrics` command."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from dnadiff.errors import DnadiffError
from dnadiff.eval.dna_metrics import (
    MarkovModel,
    dna_metrics,
    gc_content,
    js_divergence,
    kmer_counts,
    kmer_entropy,
    ks_statistic,
    longest_matches,
    reverse_complement,
    wasserstein1,
)
from helpers.random_dna import random_dna


def test_kmer_counts_and_identical_sets_give_zero_js():
    c = kmer_counts(["ACGTA", "AANAA"], 2)
    # ACGTA: AC CG GT TA; AANAA: AA, AA (windows through N skipped)
    want = np.zeros(16)
    for km in ("AC", "CG", "GT", "TA", "AA", "AA"):
        want["ACGT".index(km[0]) * 4 + "ACGT".index(km[1])] += 1
    assert np.array_equal(c, want)
    rng = random.Random(0)
    seqs = [random_dna(100, rng) for _ in range(20)]
    res = dna_metrics(seqs, list(seqs), floor=False)
    assert all(v == 0.0 for v in res["samples"]["kmer_js"].values())
    assert res["samples"]["gc"]["wasserstein1"] == 0.0 and res["samples"]["gc"]["ks"] == 0.0
    assert res["samples"]["memorisation"]["longest_match_max"] == 100
    assert res["samples"]["memorisation"]["share_ge_50bp"] == 1.0


def test_js_divergence_hand_computed():
    # p = (1, 0), q = (0, 1): disjoint -> 1 bit
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4)
    # KL(p||m) = 1/2 log2(2/3) + 1/2 log2(2); KL(q||m) = log2(4/3)
    want = 0.5 * (0.5 * math.log2(2 / 3) + 0.5) + 0.5 * math.log2(4 / 3)
    assert js_divergence([5, 5], [7, 0]) == pytest.approx(want)
    # k = 1 on strings: samples all A vs reference half A half T
    assert dna_metrics(["AAAA"], ["AATT"], kmax=1, floor=False)["samples"]["kmer_js"]["1"] == pytest.approx(want)


def test_gc_distances_hand_computed():
    assert np.allclose(gc_content(["GGCC", "ATAT", "GCAT", "NNGA"]), [1.0, 0.0, 0.5, 0.5])
    a, b = np.array([0.0, 1.0]), np.array([0.5, 0.5])
    assert wasserstein1(a, b) == pytest.approx(0.5)  # each half moves 0.5
    assert ks_statistic(a, b) == pytest.approx(0.5)
    assert wasserstein1(np.array([0.2, 0.4]), np.array([0.3, 0.5])) == pytest.approx(0.1)  # a shift


def test_kmer_entropy():
    assert kmer_entropy("AAAAAAAA", 3) == 0.0
    assert kmer_entropy("ACGT", 1) == pytest.approx(2.0)
    assert kmer_entropy("ACAC", 2) == pytest.approx(-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))


def test_markov_oracle_add_one_smoothing():
    m = MarkovModel(["AAAC"], order=1)
    # order 0: counts A3 C1 -> (3+1)/(4+4) for A; order 1: AA x2, AC x1 -> P(A|A) = 3/7, P(C|A) = 2/7
    nll, n = m.nll("AAC")
    want = -(math.log(4 / 8) + math.log(3 / 7) + math.log(2 / 7))
    assert n == 3 and nll == pytest.approx(want)
    assert m.perplexity(["AAC"]) == pytest.approx(math.exp(want / 3))
    # a uniform context never seen: (0+1)/(0+4)
    assert m.nll("GT")[0] == pytest.approx(-(math.log(1 / 8) + math.log(1 / 4)))
    # an order-2 model of a periodic reference predicts it better than order 0
    ref = ["ACGACGACGACGACGACGACG" * 5]
    assert MarkovModel(ref, 2).perplexity(ref) < MarkovModel(ref, 0).perplexity(ref) / 2


def test_longest_match_against_brute_force():
    rng = random.Random(1)
    ref = [random_dna(400, rng) for _ in range(4)]
    samples = [
        ref[1][100:170],  # 70 bp copy
        random_dna(20, rng) + ref[2][10:65] + random_dna(20, rng),  # 55 bp inside
        reverse_complement(ref[3][5:90]),  # 85 bp on the other strand
        random_dna(120, rng),
        "NNNN" + ref[0][:30] + "N" + ref[0][40:45],
    ]

    def brute(x, refs):
        best = 0
        for i in range(len(x)):
            j = i + best + 1
            while j <= len(x) and "N" not in x[i:j] and any(x[i:j] in r for r in refs):
                best, j = j - i, j + 1
        return best

    both = ref + [reverse_complement(r) for r in ref]
    got = longest_matches(samples, ref)
    assert got.tolist() == [brute(s, both) for s in samples]
    assert got[:3].tolist() == [70, 55, 85] and got[4] == 30
    one = longest_matches(samples, ref, both_strands=False)
    assert one.tolist() == [brute(s, ref) for s in samples]
    res = dna_metrics(samples, ref, floor=False)["samples"]["memorisation"]
    assert res["share_ge_50bp"] == pytest.approx(3 / 5) and res["longest_match_max"] == 85


def test_floor_and_skewed_samples():
    rng = np.random.default_rng(0)
    ref = ["".join(rng.choice(list("ACGT"), 150, p=[0.2, 0.3, 0.3, 0.2])) for _ in range(60)]
    at_rich = ["".join(rng.choice(list("ACGT"), 150, p=[0.4, 0.1, 0.1, 0.4])) for _ in range(20)]
    res = dna_metrics(at_rich, ref, kmax=3, markov_order=2)
    assert res["floor"] is not None and res["floor"]["num_samples"] == 20 and res["floor"]["num_reference"] == 40
    for k in ("1", "2", "3"):
        assert res["samples"]["kmer_js"][k] > 5 * res["floor"]["kmer_js"][k]
    assert res["samples"]["gc"]["wasserstein1"] > 0.3
    assert res["samples"]["markov_ppl"]["samples"] > res["floor"]["markov_ppl"]["samples"]
    # one long reference record: the floor is cut into windows of the samples' length
    long = dna_metrics(at_rich, ["".join(ref)], kmax=2, markov_order=1)
    assert long["floor"] is not None and long["floor"]["mean_length"] == 150
    assert dna_metrics(at_rich, ref[:30], kmax=2)["floor"] is None  # too small for a floor


def test_errors():
    with pytest.raises(DnadiffError, match="samples"):
        dna_metrics([], ["ACGT"])
    with pytest.raises(DnadiffError, match="reference"):
        dna_metrics(["ACGT"], ["NNNN"])


def _write(path, records):
    path.write_text("".join(f">{i}\n{s}\n" for i, s in enumerate(records)))
    return str(path)


def test_metrics_command(tmp_path, capsys):
    import argparse

    from dnadiff.commands import metrics as cmd

    rng = random.Random(3)
    ref = [random_dna(120, rng) for _ in range(30)]
    smp = _write(tmp_path / "s.fa", [random_dna(120, rng) for _ in range(10)])
    rf = _write(tmp_path / "r.fa", ref)
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    out = tmp_path / "out"
    assert cmd.run(parser.parse_args([smp, "--reference", rf, "--out", str(out), "--kmax", "3"])) == 0
    res = json.loads((out / "metrics.json").read_text())
    assert set(res["samples"]["kmer_js"]) == {"1", "2", "3"} and res["floor"] is not None
    assert (out / "kmer_scatter.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "gc_histogram.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "kmer JS k=3" in printed and "3-mer Pearson r" in printed and "motif hit-rate Spearman" in printed
    # the default motif set: JASPAR2024 CORE vertebrates bundled with pyjaspar, less the too-short ones
    mot = res["settings"]["motifs"]
    assert mot["num_motifs"] + len(mot["dropped_unreachable"]) == 879 and mot["pvalue"] == 1e-4
    assert len(res["samples"]["motifs"]["per_motif"]) == mot["num_motifs"] and "per_motif" not in res["floor"]["motifs"]
    assert (out / "motif_scatter.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    bad = tmp_path / "bad.fa"
    bad.write_text("hello\n")
    with pytest.raises(DnadiffError, match="bad.fa"):
        cmd.run(parser.parse_args([str(bad), "--reference", rf, "--out", str(out)]))
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    with pytest.raises(DnadiffError, match="empty.fa"):
        cmd.run(parser.parse_args([smp, "--reference", str(empty), "--out", str(out)]))


def test_kmer_pearson_hand_computed():
    from dnadiff.eval.dna_metrics import kmer_pearson

    # samples: AAA x3; reference: AAA x2, AAC x1 (64-entry count vectors)
    # r = (6 - 9/64) / sqrt((9 - 9/64)(5 - 9/64)) = 375 / sqrt(567 * 311)
    assert kmer_pearson(["AAAAA"], ["AAAAC"]) == pytest.approx(375 / math.sqrt(567 * 311), rel=1e-12)
    rng = random.Random(4)
    ref = [random_dna(200, rng) for _ in range(5)]
    assert kmer_pearson(ref * 3, ref) == pytest.approx(1.0)  # same spectrum up to scale
    assert math.isnan(kmer_pearson(["ACGT"], ref, k=1))  # a flat spectrum: undefined
    res = dna_metrics(["AAAAA"], ["AAAAC"], kmax=1, floor=False)["samples"]["kmer_pearson"]
    assert res == {"k": 3, "r": pytest.approx(375 / math.sqrt(567 * 311), rel=1e-12)}
