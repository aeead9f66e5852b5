"""pipelines/infill.py (issue 47 §1): its rows (bits per hidden base, paired difference from the Markov chain), its
table, its bad input, and the dry run of every row."""

from __future__ import annotations

import importlib
import math

import pytest

infill = importlib.import_module("infill")


def test_rows_are_bits_per_hidden_base_paired_with_the_markov_chain():
    ln2 = math.log(2)
    scored = {"markov": {"sequence_nats": [4 * ln2, 6 * ln2, 8 * ln2], "sequence_tokens": [2, 2, 4]},
              "mdlm_nelbo": {"sequence_nats": [2 * ln2, 5 * ln2, 4 * ln2], "sequence_tokens": [2, 2, 4]}}
    rows = {r["model"]: r for r in infill.rows_of("dhs", "span8", scored)}
    assert rows["markov"]["bits_per_hidden_base"] == pytest.approx(18 / 8) and rows["markov"]["paired_markov"] is None
    m = rows["mdlm_nelbo"]
    assert m["bits_per_hidden_base"] == pytest.approx(11 / 8) and m["hidden_bases"] == 8 and m["windows"] == 3
    d = [1 - 2, 2.5 - 3, 1 - 2]  # per-window bits/base differences
    mean = sum(d) / 3
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / 2 / 3)
    assert m["paired_markov"]["mean"] == pytest.approx(mean) and m["paired_markov"]["std_error"] == pytest.approx(se)
    assert (m["data"], m["mask"]) == ("dhs", "span8")


def test_markdown_lists_every_row_and_the_fill_table():
    rows = infill.rows_of("chr22", "random15", {"markov": {"sequence_nats": [1.0, 2.0], "sequence_tokens": [3, 3]},
                                                "ar_left": {"sequence_nats": [1.5, 2.0], "sequence_tokens": [3, 3]}})
    r = {"command": "python pipelines/infill.py", "note": "preliminary", "settings": {}, "notes": ["a note"],
         "rows": rows, "fill_samples": [{"row": "real (unfilled)", "n": 4, "class_kept": 0.75}], "wall_s": 1.0,
         "threads": 1, "load_before": 1.0, "load_after": 1.0, "machine": "test"}
    text = infill.markdown(r, None)
    assert "| chr22 | random15 | ar_left |" in text and "(reference)" in text and "**preliminary**" in text
    assert "| real (unfilled) | 4 | 0.750 |" in text and "- a note" in text


def test_combine_puts_runs_of_other_data_in_one_table(tmp_path, capsys):
    import json

    def run(data: str, note: str, fills: list) -> dict:
        rows = infill.rows_of(data, "span8", {"markov": {"sequence_nats": [1.0, 2.0], "sequence_tokens": [3, 3]},
                                              "mdlm_nelbo": {"sequence_nats": [0.5, 2.0], "sequence_tokens": [3, 3]}})
        return {"command": f"python pipelines/infill.py --data {data}", "note": note, "settings": {"batch": 64},
                "models": {data: {"markov": "m"}}, "notes": [f"{data} note"], "rows": rows, "fill_samples": fills,
                "wall_s": 10.0, "threads": 1, "load_before": "lb", "load_after": "la", "machine": "vm"}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(run("chr22", "chr22 part", [])))
    b.write_text(json.dumps(run("dhs", "dhs part", [{"row": "real (unfilled)", "n": 4, "class_kept": 0.75}])))
    out = tmp_path / "both"
    assert infill.main(["--combine", str(a), str(b), "--results", str(out)]) == 0
    res = json.loads(out.with_suffix(".json").read_text())
    assert [(r["data"], r["model"]) for r in res["rows"]] == [("chr22", "markov"), ("chr22", "mdlm_nelbo"),
                                                              ("dhs", "markov"), ("dhs", "mdlm_nelbo")]
    assert set(res["models"]) == {"chr22", "dhs"} and res["wall_s"] == 20.0 and len(res["fill_samples"]) == 1
    md = out.with_suffix(".md").read_text()
    assert "chr22: `python pipelines/infill.py --data chr22`" in md and "*dhs part*" in md and "- dhs note" in md
    assert "| dhs | span8 | mdlm_nelbo |" in md and "| real (unfilled) | 4 | 0.750 |" in md
    capsys.readouterr()
    assert infill.main(["--combine", str(b), str(b), "--results", str(out)]) == 2  # the same data twice
    assert capsys.readouterr().err.strip() == "error: --combine: the runs share a data set (dhs, dhs)"
    c = tmp_path / "c.json"
    c.write_text(json.dumps(run("chr22", "", []) | {"settings": {"batch": 4}}))
    assert infill.main(["--combine", str(c), str(b), "--results", str(out)]) == 2
    assert "different settings" in capsys.readouterr().err


def test_bad_data_choice_is_one_line(capsys):
    assert infill.main(["--dry-run", "--data", "chr9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --data 'chr9'") and len(err.splitlines()) == 1


@pytest.mark.slow  # ~1 min of CPU (4 min wall on a loaded 2-core machine): tiny models trained a step, an oracle
@pytest.mark.training
def test_dry_run_builds_and_scores_every_row(capsys):
    assert infill.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ", 3 fill rows" in out
    for model in ("markov", "mdlm_nelbo", "mdlm_ordered", "ar_left", "bd3_nelbo"):
        assert f"chr22 span32 {model}:" in out and f"dhs span32 {model}:" in out
    assert "dhs random50 ar_left" not in out and "dhs random50 bd3_nelbo" in out  # AR: contiguous spans only
