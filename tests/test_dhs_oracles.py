"""The DHS oracles (issue 34 §3, the DRAKES protocol): the disjoint training halves (`dhs:half_a` /
`dhs:half_b`), the evaluation oracle's role mark and its refusal by everything that guides or fine-tunes,
the FASTA scorer (dnadiff/eval/oracle.py) and pipelines/dhs_oracles.py --scale tiny, on the 300-row fixture."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.cli import main
from dnadiff.data import dhs
from dnadiff.data.dhs import CELL_TYPES, load_dhs, parse_dhs_table
from dnadiff.errors import DnadiffError
from dnadiff.eval.oracle import accuracy_table, load_oracle, predict_proba, score_fasta, target_rate
from dnadiff.guidance.rewards import build_reward
from dnadiff.heads.classifier import SequenceClassifier
from dnadiff.heads.saved import load_classifier_dir, save_classifier_dir
from helpers.cli_model import tiny_model_dir

FIXTURE = Path(__file__).resolve().parent / "data" / "dhs" / "dhs_fixture.txt"


@pytest.fixture
def stored(tmp_path, monkeypatch):
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    table = parse_dhs_table(FIXTURE.read_bytes(), str(FIXTURE), "fixture")
    dhs.store_dhs(table)
    return table


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# ----------------------------------------------------------------------------- the halves


def test_halves_partition_the_training_split_by_content(stored):
    table = load_dhs()
    train = table.indices("train")
    seqs = {int(i): table.sequences(None)[i] for i in train}
    # the rule, computed independently: first byte of sha256(sequence) even -> half_a
    expect_a = [i for i in train if hashlib.sha256(seqs[int(i)].encode()).digest()[0] % 2 == 0]
    a, b = dhs.train_half(table, "half_a"), dhs.train_half(table, "half_b")
    assert a.tolist() == expect_a
    assert sorted(a.tolist() + b.tolist()) == train.tolist() and not set(a.tolist()) & set(b.tolist())
    assert not {seqs[int(i)] for i in a} & {seqs[int(i)] for i in b}
    assert len(a) == 55 and len(b) == 45  # the fixture's 100 training rows
    with pytest.raises(DnadiffError, match="DHS training half must be one of half_a, half_b"):
        dhs.train_half(table, "half_c")


def test_finetune_splits_of_a_half(stored):
    table = load_dhs()
    seqs = table.sequences(None)
    for name, half, split in [("dhs:half_a", "half_a", "test"), ("dhs:half_b:valid", "half_b", "valid"),
                              ("dhs:half_a:test", "half_a", "test")]:
        train, test = dhs.finetune_splits(name)
        rows = dhs.train_half(table, half)
        assert train.sequences == [seqs[i] for i in rows]
        assert train.labels == table.labels[rows].tolist()
        assert test.sequences == [seqs[i] for i in table.indices(split)]
    assert dhs.parse_finetune_name("dhs") == (None, "test") and dhs.parse_finetune_name("dhs:valid") == (None, "valid")
    assert dhs.parse_finetune_name("benchmarks/x") is None
    for bad in ("dhs:half_c", "dhs:valid:half_a", "dhs:half_a:train", "dhs:"):
        with pytest.raises(DnadiffError, match=r"is not a DHS selection; use dhs\[:half_a\|:half_b\]\[:test\|:valid\]"):
            dhs.finetune_splits(bad)


def test_finetune_kmer_lr_on_a_half(stored, tmp_path):
    out = tmp_path / "ft"
    assert main(["finetune", "finetune/finetune_dhs", "data.dataset=dhs:half_b:valid", "model.backbone=kmer_lr",
                 "protocol.seeds=[0]", "model.overrides.c_grid=[1.0]", "model.overrides.ks=[2]", "--out", str(out),
                 "-q"]) == 0
    result = json.loads((out / "results.json").read_text())
    assert result["num_train"] == 45 and result["num_test"] == 100


# ----------------------------------------------------------------------------- the role mark


def tiny_classifier(seed: int = 0) -> SequenceClassifier:
    torch.manual_seed(seed)
    return SequenceClassifier(build_backbone("caduceus", preset="tiny-ph", vocab_size=12), 4, conjoin="ph").eval()


@pytest.fixture
def oracle_dirs(tmp_path):
    ev = save_classifier_dir(tmp_path / "eval_oracle", tiny_classifier(1), list(CELL_TYPES), {"role": "evaluation"})
    rw = save_classifier_dir(tmp_path / "reward_classifier", tiny_classifier(2), list(CELL_TYPES), {"role": "reward"})
    return ev, rw


def test_evaluation_oracle_is_refused_by_rewards(oracle_dirs):
    ev, rw = oracle_dirs
    with pytest.raises(DnadiffError, match="an evaluation oracle .* only scores; guidance and fine-tuning may not"):
        build_reward(f"classifier:{ev}", target="HepG2")
    with pytest.raises(DnadiffError, match="an evaluation oracle"):
        load_classifier_dir(ev)
    reward = build_reward(f"classifier:{rw}", target="HepG2")  # the reward classifier is fine
    assert reward.target == CELL_TYPES.index("HepG2")
    model, meta = load_oracle(ev)  # scoring may read it
    assert meta["role"] == "evaluation"
    # the same weights either way
    want = tiny_classifier(1).state_dict()
    assert all(torch.equal(v, want[k]) for k, v in model.state_dict().items())


def test_unknown_role_is_one_line(tmp_path):
    path = save_classifier_dir(tmp_path / "c", tiny_classifier(), list(CELL_TYPES), {"role": "judge"})
    with pytest.raises(DnadiffError, match=r"classifier.json: role is 'judge', expected one of reward, evaluation"):
        load_oracle(path)


@pytest.mark.parametrize("command", ["design", "design-finetune"])
def test_cli_refuses_the_evaluation_oracle_in_one_line(oracle_dirs, tmp_path, capsys, command):
    ev, _ = oracle_dirs
    model = tiny_model_dir(tmp_path, seq_len=16)
    if command == "design":
        argv = ["design", model, "--reward", f"classifier:{ev}", "--target", "HepG2", "--num", "2", "--length", "16",
                "--steps", "2", "--out", str(tmp_path / "d.fa"), "--threads", "1"]
    else:
        argv = ["design-finetune", model, "--method", "drakes", "--kl-weight", "0.1", "--reward", f"classifier:{ev}",
                "--target", "HepG2", "--out",
                str(tmp_path / "ft"), "--length", "16", "--threads", "1", "-q"]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"{ev}: an evaluation oracle (classifier.json role: evaluation) only scores" in line
    assert not (tmp_path / "ft" / "model.safetensors").exists()


def test_finetune_config_role_is_checked(capsys):
    assert main(["finetune", "finetune/finetune_dhs_oracle_eval", "model.role=judge", "--print-config"]) == 2
    assert "model.role" in one_error_line(capsys)


# ----------------------------------------------------------------------------- scoring


class CountA(torch.nn.Module):
    """A fake oracle: logits 10 * one-hot of (number of A's mod 4), so the argmax is known exactly."""

    num_classes = 4

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids, mask=None):
        k = ((ids == 7) & (mask.bool() if mask is not None else True)).sum(1) % 4
        return torch.nn.functional.one_hot(k, 4).double() * 10.0 + self.w


