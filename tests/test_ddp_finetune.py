"""Fine-tuning under DDP: `dnadiff finetune ... train.devices=2` on the CPU.

Each global batch of the 1-process loader is split between the 2 ranks with per-example weights
2 / batch size, so the averaged gradient is the 1-process one; validation logits are gathered, so
both ranks pick the same best epoch and learning rate. With no randomness inside the model
(dropout 0, no RC augmentation) the 2-process job reproduces the 1-process job to float tolerance.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dnadiff.classifier_tuning.config import load_finetune_config
from dnadiff.classifier_tuning.runs import run_finetune
from helpers import progress_wait
from helpers.benchmark_files import write_benchmark
from helpers.subprocess_env import child_env

pytestmark = [pytest.mark.subprocess, pytest.mark.training, pytest.mark.ddp]

REPO = Path(__file__).resolve().parent.parent


def _benchmark(root: Path) -> Path:
    """A two-class benchmark in the genomic-benchmarks layout: A/T-rich vs G/C-rich 40-mers, noisy."""
    rng = np.random.default_rng(0)
    classes = (("at_rich", [0.35, 0.15, 0.15, 0.35]), ("gc_rich", [0.2, 0.3, 0.3, 0.2]))
    return write_benchmark(root / "toy", {
        split: {label: ["".join(rng.choice(list("ACGT"), size=40, p=probs)) for _ in range(n)]
                for label, probs in classes}
        for split, n in (("train", 36), ("test", 16))})


def test_finetune_two_processes_equal_one(tmp_path):
    data = _benchmark(tmp_path)
    overrides = [f"data.dataset={data}", "data.max_train=null", "data.max_test=null", "model.rc_aug=false",
                 "model.dropout=0.0", "model.overrides.embed_dropout=0.0", "train.epochs=3", "train.batch_size=10",
                 "train.lr_grid=[0.003,0.01]", "protocol.seeds=[0]", "train.accelerator=cpu", "train.threads=1",
                 "train.progress=false"]
    cfg = load_finetune_config("experiments/tiny_finetune", overrides)
    single = run_finetune(cfg, tmp_path / "one", echo=lambda *a: None)

    env = child_env()
    # waited for by progress (output, files in --out): under load this takes far longer than alone
    proc = progress_wait.run([sys.executable, "-m", "dnadiff", "finetune", "experiments/tiny_finetune", *overrides,
                              "train.devices=2", "--out", str(tmp_path / "two")],
                             cwd=REPO, env=env, watch=[tmp_path / "two"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # one table (stdout) and one summary (stderr, through logging), from rank 0
    assert proc.stdout.count("mean ± range") == 1, proc.stdout
    assert proc.stderr.count("majority-class baseline") == 1, proc.stderr
    assert proc.stderr.count("wrote ") == 1, proc.stderr
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert two["selected_lr"] == single["selected_lr"]
    assert two["val_acc_by_lr"] == pytest.approx(single["val_acc_by_lr"], abs=1e-9)
    for a, b in zip(two["runs"], single["runs"], strict=True):
        assert a["best_epoch"] == b["best_epoch"]
        assert [h["val_acc"] for h in a["history"]] == pytest.approx([h["val_acc"] for h in b["history"]], abs=1e-9)
        # float summation order (allreduce, weighted sums) grows through Adam steps: ~1e-3 relative after 3 epochs
        assert [h["val_loss"] for h in a["history"]] == pytest.approx([h["val_loss"] for h in b["history"]], rel=5e-3)
        for m, v in b["test"].items():
            assert a["test"][m] == pytest.approx(v, abs=1e-6), m
        assert a["steps"] == b["steps"]
    diffs = [[abs(ha["val_loss"] - hb["val_loss"]) for ha, hb in zip(a["history"], b["history"])]
             for a, b in zip(two["runs"], single["runs"])]
    print(f"\nfinetune 2 processes vs 1: |dval_loss| per epoch {diffs}")
