"""The in-house Fréchet distance (closed forms), classifier embeddings, held-out classifier accuracy on
class-conditional samples, and their options in `dnadiff metrics`."""

from __future__ import annotations

import argparse
import json
import math
import random

import numpy as np
import pytest
import torch

from dnadiff.errors import DnadiffError
from dnadiff.eval.encoders import (
    Embedder,
    class_index,
    classifier_accuracy,
    frechet_distance,
    frechet_from_embeddings,
    gaussian_fit,
)
from helpers.random_dna import random_dna


def test_frechet_closed_forms():
    # 1-D: (m1 - m2)^2 + (s1 - s2)^2
    assert frechet_distance([1.0], [[4.0]], [3.0], [[9.0]]) == pytest.approx(4.0 + 1.0)
    # commuting (diagonal) covariances: ||dm||^2 + sum (sqrt(a) - sqrt(b))^2
    d = frechet_distance([0, 0, 0], np.diag([1.0, 4.0, 9.0]), [1, 2, 2], np.diag([4.0, 4.0, 1.0]))
    assert d == pytest.approx(9.0 + 1.0 + 0.0 + 4.0)
    # non-commuting 2x2: Tr (S1 S2)^½ = sqrt(tr(S1 S2) + 2 sqrt(det(S1 S2)))
    s1, s2 = np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([[3.0, 0.0], [0.0, 1.0]])
    p = s1 @ s2
    tr_sqrt = math.sqrt(np.trace(p) + 2 * math.sqrt(np.linalg.det(p)))
    want = 0.5**2 + np.trace(s1) + np.trace(s2) - 2 * tr_sqrt
    assert frechet_distance([0.5, 0.0], s1, [0.0, 0.0], s2) == pytest.approx(want, rel=1e-12)
    # a singular covariance (rank 1) against itself
    s = np.outer([1.0, 2.0], [1.0, 2.0])
    assert frechet_distance([1, 1], s, [1, 1], s) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(DnadiffError, match="shapes"):
        frechet_distance([0, 0], np.eye(2), [0], np.eye(1))