def test_accuracy_table_and_target_rate_exact():
    probs = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]])
    t = accuracy_table(probs, [0, 1, 2, 3], CELL_TYPES)
    assert t["accuracy"] == 0.75 and t["per_class"] == {"GM12878": 1.0, "HepG2": 1.0, "K562": 0.0, "hESC": 1.0}
    assert t["confusion"][2] == [0, 1, 0, 0] and t["counts"]["K562"] == 1
    r = target_rate(probs, [1, 1, 1, 0], CELL_TYPES)
    assert r["rate"] == 0.5 and r["per_class"]["HepG2"]["rate"] == pytest.approx(2 / 3)
    assert r["per_class"]["HepG2"]["mean_p_target"] == pytest.approx((0.1 + 0.7 + 0.7) / 3)
    assert r["per_class"]["GM12878"]["predicted"] == {"GM12878": 0, "HepG2": 0, "K562": 0, "hESC": 1}


def test_score_fasta_target_rate(tmp_path, capsys):
    seqs = ["CCCC", "ACCC", "AACC", "AAAC", "AAAA", "AGGG"]  # A counts 0 1 2 3 4 1 -> classes 0 1 2 3 0 1
    fa = tmp_path / "s.fa"
    fa.write_text("".join(f">s{i} class={c}\n{s}\n" for i, (s, c) in
                          enumerate(zip(seqs, ["GM12878", "HepG2", "HepG2", "hESCT0", "K562", "HepG2"]))))
    meta = {"classes": list(CELL_TYPES), "role": "evaluation", "backbone": "fake"}
    got = score_fasta(fa, "fake", model_and_meta=(CountA(), meta))  # targets from the headers
    assert got["n"] == 6 and got["rate"] == pytest.approx(4 / 6)
    assert got["per_class"]["HepG2"]["rate"] == pytest.approx(2 / 3) and got["per_class"]["K562"]["rate"] == 0.0
    one = score_fasta(fa, "fake", target="HepG2", model_and_meta=(CountA(), meta))
    assert one["rate"] == pytest.approx(2 / 6) and set(one["per_class"]) == {"HepG2"}
    with pytest.raises(DnadiffError, match="target: 'liver' is not one of the oracle's classes"):
        score_fasta(fa, "fake", target="liver", model_and_meta=(CountA(), meta))
    bare = tmp_path / "b.fa"
    bare.write_text(">x\nACGT\n")
    with pytest.raises(DnadiffError, match="record 'x' has no class=NAME in its header"):
        score_fasta(bare, "fake", model_and_meta=(CountA(), meta))


