"""Issue 52 (DHS row): class-conditional block diffusion. The bd3lm objective trains a class-conditional causal
Mamba through the label embedding and the `block` sampler draws each class's own composition; the shipped DHS
config is the conditional AR row's network and budget with the bd3lm objective."""

from __future__ import annotations

import pytest


def test_shipped_dhs_block_diffusion_config_is_the_conditional_ar_row_in_blocks():
    from dnadiff.config import RunConfig, load_config

    bd3 = load_config(RunConfig, "experiments/dhs_cond_bd3lm")
    ar = load_config(RunConfig, "experiments/dhs_cond_ar")
    obj = bd3.objective
    assert (obj.name, obj.block_size, bd3.data.seq_len % obj.block_size) == ("bd3lm", 4, 0)
    assert (bd3.model.backbone, bd3.model.overrides) == (ar.model.backbone, ar.model.overrides)
    assert bd3.model.num_classes == ar.model.num_classes == 4
    assert bd3.train == ar.train and bd3.data == ar.data  # same budget (60 min, one core) and data
    assert bd3.model.label_dropout == 0.1 and (bd3.sample.sampler, bd3.sample.steps) == ("block", 2)


@pytest.mark.training
def test_class_conditional_block_diffusion_learns_each_class(tmp_path):
    """Two classes of 16-bp sequences (7/8 vs 1/8 A); bd3lm in blocks of 4 on a class-conditional Mamba; the
    block sampler (2 calls per block, the label passed to every call) draws each class's composition."""
    from dnadiff.checkpoint import load
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train
    from helpers.benchmark_files import write_two_class_benchmark

    write_two_class_benchmark(tmp_path / "bench")  # 64 A-rich and 64 C-rich 16-mers per split
    cfg = load_config(RunConfig, "experiments/dhs_cond_bd3lm", [
        f"out_dir={tmp_path}", "name=bd3", "data.kind=benchmark", f"data.benchmark={tmp_path / 'bench'}",
        "data.seq_len=16", "data.rc_prob=0", "train.batch_size=16", "train.max_steps=40", "train.lr=1e-2",
        "train.val_batches=1", "train.val_every=40", "train.ckpt_every=40", "train.progress=false",
        "train.warmup_steps=5", "train.max_minutes=null",
        "model.num_classes=2", "model.overrides.cond_dim=16", "model.overrides.d_model=32", "train.threads=1",
        "model.label_dropout=0.0"])
    model = load(train(cfg).model_dir)
    res = {name: model.generate(32, 16, generator=0, label=name) for name in ("a_rich", "c_rich")}
    frac_a = {name: (x == 7).float().mean().item() for name, x in res.items()}
    assert frac_a["a_rich"] > 0.6 and frac_a["c_rich"] < 0.4, frac_a