def test_frechet_of_embeddings_identical_and_shifted():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 8))
    assert frechet_from_embeddings(x, x.copy()) == pytest.approx(0.0, abs=1e-9)
    shift = np.arange(8) / 4
    assert frechet_from_embeddings(x, x + shift) == pytest.approx(float((shift**2).sum()), rel=1e-9)
    few = rng.normal(size=(5, 16))  # fewer embeddings than dimensions: singular covariances
    assert frechet_from_embeddings(few, few[::-1]) == pytest.approx(0.0, abs=1e-9)
    mu, cov = gaussian_fit(np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert mu.tolist() == [1.0, 2.0] and cov.tolist() == [[2.0, 2.0], [2.0, 2.0]]  # ddof = 1
    with pytest.raises(DnadiffError, match="at least 2"):
        gaussian_fit(x[:1])


def _classifier(backbone="hyena", preset="tiny", bias=None, seed=0):
    from dnadiff.backbones import build_backbone
    from dnadiff.heads.classifier import SequenceClassifier

    torch.manual_seed(seed)
    clf = SequenceClassifier(build_backbone(backbone, preset=preset, vocab_size=12), 2).eval()
    if bias is not None:  # a constant classifier: logits = bias for every input
        with torch.no_grad():
            clf.head.dense.weight.zero_()
            clf.head.dense.bias.copy_(torch.tensor(bias))
    return clf


@pytest.mark.parametrize("backbone,preset", [("hyena", "tiny"), ("caduceus", "tiny-ph")])
def test_embedder_is_the_pooled_head_input(backbone, preset):
    """The embedding is what the classifier's head sees: mean-pooled backbone features, averaged over
    both strands for a post-hoc conjoined (ph) classifier."""
    from dnadiff.heads.pooling import pool
    from dnadiff.tokenizers.dna import DNATokenizer

    clf = _classifier(backbone, preset)
    rng = random.Random(0)
    seqs = [random_dna(24, rng) for _ in range(3)]
    emb = Embedder(clf, batch_size=2)(seqs)
    ids = torch.tensor([DNATokenizer().encode(s) for s in seqs])
    with torch.no_grad():
        want = pool(clf.features(ids), None, clf.pooling)
        if clf.conjoin == "ph":
            want = 0.5 * (want + pool(clf.features(clf.reverse_complement(ids)), None, clf.pooling))
    assert emb.shape == (3, clf.head.dense.in_features)
    assert np.allclose(emb, want.double().numpy(), atol=1e-5)
    assert clf.conjoin == ("ph" if backbone == "caduceus" else "none")


def test_classifier_accuracy_of_a_constant_classifier():
    """A classifier that always says class 1 with logits (0, 1): accuracy = share of samples generated for
    class 1; mean p(class) = their share of sigmoid(1) plus the rest's share of 1 - sigmoid(1)."""
    clf = _classifier(bias=[0.0, 1.0])
    rng = random.Random(1)
    seqs = [random_dna(20, rng) for _ in range(5)]
    labels = ["pos", "pos", "neg", "1", "pos"]  # a class index works too
    res = classifier_accuracy(clf, ["neg", "pos"], seqs, labels, batch_size=2)
    sig = 1 / (1 + math.exp(-1))
    assert res["accuracy"] == pytest.approx(4 / 5)
    assert res["mean_probability"] == pytest.approx((4 * sig + (1 - sig)) / 5)
    assert res["per_class"] == {"neg": {"num": 1, "accuracy": 0.0}, "pos": {"num": 4, "accuracy": 1.0}}
    assert res["predicted"] == {"neg": 0, "pos": 5}
    assert class_index("neg", ["neg", "pos"]) == 0
    with pytest.raises(DnadiffError, match="knows the classes neg, pos"):
        class_index("enhancer", ["neg", "pos"])
    with pytest.raises(DnadiffError, match="2 labels for 5"):
        classifier_accuracy(clf, ["neg", "pos"], seqs, labels[:2])


def _write(path, records):
    path.write_text("".join(f">{name}\n{s}\n" for name, s in records))
    return str(path)


def test_metrics_command_embedder_and_classifier(tmp_path, capsys):
    from dnadiff.commands import metrics as cmd
    from dnadiff.heads.saved import save_classifier_dir

    rng = random.Random(5)
    ref = [random_dna(64, rng) for _ in range(24)]
    smp_recs = [(f"sample_{i} sampler=ancestral length=64 seed=0 class=pos guidance=0.0", random_dna(64, rng))
                for i in range(6)]
    smp = _write(tmp_path / "s.fa", smp_recs)
    rf = _write(tmp_path / "r.fa", [(str(i), s) for i, s in enumerate(ref)])
    emb_dir = save_classifier_dir(tmp_path / "emb", _classifier(seed=1), ["neg", "pos"])
    clf_dir = save_classifier_dir(tmp_path / "clf", _classifier(bias=[0.0, 1.0]), ["neg", "pos"])
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    out = tmp_path / "out"
    base = [smp, "--reference", rf, "--kmax", "2", "--motif-ids", "MA0139.2,MA0079.5,MA0060.4"]
    assert cmd.run(parser.parse_args(base + ["--out", str(out), "--embedder", str(emb_dir),
                                             "--classifier", str(clf_dir)])) == 0
    res = json.loads((out / "metrics.json").read_text())
    fre = res["samples"]["frechet"]
    assert fre["distance"] > 0 and "not comparable with published SFID/FBD" in fre["note"]
    assert res["floor"]["frechet"]["distance"] > 0
    assert (res["classifier"]["accuracy"] == 1.0
            and res["classifier"]["per_class"] == {"pos": {"num": 6, "accuracy": 1.0}})
    assert (res["settings"]["motifs"]["num_motifs"] == 3
            and res["settings"]["motifs"]["source"].startswith("JASPAR2024 ids"))
    assert [m["id"] for m in res["samples"]["motifs"]["per_motif"]] == ["MA0139.2", "MA0079.5", "MA0060.4"]
    printed = capsys.readouterr().out
    assert ("Frechet distance (in-house embedder; not SFID/FBD)" in printed
            and "held-out classifier accuracy (n=6)" in printed)
    # --label overrides the headers: the constant classifier never says "neg"
    out2 = tmp_path / "out2"
    assert cmd.run(parser.parse_args(base + ["--out", str(out2), "--no-motifs", "--classifier", str(clf_dir),
                                             "--label", "neg"])) == 0
    res2 = json.loads((out2 / "metrics.json").read_text())
    assert res2["classifier"]["accuracy"] == 0.0 and "motifs" not in res2["samples"]
    # the samples' FASTA and the same reference: the Fréchet distance is 0
    out3 = tmp_path / "out3"
    assert cmd.run(parser.parse_args([smp, "--reference", smp, "--out", str(out3), "--no-motifs", "--no-floor",
                                      "--no-plots", "--embedder", str(emb_dir)])) == 0
    assert (json.loads((out3 / "metrics.json").read_text())["samples"]["frechet"]["distance"]
            == pytest.approx(0, abs=1e-8))
    # bad input: named in one line, before any work
    plain = _write(tmp_path / "plain.fa", [(str(i), s) for i, (_, s) in enumerate(smp_recs)])
    with pytest.raises(DnadiffError, match="plain.fa: record '0' has no class=NAME"):
        cmd.run(parser.parse_args([plain, "--reference", rf, "--out", str(tmp_path / "o4"),
                                   "--classifier", str(clf_dir)]))
    with pytest.raises(DnadiffError, match="--label 'enhancer': the classifier knows the classes neg, pos"):
        cmd.run(parser.parse_args(base + ["--out", str(tmp_path / "o5"), "--classifier", str(clf_dir),
                                          "--label", "enhancer"]))
    with pytest.raises(DnadiffError, match="--label needs --classifier"):
        cmd.run(parser.parse_args(base + ["--out", str(tmp_path / "o6"), "--label", "pos"]))
    with pytest.raises(DnadiffError, match="--embedder .*nope: no such classifier directory"):
        cmd.run(parser.parse_args(base + ["--out", str(tmp_path / "o7"), "--embedder", str(tmp_path / "nope")]))
    with pytest.raises(DnadiffError, match="--motif-pvalue"):
        cmd.run(parser.parse_args(base + ["--out", str(tmp_path / "o8"), "--motif-pvalue", "2"]))
    with pytest.raises(DnadiffError, match="no matrix 'MA0000.0'"):
        cmd.run(parser.parse_args([smp, "--reference", rf, "--out", str(tmp_path / "o9"), "--motif-ids", "MA0000.0"]))
    assert not (tmp_path / "o4").exists() and not (tmp_path / "o9").exists()


def test_stored_reference_embeddings_are_read_back_not_recomputed(tmp_path, caplog):
    """persist=True vectors go to the .npz store; a new Embedder on the same store reads them (exactly)
    instead of running the model; samples (persist=False) are not stored; a damaged store is rebuilt."""
    from dnadiff.eval.encoders import fingerprint
    from dnadiff.heads.saved import save_classifier_dir

    rng = random.Random(7)
    ref, smp = [random_dna(40, rng) for _ in range(5)], [random_dna(40, rng) for _ in range(2)]
    store = tmp_path / "cache" / "emb.npz"
    first = Embedder(_classifier(seed=3), batch_size=2, store=store)
    want = first(ref, persist=True)
    first(smp)
    with np.load(store) as z:
        assert len(z["keys"]) == 5 and np.array_equal(z["vectors"], want)  # the reference only

    second = Embedder(_classifier(seed=3), batch_size=2, store=store)
    second._embed = lambda seqs, progress: (_ for _ in ()).throw(AssertionError(f"embedded {len(seqs)}"))
    assert np.array_equal(second(ref[::-1], persist=True), want[::-1]) and second.store_hits == 5
    with pytest.raises(AssertionError, match="embedded 2"):  # the samples were never stored
        second(smp, persist=True)

    store.write_bytes(b"not an npz")
    third = Embedder(_classifier(seed=3), batch_size=2, store=store)
    assert np.allclose(third(ref, persist=True), want, atol=1e-12) and third.store_hits == 0
    assert "unreadable stored embeddings" in caplog.text
    with np.load(store) as z:
        assert len(z["keys"]) == 5
    # the store's key: the directory's content (retrained weights, another key)
    a = save_classifier_dir(tmp_path / "a", _classifier(seed=1), ["neg", "pos"])
    b = save_classifier_dir(tmp_path / "b", _classifier(seed=1), ["neg", "pos"])
    c = save_classifier_dir(tmp_path / "c", _classifier(seed=2), ["neg", "pos"])
    assert fingerprint(a) == fingerprint(b) != fingerprint(c)


def test_metrics_command_stores_the_reference_embeddings(tmp_path, monkeypatch):
    """A second `dnadiff metrics --embedder` on the same reference reads its vectors from the cache folder:
    the same Fréchet distance; --no-embedding-cache neither reads nor writes it."""
    from dnadiff.commands import metrics as cmd
    from dnadiff.eval import encoders
    from dnadiff.heads.saved import save_classifier_dir

    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    rng = random.Random(8)
    smp = _write(tmp_path / "s.fa", [(str(i), random_dna(48, rng)) for i in range(4)])
    rf = _write(tmp_path / "r.fa", [(str(i), random_dna(48, rng)) for i in range(12)])
    emb_dir = save_classifier_dir(tmp_path / "emb", _classifier(seed=4), ["neg", "pos"])
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    hits = []
    real_call = encoders.Embedder.__call__

    def counting(self, seqs, progress=False, persist=False):
        out = real_call(self, seqs, progress, persist)
        hits.append(self.store_hits)
        return out

    monkeypatch.setattr(encoders.Embedder, "__call__", counting)
    common = [smp, "--reference", rf, "--no-motifs", "--no-plots", "--embedder", str(emb_dir), "--kmax", "2"]

    def distance(name, *extra):
        assert cmd.run(parser.parse_args(common + ["--out", str(tmp_path / name), *extra])) == 0
        return json.loads((tmp_path / name / "metrics.json").read_text())["samples"]["frechet"]["distance"]

    d1 = distance("o1")
    stored = list((tmp_path / "cache" / "embeddings").glob("*.npz"))
    assert len(stored) == 1 and stored[0].stem == encoders.fingerprint(emb_dir) and max(hits) == 0
    hits.clear()
    assert distance("o2") == d1 and max(hits) == 12  # every reference window read back
    stored[0].unlink()
    hits.clear()
    assert distance("o3", "--no-embedding-cache") == pytest.approx(d1, abs=1e-9) and max(hits) == 0
    assert not stored[0].exists()


def test_embedder_of_a_model_directory(tmp_path):
    """A generative model directory embeds by the mean of its backbone features over real positions at
    t = 0; padding a shorter sequence in a batch does not change its embedding."""
    from dnadiff.backbones import build_backbone
    from dnadiff.commands.metrics import load_embedder
    from dnadiff.config import RunConfig, load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    tok = DNATokenizer()
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=32"])
    torch.manual_seed(0)
    backbone = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)
    save_model_dir(tmp_path / "model", cfg, backbone, tok)
    rng = random.Random(2)
    seqs = [random_dna(30, rng), random_dna(18, rng)]
    emb = load_embedder(str(tmp_path / "model"), seqs[:1])
    got = emb(seqs)
    with torch.no_grad():
        for s, row in zip(seqs, got):
            ids = torch.tensor([tok.encode(s)])
            t = torch.zeros(1) if getattr(backbone, "time_conditioned", False) else None
            want = backbone.eval().features(ids, t).mean(1)[0].double().numpy()
            assert np.allclose(row, want, atol=1e-5)
    assert Embedder(emb.model, batch_size=1)(seqs[1:]) == pytest.approx(got[1:], abs=1e-5)
    with pytest.raises(DnadiffError, match="--embedder .*not a classifier directory"):
        load_embedder(str(tmp_path), seqs)
