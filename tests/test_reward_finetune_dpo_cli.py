"""`dnadiff design-finetune --method dpo` (the offline route): a tiny model fine-tuned for a few updates on a
pool of pretrained trajectories writes a loadable model directory that moved; a resumed run gives what an
uninterrupted one gives (the pool is drawn again from the same seed); bad pool sizes are one line."""

from __future__ import annotations

import json

import pytest
import torch

from dnadiff.cli import main

FAST = ["--sample-steps", "6", "--batch-size", "4", "--group-size", "2", "--length", "12", "--lr", "1e-2",
        "--threads", "1", "-q", "--pool-size", "8", "--target-samples", "8", "--eval-samples", "4"]


def finetune(model, out, *extra):
    return main(["design-finetune", model, "--out", str(out), *FAST, "--method", "dpo", *extra])


@pytest.mark.training
def test_dpo_writes_a_loadable_model_directory(model, tmp_path):
    import dnadiff
    from dnadiff.weights import read_weights

    out = tmp_path / "ft"
    assert finetune(model, out, "--reward", "motif:ACG", "--kl-weight", "0.2", "--train-steps", "2") == 0
    ft = dnadiff.load(out)
    assert ft.config.reward_finetune["method"] == "dpo" and ft.config.reward_finetune["pool_size"] == 8
    m = json.loads((out / "metrics.json").read_text())
    assert m["updates"] == 2 and m["target_n"] == 8 and m["reached_n"] == 4
    before, after = read_weights(f"{model}/model.safetensors"), read_weights(out / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.training
def test_dpo_resume_matches_an_uninterrupted_run(model, tmp_path):
    args = ["--reward", "gc", "--kl-weight", "0.2"]
    assert finetune(model, tmp_path / "whole", *args, "--train-steps", "3") == 0
    assert finetune(model, tmp_path / "parts", *args, "--train-steps", "1") == 0
    assert finetune(model, tmp_path / "parts", *args, "--train-steps", "3", "--resume") == 0
    whole = (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert whole == (tmp_path / "parts" / "model.safetensors").read_bytes()


def test_dpo_bad_input_is_one_line(model, tmp_path, capsys):
    base = ["design-finetune", model, "--out", str(tmp_path / "o"), "--kl-weight", "0.1", "--reward", "gc",
            "--method", "dpo"]
    assert main(base + ["--pool-size", "4", "--group-size", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --pool-size must be >= --group-size") and "\n" not in err
    assert main(base + ["--batch-size", "6", "--group-size", "4"]) == 2
    assert "multiple of --group-size" in capsys.readouterr().err
