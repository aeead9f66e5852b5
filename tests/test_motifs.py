"""JASPAR motif scanning: exact p-value thresholds, planted sites on both strands, the vectorised scan
against a per-window loop, and the sample-vs-reference motif metrics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dnadiff.errors import DnadiffError
from dnadiff.eval.dna_metrics import reverse_complement
from dnadiff.eval.motifs import (
    Motif,
    MotifScanner,
    background_of,
    integer_matrix,
    load_jaspar,
    log_odds,
    motif_from_consensus,
    motif_metrics,
    score_distribution,
    score_threshold,
    spearman,
)

UNIFORM = np.full(4, 0.25)


def _rand(n, rng, p=None):
    return "".join(rng.choice(list("ACGT"), n, p=p))


def _score(q, window):
    return sum(int(q[j, "ACGT".index(b)]) for j, b in enumerate(window))


def test_log_odds_with_fimo_pseudocount():
    counts = np.array([[10.0, 0, 0, 10], [0, 20, 0, 0]])
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    w = log_odds(counts, bg, pseudocount=0.1)
    # column 0, base A: f = 1/2 -> p = (0.5 + 0.1 * 0.3) / 1.1
    assert w[0, 0] == pytest.approx(math.log2((0.5 + 0.03) / 1.1 / 0.3))
    assert w[1, 0] == pytest.approx(math.log2(0.03 / 1.1 / 0.3))
    assert w[1, 1] == pytest.approx(math.log2((1 + 0.02) / 1.1 / 0.2))
    assert integer_matrix(np.array([[0.004, 0.006, -0.016, 1.0]])).tolist() == [[0, 1, -2, 100]]
    with pytest.raises(DnadiffError, match="column"):
        log_odds(np.zeros((1, 4)), UNIFORM)


def test_threshold_matches_brute_force_enumeration():
    """The DP null distribution equals the enumeration of all 4^7 words, and so does the threshold."""
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 30, size=(7, 4)).astype(float)
    bg = np.array([0.32, 0.18, 0.18, 0.32])
    q = integer_matrix(log_odds(counts, bg))
    low, pmf = score_distribution(q, bg)
    brute = {}
    for word in itertools.product(range(4), repeat=7):
        s = int(sum(q[j, b] for j, b in enumerate(word)))
        brute[s] = brute.get(s, 0.0) + float(np.prod(bg[list(word)]))
    assert low == min(brute) and low + pmf.size - 1 == max(brute)
    for s, p in brute.items():
        assert pmf[s - low] == pytest.approx(p, rel=1e-12, abs=1e-18)
    assert pmf.sum() == pytest.approx(1.0)
    tail = {s: sum(p for t, p in brute.items() if t >= s) for s in brute}
    for pvalue in (1e-2, 1e-3, 1e-4, 1e-5):
        want = min((s for s in brute if tail[s] < pvalue), default=None)
        assert score_threshold(q, bg, pvalue) == want
    assert score_threshold(q, bg, 1e-4) is not None and score_threshold(q, bg, 1e-5) is None
    # a 5-mer consensus matrix at p = 1e-4: even the best word has p-value 4^-5-ish, so no threshold
    assert score_threshold(integer_matrix(log_odds(motif_from_consensus("ACGTA").counts, UNIFORM)), UNIFORM) is None


def test_planted_sites_exact_count_and_minus_strand():
    motif = motif_from_consensus("TGACGTCAGGT", id="m1")
    scanner = MotifScanner([motif], UNIFORM, pvalue=1e-6)
    q, t = scanner.matrices[0], scanner.thresholds[0]
    # with pseudocount 0.1 on a 20-count column a match scores round(100*log2(4*(1+0.025)/1.1)) = 190,
    # a mismatch round(100*log2(4*0.025/1.1)) = -346; at 1e-6 only a perfect 11-mer (4^-11 = 2.4e-7) passes
    assert q.max(axis=1).tolist() == [190] * 11 and q.min(axis=1).tolist() == [-346] * 11
    assert t == 11 * 190
    filler = "C" * 40
    site = "TGACGTCAGGT"
    seq = filler + site + filler + site + "A" * 7 + reverse_complement(site) + filler
    hits, bases = scanner.scan([seq])
    assert hits.tolist() == [[3]] and bases.tolist() == [len(seq)]
    # one copy on the minus strand only: found through the reverse-complemented matrix
    minus = scanner.scan([filler + reverse_complement(site) + filler])[0]
    assert minus.tolist() == [[1]]
    # a site broken by N is not scored, and sites may sit at the very ends
    assert scanner.scan([site[:5] + "N" + site[6:], site, "G" + site])[0].ravel().tolist() == [0, 1, 1]


def test_vectorised_scan_equals_window_loop():
    """Hits of several motifs (lengths 6..9, forward and minus strand) on random sequences with planted
    sites, N's and different lengths equal a per-window Python loop over integer scores."""
    rng = np.random.default_rng(1)
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    motifs = [Motif(f"r{i}", f"r{i}", rng.gamma(0.3, 10, size=(L, 4)) + 0.01) for i, L in enumerate((6, 7, 8, 8, 9))]
    scanner = MotifScanner(motifs, bg, pvalue=2e-3)
    seqs = [_rand(n, rng, bg) for n in (50, 300, 9, 1000)]
    for q in scanner.matrices:  # plant each motif's best word on both strands
        best = "".join("ACGT"[b] for b in q.argmax(axis=1))
        seqs.append(_rand(20, rng) + best + _rand(15, rng) + reverse_complement(best) + "N" + _rand(5, rng))
    seqs[1] = seqs[1][:100] + "NN" + seqs[1][102:]
    hits, bases = scanner.scan(seqs)
    for i, s in enumerate(seqs):
        for m, (q, t) in enumerate(zip(scanner.matrices, scanner.thresholds)):
            L, want = q.shape[0], 0
            for j in range(len(s) - L + 1):
                w = s[j : j + L]
                if "N" in w:
                    continue
                want += (_score(q, w) >= t) + (_score(q, reverse_complement(w)) >= t)
            assert hits[i, m] == want, (i, m)
    assert hits[len(seqs) - 5 :].diagonal().min() >= 2  # every planted pair found
    assert bases.tolist() == [len(s) - s.count("N") for s in seqs]
    # the cache answers the same
    assert np.array_equal(scanner.scan(seqs[::-1])[0], hits[::-1])


