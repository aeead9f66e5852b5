"""`dnadiff design-finetune` states its target and what it reached: metrics.json and the printed table carry
the SNIS estimate of p*'s reward and KL over the pretrained samples (with the ESS) and the fine-tuned
model's mean reward and trajectory KL; the numbers are the estimators' on those samples."""

from __future__ import annotations

import json

import pytest

from dnadiff.cli import main

FAST = ["--sample-steps", "6", "--truncate-steps", "3", "--batch-size", "4", "--group-size", "2", "--length", "12",
        "--lr", "1e-2", "--threads", "1", "-q", "--train-steps", "2"]


@pytest.mark.training
@pytest.mark.parametrize("method", ["drakes", "policy_gradient"])
def test_run_records_target_and_reach(model, tmp_path, method, capsys):
    out = tmp_path / "ft"
    argv = ["design-finetune", model, "--out", str(out), *FAST, "--reward", "gc", "--method", method,
            "--kl-weight", "0.05", "--target-samples", "40", "--eval-samples", "12"]
    assert main(argv) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["target_n"] == 40 and m["reached_n"] == 12
    assert 1.0 <= m["target_ess"] <= 40.0
    assert 0.0 <= m["target_kl"] <= __import__("math").log(40) + 1e-9  # the SNIS estimate's range
    assert 0.0 <= m["pretrained_reward"] <= 1.0 and 0.0 <= m["reached_reward"] <= 1.0  # GC fractions
    assert m["target_reward"] >= m["pretrained_reward"]  # tilting toward a higher reward never lowers the mean
    assert m["reached_kl"] >= 0.0 and m["reached_kl_se"] >= 0.0
    printed = capsys.readouterr().out
    assert "target_reward" in printed and "reached_kl" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["reward_finetune"]["target_samples"] == 40


@pytest.mark.training
def test_zero_samples_skip_the_estimates(model, tmp_path):
    out = tmp_path / "ft"
    argv = ["design-finetune", model, "--out", str(out), *FAST, "--reward", "gc", "--method", "drakes",
            "--kl-weight", "0.5", "--target-samples", "0", "--eval-samples", "0"]
    assert main(argv) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert not any(k.startswith(("target_", "reached_")) for k in m)


def test_negative_sample_counts_are_refused(model, tmp_path, capsys):
    argv = ["design-finetune", model, "--out", str(tmp_path / "o"), "--reward", "gc", "--method", "drakes",
            "--kl-weight", "0.1", "--target-samples", "-1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --target-samples must be >= 0") and "\n" not in err
