"""Issue 51 §3: pipelines/dhs_drakes_grid.py, the β grid × DRAKES estimator runner of the HepG2 design table."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

grid = importlib.import_module("dhs_drakes_grid")


def test_finetune_commands_of_every_variant():
    sc = grid.SCALES["cpu"]
    argvs = {v: grid.finetune_argv(v, 0.25, sc, "M", "R", Path("o"), 1) for v in grid.VARIANTS}
    for v, a in argvs.items():
        assert a[:8] == ["design-finetune", "M", "--reward", "classifier:R", "--target", "HepG2", "--method",
                         grid.VARIANTS[v][0]]
        assert a[a.index("--sample-steps") + 1] == sc["steps"] and "--truncate-steps" not in a  # K sized
        assert a[a.index("--kl-weight") + 1] == 0.25 and a[a.index("--grad-clip") + 1] == 1.0
    opts = {v: [a[i + 1] for i, x in enumerate(a) if x == "--option"] for v, a in argvs.items()}
    assert opts == {"drakes_st": ["estimator=straight_through"], "drakes_soft": ["estimator=soft"],
                    "drakes_soft_live": ["estimator=soft", "kl=live"], "policy_gradient": []}
    assert argvs["drakes_soft"][argvs["drakes_soft"].index("--gumbel-temperature") + 1] == 0.1
    assert "--gumbel-temperature" not in argvs["policy_gradient"]


def test_the_commands_parse_and_pass_the_option_checks(tmp_path):
    """Each variant's command line is one design-finetune accepts (its options checked before any model)."""
    from dnadiff.cli import build_parser
    from dnadiff.commands.design_finetune import check_args

    for v in grid.VARIANTS:
        argv = [str(a) for a in grid.finetune_argv(v, 1.0, grid.SCALES["cpu"], "M", "R", tmp_path / v, 1)]
        args = build_parser().parse_args(argv)
        check_args(args)
        assert args.drakes_options["estimator"] == ("straight_through" if v == "drakes_st" else "soft")  # default
        assert args.drakes_options["kl"] == ("live" if v.endswith("live") else "all")


def test_reward_calls_count_training_target_and_evaluation():
    sc = grid.SCALES["cpu"]
    assert grid.reward_calls({"updates": 180}, sc) == 180 * 8 + 64 + 32


def test_markdown_and_plot_of_a_result(tmp_path):
    row = {"success": 0.5, "success_se": 0.1, "realistic_success": 0.25, "loglik": -1.3, "reward": -0.7}
    r = {"scale": "tiny", "command": "python pipelines/dhs_drakes_grid.py --scale tiny", "wall_s": 10.0, "cpu_s": 9.0,
         "threads": 1, "machine": "vm", "load_before": "1", "load_after": "1", "settings": grid.SCALES["tiny"],
         "rows": [{"row": "unguided", "variant": "unguided", "setting": "", "kl": 0.0, "reward_calls": 0,
                   "nfe_per_design": 8.0, **row},
                  {"row": "cfg", "variant": "cfg", "setting": "w=1", "kl": None, "reward_calls": 0,
                   "nfe_per_design": 16.0, **row},
                  {"row": "finetuned", "variant": "drakes_soft", "setting": "β=0.25", "kl": 0.02, "target_kl": 0.05,
                   "kl_ratio": 0.4, "reward_calls": 40, "nfe_per_design": 8.0, "finetune_wall_s": 30.0,
                   "curve_first_quarter": -1.0, "curve_last_quarter": -0.5, **{**row, "loglik": -1.4}}]}
    png = grid.plot(r, tmp_path / "f.png")
    md = grid.markdown(r, png)
    assert Path(png).stat().st_size > 1000
    assert "SMALL SCALE" in md and "drakes_soft" in md and "0.4" in md and "![frontier](f.png)" in md


@pytest.mark.slow  # trains two tiny MDLMs and two oracles, fine-tunes four times: minutes on one core
@pytest.mark.training
def test_dry_run(capsys):
    assert grid.main(["--dry-run", "--threads", "1"]) == 0
    assert "dry run: 7 rows" in capsys.readouterr().out


def _result(rows, prints, **settings):
    return {"scale": "cpu", "command": "python pipelines/dhs_drakes_grid.py", "wall_s": 1.0, "cpu_s": 1.0,
            "threads": 1, "machine": "vm", "load_before": "1", "load_after": "1",
            "settings": {**grid.SCALES["cpu"], **settings}, "fingerprints": prints, "rows": rows}


