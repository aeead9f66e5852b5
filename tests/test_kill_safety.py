"""Kill-safety of `dnadiff train`: SIGKILL mid-checkpoint-write and mid-run, resume, compare.

The reduced version runs two killed child processes (one killed halfway through writing a
checkpoint, one killed from outside after it checkpointed a new step) and finishes in-process; the
full benchmark (5 kills each for train and finetune) is benchmarks/kill_safety.py, run by the slow test.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import signal
from pathlib import Path

import pytest
import torch

from dnadiff.config import RunConfig, load_config
from dnadiff.training import train
from dnadiff.weights import read_weights
from helpers.progress_wait import Child

pytestmark = [pytest.mark.subprocess, pytest.mark.training]

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("kill_safety", REPO / "benchmarks" / "kill_safety.py")
ks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ks)

STEPS = 8


def _all_checkpoints_load(run: Path) -> int:
    """Every checkpoints/*.ckpt loads weights-only; returns the highest step among them (where
    --resume continues: a kill between stepN.ckpt and its copy last.ckpt leaves last.ckpt behind)."""
    files = sorted(glob.glob(str(run / "checkpoints" / "*.ckpt")))
    assert files, "no checkpoint at all"
    steps = []
    for f in files:
        state = torch.load(f, map_location="cpu", weights_only=True)  # raises on a truncated file
        steps.append(int(state["global_step"]))
    return max(steps)


def test_train_killed_twice_resumes_bit_identical(tmp_path):
    job = ks.TrainJob(tmp_path, STEPS)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [*ks.TRAIN_OVERRIDES, f"train.max_steps={STEPS}"])
    reference = train(cfg, run_dir=tmp_path / "ref")
    run = tmp_path / "killed"

    # kill 1: the child kills itself after writing half of its 5th checkpoint file (step 3's step*.ckpt)
    log = tmp_path / "killed.log"  # ks.launch sends the child's output there
    proc = ks.launch(job, run, resume=False, mid_write_nth=5)
    assert Child(proc=proc, watch=[run, log]).wait().returncode == -signal.SIGKILL
    tmp = glob.glob(str(run / "checkpoints" / ".*.tmp"))
    assert len(tmp) == 1 and os.path.getsize(tmp[0]) > 0  # the half-written file exists, under a temp name
    with pytest.raises(Exception):
        torch.load(tmp[0], weights_only=True)  # and it really is truncated
    first = _all_checkpoints_load(run)
    assert first == 2  # the previous, complete step

    # kill 2: resumed child, SIGKILLed from outside right after it wrote a new checkpoint
    proc = ks.launch(job, run, resume=True)
    start = job.progress(run)
    # until the resumed child has checkpointed a new step (waited for by progress), then at once: a step
    # takes a few ms on an idle machine, so any further wait could outlast the run
    Child(proc=proc, watch=[run, log]).wait_until(lambda: job.progress(run) > start)
    assert ks.kill(proc), "the child finished before the kill"
    second = _all_checkpoints_load(run)
    assert first < second < STEPS

    resumed = train(cfg, resume=True, run_dir=run)  # in-process, same single thread as the reference
    wa = read_weights(reference.model_dir / "model.safetensors")
    wb = read_weights(resumed.model_dir / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    assert _all_checkpoints_load(run) == STEPS
    assert not glob.glob(str(run / "checkpoints" / ".*.tmp"))  # --resume removed the half-written file


@pytest.mark.slow
def test_full_kill_benchmark(tmp_path):
    """5 SIGKILLs each for `dnadiff train` and `dnadiff finetune` (several minutes)."""
    assert ks.main(["--kills", "5", "--steps", "30", "--work", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 0
