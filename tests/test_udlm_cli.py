"""The `udlm` objective through the commands: train, eval, sample and design a tiny uniform-noise DNA model,
and class-conditional training with D-CFG sampling (samplers/uniform.py)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dnadiff.checkpoint import load
from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.data.records import read_fasta
from dnadiff.training import train
from helpers.benchmark_files import write_two_class_benchmark

pytestmark = [pytest.mark.training]

FAST = ["data.seq_len=32", "train.batch_size=4", "train.val_batches=1", "train.warmup_steps=0", "train.threads=1",
        "train.progress=false"]


def test_udlm_train_eval_sample_and_design_through_the_cli(tmp_path, capsys):
    assert main(["train", "experiments/tiny_dna_mdlm", "objective=udlm", "name=tiny_udlm", f"out_dir={tmp_path}",
                 *FAST, "train.max_steps=6", "train.val_every=3", "train.ckpt_every=6"]) == 0
    model_dir = str(tmp_path / "tiny_udlm" / "model")
    model = load(model_dir)
    assert model.objective.name == "udlm" and model.config.sample.sampler == "udlm"
    assert model.objective.data_ids.tolist() == [7, 8, 9, 10]  # A C G T: N, pads and specials stay visible

    out = tmp_path / "e.json"
    assert main(["eval", model_dir, "--seq-len", "32", "--max-windows", "8", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["objective"] == "udlm" and res["kind"] == "bound" and res["pad_policy"] == "visible"
    assert 0.5 < res["nats_per_base"] < 2.5 and math.isfinite(res["std_error_nats"])

    fa = tmp_path / "s.fa"
    assert main(["sample", model_dir, "--num", "3", "--length", "32", "--steps", "5", "--threads", "1",
                 "--out", str(fa)]) == 0
    records = read_fasta(str(fa))
    assert len(records) == 3 and all(len(s) == 32 and set(s) <= set("ACGT") for _, s in records)
    stats = json.loads(fa.with_suffix(".json").read_text())
    assert stats["sampler"] == "udlm" and stats["nfe_per_sequence"] == 5 and stats["steps"] == 5

    capsys.readouterr()
    assert main(["sample", model_dir, "--num", "1", "--sampler", "ancestral", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: sampler 'ancestral' samples mask noise; this udlm model (uniform noise) samples with udlm"

    d = tmp_path / "d.fa"
    assert main(["design", model_dir, "--reward", "gc:0.7", "--method", "cg", "--num", "2", "--length", "16",
                 "--steps", "4", "--threads", "1", "--out", str(d)]) == 0
    summary = json.loads(d.with_suffix(".json").read_text())
    assert summary["sampler"] == "udlm"
    # exact D-CBG scores every free position's 4 bases at each of the 4 steps
    assert summary["reward_calls"] == 2 * 16 * 4 * 4


def test_class_conditional_udlm_with_posterior_cfg(tmp_path):
    write_two_class_benchmark(tmp_path / "bench")
    cfg = load_config(RunConfig, "experiments/tiny_cfg_leptospira", [
        "objective=udlm", f"out_dir={tmp_path}", f"data.benchmark={tmp_path / 'bench'}", "data.seq_len=16",
        "train.batch_size=16", "train.max_steps=60", "train.lr=1e-2", "train.val_every=30", "train.ckpt_every=30",
        "train.progress=false", "train.warmup_steps=5", "model.overrides.cond_dim=16",
    ])
    model = load(train(cfg).model_dir)
    frac_a = {}
    for name in ("a_rich", "c_rich"):
        x, smp = model.generate(32, 16, steps=16, generator=torch.Generator().manual_seed(0), label=name,
                                guidance=1.0, return_sampler=True)
        assert smp.name == "udlm" and smp.cfg[1] == 2.0  # D-CFG at the posterior, γ = 1 + w
        frac_a[name] = (x == 7).float().mean().item()
    assert frac_a["a_rich"] > 0.6 and frac_a["c_rich"] < 0.4, frac_a