def _row(variant, setting, success, beta=None):
    return {"row": "finetuned" if beta else variant, "variant": variant, "setting": setting, "beta": beta,
            "success": success, "success_se": 0.05, "realistic_success": 0.25, "loglik": -1.3, "reward": -0.7,
            "kl": 0.01, "reward_calls": 0, "nfe_per_design": 50.0}


def test_fingerprint_reads_npz_arrays_not_zip_bytes(tmp_path):
    import zipfile

    import numpy as np

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "classifier.json").write_text("{}")
    (a / "metrics.json").write_text("1")  # left out
    np.savez(a / "classifier.npz", w=np.arange(6.0))
    with zipfile.ZipFile(a / "classifier.npz") as za, zipfile.ZipFile(b / "classifier.npz", "w") as zb:
        for info in za.infolist():  # the same arrays, the members stamped with another time
            zb.writestr(zipfile.ZipInfo(info.filename, date_time=(2001, 2, 3, 4, 5, 6)), za.read(info))
    assert (a / "classifier.npz").read_bytes() != (b / "classifier.npz").read_bytes()
    assert grid.fingerprint(a) == grid.fingerprint(b)
    np.savez(b / "classifier.npz", w=np.arange(6.0) + 1e-9)
    assert grid.fingerprint(a) != grid.fingerprint(b) and grid.fingerprint(tmp_path / "none") is None


def test_carry_rows_merges_cells_and_refuses_other_models(tmp_path):
    import json

    prints = {"cg": "c" * 64, "reward": "r" * 64, "evaluation": "e" * 64, "cfg": None, "neural": None}
    first = _result([_row("unguided", "", 0.2), _row("policy_gradient", "β=0.25", 0.7, 0.25)], prints)
    (tmp_path / "a.json").write_text(json.dumps(first))
    here = [_row("drakes_soft", "β=0.25", 0.5, 0.25), _row("policy_gradient", "β=0.25", 0.9, 0.25)]
    rows = grid.ordered(grid.carry_rows(here, str(tmp_path / "a.json"), first["settings"], prints, "cpu"))
    assert [(x["variant"], x["success"]) for x in rows] == [("unguided", 0.2), ("drakes_soft", 0.5),
                                                            ("policy_gradient", 0.9)]  # this run's cell wins
    assert rows[0]["carried_from"] == "a.json" and "carried_from" not in rows[1]
    md = grid.markdown(_result(rows, prints), None)
    assert "| unguided * |" in md and "Partial grid" in md and "drakes_st β=0.0625" in md
    assert "drakes_soft β=0.25" not in md.split("Partial grid")[1].split("\n")[0]
    assert "0.44% of the official" in md  # 180 × 8 × 50 of 16.4 M trajectory-steps
    other = {**prints, "cg": "d" * 64}
    with pytest.raises(SystemExit, match="cg model/oracle differs"):
        grid.carry_rows(here, str(tmp_path / "a.json"), first["settings"], other, "cpu")
    with pytest.raises(SystemExit, match="settings.num"):
        grid.carry_rows(here, str(tmp_path / "a.json"), {**first["settings"], "num": 8}, prints, "cpu")
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(SystemExit, match="not a dhs_drakes_grid results JSON"):
        grid.carry_rows(here, str(tmp_path / "bad.json"), first["settings"], prints, "cpu")


def test_from_json_merges_without_models(tmp_path):
    import json

    prints = {"cg": "c" * 64, "reward": "r" * 64, "evaluation": "e" * 64}
    a = _result([_row("unguided", "", 0.2)], prints)
    b = _result([_row("policy_gradient", "β=1", 0.6, 1.0)], prints)
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert grid.main(["--from-json", str(tmp_path / "a.json"), "--carry-from", str(tmp_path / "b.json"),
                      "--results", str(tmp_path / "m"), "--note", "Reading: a note."]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [x["variant"] for x in merged["rows"]] == ["unguided", "policy_gradient"]
    md = (tmp_path / "m.md").read_text()
    assert md.rstrip().endswith("Reading: a note.") and "| policy_gradient * | β=1 |" in md


def test_an_invocation_that_makes_no_row_is_refused_before_any_model():
    with pytest.raises(SystemExit, match="no row to make"):
        grid.main(["--variants", "none", "--no-inference-rows", "--models", "absent", "--oracles", "absent"])
