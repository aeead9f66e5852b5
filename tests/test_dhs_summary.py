"""The DHS runs' terminal output (issue 49, items 10 and 12): `dnadiff train experiments/dhs_markov` printed
its per-class JSON inline (a table ~1,000 columns wide) and the cell type was `hESCT0` in outputs but
`hESC` in the README. The summary now fits 100 columns (per-class values in RUN/metrics.json), and
`hESC` is the one name printed, with `hESCT0` accepted wherever a cell type is given."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from dnadiff.cli import main
from dnadiff.data import dhs, dhs_fetch
from dnadiff.data.class_names import canonical, class_position
from dnadiff.data.dhs import CELL_TYPES, parse_dhs_table
from dnadiff.utils import TERMINAL_COLUMNS, summary_table

FIXTURE = Path(__file__).resolve().parent / "data" / "dhs" / "dhs_fixture.txt"  # 300 rows of the real table
FIXTURE_SHA256 = "5016907cfaf6c8a45cdc80c219d2bfc1d7ed2e9914cabc0f1644e8fe56bd49b4"
OLD_NAMES = ["GM12878", "HepG2", "K562", "hESCT0"]  # what directories written before the rename record


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """The fixture table stored in a fresh dnadiff cache (as `dnadiff data dhs` stores the real one)."""
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dhs_fetch, "DHS_SHA256", FIXTURE_SHA256)
    table = parse_dhs_table(FIXTURE.read_bytes(), str(FIXTURE), FIXTURE_SHA256)
    dhs.store_dhs(table)
    return table


def test_the_cell_types_print_hesc_and_keep_the_label_order(stored):
    assert CELL_TYPES == ("GM12878", "HepG2", "K562", "hESC")  # label 3 as before the rename
    with open(FIXTURE, newline="", encoding="utf-8") as fh:  # read independently of dnadiff
        hesc_rows = sum(row["TAG"] == "hESCT0_ENCLB449ZZZ" for row in csv.DictReader(fh, delimiter="\t"))
    assert hesc_rows > 0 and int((stored.labels == 3).sum()) == hesc_rows
    assert stored.counts()["train"]["hESC"] > 0 and "hESCT0" not in stored.counts()["train"]


def test_both_spellings_find_the_class_in_new_and_old_directories():
    for names in (list(CELL_TYPES), OLD_NAMES):
        assert class_position("hESC", names) == class_position("hESCT0", names) == 3
        assert class_position("K562", names) == 2 and class_position("hesc", names) is None
    assert canonical("hESCT0") == "hESC" and canonical("K562") == "K562"
    from dnadiff.eval.encoders import class_index

    assert class_index("hESC", OLD_NAMES) == class_index("hESCT0", CELL_TYPES) == 3


def test_summary_table_fits_a_terminal():
    row = {"classes": list(CELL_TYPES), "per_class": {c: {"order": 2, "bits": [1.9] * 10} for c in CELL_TYPES},
           "val_bits_per_token": 1.92712345, "a_rather_long_metric_name_for_wall_seconds": 0.5,
           "note": "x" * 300}
    table = summary_table(row)
    assert max(len(line.rstrip()) for line in table.splitlines()) <= TERMINAL_COLUMNS
    assert "per_class" not in table and "hESC" in table and "1.927" in table and "x" * 55 + "…\n" in table + "\n"
    assert summary_table({"steps": 5, "loss": 0.25}) == "steps  loss\n-----  ----\n5      0.25"  # narrow: one row


def test_train_dhs_markov_summary_fits_and_sample_names_hesc(stored, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "experiments/dhs_markov", "model.overrides.max_order=2", "--run-dir", str(run),
                 "--threads", "1"]) == 0
    captured = capsys.readouterr()
    assert max(len(line) for line in captured.out.splitlines()) <= TERMINAL_COLUMNS, captured.out
    assert "per_class" not in captured.out and "valid_bits_per_base_by_order" not in captured.out
    assert f"all metrics (per_class too): {run / 'metrics.json'}" in captured.err
    metrics = json.loads((run / "metrics.json").read_text())
    assert list(metrics["per_class"]) == [*CELL_TYPES, "(pooled)"]  # the full values are in the run directory
    assert all(set(v) >= {"order", "valid_bits_per_base_by_order"} for v in metrics["per_class"].values())
    for spelling in ("hESCT0", "hESC"):
        out = tmp_path / f"{spelling}.fa"
        assert main(["sample", str(run / "model"), "--class", spelling, "-n", "2", "--length", "12",
                     "--out", str(out)]) == 0
        headers = [line for line in out.read_text().splitlines() if line.startswith(">")]
        assert len(headers) == 2 and all(h.endswith("class=hESC guidance=0.0") for h in headers), headers
    capsys.readouterr()
    assert main(["sample", str(run / "model"), "--class", "hES", "-n", "1", "--length", "12"]) == 2
    assert "this model knows: GM12878, HepG2, K562, hESC" in capsys.readouterr().err
    # a directory written before the rename records hESCT0: --class hESC still finds it, and hESC is printed
    config_path = run / "model" / "config.json"
    config_path.write_text(config_path.read_text().replace('"hESC"', '"hESCT0"'))
    assert '"hESCT0"' in config_path.read_text()
    out = tmp_path / "old.fa"
    assert main(["sample", str(run / "model"), "--class", "hESC", "-n", "2", "--length", "12", "--out", str(out)]) == 0
    assert all(h.endswith("class=hESC guidance=0.0") for h in out.read_text().splitlines() if h.startswith(">"))
