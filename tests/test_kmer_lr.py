"""k-mer-count logistic regression baseline: exact features, the finetune protocol, the CLI row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dnadiff.classifier_tuning.config import load_finetune_config
from dnadiff.classifier_tuning.kmer_lr import kmer_features, kmer_options, run_kmer_lr
from dnadiff.errors import DnadiffError


def idx(kmer: str) -> int:
    return int("".join(str("ACGT".index(b)) for b in kmer), 4)


def test_features_are_per_k_frequencies_on_both_strands():
    x = kmer_features(["AACN"], ks=[2], both_strands=False).toarray()[0]
    assert x[idx("AA")] == x[idx("AC")] == 0.5 and x.sum() == 1.0  # CN skipped
    x = kmer_features(["AACN"], ks=[2], both_strands=True).toarray()[0]  # + reverse complement NGTT
    assert all(x[idx(k)] == 0.25 for k in ("AA", "AC", "GT", "TT")) and x.sum() == 1.0
    x = kmer_features(["ACGTA", "NN"], ks=[1, 3]).toarray()
    assert x.shape == (2, 4 + 64)
    np.testing.assert_allclose(x[0, :4].sum(), 1.0)
    np.testing.assert_allclose(x[0, 4:].sum(), 1.0)
    assert x[1].sum() == 0.0  # no valid k-mer: an all-zero row, not NaN
    # a sequence and its reverse complement have the same both-strand features
    a, b = kmer_features(["AACGTTTGCA", "TGCAAACGTT"], ks=[3, 4]).toarray()
    np.testing.assert_allclose(a, b)


def make_benchmark(root, n_train=60, n_test=30, length=80, seed=0):
    """Two classes that differ in a 4-mer: 'motif' sequences hold GATC repeats, 'plain' ones do not."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        for cls in ("motif", "plain"):
            d = root / split / cls
            d.mkdir(parents=True)
            for i in range(n):
                s = list(rng.choice(list("ACT"), length))
                if cls == "motif":
                    for p in rng.choice(length - 4, 4, replace=False):
                        s[p:p + 4] = list("GATC")
                (d / f"{i}.txt").write_text("".join(s[:length]))
    return root


def test_protocol_runs_choice_of_c_and_metrics(tmp_path):
    bench = make_benchmark(tmp_path / "bench")
    cfg = load_finetune_config("finetune/finetune_base", [
        f"data.dataset={bench}", "model.backbone=kmer_lr", "protocol.seeds=[0,1,2]",
        "model.overrides.ks=[3,4]", "model.overrides.c_grid=[0.0001,0.1]"])
    res = run_kmer_lr(cfg, tmp_path / "out", echo=lambda *a: None)
    assert res["num_train"] == 120 and res["num_test"] == 60 and len(res["runs"]) == 3
    from dnadiff.classifier_tuning.protocol import protocol_runs

    runs = protocol_runs(cfg, np.repeat([0, 1], 60))  # the neural heads' splits
    assert [(r["run"], r["num_train"], r["num_valid"]) for r in res["runs"]] == \
        [(n, len(tr), len(va)) for n, _, tr, va in runs]
    by_c = res["val_acc_by_lr"]
    assert res["selected_C"] == max((float(c) for c in by_c), key=lambda c: (by_c[f"{c:g}"], -c))
    assert res["summary"]["accuracy"]["mean"] > 0.9  # GATC is a 4-mer: trivially separable
    assert res["summary"]["accuracy"]["n"] == 3
    for r in res["runs"]:  # per test sequence outcomes, in the test set's order, for paired comparisons
        assert len(r["test_correct"]) == 60
        assert sum(r["test_correct"]) / 60 == pytest.approx(r["test"]["accuracy"], abs=1e-12)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["summary"] == res["summary"]


def test_same_row_through_dnadiff_finetune(tmp_path):
    from dnadiff.classifier_tuning.runs import run_finetune

    bench = make_benchmark(tmp_path / "bench", n_train=30, n_test=10)
    cfg = load_finetune_config("finetune/finetune_base", [
        f"data.dataset={bench}", "model.backbone=kmer_lr", "protocol.seeds=[0]", "model.overrides.ks=[2]",
        "model.overrides.c_grid=[1.0]"])
    a = run_finetune(cfg, tmp_path / "a", echo=lambda *a: None)
    b = run_kmer_lr(cfg, tmp_path / "b", echo=lambda *a: None)
    assert a["backbone"] == "kmer_lr" and a["summary"] == b["summary"]


def test_bad_options_name_the_field():
    with pytest.raises(DnadiffError, match="model.overrides: unknown"):
        kmer_options({"kk": [3]})
    with pytest.raises(DnadiffError, match="model.overrides.ks"):
        kmer_options({"ks": [0]})
    with pytest.raises(DnadiffError, match="model.overrides.c_grid"):
        kmer_options({"c_grid": [-1]})


def test_two_class_row_keeps_a_classifier_that_predicts_exactly(tmp_path, monkeypatch):
    """Two classes: scikit-learn's single-margin model (coef of one row) saved and read back bit for bit."""
    from dnadiff.classifier_tuning import kmer_lr
    from dnadiff.eval.oracle import load_oracle, predict_proba

    saved = []
    real = kmer_lr.save_classifier
    monkeypatch.setattr(kmer_lr, "save_classifier", lambda out, pipe, *a: (saved.append(pipe), real(out, pipe, *a)))
    bench = make_benchmark(tmp_path / "bench", n_train=30, n_test=10)
    cfg = load_finetune_config("finetune/finetune_base", [
        f"data.dataset={bench}", "model.backbone=kmer_lr", "protocol.seeds=[0,1]", "model.overrides.ks=[3,4]",
        "model.overrides.c_grid=[0.01,1.0]"])
    res = run_kmer_lr(cfg, tmp_path / "out", echo=lambda *a: None)
    assert res["classifier_dir"] == "classifier" and len(saved) == 1
    model, meta = load_oracle(tmp_path / "out" / "classifier")
    assert meta["classes"] == ["motif", "plain"] and "role" not in meta and meta["C"] == res["selected_C"]
    assert meta["val_acc"] == max(r["val_acc"] for r in res["runs"])  # the chosen C's best run
    seqs = ["GATCGATCAAACCCTTT", "ACTACTACTTTTCCCAAA", "NNNN", "acgtgatc"]
    want = saved[0].predict_proba(kmer_features([s.upper() for s in seqs], [3, 4]))
    got = predict_proba(model, seqs)
    assert want.shape == (4, 2) and np.array_equal(got, want)