def test_predict_proba_matches_the_classifier_and_pads(oracle_dirs, tmp_path):
    ev, _ = oracle_dirs
    model, _ = load_oracle(ev)
    tok_ids = {"A": 7, "C": 8, "G": 9, "T": 10}
    seqs = ["ACGTACGTAA", "GGGCCCAATT", "TTTTACG"]
    probs = predict_proba(model, seqs, batch_size=2)
    with torch.no_grad():
        for i, s in enumerate(seqs):  # one at a time, no padding: the same probabilities
            want = model(torch.tensor([[tok_ids[c] for c in s]])).double().softmax(-1)[0].numpy()
            np.testing.assert_allclose(probs[i], want, rtol=1e-5, atol=1e-6)
    fa = tmp_path / "g.fa"
    fa.write_text("".join(f">g{i}\n{s}\n" for i, s in enumerate(seqs)))
    got = score_fasta(fa, ev, target="K562")
    assert got["rate"] == pytest.approx(float((probs.argmax(1) == 2).mean())) and got["oracle_role"] == "evaluation"


# ----------------------------------------------------------------------------- the pipeline


@pytest.mark.training
def test_pipeline_tiny(tmp_path, monkeypatch):
    import dhs_oracles  # pipelines/ is on sys.path in the tests (pyproject.toml)

    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "unused"))  # restored after: the pipeline points it elsewhere
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert dhs_oracles.main(["--scale", "tiny", "--out", str(out)]) == 0
    result = json.loads((out / "dhs_oracles.json").read_text())
    rw, ev = result["oracles"]["reward"], result["oracles"]["evaluation"]
    assert (rw["backbone"], rw["half"], ev["backbone"], ev["half"]) == ("caduceus", "half_a", "kmer_lr", "half_b")
    assert ev["hyperparameter"] == "C"
    assert [r["lr"] for r in ev["runs"]] == ev["lr_grid"] == [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 0.1]
    assert rw["num_train"] + ev["num_train"] == 100  # the halves of the fixture's 100 training rows
    assert json.loads((out / "eval_oracle" / "classifier.json").read_text())["role"] == "evaluation"
    assert json.loads((out / "reward_classifier" / "classifier.json").read_text())["role"] == "reward"
    assert "an evaluation oracle" in result["evaluation_oracle_refused_as_reward"]
    table = load_dhs()  # the pipeline's tiny cache is in $DNADIFF_CACHE now
    for o in (rw, ev):
        assert o["test"]["n"] == 100 and sum(o["test"]["counts"].values()) == 100
        chosen = max(o["runs"], key=lambda r: r["valid_split_accuracy"])
        assert o["chosen_lr"] == chosen["lr"]
        assert o["valid"]["accuracy"] == pytest.approx(chosen["valid_split_accuracy"])
        model, _ = load_oracle(out / Path(o["dir"]).name)
        rows = table.indices("test")
        probs = predict_proba(model, [table.sequences(None)[i] for i in rows])
        assert o["test"]["accuracy"] == pytest.approx(float((probs.argmax(1) == table.labels[rows]).mean()))
    md = (out / "dhs_oracles.md").read_text()
    assert "| reward | caduceus tiny-ph |" in md and "| evaluation | kmer_lr k 3-6 |" in md


