"""`dnadiff design-finetune`: defaults sized to the model, the ETA line after the first update, the drakes
estimator options (--option estimator / kl / final_temperature) and the step-count mismatch measured."""

from __future__ import annotations

import json

import pytest

from dnadiff.cli import main
from dnadiff.training.reward_loop import complete_settings, sized_defaults, temperature_at
from helpers.cli_errors import error_of


@pytest.mark.parametrize("length,steps,method,want", [
    (128, 64, "drakes", (64, 16, 8)),  # caduceus:tiny's bundled config: L = 128, 64 sampling steps
    (32, 64, "drakes", (64, 16, 16)),  # short sequences: the batch grows to its cap
    (200, 50, "drakes", (50, 13, 6)),
    (1024, 128, "drakes", (128, 32, 2)),  # long ones: down to the floor
    (128, 64, "policy_gradient", (64, 16, 8)),
    (32, 64, "policy_gradient", (64, 16, 16)),
    (200, 50, "policy_gradient", (50, 13, 8)),  # whole groups of 8
])
def test_defaults_scale_with_the_model(length, steps, method, want):
    got = sized_defaults(length, steps, method, group_size=8)
    assert (got["sample_steps"], got["truncate_steps"], got["batch_size"]) == want
    if method == "drakes" and want[2] not in (2, 16):  # inside the clamp: B·L·T stays near 65,536 token-steps
        assert 0.75 * 2**16 < got["batch_size"] * length * steps <= 2**16


def test_given_settings_win_over_the_sized_ones(tmp_path):
    s = complete_settings(str(tmp_path), {"method": "drakes", "kl_weight": 0.1, "sample_steps": 10, "batch_size": 3},
                          sample_length=128, model_steps=64)
    assert (s["sample_steps"], s["truncate_steps"], s["batch_size"], s["model_sample_steps"]) == (10, 3, 3, 64)
    s = complete_settings(str(tmp_path), {"method": "drakes", "kl_weight": 0.1, "truncate_steps": 99}, 128, 64)
    assert (s["sample_steps"], s["truncate_steps"], s["batch_size"]) == (64, 64, 8)  # K ≤ T


def test_temperature_anneal_is_exponential_between_the_end_points():
    s = {"gumbel_temperature": 1.0, "final_temperature": 0.01, "train_steps": 5}
    got = [temperature_at(s, n) for n in range(5)]
    assert got == pytest.approx([1.0, 10**-0.5, 0.1, 10**-1.5, 0.01])
    assert temperature_at({**s, "final_temperature": None}, 3) == 1.0


def test_bad_options_are_one_line(model, tmp_path, capsys):
    base = ["design-finetune", model, "--out", str(tmp_path / "o"), "--kl-weight", "0.1", "--reward", "gc"]
    assert "straight_through or soft" in error_of(capsys, base + ["--method", "drakes", "--option", "estimator=x"])
    assert "all or live" in error_of(capsys, base + ["--method", "drakes", "--option", "kl=some"])
    assert "positive number" in error_of(capsys, base + ["--method", "drakes", "--option", "final_temperature=-1"])
    assert "unknown drakes option" in error_of(capsys, base + ["--method", "drakes", "--option", "tau=1"])
    assert "--method drakes" in error_of(capsys, base + ["--method", "policy_gradient", "--option", "estimator=soft"])
    assert not (tmp_path / "o").exists()


@pytest.mark.training
def test_eta_line_options_and_the_step_mismatch(model, tmp_path, capfd):
    """Trained with 6 steps, the model samples with 64: the run says so and measures its reach at both;
    after the first update it prints the time and the ETA; the options reach the run's config."""
    import dnadiff

    out = tmp_path / "ft"
    assert main(["design-finetune", model, "--out", str(out), "--reward", "gc", "--method", "drakes", "--kl-weight",
                 "0.5", "--train-steps", "2", "--sample-steps", "6", "--batch-size", "2", "--length", "12",
                 "--threads", "1", "--target-samples", "0", "--eval-samples", "2", "--option", "estimator=soft",
                 "--option", "kl=live", "--option", "final_temperature=0.25"]) == 0
    err = capfd.readouterr().err
    assert "the first update took" in err and "1 more: about" in err and "(ETA " in err
    assert "training with 6 sampling steps, the model samples with 64" in err
    rf = dnadiff.load(out).config.reward_finetune
    assert (rf["estimator"], rf["kl"], rf["final_temperature"]) == ("soft", "live", 0.25)
    assert (rf["sample_steps"], rf["truncate_steps"], rf["model_sample_steps"]) == (6, 2, 64)
    metrics = json.loads((out / "metrics.json").read_text())
    assert "reached_reward_at_model_steps" in metrics and "reached_kl_at_model_steps" in metrics
