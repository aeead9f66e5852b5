"""pipelines/dhs_edit.py (issue 47 §3): the `dnadiff edit` command of every row, the table, bad input, and the dry
run of every row on the 300-row DHS fixture with tiny models and oracles."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

edit = importlib.import_module("dhs_edit")


def test_edit_commands_of_every_method():
    sc = edit.SCALES["cpu"]
    models = {"cg": "M/cg", "cfg": "M/cfg", "markov": "M/markov"}
    argvs = {m: edit.edit_argv(m, 16, sc, models, "R", Path("in.fa"), Path("o.fa"), 1) for m in edit.METHODS}
    for method, (argv, reads) in argvs.items():
        assert argv[argv.index("--reward") + 1] == "classifier:R" and argv[argv.index("--target") + 1] == "HepG2"
        assert argv[argv.index("--max-edits") + 1] == 16 and argv[argv.index("--method") + 1] == method
        assert reads[1] == "R"
    assert argvs["greedy"][0][1] == "M/cg" and "--class" not in argvs["greedy"][0]
    assert argvs["remask"][0][1] == "M/cfg" and argvs["markov"][0][1] == "M/markov"
    led = argvs["ledidi"][0]
    assert led[1] == "M/cg" and "--class" not in led and led[led.index("--steps") + 1] == sc["ledidi_steps"]
    assert led[led.index("--edit-cost") + 1] == sc["edit_cost"]
    for m in ("remask", "markov"):
        a = argvs[m][0]
        assert a[a.index("--class") + 1] == "HepG2" and a[a.index("--rounds") + 1] == 8
    assert edit.METHODS[0].startswith("greedy")
    path, _ = edit.edit_argv("greedy", 32, sc, models, "R", Path("in.fa"), Path("o.fa"), 1, [4, 8, 16])
    assert path[path.index("--also-at") + 1] == "4,8,16" and "--also-at" not in argvs["greedy"][0]


def test_markdown_has_every_row():
    rows = [{"method": "unedited", "max_edits": 0, "edits_mean": 0.0, "reward_calls": 0, "network_calls": 0,
             "markov_llr": 0.0, "oracle_rate": 0.25, "oracle_rate_se": 0.1, "realistic_rate": 0.2},
            {"method": "greedy", "max_edits": 16, "edits_mean": 15.5, "reward_calls": 9600.0, "network_calls": 0.0,
             "markov_llr": -12.5, "oracle_rate": 0.9, "oracle_rate_se": 0.05, "realistic_rate": 0.4,
             "neural_rate": 0.625}]
    r = {"command": "python pipelines/dhs_edit.py", "wall_s": 1.0, "threads": 1, "machine": "m", "load_before": 1,
         "load_after": 1, "settings": {"per_source": 16}, "sources": edit.SOURCES, "rows": rows}
    text = edit.markdown(r, None)
    assert "| greedy | 16 | 0.900 ± 0.050 | 0.400 | 0.625 | 15.5 | 9600 | 0 | -12.50 |" in text
    assert "| unedited | 0 | 0.250 ± 0.100 | 0.200 | — |" in text  # a row without the neural oracle
    assert "**" not in text and "**Targets: missed.**" in edit.markdown({**r, "note": "Targets: missed."}, None)


def test_bad_methods_are_one_line(capsys):
    assert edit.main(["--dry-run", "--methods", "annealing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --methods 'annealing'") and len(err.splitlines()) == 1


def test_missing_models_are_named(tmp_path, capsys):
    assert edit.main(["--models", str(tmp_path), "--oracles", str(tmp_path), "--out", str(tmp_path / "w")]) == 2
    assert "reward_classifier: missing" in capsys.readouterr().err


@pytest.mark.slow  # two tiny oracles and three tiny models trained, every row edited; greedy's 900 reward rows
# dominate (21 min wall with twice the sequences and edits at load 15 on 2 cores, 6 Dec; minutes when idle)
@pytest.mark.training
def test_dry_run_edits_every_row(capsys):
    assert edit.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    for method in edit.METHODS:
        for m in edit.SCALES["dry"]["max_edits"]:
            assert f"{method} M={m}: oracle" in out
    assert "dry run: 10 rows" in out