# ----------------------------------------------------------------------------- the k-mer LR evaluation oracle


@pytest.fixture
def kmer_oracle(stored, tmp_path, monkeypatch):
    """`dnadiff finetune ... model.backbone=kmer_lr model.role=evaluation` on half_b of the fixture: (its
    classifier directory, the fitted scikit-learn pipeline it saved, the run's results.json)."""
    from dnadiff.classifier_tuning import kmer_lr

    saved = []
    real = kmer_lr.save_classifier
    monkeypatch.setattr(kmer_lr, "save_classifier", lambda out, pipe, *a: (saved.append(pipe), real(out, pipe, *a)))
    out = tmp_path / "ft"
    assert main(["finetune", "finetune/finetune_dhs", "data.dataset=dhs:half_b:valid", "model.backbone=kmer_lr",
                 "model.role=evaluation", "protocol.seeds=[0]", "model.overrides.c_grid=[0.01,1.0]",
                 "model.overrides.ks=[2,3]", "--out", str(out), "-q"]) == 0
    assert len(saved) == 1
    return out / "classifier", saved[0], json.loads((out / "results.json").read_text())


def test_kmer_lr_oracle_predicts_exactly_as_fitted(kmer_oracle, stored, tmp_path):
    from dnadiff.eval.kmer_oracle import KmerLRClassifier, kmer_features

    folder, pipeline, result = kmer_oracle
    meta = json.loads((folder / "classifier.json").read_text())
    assert (meta["backbone"], meta["role"], meta["ks"], meta["both_strands"]) == ("kmer_lr", "evaluation", [2, 3], True)
    assert meta["classes"] == list(CELL_TYPES) and meta["C"] == result["selected_C"]
    assert sorted(p.name for p in folder.iterdir()) == ["classifier.json", "classifier.npz"]
    model, loaded_meta = load_oracle(folder)
    assert isinstance(model, KmerLRClassifier) and loaded_meta == meta
    seqs = stored.sequences(None)
    fitted = pipeline.predict_proba(kmer_features(seqs, [2, 3], True))
    got = predict_proba(model, seqs)
    assert got.dtype == np.float64 and np.array_equal(got, fitted)  # bit for bit
    assert np.array_equal(model.pipeline[-1].coef_, pipeline[-1].coef_)
    # the run's own test score (the validation split, chr2) is what the saved model gives
    rows = stored.indices("valid")
    acc = accuracy_table(got[rows], stored.labels[rows].astype(np.int64), CELL_TYPES)["accuracy"]
    chosen = [r for r in result["runs"] if r["run"] == meta["run"]][0]
    assert acc == chosen["test"]["accuracy"]
    # score_fasta: lower-case letters read as the upper-case ones
    fa = tmp_path / "s.fa"
    fa.write_text("".join(f">s{i} class=HepG2\n{seqs[i].lower()}\n" for i in rows[:20]))
    rep = score_fasta(fa, folder)
    assert rep["oracle_backbone"] == "kmer_lr" and rep["oracle_role"] == "evaluation"
    assert rep["rate"] == float((got[rows[:20]].argmax(1) == CELL_TYPES.index("HepG2")).mean())
    # the Fréchet embedding: its class scores
    from dnadiff.eval.encoders import Embedder

    emb = Embedder(model)(seqs[:5])
    assert np.array_equal(emb, pipeline.decision_function(kmer_features(seqs[:5], [2, 3], True)))


