"""`dnadiff eval` says before scoring how many windows and about how long (one batch timed), with
the --max-windows hint; it prints a table and writes JSON only with --out, as the README says."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from dnadiff.cli import main
from helpers.cli_model import tiny_model_dir

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("eval"), seq_len=16)


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "r.fa"
    path.write_text("".join(f">r{i}\n{'ACGTTGCAACGGTTCA' * 2}\n" for i in range(10)))  # 10 x 32 bp: 20 windows of 16
    return path


def test_eval_announces_windows_time_and_max_windows(model, records, capsys, monkeypatch):
    clock = iter(range(0, 10_000, 36))  # every reading of the clock 36 s later: one batch takes 36 s
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    assert main(["eval", model, "--records", str(records), "--batch-size", "4"]) == 0
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("scoring"))
    assert line == (f"scoring 20 windows of 16 bp from {records}: about 3 min (5 batches of 4, one took 36 s); "
                    "--max-windows 4 gives an estimate in about 36 s")


def test_eval_few_batches_says_the_count_only(model, records, capsys):
    assert main(["eval", model, "--records", str(records), "--batch-size", "8"]) == 0
    assert f"scoring 20 windows of 16 bp from {records}\n" in capsys.readouterr().err


def test_json_only_with_out_as_the_readme_says(model, records, tmp_path, capsys, monkeypatch):
    row = next(line for line in README.splitlines() if line.startswith("dnadiff eval "))
    assert "JSON with --out" in row
    from dnadiff.commands import eval as eval_command

    assert "JSON with --out" in eval_command.HELP
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["eval", model, "--records", str(records)]) == 0
    assert "bits_per_base" in capsys.readouterr().out and sorted(p.name for p in tmp_path.iterdir()) == before
    assert main(["eval", model, "--records", str(records), "--out", "e.json"]) == 0
    assert re.search(r"^\s*\d", capsys.readouterr().out, re.M)  # the table still printed
    assert json.loads((tmp_path / "e.json").read_text())["num_windows"] == 20
