"""pipelines/dhs_classification.py --scale tiny (issue 34 §6) on the 300-row DHS fixture: the learning-curve rows
use exactly the stratified subsets they name, settings are chosen on chr2 only, the test split is read once per
row, and the reported test scores are those of the saved predictions."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dnadiff.data.dhs import CELL_TYPES, load_dhs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny run: (its output folder, its results JSON, the folders score_test was called with)."""
    import dhs_classification  # pipelines/ is on sys.path in the tests (pyproject.toml)

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("dhs_classification")
    mp.setenv("DNADIFF_CACHE", str(tmp / "unused"))  # the pipeline points it at its own fixture cache
    scored = []
    real = dhs_classification.score_test
    mp.setattr(dhs_classification, "score_test", lambda c, t, folder: (scored.append(folder), real(c, t, folder))[1])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp / "run"
    try:
        assert dhs_classification.main(["--scale", "tiny", "--out", str(out)]) == 0
        yield out, json.loads((out / "dhs_classification.json").read_text()), scored, load_dhs()
    finally:
        torch.set_num_threads(threads)
        mp.undo()


@pytest.mark.training
def test_rows_use_the_stratified_subsets(tiny):
    out, r, scored, table = tiny
    assert r["sizes"] == ["20", "40", "all"] and not r["missing"]
    assert [(x["method"], x["size"]) for x in r["rows"]] == [
        (m, s) for m in ("kmer_lr", "scratch", "pretrained") for s in ("20", "40", "all")]
    for row in r["rows"]:
        n = {"20": 20, "40": 40, "all": 100}[row["size"]]  # the fixture: 25 training rows per cell type
        assert row["num_train"] == n and row["subset_counts"] == {c: n // 4 for c in CELL_TYPES}
        for run in row["runs"]:
            assert run["num_fit"] + run["num_holdout"] == n and run["num_holdout"] == n // 10
            assert f"data.max_train={n}" in run["command"] or (n == 100 and "max_train" not in run["command"])
    kmer = [x for x in r["rows"] if x["method"] == "kmer_lr"]
    assert [x["num_train"] for x in kmer] == [20, 40, 100]
    assert all(x["wall_s"] > 0 and "load average" in x["load_before"] for x in r["rows"])


@pytest.mark.training
def test_settings_chosen_on_chr2_and_test_read_once(tiny):
    out, r, scored, table = tiny
    n_valid = len(table.indices("valid"))
    for row in r["rows"]:
        accs = [x["valid_split_accuracy"] for x in row["runs"]]
        assert row["chosen"] == row["runs"][int(np.argmax(accs))]["setting"]  # first of the best on ties
        assert row["chosen_valid_split_accuracy"] == max(accs)
        expect_n = n_valid if row["method"] == "kmer_lr" else 40  # neural: a 40-sequence chr2 subsample
        assert all(x["valid_split_n"] == expect_n and "data.dataset=dhs:valid" in x["command"] for x in row["runs"])
    for m, grid in (("kmer_lr", [1e-3, 1e-1]), ("scratch", [1e-3, 3e-3]), ("pretrained", [1e-3, 3e-3])):
        rows = [x for x in r["rows"] if x["method"] == m]
        if m == "kmer_lr":  # C chosen at every size
            assert all([x["setting"] for x in row["runs"]] == grid for row in rows)
        else:  # lr chosen at the smallest size, then kept
            assert [x["setting"] for x in rows[0]["runs"]] == grid
            assert all([x["setting"] for x in row["runs"]] == [rows[0]["chosen"]] for row in rows[1:])
    assert sorted(Path(f).relative_to(out).as_posix() for f in scored) == sorted(
        f"{m}/{s}" for m in ("kmer_lr", "scratch", "pretrained") for s in ("20", "40", "all"))


@pytest.mark.training
def test_test_scores_equal_a_count_of_the_saved_predictions(tiny):
    out, r, scored, table = tiny
    rows = table.indices("test")
    for row in r["rows"]:
        with open(out / row["method"] / row["size"] / "test_predictions.csv") as fh:
            pred = list(csv.DictReader(fh))
        assert [int(p["row"]) for p in pred] == rows.tolist()
        assert [p["label"] for p in pred] == [CELL_TYPES[k] for k in table.labels[rows]]
        hits = sum(p["label"] == p["predicted"] for p in pred)
        assert row["test"]["n"] == 100 and row["test"]["accuracy"] == hits / 100
        f1 = []
        for c in CELL_TYPES:
            tp = sum(p["label"] == c and p["predicted"] == c for p in pred)
            n_true, n_pred = sum(p["label"] == c for p in pred), sum(p["predicted"] == c for p in pred)
            assert row["test"]["per_class"][c] == tp / n_true
            f1.append(2 * tp / (n_true + n_pred) if n_true + n_pred else 0.0)
        assert row["test"]["f1_macro"] == pytest.approx(float(np.mean(f1)), abs=1e-12)


@pytest.mark.training
def test_scratch_has_the_pretrained_backbone_config(tiny):
    from dnadiff.checkpoint import load_backbone
    from dnadiff.eval import load_oracle

    out, r, scored, table = tiny
    _, pretrained = load_backbone(out / "pretrained" / "model")
    for method in ("scratch", "pretrained"):
        model, _ = load_oracle(out / method / "all" / Path(
            next(x for x in r["rows"] if x["method"] == method and x["size"] == "all")["classifier"]).parent.name
            / "classifier")
        assert dataclasses.asdict(model.backbone.config) == dataclasses.asdict(pretrained.config)
    md = (out / "dhs_classification.md").read_text()
    assert "| Caduceus from the DHS MDLM | 100 |" in md and "![learning curve](dhs_classification.png)" in md
    assert (out / "dhs_classification.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.training
def test_resume_keeps_rows_and_a_bad_model_dir_is_one_line(tiny, monkeypatch, capsys):
    import dhs_classification

    out, r, scored, table = tiny
    monkeypatch.setattr(dhs_classification, "finetune_run", lambda *a, **k: pytest.fail("a kept row was rerun"))
    assert dhs_classification.main(["--scale", "tiny", "--out", str(out), "--resume", "--rows", "kmer_lr"]) == 0
    again = json.loads((out / "dhs_classification.json").read_text())
    assert [x["test"] for x in again["rows"]] == [x["test"] for x in r["rows"]]
    assert dhs_classification.main(["--scale", "tiny", "--out", str(out), "--table-only"]) == 0
    again = json.loads((out / "dhs_classification.json").read_text())
    assert [x["test"] for x in again["rows"]] == [x["test"] for x in r["rows"]]
    assert again["pretrained"]["dir"] == r["pretrained"]["dir"]  # the neural rows' record of it
    assert "pretrained/model` (dhs_mdlm, 1 steps" in (out / "dhs_classification.md").read_text()
    capsys.readouterr()
    assert dhs_classification.main(["--scale", "tiny", "--out", str(out), "--rows", "scratch",
                                    "--pretrained", str(out / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --pretrained: ") and "no config.json" in err[0]