def test_kmer_lr_oracle_is_refused_by_rewards(kmer_oracle, tmp_path, capsys):
    folder, _, _ = kmer_oracle
    with pytest.raises(DnadiffError, match="an evaluation oracle .* only scores; guidance and fine-tuning may not"):
        build_reward(f"classifier:{folder}", target="HepG2")
    with pytest.raises(DnadiffError, match=r"an evaluation oracle \(classifier.json role: evaluation\) only scores"):
        load_classifier_dir(folder)
    model = tiny_model_dir(tmp_path, seq_len=16)
    assert main(["design", model, "--reward", f"classifier:{folder}", "--target", "HepG2", "--num", "2", "--length",
                 "16", "--steps", "2", "--out", str(tmp_path / "d.fa"), "--threads", "1"]) == 2
    assert f"{folder}: an evaluation oracle (classifier.json role: evaluation) only scores" in one_error_line(capsys)
    # marked reward (or unmarked), a k-mer LR still cannot guide: no torch module to differentiate
    meta = json.loads((folder / "classifier.json").read_text())
    (folder / "classifier.json").write_text(json.dumps({**meta, "role": "reward"}))
    with pytest.raises(DnadiffError, match="a k-mer LR classifier .* only scores .* need a neural classifier"):
        build_reward(f"classifier:{folder}", target="HepG2")


def test_kmer_lr_oracle_damaged_files_are_one_line(kmer_oracle):
    import io

    folder, _, _ = kmer_oracle
    weights, meta_path = folder / "classifier.npz", folder / "classifier.json"
    good, meta = weights.read_bytes(), json.loads(meta_path.read_text())

    def error() -> str:
        with pytest.raises(DnadiffError) as exc:
            load_oracle(folder)
        assert "\n" not in str(exc.value)
        return str(exc.value)

    weights.write_bytes(good[: len(good) // 2])  # truncated
    assert error().startswith(f"{weights}: unreadable")
    buf = io.BytesIO()
    with np.load(io.BytesIO(good)) as z:
        np.savez(buf, scale=z["scale"], coef=z["coef"])
    weights.write_bytes(buf.getvalue())
    assert error() == f"{weights}: missing array(s) intercept"
    buf = io.BytesIO()
    with np.load(io.BytesIO(good)) as z:
        np.savez(buf, scale=z["scale"], coef=z["coef"][:, :-1], intercept=z["intercept"])
    weights.write_bytes(buf.getvalue())
    assert "do not match classifier.json (ks [2, 3]: 80 features, 4 classes)" in error()
    weights.unlink()
    assert error() == f"{folder}: not a k-mer LR classifier directory (needs classifier.json and classifier.npz)"
    weights.write_bytes(good)
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k != "ks"}))
    assert "a k-mer LR classifier needs ks, both_strands and classes" in error()
    meta_path.write_text("{")
    assert error().startswith(f"{meta_path}: invalid JSON")
    meta_path.unlink()
    assert error().startswith(f"{folder}: not a classifier directory")
