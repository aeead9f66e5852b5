"""Training progress, messages, threads,
resuming a run killed before its first checkpoint, a resumed run's full CSV log."""

from __future__ import annotations

import csv
import os
import sys

import pytest
import yaml

from dnadiff.config import RunConfig, load_config
from dnadiff.training import train
from helpers import progress_wait

FAST = ["data.seq_len=32", "train.batch_size=2", "train.val_batches=1", "train.log_every=1", "train.warmup_steps=0"]


@pytest.mark.subprocess
@pytest.mark.training
def test_training_progress_counts_steps_and_is_quiet(tmp_path):
    # train.threads null: the default thread count, here OMP_NUM_THREADS of the environment
    proc = progress_wait.run(
        [sys.executable, "-m", "dnadiff", "train", "experiments/tiny_dna_mdlm", f"out_dir={tmp_path}", *FAST,
         "train.max_steps=4", "train.val_every=2", "train.ckpt_every=4", "train.progress=true", "train.threads=null"],
        watch=[tmp_path], env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "4/4" in err and "step/s" in err  # optimizer steps out of max_steps, steps per second
    assert "val " in err and "nats/token" in err  # the validation figure, in full
    assert "Epoch 0/-2" not in err and "it/s" not in err
    for noise in ("Tip", "litmodels", "LeafSpec", "GPU available", "TPU available", "LOCAL_RANK", "Warning"):
        assert noise not in err, noise
    n = 1
    assert f"{n} CPU thread" in err  # said at start ...
    cfg = yaml.safe_load((tmp_path / "tiny_dna_mdlm" / "config.yaml").read_text())
    assert cfg["train"]["threads"] == n  # ... and recorded in the run's config


@pytest.mark.subprocess
@pytest.mark.training
def test_quiet_training_prints_nothing_on_stderr(tmp_path):
    proc = progress_wait.run(
        [sys.executable, "-m", "dnadiff", "train", "-q", "experiments/tiny_dna_mdlm", f"out_dir={tmp_path}", *FAST,
         "train.max_steps=2", "train.val_every=100", "train.ckpt_every=2", "train.progress=true", "train.threads=1"],
        watch=[tmp_path])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ""
    assert "steps" in proc.stdout  # the result table stays on stdout


def test_threads_default_is_the_free_physical_cores_of_the_affinity(monkeypatch):
    from dnadiff.machine import available_cores
    from dnadiff.training.run import resolve_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: every core is free
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert available_cores() == 1
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.threads=null"])
    assert resolve_threads(cfg).train.threads == 1
    assert resolve_threads(load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.threads=3"])).train.threads == 3


@pytest.mark.training
def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_afresh(tmp_path, caplog):
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"out_dir={tmp_path}", *FAST, "train.max_steps=2",
                                                              "train.val_every=100", "train.ckpt_every=2",
                                                              "train.progress=false", "train.threads=1"])
    run = tmp_path / "tiny_dna_mdlm"
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": "tiny_dna_mdlm"}))  # what a kill before step 1 leaves
    (run / "logs" / "metrics.csv").write_text("step,train/loss\n0,9.9\n")
    with caplog.at_level("WARNING", logger="dnadiff"):
        result = train(cfg, resume=True)  # before the fix: "nothing to resume (no checkpoints/last.ckpt)"
    assert "starting the run afresh" in caplog.text
    assert result.metrics["steps"] == 2 and (run / "checkpoints" / "last.ckpt").is_file()
    rows = list(csv.DictReader(open(run / "logs" / "metrics.csv")))
    assert "9.9" not in {r.get("train/loss") for r in rows}  # nothing of the dead run is kept


def _loss_steps(run) -> list[int]:
    with open(run / "logs" / "metrics.csv") as fh:
        return sorted(int(r["step"]) for r in csv.DictReader(fh) if r.get("train/loss"))


class _Killed(Exception):
    pass


class _KillAt:
    """Stops the run after optimizer step `n` (a kill after a checkpoint, with logged rows past it).

    An ordinary exception: Lightning turns KeyboardInterrupt into sys.exit and ignores SIGINT after."""

    def __init__(self, n):
        from lightning.pytorch.callbacks import Callback

        class K(Callback):
            def on_train_batch_end(self, trainer, *args):
                if trainer.global_step >= n:
                    raise _Killed

        self.callback = K()


@pytest.mark.training
def test_resumed_run_keeps_earlier_sessions_rows_in_metrics_csv(tmp_path):
    over = [*FAST, "train.max_steps=6", "train.val_every=100", "train.ckpt_every=2", "train.progress=false",
            "train.threads=1"]
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", over)
    full = train(cfg, run_dir=tmp_path / "full")
    expected = _loss_steps(full.run_dir)
    run = tmp_path / "killed"
    with pytest.raises(_Killed):
        train(cfg, run_dir=run, callbacks=[_KillAt(3).callback])  # checkpoint at step 2, rows logged up to 3
    assert _loss_steps(run)  # the first session logged rows
    train(cfg, run_dir=run, resume=True)
    assert _loss_steps(run) == expected  # before the fix: only the second session's rows (steps >= 2)
