"""`dnadiff finetune --init-from`: the saved config.yaml names the backbone actually loaded (not the
config's default), and the console says what was loaded."""

import random

import pytest
import yaml

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig, from_dict
from dnadiff.modelio.model_dir import save_model_dir
from helpers.benchmark_files import write_benchmark

pytestmark = [pytest.mark.training]


def _tiny_benchmark(root):
    rng = random.Random(0)
    return write_benchmark(root, {
        split: {cls: ["".join(rng.choice(alphabet) for _ in range(24)) for _ in range(n)]
                for cls, alphabet in (("gc", "GGCCGCA"), ("at", "AATTATC"))}
        for split, n in (("train", 12), ("test", 6))})


def test_finetune_config_names_the_loaded_backbone(tmp_path, capsys):
    from dnadiff.cli import main

    bb = build_backbone("caduceus", preset="tiny", vocab_size=12)
    save_model_dir(tmp_path / "m", from_dict(RunConfig, {"model": {"backbone": "caduceus", "preset": "tiny"}}), bb)
    out = tmp_path / "ft"
    # the tiny_finetune config says backbone: hyena, preset: tiny
    rc = main(["finetune", "experiments/tiny_finetune", "protocol.seeds=[0]", "train.batch_size=8",
               "--dataset", str(_tiny_benchmark(tmp_path / "bench")), "--init-from", str(tmp_path / "m"),
               "--out", str(out), "--no-progress"])
    assert rc == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["model"]["backbone"] == "caduceus"
    assert saved["model"]["overrides"]["d_model"] == bb.config.d_model and saved["model"]["overrides"]["rcps"] is True
    printed = capsys.readouterr().out
    n = sum(p.numel() for p in bb.parameters())
    assert f"loaded caduceus backbone ({n:,} parameters) from dnadiff model directory {tmp_path / 'm'}" in printed
