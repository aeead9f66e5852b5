"""pipelines/reward_finetuning.py (issue 35 §2, the frontier): the β grid chosen from the SNIS target, the
strength plans of the inference-time methods, the curve and validation rules, and the dry run's rows."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent


def pipeline(name: str):
    return importlib.import_module(name)  # pipelines/ is on sys.path in the tests (pyproject.toml)


def test_beta_grid_kept_is_monotone_in_target_kl_and_closest_to_each_wanted_kl():
    fr = pipeline("reward_frontier")
    rewards = np.random.default_rng(0).normal(-0.69, 0.01, size=512)
    betas = fr.candidate_betas(rewards)
    assert betas == sorted(betas, reverse=True) and len(betas) == 46
    assert betas[0] == pytest.approx(rewards.std() * 100.0)
    table = fr.target_table(rewards, betas)
    kls = [t["kl"] for t in table]
    # on one pool the SNIS KL grows as β shrinks (dKL/dλ = λ·Var_λ(r) ≥ 0), up to log n
    assert all(b >= a - 1e-12 for a, b in zip(kls, kls[1:]))
    assert kls[0] < 1e-3 and math.log(512) - 0.5 < kls[-1] <= math.log(512) + 1e-9
    ess = [t["ess"] for t in table]
    assert ess[0] == pytest.approx(512, rel=1e-3) and ess[-1] < 3
    wanted = (0.05, 0.3, 1.0, 3.0)
    kept = fr.choose_betas(table, wanted)
    assert len(kept) == 4
    assert [k["beta"] for k in kept] == sorted((k["beta"] for k in kept), reverse=True)
    assert [k["kl"] for k in kept] == sorted(k["kl"] for k in kept)
    for k in kept:  # the closest candidate on a log scale, and the wanted KL it was kept for
        gap = abs(math.log(k["kl"]) - math.log(k["kl_wanted"]))
        assert all(gap <= abs(math.log(max(t["kl"], 1e-6)) - math.log(k["kl_wanted"])) + 1e-12 for t in table)
        assert gap < 0.35  # the grid is fine enough: within 42 % of the wanted KL
    # equal rewards: p* = p_pre at every β, one β kept
    flat = fr.target_table(np.zeros(16), fr.candidate_betas(np.zeros(16)))
    assert all(t["kl"] == 0.0 and t["ess"] == pytest.approx(16) for t in flat)
    assert len(fr.choose_betas(flat, wanted)) == 1


def test_bon_kl_bound_curve_stats_and_one_se_rule():
    fr = pipeline("reward_frontier")
    assert fr.bon_kl_bound(1) == 0.0 and fr.bon_kl_bound(2) == pytest.approx(math.log(2) - 0.5)
    assert fr.bon_kl_bound(16) == pytest.approx(math.log(16) - 15 / 16)
    rising = [(i, float(i)) for i in range(8)]  # quarters 0.5, 2.5, 4.5, 6.5
    st = fr.curve_stats(rising)
    assert (st["first_q"], st["third_q"], st["last_q"]) == (0.5, 4.5, 6.5)
    assert st["late_gain_share"] == pytest.approx(2 / 6) and st["flattened"] is False
    plateau = [(i, min(i, 4) + (0.01 if i % 2 else 0.0)) for i in range(16)]
    assert fr.curve_stats(plateau)["flattened"] is True
    assert fr.curve_stats([(0, 1.0), (1, 2.0)])["flattened"] is False  # too short to say
    runs = [{"beta": 0.01, "val_reward": 1.0, "val_reward_se": 0.1}, {"beta": 0.1, "val_reward": 0.95},
            {"beta": 1.0, "val_reward": 0.5}]
    assert fr.choose_by_validation(runs)["beta"] == 0.1  # within one SE of the best, the largest β
    runs[0]["val_reward_se"] = 0.01
    assert fr.choose_by_validation(runs)["beta"] == 0.01


def test_read_curve_reads_the_logged_reward(tmp_path):
    fr = pipeline("reward_frontier")
    (tmp_path / "metrics.csv").write_text("epoch,step,train/kl,train/loss,train/reward\n0,0,0.0,-2.0,0.25\n"
                                          "0,1,,,\n0,2,0.1,-1.0,0.5\n")
    assert fr.read_curve(tmp_path / "metrics.csv") == [(0, 0.25), (2, 0.5)]
    assert fr.read_curve(tmp_path / "missing.csv") == []


def test_every_inference_method_at_every_strength_is_planned():
    rf, rows = pipeline("reward_finetuning"), pipeline("reward_finetuning_rows")
    for scale, sc in rf.SCALES.items():
        labels = [label for label, *_ in rows.guided_plan(sc)]
        want = ["unguided", *(f"best_of_n n={n}" for n in sc["best_ns"]), *(f"svdd m={m}" for m in sc["svdd_ms"]),
                *(f"smc k={k}" for k in sc["smc_ks"]), *(f"cg_grad ×{c:g}" for c in sc["cg_scales"])]
        assert labels == want, scale
        assert len(sc["kl_targets"]) >= 2 and sc["ft_sample_steps"] == sc["steps"]
        assert set(sc["methods"]) == {"drakes", "policy_gradient", "dpo"}
    cpu = rf.SCALES["cpu"]
    assert cpu["best_ns"] == (2, 4, 8, 16) and min(cpu["kl_targets"]) <= 0.05 and max(cpu["kl_targets"]) >= 3
    # a caller's scale without strength lists keeps its single rows (pipelines that import guided_rows)
    old = {"best_n": 4, "svdd_m": 4, "smc_k": 4}
    assert [label for label, *_ in rows.guided_plan(old)] == ["unguided", "best_of_n n=4", "svdd m=4", "smc k=4",
                                                             "cg_grad ×1"]


def test_aggregate_keeps_labels_and_ranges():
    rf = pipeline("reward_finetuning")
    rows = rf.aggregate([[{"method": "a", "family": "x", "v": 1.0, "chosen": True}],
                         [{"method": "a", "family": "x", "v": 3.0, "chosen": True}]])
    assert rows == [{"method": "a", "seeds": 2, "family": "x", "v": 2.0, "v_range": [1.0, 3.0], "chosen": True}]


@pytest.mark.training
@pytest.mark.subprocess
@pytest.mark.slow
def test_dry_run_has_every_row_the_beta_grid_and_bon_costs(tmp_path):
    """The whole pipeline at toy sizes: every method × strength row of every task, fine-tuned rows for each
    method at each kept β with their target and reach, the kept β monotone in target KL, best-of-N's
    denoiser rows n × the unguided ones, the PNGs; results/ untouched."""
    rf = pipeline("reward_finetuning")
    before = sorted((REPO / "results").rglob("*"))
    assert rf.main(["--dry-run", "--work", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "dry_run.json").read_text())
    sc = rf.SCALES["dry"]
    for task, rows in res["tasks"].items():
        by = {r["method"]: r for r in rows}
        planned = [label for label, *_ in pipeline("reward_finetuning_rows").guided_plan(sc)]
        if task == "classifier":
            planned += [f"cfg w={w:g}" for w in sc["cfg_ws"]]
        rec = res["frontier"][task]
        kept = rec["kept"]
        assert [k["beta"] for k in kept] == sorted((k["beta"] for k in kept), reverse=True)
        assert [k["kl"] for k in kept] == sorted(k["kl"] for k in kept)
        planned += [f"{m} β={k['beta']:.3g}" for m in sc["methods"] for k in kept]
        assert set(planned) <= set(by), (task, sorted(set(planned) - set(by)))
        # the ancestral sampler: `steps` calls, one more where a position is left masked; best-of-N runs n of them
        unguided = by["unguided"]["nfe_per_design"]
        assert sc["steps"] <= unguided <= sc["steps"] + 1
        for n in sc["best_ns"]:
            assert n * sc["steps"] <= by[f"best_of_n n={n}"]["nfe_per_design"] <= n * (sc["steps"] + 1)
            assert by[f"best_of_n n={n}"]["kl_bound"] == pytest.approx(math.log(n) - (n - 1) / n)
        for m in sc["methods"]:
            for k in kept:
                row = by[f"{m} β={k['beta']:.3g}"]
                assert row["target_kl"] == k["kl"] and row["updates"] == sc["ft_steps"]
                if "failed" not in row:
                    assert sc["steps"] <= row["nfe_per_design"] <= sc["steps"] + 1 and row["reached_kl"] >= 0.0
        assert set(rec["chosen_beta"]) <= set(sc["methods"])
        assert (tmp_path / f"dry_run_{task}_frontier.png").stat().st_size > 0
        assert (tmp_path / f"dry_run_{task}_curves.png").stat().st_size > 0
    assert set(res["frontier"]["classifier"]["lr_choice"]["lrs"]) == set(sc["methods"])
    md = (tmp_path / "dry_run.md").read_text()
    assert "Target p* ∝ p_pre·exp(r/β)" in md and "Frontier" in md and "dry_run_gc_frontier.png" in md
    assert set(res["reward_spread"]) == {"clean", "noisy"} and "Reward classifiers" in md  # the can-it-tell check
    assert sorted((REPO / "results").rglob("*")) == before


def test_render_rebuilds_the_table_from_the_json_with_each_rows_target(tmp_path, capsys):
    """--render: OUT.md and the PNGs from OUT.json alone; a fine-tuned row shows its target E*[r] beside the
    reward its designs reached, and the header the fine-tuning runs' wall time summed; no JSON: exit 2."""
    rf = pipeline("reward_finetuning")
    out = tmp_path / "res"
    assert rf.main(["--render", "--out", str(out)]) == 2
    assert "no " + str(out) + ".json" in capsys.readouterr().err
    row = {"method": "drakes β=0.1", "family": "drakes", "strength": 0.1, "oracle_success": 0.75, "reward": -0.5,
           "target_reward": -0.25, "target_kl": 1.5, "reached_kl": 0.5, "finetune_s": 120.0, "nfe_per_design": 32.0,
           "loglik": -1.3}
    beta_row = {"beta": 0.1, "reward": -0.25, "reward_se": 0.01, "kl": 1.5, "kl_se": 0.1, "ess": 20.0}
    runs = [{"method": "drakes", "beta": 0.1, "lr": 1e-3, "updates": 80, "finetune_s": s,
             "curve": [[0, -0.7], [1, -0.6]]} for s in (120.0, 240.0)]
    res = {"scale": "cpu", "command": "python pipelines/reward_finetuning.py --scale cpu", "benchmark": "b",
           "wall_s": 1.0, "machine": "m", "load_average": "l", "gc_range": [0.3, 0.5], "loglik_floor": -1.5,
           "tasks": {"classifier": [row]},
           "frontier": {"classifier": {"table": [beta_row], "kept": [beta_row], "pool": 64, "pool_reward_mean": -0.7,
                                       "pool_reward_sd": 0.1, "kl_cap": math.log(64), "runs": runs,
                                       "lr_choice": {"task": "classifier", "beta": 0.1, "target_kl": 1.5,
                                                     "lrs": {"drakes": 1e-3}}}}}
    (tmp_path / "res.json").write_text(json.dumps(res))
    assert rf.main(["--render", "--out", str(out)]) == 0
    md = (tmp_path / "res.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("method"))
    cells = next(line for line in md.splitlines() if line.startswith("drakes β=0.1 "))
    assert header.split()[1:4] == ["oracle_success", "realistic_success", "reward"] and "target_reward" in header
    assert cells.split()[2:5] == ["0.75", "-0.5", "-0.25"]  # success, reward reached, target (no realistic)
    assert "earlier invocations included): 6 min" in md
    assert (tmp_path / "res_classifier_frontier.png").stat().st_size > 0