def test_motif_metrics_on_planted_motifs():
    a, b = motif_from_consensus("GGGACTTTCC", id="a"), motif_from_consensus("CACGTGACGT", id="b")
    c = motif_from_consensus("TTGCGCAAAT", id="c")
    scanner = MotifScanner([a, b, c], UNIFORM, pvalue=1e-5)
    pad = "A" * 30
    # reference: 1 kb with 4 a-sites, 2 b-sites, 1 c-site; samples: 500 bp with 2 a, 0 b, 3 c (RC)
    ref = [pad + ("GGGACTTTCC" + pad) * 4 + ("CACGTGACGT" + pad) * 2 + "TTGCGCAAAT"]
    ref[0] += "A" * (1000 - len(ref[0]))
    smp = [pad + ("GGGACTTTCC" + pad) * 2 + (reverse_complement("TTGCGCAAAT") + pad) * 3]
    smp[0] += "A" * (500 - len(smp[0]))
    res = motif_metrics(scanner, smp, ref)
    rates = {r["id"]: (r["samples_per_kb"], r["reference_per_kb"]) for r in res["per_motif"]}
    assert rates == {"a": (4.0, 4.0), "b": (0.0, 2.0), "c": (6.0, 1.0)}
    assert res["hits_per_kb_samples"] == 10.0 and res["hits_per_kb_reference"] == 7.0
    assert res["spearman"] == pytest.approx(spearman(np.array([4, 0, 6]), np.array([4, 2, 1])))
    assert res["spearman"] == pytest.approx(-0.5)  # ranks (2, 1, 3) vs (3, 2, 1)
    p, r = np.array([2, 0, 3]) / 5, np.array([4, 2, 1]) / 7
    m = (p + r) / 2
    kl = lambda x, y: sum(xi * math.log2(xi / yi) for xi, yi in zip(x, y) if xi > 0)  # noqa: E731
    assert res["js"] == pytest.approx(0.5 * kl(p, m) + 0.5 * kl(r, m))
    same = motif_metrics(scanner, ref, ref)
    assert same["js"] == 0.0 and same["spearman"] == pytest.approx(1.0)


def test_background_is_strand_symmetric():
    bg = background_of(["AAAAAAAC"])  # counts + 1: A8 C2 G1 T1 -> symmetrised A=T=4.5, C=G=1.5
    assert bg.tolist() == pytest.approx([0.375, 0.125, 0.125, 0.375])


def test_jaspar_offline_and_planted_ctcf():
    """pyjaspar's bundled JASPAR2024 (no network): a CTCF site and its reverse complement planted in a
    low-complexity background are found on their strands."""
    pytest.importorskip("pyjaspar")
    (ctcf,) = load_jaspar(ids=["MA0139.2"])
    assert ctcf.name == "CTCF" and ctcf.counts.shape == (15, 4)
    scanner = MotifScanner([ctcf], UNIFORM)
    best = "".join("ACGT"[b] for b in scanner.matrices[0].argmax(axis=1))
    filler = "AT" * 30
    assert scanner.scan([filler + best + filler])[0].tolist() == [[1]]
    assert scanner.scan([filler + reverse_complement(best) + filler + best + filler])[0].tolist() == [[2]]
    with pytest.raises(DnadiffError, match="no matrix"):
        load_jaspar(ids=["MA9999.9"])
    with pytest.raises(DnadiffError, match="JASPAR1999"):
        load_jaspar(release="JASPAR1999")


@pytest.mark.slow
def test_full_jaspar_scan_equals_numpy_scoring():
    """All JASPAR2024 CORE vertebrate matrices (lengths up to 33, conv groups of ~140 channels) on random
    sequences, one longer than a scan chunk: the conv scan equals integer scoring in numpy exactly."""
    pytest.importorskip("pyjaspar")
    from dnadiff.eval.dna_metrics import encode

    rng = np.random.default_rng(3)
    seqs = [_rand(n, rng, [0.3, 0.2, 0.2, 0.3]) for n in (5000, 3000, 40000)]
    scanner = MotifScanner(load_jaspar(), background_of(seqs))
    hits, _ = scanner.scan(seqs)
    for i, s in enumerate(seqs):
        fwd, rev = encode(s).astype(np.int64), encode(reverse_complement(s)).astype(np.int64)
        for m, (q, t) in enumerate(zip(scanner.matrices, scanner.thresholds)):
            n = len(s) - q.shape[0] + 1
            f = sum(q[j, fwd[j : j + n]] for j in range(q.shape[0]))
            r = sum(q[j, rev[j : j + n]] for j in range(q.shape[0]))
            assert hits[i, m] == int((f >= t).sum() + (r >= t).sum()), (i, scanner.motifs[m].id)
    assert hits.sum() > 5000
