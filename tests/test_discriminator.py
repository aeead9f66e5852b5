"""The classifier two-sample test of `dnadiff metrics` (issue 46, dnadiff/eval/discriminator.py) and its CNN
(dnadiff/eval/conv_judge.py): separable sets are told apart, two halves of one set are not, the CNN reads
motif co-occurrence a k-mer LR provably cannot, the numbers are seeded, the bad inputs are one line each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dnadiff.cli import main
from dnadiff.errors import DnadiffError
from dnadiff.eval.discriminator import (
    DiscriminatorSettings,
    auroc_standard_error,
    binomial_p_value,
    discriminator_test,
    two_sample_test,
)

SLICE = Path(__file__).resolve().parent / "data" / "chr22_slice"
L = 100
SMALL = dict(channels=8, blocks=1, epochs=8, patience=3, lr=1e-2)  # a CNN that fits in a second


@pytest.fixture(scope="module")
def real_windows() -> list[str]:
    """Non-overlapping 100-bp windows (no N) of the real chr22 slice, in genome order."""
    import pyfaidx

    genome = pyfaidx.Fasta(str(SLICE / "chr22_slice.fa.gz"), rebuild=False)["chr22"]
    out = []
    for line in (SLICE / "sequences.bed").read_text().splitlines():
        _, start, end, _ = line.split()
        seq = str(genome[int(start): int(end)]).upper()
        out += [seq[i: i + L] for i in range(0, len(seq) - L + 1, L) if "N" not in seq[i: i + L]]
    return out


def iid(rng: np.random.Generator, n: int, length: int, gc: float = 0.5) -> list[str]:
    p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return ["".join(rng.choice(list("ACGT"), length, p=p)) for _ in range(n)]


def test_hanley_mcneil_and_binomial_tail_exact():
    # A = 0.5: Q1 = Q2 = 1/3, SE^2 = (1/4 + 9/12 + 9/12) / 100 for 10 + 10
    assert auroc_standard_error(0.5, 10, 10) == pytest.approx(math.sqrt(1.75 / 100))
    assert auroc_standard_error(1.0, 50, 50) == 0.0
    assert binomial_p_value(10, 10) == pytest.approx(0.5**10)
    assert binomial_p_value(0, 10) == 1.0
    assert binomial_p_value(6, 10) == pytest.approx(sum(math.comb(10, k) for k in range(6, 11)) / 1024)


def test_separable_sets_and_two_halves(real_windows):
    rng = np.random.default_rng(1)
    idx = rng.permutation(len(real_windows))
    real = [real_windows[i] for i in idx[:300]]
    gc_shifted = iid(rng, 100, L, gc=0.7)
    settings = DiscriminatorSettings(folds=2, **SMALL)
    for clf in ("cnn", "kmer_lr"):
        apart = two_sample_test(gc_shifted, real[:100], clf, settings, seed=0)
        assert apart["auroc"] > 0.9 and apart["p_value"] < 1e-6, (clf, apart)
        same = two_sample_test(real[100:200], real[200:300], clf, settings, seed=0)
        assert abs(same["auroc"] - 0.5) < 0.1 and same["p_value"] > 0.01, (clf, same)


def test_cnn_reads_motif_co_occurrence_a_kmer_lr_cannot():
    """Set A: every sequence holds motif M1 once and M2 once; set B: M1 twice or M2 twice. The pooled k-mer
    spectra agree (each motif's count is linear in the features, equal in expectation: an XOR for a linear
    model), so the k-mer LR stays near 0.5; a CNN's max-pooled motif detectors see both present or one."""
    rng = np.random.default_rng(0)
    m1, m2, n, length = "TGACTCAG", "CACGTGAC", 200, 50

    def plant(seq: str, motifs: list[str]) -> str:
        s = list(seq)
        for m, p in zip(motifs, rng.choice(np.arange(0, length - 8, 10), len(motifs), replace=False)):
            s[p: p + 8] = m
        return "".join(s)

    a = [plant(s, [m1, m2]) for s in iid(rng, n, length)]
    b = [plant(s, [m1, m1] if i % 2 else [m2, m2]) for i, s in enumerate(iid(rng, n, length))]
    settings = DiscriminatorSettings(folds=2, channels=16, blocks=1, epochs=25, patience=6, lr=1e-2)
    cnn = two_sample_test(a, b, "cnn", settings, seed=0)
    kmer = two_sample_test(a, b, "kmer_lr", settings, seed=0)
    assert cnn["auroc"] > 0.75 and cnn["p_value"] < 1e-6, cnn
    assert kmer["auroc"] < 0.6 and kmer["p_value"] > 0.01, kmer


