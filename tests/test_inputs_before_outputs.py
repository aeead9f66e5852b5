"""Inputs are checked before outputs (issue 49, item 6): `dnadiff metrics` said "metrics.json: exists" for a
run whose --reference did not exist, so --force only led to the next error. Every command reports a
missing input first, whatever lies at its destination."""

from __future__ import annotations

import pytest

from dnadiff.cli import main


def _error_line(capsys, argv) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def taken(tmp_path):
    """Destinations that exist: a metrics folder with its JSON, a file, a run directory with something in it."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "metrics.json").write_text("{}")
    (tmp_path / "out.json").write_text("{}")
    (tmp_path / "out.fa").write_text(">a\nACGT\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("name: earlier\n")
    (tmp_path / "s.fa").write_text(">s\nACGTACGTAC\n")
    return tmp_path


def test_metrics_names_the_missing_reference_before_the_existing_output(taken, capsys):
    line = _error_line(capsys, ["metrics", str(taken / "s.fa"), "--reference", str(taken / "nope.fa"),
                                "--out", str(taken / "m")])
    assert line == f"error: {taken / 'nope.fa'}: FASTA file not found"
    line = _error_line(capsys, ["metrics", str(taken / "gone.fa"), "--reference", str(taken / "s.fa"),
                                "--out", str(taken / "m")])
    assert line == f"error: {taken / 'gone.fa'}: FASTA file not found"
    line = _error_line(capsys, ["metrics", str(taken / "s.fa"), "--reference", str(taken / "s.fa"),
                                "--oracle", str(taken / "no_model"), "--out", str(taken / "m")])
    assert line == f"error: --oracle {taken / 'no_model'}: model directory not found"
    # with every input present, the existing output is what is reported
    line = _error_line(capsys, ["metrics", str(taken / "s.fa"), "--reference", str(taken / "s.fa"),
                                "--out", str(taken / "m")])
    assert line.endswith("metrics.json: exists (use --force to overwrite it)")


def test_eval_compare_distill_and_sample_check_inputs_first(taken, capsys, model):
    assert _error_line(capsys, ["eval", str(taken / "nope"), "--out", str(taken / "out.json")]) == (
        f"error: {taken / 'nope'}: model directory not found")
    assert "genome FASTA not found" in _error_line(
        capsys, ["eval", model, "--fasta", str(taken / "nope.fa"), "--bed", str(taken / "s.fa"),
                 "--out", str(taken / "out.json")])
    assert "not found" in _error_line(capsys, ["compare", str(taken / "a.json"), str(taken / "b.json"),
                                               "--out", str(taken / "out.json")])
    assert _error_line(capsys, ["distill", str(taken / "nope"), "--steps", "2", "--out", str(taken / "run")]) == (
        f"error: {taken / 'nope'}: model directory not found")
    assert _error_line(capsys, ["sample", model, "--template-fasta", str(taken / "nope.fa"),
                                "--out", str(taken / "out.fa")]) == f"error: {taken / 'nope.fa'}: FASTA file not found"


def test_train_checks_its_data_before_its_run_directory(taken, capsys):
    line = _error_line(capsys, ["train", "experiments/tiny_dna_mdlm", f"data.fasta={taken / 'nope.fa'}",
                                f"data.bed={taken / 's.fa'}", "--run-dir", str(taken / "run")])
    assert "nope.fa: genome FASTA not found" in line
    line = _error_line(capsys, ["train", "experiments/tiny_dna_mdlm", f"model.init_from={taken / 'nope'}",
                                "--run-dir", str(taken / "run")])
    assert line == f"error: model.init_from: {taken / 'nope'}: model directory not found"


def test_edit_checks_its_sequences_and_model_before_its_outputs(taken, capsys, model):
    for name in ("out.fa", "out.tsv", "out.json"):
        (taken / name).write_text("earlier")
    base = ["edit", model, "--reward", "gc", "--max-edits", "2", "--out", str(taken / "out.fa")]
    assert _error_line(capsys, [*base, "--in", str(taken / "nope.fa")]) == (
        f"error: {taken / 'nope.fa'}: FASTA file not found")
    assert _error_line(capsys, ["edit", str(taken / "nope"), *base[2:], "--in", str(taken / "s.fa")]) == (
        f"error: {taken / 'nope'}: model directory not found")
    assert _error_line(capsys, [*base, "--in", str(taken / "s.fa")]).endswith("exists (use --force to overwrite it)")
