"""Issue 34 §5 / issue 35 §3: pipelines/dhs_design.py, the HepG2 design table, on the 300-row fixture
(tests/data/dhs/), and its helpers exactly."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

design = importlib.import_module("dhs_design")


def test_choose_prefers_realistic_success_then_reward_then_the_first_setting():
    scores = [{"realistic_success": 0.5, "reward": -1.0}, {"realistic_success": 0.75, "reward": -2.0},
              {"realistic_success": 0.75, "reward": -1.5}, {"realistic_success": 0.75, "reward": -1.5}]
    assert design.choose(scores) == 2
    assert design.choose(scores[:2]) == 1
    assert design.choose([{"realistic_success": 0.0, "reward": -1.0}] * 3) == 0


def test_reward_curve_reads_the_design_finetune_log(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "metrics.csv").write_text(
        "epoch,step,train/kl,train/loss,train/reward\n0,0,0.5,1.0,-1.25\n0,1,0.25,0.5,-1.0\n0,2,,0.1,-0.5\n"
        "0,3,0.1,0.2,-0.25\n0,4,0.1,0.2,\n")
    curve = design.reward_curve(tmp_path)
    assert curve == [{"update": 1, "reward": -1.25, "kl": 0.5}, {"update": 2, "reward": -1.0, "kl": 0.25},
                     {"update": 3, "reward": -0.5, "kl": None}, {"update": 4, "reward": -0.25, "kl": 0.1}]
    assert design.quarter_means(curve) == (-1.25, -0.25)
    assert design.quarter_means([]) == (None, None)
    assert design.reward_curve(tmp_path / "absent") == []


def test_commands_refuse_the_evaluation_oracle_before_running(tmp_path):
    oracle = tmp_path / "oracles" / "eval_oracle"
    oracle.mkdir(parents=True)
    cmds = design.Commands(str(oracle), lambda *a: None)
    for argv in (["design", "m", "--reward", f"classifier:{oracle}", "--target", "HepG2"],
                 ["design-finetune", "m", "--reward", f"classifier:{tmp_path}/oracles/../oracles/eval_oracle"]):
        with pytest.raises(SystemExit, match="refusing to pass the evaluation oracle"):
            cmds.run(argv, "test", tmp_path / "x.done.json", [])
    assert cmds.records == [] and not (tmp_path / "x.done.json").exists()


def test_design_commands_of_every_row():
    sc = design.SCALES["cpu"]
    models = {"cg": "M/cg", "cfg": "M/cfg"}
    argvs = {row: design.design_argv(row, 2.0, sc, models, "R", 8, 0, Path("o.fa"), 1, "FT")[0]
             for row in design.ROWS}
    assert argvs["cfg"][:6] == ["sample", "M/cfg", "--class", "HepG2", "--guidance", 2.0]
    assert argvs["drakes"][:2] == ["sample", "FT"] and argvs["policy_gradient"][:2] == ["sample", "FT"]
    for row in ("unguided", "best_of_n", "svdd", "smc", "cg"):
        a = argvs[row]
        assert a[:7] == ["design", "M/cg", "--reward", "classifier:R", "--target", "HepG2", "--method"]
    assert argvs["best_of_n"][7:10] == ["best_of_n", "--option", "n=16"]
    assert argvs["unguided"][7] == "none" and argvs["cg"][7:10] == ["cg_grad", "--option", "scale=2.0"]
    for a in argvs.values():  # same length, steps and seed for every row
        assert a[a.index("--steps") + 1] == 50 and a[a.index("--length") + 1] == 200 and a[a.index("--seed") + 1] == 0


@pytest.mark.slow  # ~1-2 min on one core: trains two tiny MDLMs and two oracles, fine-tunes three times
@pytest.mark.training
def test_design_tiny_scale(tmp_path):
    assert design.main(["--scale", "tiny", "--out", str(tmp_path / "d")]) == 0
    r = json.loads((tmp_path / "d" / "dhs_design_tiny.json").read_text())
    rows = {x["row"]: x for x in r["rows"]}
    assert list(rows) == [*design.ROWS, "real"]
    sc = design.SCALES["tiny"]
    for name, x in rows.items():
        assert x["n"] == sc["num"]
        assert 0.0 <= x["realistic_success"] <= x["success"] <= 1.0
        assert -1.0 <= x["motif_spearman"] <= 1.0 or x["motif_spearman"] != x["motif_spearman"]  # NaN: no hits
        assert 0.0 < x["distinct_6mers"] <= 1.0 and 0.0 <= x["pairwise_identity"] <= 1.0
        assert x["reward"] <= 0.0  # a log-probability
    # denoiser calls: the unguided sampler's steps (plus a last fill of rows still masked), best-of-16 sixteen
    # times that, CFG two passes a step, the fine-tuned models as many as unguided
    steps, ung = sc["steps"], rows["unguided"]["nfe_per_design"]
    assert steps <= ung <= steps + 1
    assert 16 * steps <= rows["best_of_n"]["nfe_per_design"] <= 16 * (steps + 1)
    assert rows["best_of_n"]["nfe_per_design"] == pytest.approx(16 * ung, abs=16 * 0.5)
    assert 2 * steps <= rows["cfg"]["nfe_per_design"] <= 2 * (steps + 1)
    for m in design.FINETUNED:
        x = rows[m]
        assert steps <= x["nfe_per_design"] <= steps + 1
        assert x["updates"] == sc["finetune"]["train_steps"] and x["finetune_wall_s"] > 0
        assert x["target_ess"] is not None and 1.0 <= x["target_ess"] <= sc["finetune"]["target_samples"]
        assert x["target_kl"] >= 0.0
    for m, runs in r["finetuning"].items():
        assert len(runs) == len(sc["finetune_grid"][m])
        for ft in runs:
            assert [c["update"] for c in ft["curve"]] == list(range(1, sc["finetune"]["train_steps"] + 1))
    # the settings came from the validation grids: one score per setting, the kept one is the best
    for row, grid in sc["grids"].items():
        c = r["choice"][row]
        assert len(c["grid"]) == len(grid) and c["index"] == design.choose(c["grid"])
        assert rows[row]["setting"].startswith(c["setting"])
    # the evaluation oracle reached no command; every generating command was recorded
    oracle = r["oracles"]["evaluation"]
    cmds = [c["command"] for c in r["commands"]]
    assert oracle and not any(oracle in c or "eval_oracle" in c for c in cmds)
    purposes = [c["purpose"] for c in r["commands"]]
    assert purposes.count("fine-tune drakes") == 2 and purposes.count("fine-tune policy_gradient") == 1
    assert {p.split()[-1] for p in purposes if p.startswith("test designs")} == set(design.ROWS)
    assert all(c.startswith(("dnadiff design ", "dnadiff sample ", "dnadiff design-finetune ")) for c in cmds)
    assert all("classifier:" + r["oracles"]["reward"] in c for c in cmds if c.startswith("dnadiff design"))
    md = (tmp_path / "d" / "dhs_design_tiny.md").read_text()
    assert "## Design table" in md and "Amortised design" in md and "DRAKES fine-tuned" in md
    # issue 46: no neural oracle in the tiny oracles folder: the rule says the k-mer LR judges, the column is —
    assert r["oracles"]["neural"] is None and "k-mer LR evaluation oracle" in r["oracles"]["realistic_rule"]
    assert all(x["success_neural"] is None for x in rows.values()) and "Judges: success and realistic" in md
    assert (tmp_path / "d" / "dhs_design_tiny.png").is_file()


def test_from_json_rerenders_a_finished_run_with_the_note_and_the_models_training(tmp_path):
    src = Path(__file__).resolve().parent.parent / "results" / "dhs_design_cpu.json"
    r = json.loads(src.read_text())
    r["models"]["cg"].update(steps=1234, val_bits_per_base=1.5)  # what the header must show, whatever committed
    r["note"] = "old note"
    given = tmp_path / "run.json"
    given.write_text(json.dumps(r))
    argv = ["--from-json", str(given), "--results", str(tmp_path / "out"), "--note", "Models: 30 min."]
    assert design.main(argv) == 0
    md = (tmp_path / "out.md").read_text()
    assert "**Models: 30 min.**" in md and "old note" not in md
    assert "(unconditional MDLM, 1,234 steps, validation 1.500 bits/base;" in md
    assert json.loads((tmp_path / "out.json").read_text())["rows"] == r["rows"] and (tmp_path / "out.png").is_file()
    # without --note the run's own note stays
    assert design.main(["--from-json", str(given), "--results", str(tmp_path / "kept")]) == 0
    assert "**old note**" in (tmp_path / "kept.md").read_text()


def test_from_json_refuses_what_is_not_a_design_run(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    assert design.main(["--from-json", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: --from-json {bad}: not a dhs_design results JSON")
    assert not (tmp_path / "bad.md").exists()