def test_seeded_reproducible_and_cut_to_one_length(real_windows):
    rng = np.random.default_rng(2)
    samples = [s + "ACGT" * (i % 2) for i, s in enumerate(iid(rng, 40, L, gc=0.6))]  # 100 or 104 bp: cut to 100
    settings = DiscriminatorSettings(folds=2, seed=3, **SMALL)
    ref = real_windows[:80]
    first = discriminator_test(samples, ref, settings)
    again = discriminator_test(samples, ref, settings)
    def numbers(res):  # everything but the CPU seconds each test took
        return json.dumps({k: ({a: b for a, b in v.items() if a != "cpu_s"} if isinstance(v, dict) else v)
                           for k, v in res.items()}, sort_keys=True)

    assert numbers(first) == numbers(again)
    other = discriminator_test(samples, ref, DiscriminatorSettings(folds=2, seed=4, **SMALL))
    assert other["cnn"]["auroc"] != first["cnn"]["auroc"]
    assert first["length"] == 100 and first["n_per_side"] == 40 and "20 sequence(s) longer" in first["cut"]
    assert set(first["cnn"]) >= {"auroc", "std_error", "accuracy", "p_value", "floor_auroc", "floor_p_value"}
    with pytest.raises(DnadiffError, match=r"reference sequence\(s\) are shorter than the shortest sample"):
        discriminator_test(samples, [r[:50] for r in ref], settings)
    with pytest.raises(DnadiffError, match="too few for 2 folds"):
        discriminator_test(samples[:15], ref, settings)


def test_conv_judge_strand_invariant_saved_and_scoring_only(tmp_path):
    import torch

    from dnadiff.eval.conv_judge import ConvJudge, ConvJudgeConfig, save_judge
    from dnadiff.eval.oracle import load_oracle, predict_proba
    from dnadiff.heads.saved import load_classifier_dir
    from dnadiff.tokenizers.dna import reverse_complement_str

    torch.manual_seed(0)
    model = ConvJudge(3, ConvJudgeConfig(channels=8, blocks=2), ["a", "b", "c"]).eval()
    seqs = iid(np.random.default_rng(5), 6, 60)
    p = model.predict_proba(seqs)
    np.testing.assert_allclose(p, model.predict_proba([reverse_complement_str(s) for s in seqs]), atol=1e-6)
    for role in ("evaluation", None):
        save_judge(tmp_path / str(role), model, {"role": role} if role else {})
        loaded, meta = load_oracle(tmp_path / str(role))
        np.testing.assert_allclose(predict_proba(loaded, seqs), p, atol=1e-6)
        with pytest.raises(DnadiffError, match="evaluation oracle" if role else "conv_judge classifier"):
            load_classifier_dir(tmp_path / str(role))


def _fasta(path: Path, seqs: list[str]) -> str:
    path.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(seqs)))
    return str(path)


def test_metrics_cli_discriminator_and_bad_input(tmp_path, real_windows, capsys):
    rng = np.random.default_rng(6)
    samples = _fasta(tmp_path / "samples.fa", iid(rng, 40, L, gc=0.7))
    reference = _fasta(tmp_path / "real.fa", real_windows[:90])
    out = tmp_path / "m"
    base = ["--no-motifs", "--no-plots", "--kmax", "2", "--discriminator-folds", "2", "-q"]
    assert main(["metrics", samples, "--reference", reference, "--out", str(out), "--discriminator", *base]) == 0
    d = json.loads((out / "metrics.json").read_text())["discriminator"]
    assert d["n_per_side"] == 40 and d["kmer_lr"]["auroc"] > 0.9 and d["kmer_lr"]["p_value"] < 1e-6
    assert 0.3 < d["kmer_lr"]["floor_auroc"] < 0.7 and set(d["cnn"]) >= {"auroc", "std_error", "floor_auroc"}
    capsys.readouterr()
    bad = [  # (argv, what the one error line says)
        ([samples, "--reference", _fasta(tmp_path / "few.fa", real_windows[:30]), "--discriminator"], "too few"),
        ([samples, "--reference", _fasta(tmp_path / "short.fa", [r[:60] for r in real_windows[:90]]),
          "--discriminator"], "shorter than the shortest sample"),
        ([samples, "--reference", reference, "--disjoint-from", _fasta(tmp_path / "train.fa", real_windows[50:60])],
         "share an exact match of >= 50 bp"),
    ]
    for i, (argv, message) in enumerate(bad):
        assert main(["metrics", *argv, "--out", str(tmp_path / f"bad{i}"), *base]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
        assert not (tmp_path / f"bad{i}").exists()


def test_default_runs_only_where_the_reference_is_large_enough():
    from dnadiff.eval.discriminator import AUTO_MIN, settings_for

    assert settings_for(None, AUTO_MIN - 1, 10 * AUTO_MIN, 5, 0, floor=True) is None  # too few samples: skipped
    assert settings_for(None, AUTO_MIN, 2 * AUTO_MIN - 2, 5, 0, floor=True) is None  # floor needs 2x reference
    on = settings_for(None, AUTO_MIN, 2 * AUTO_MIN, 5, 7, floor=True)
    assert on is not None and on.seed == 7 and on.folds == 5 and on.floor
    assert settings_for(False, 1000, 4000, 5, 0, floor=True) is None
    assert settings_for(True, 60, 60, 5, 0, floor=False) is not None  # asked for: 10 per fold and side suffice
    with pytest.raises(DnadiffError, match="too few for 5 folds"):
        settings_for(True, 60, 60, 5, 0, floor=True)
    with pytest.raises(DnadiffError, match="--discriminator-folds must be at least 2"):
        settings_for(True, 600, 6000, 1, 0, floor=True)
