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
