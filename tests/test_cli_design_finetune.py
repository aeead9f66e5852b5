"""`dnadiff design-finetune`: a tiny model fine-tuned for a few updates with each method writes a
loadable model directory; resuming gives what an uninterrupted run gives; bad input is one line, exit 2."""

from __future__ import annotations

import json

import pytest
import torch

from dnadiff.cli import main
from helpers.cli_errors import error_of

FAST = ["--sample-steps", "6", "--truncate-steps", "3", "--batch-size", "4", "--group-size", "2", "--length", "12",
        "--lr", "1e-2", "--threads", "1", "-q", "--target-samples", "8", "--eval-samples", "4"]  # target: its own test


def count_a(x):
    """A user reward without soft input (token ids only): the number of A's."""
    return (x == 7).sum(1).double()


def finetune(model, out, *extra):
    return main(["design-finetune", model, "--out", str(out), *FAST, *extra])


@pytest.mark.training
@pytest.mark.parametrize("method,reward", [("drakes", "motif:ACG"),
                                           ("policy_gradient", "test_cli_design_finetune:count_a")])
def test_writes_a_loadable_model_directory(model, tmp_path, method, reward, capsys):
    import dnadiff
    from dnadiff.weights import read_weights

    out = tmp_path / "ft"
    assert finetune(model, out, "--reward", reward, "--method", method, "--kl-weight", "0.5", "--train-steps", "2") == 0
    ft = dnadiff.load(out)
    rf = ft.config.reward_finetune
    assert (rf["method"], rf["reward"], rf["kl_weight"], rf["train_steps"]) == (method, reward, 0.5, 2)
    assert rf["pretrained"] == str(__import__("pathlib").Path(model).resolve())
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["updates"] == 2 and metrics["method"] == method
    before, after = read_weights(f"{model}/model.safetensors"), read_weights(out / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the updates moved the weights
    x = ft.generate(num=2, length=12, steps=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (2, 12) and bool(((x >= 7) & (x <= 10)).all())
    assert (out / "checkpoints" / "last.ckpt").is_file() and (out / "logs" / "metrics.csv").is_file()
    assert "updates" in capsys.readouterr().out  # the results table


@pytest.mark.training
@pytest.mark.parametrize("method", ["drakes", "policy_gradient"])
def test_resume_matches_an_uninterrupted_run(model, tmp_path, method):
    args = ["--reward", "gc", "--method", method, "--kl-weight", "0.2"]
    assert finetune(model, tmp_path / "whole", *args, "--train-steps", "3", "--ppo-epochs", "2") == 0
    # stopped after update 1: policy_gradient resumes in the middle of a batch reused for 2 updates
    assert finetune(model, tmp_path / "parts", *args, "--train-steps", "1", "--ppo-epochs", "2") == 0
    assert finetune(model, tmp_path / "parts", *args, "--train-steps", "3", "--ppo-epochs", "2", "--resume") == 0
    whole = (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert whole == (tmp_path / "parts" / "model.safetensors").read_bytes()


def test_bad_input_is_one_line(model, tmp_path, capsys):
    base = ["design-finetune", model, "--out", str(tmp_path / "o"), "--kl-weight", "0.1"]
    assert "choose drakes or policy_gradient" in error_of(capsys, base + ["--reward", "gc", "--method", "ppo"])
    err = error_of(capsys, base + ["--reward", "test_cli_design_finetune:count_a", "--method", "drakes"])
    assert "soft one-hot" in err and "--method policy_gradient" in err
    assert "unknown reward" in error_of(capsys, base + ["--reward", "bogus", "--method", "drakes"])
    assert "--kl-weight" in error_of(capsys, base[:-2] + ["--kl-weight", "0", "--reward", "gc", "--method", "drakes"])
    assert "multiple of --group-size" in error_of(capsys, base + ["--reward", "gc", "--method", "policy_gradient",
                                                                  "--batch-size", "5", "--group-size", "2"])
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("x")
    assert "--resume" in error_of(capsys, base + ["--reward", "gc", "--method", "drakes"])
    assert not (tmp_path / "o" / "checkpoints").exists()


@pytest.mark.training
def test_resume_refuses_other_settings(model, tmp_path, capsys):
    args = ["--reward", "gc", "--method", "drakes", "--train-steps", "1"]
    assert finetune(model, tmp_path / "r", *args, "--kl-weight", "0.2") == 0
    capsys.readouterr()
    err = error_of(capsys, ["design-finetune", model, "--out", str(tmp_path / "r"), *FAST, *args, "--kl-weight", "0.3",
                            "--resume"])
    assert "kl_weight" in err


@pytest.mark.training
def test_classifier_reward_through_soft_one_hot(model, tmp_path, capsys):
    """drakes with classifier:DIR: the classifier reads the relaxed one-hot through its embedding
    (a hyena classifier); an RCPS classifier cannot, and is refused naming policy_gradient."""
    from dnadiff.backbones import build_backbone
    from dnadiff.heads.classifier import SequenceClassifier
    from dnadiff.heads.saved import save_classifier_dir

    torch.manual_seed(0)
    clf = SequenceClassifier(build_backbone("hyena", preset="tiny", vocab_size=12), 2).eval()
    path = save_classifier_dir(tmp_path / "c", clf, ["neg", "pos"])
    assert finetune(model, tmp_path / "ft", "--reward", f"classifier:{path}", "--target", "pos", "--method", "drakes",
                    "--kl-weight", "1", "--train-steps", "1") == 0
    assert json.loads((tmp_path / "ft" / "metrics.json").read_text())["reward_last"] < 0  # a log-probability
    rcps = SequenceClassifier(build_backbone("caduceus", preset="tiny", vocab_size=12), 2, conjoin="ps").eval()
    path = save_classifier_dir(tmp_path / "r", rcps, ["neg", "pos"])
    capsys.readouterr()
    err = error_of(capsys, ["design-finetune", model, "--out", str(tmp_path / "o"), *FAST, "--reward",
                            f"classifier:{path}", "--method", "drakes", "--kl-weight", "1"])
    assert "RCPS" in err and "--method policy_gradient" in err


def test_soft_input_reaches_the_model_embedding(model):
    """call_soft gives the plain call's logits and a gradient w.r.t. the one-hot (RCPS caduceus)."""
    import dnadiff
    from dnadiff.diffusion.soft_input import call_soft

    m = dnadiff.load(model)
    x = torch.randint(7, 11, (2, 12), generator=torch.Generator().manual_seed(0))
    onehot = torch.nn.functional.one_hot(x, 12).double().requires_grad_(True)
    t = torch.full((2,), 0.5)
    soft = call_soft(m.denoiser, x, onehot, t)
    assert torch.equal(soft.detach(), m.denoiser(x, t).detach())
    (grad,) = torch.autograd.grad(soft.sum(), onehot)
    assert float(grad.abs().sum()) > 0
