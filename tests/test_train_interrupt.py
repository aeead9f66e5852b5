"""Ctrl-C in `dnadiff train` (issue 49): exit 130, where the run stopped (step, newest complete checkpoint),
the exact command that continues it, and `--resume` going on from that step. Before: exit 1, no word
(Lightning turns the KeyboardInterrupt into sys.exit(1))."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import lightning as L
import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.training import train
from dnadiff.training.checkpoints import load_checkpoint_state, newest_complete_checkpoint
from dnadiff.training.interrupt import TrainingInterrupted

pytestmark = [pytest.mark.training]

TINY = ["data.seq_len=32", "train.batch_size=2", "train.val_every=1000", "train.val_batches=1", "train.log_every=1",
        "train.warmup_steps=0", "train.ckpt_every=2", "train.progress=false", "train.threads=1",
        "train.accelerator=cpu", "train.max_steps=100000"]


def _complete_checkpoints_only(folder) -> None:
    """Every file of the checkpoint folder is a complete checkpoint under its final name (no temporaries)."""
    names = sorted(p.name for p in folder.iterdir())
    assert names and all(re.fullmatch(r"(step\d+|last)\.ckpt", n) for n in names), names
    for name in names:  # each one loads (a truncated archive raises): none is half-written
        assert "global_step" in load_checkpoint_state(folder / name)


@pytest.mark.subprocess
def test_ctrl_c_says_where_it_stopped_and_resume_continues_from_there(tmp_path, caplog):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "dnadiff", "train", "experiments/tiny_dna_mdlm", *TINY, "--run-dir", str(run)]
    # SIGINT at its default in the child (a test run from a background shell has it ignored, and children inherit that)
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"),
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list((run / "checkpoints").glob("step*.ckpt")):  # mid-training, after a checkpoint exists
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()[1][-2000:]
        time.sleep(0.1)
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    time.sleep(0.2)
    if child.poll() is None:
        child.send_signal(signal.SIGINT)  # a second Ctrl-C while it shuts down and speaks
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    stopped = re.search(r"interrupted at step (\d+) of 100000 \(run directory (.+)\); newest complete checkpoint: "
                        r"step (\d+) \(checkpoints/(\S+)\), where --resume continues", err)
    assert stopped, err[-2000:]
    step, ckpt_step = int(stopped[1]), int(stopped[3])
    assert stopped[2] == str(run) and 2 <= ckpt_step <= step and ckpt_step % 2 == 0
    assert newest_complete_checkpoint(run / "checkpoints", warn=False).step == ckpt_step  # what it said is so
    _complete_checkpoints_only(run / "checkpoints")
    command = re.search(r"^continue it with: (.+)$", err, re.M)[1]
    words = shlex.split(command)
    assert words[:2] == ["dnadiff", "train"] and words[2:] == [*cmd[4:], "--resume"]  # the same run, with --resume
    # the printed command (in-process), two steps further than the checkpoint
    with caplog.at_level("INFO", logger="dnadiff"):
        assert main([*words[1:], f"train.max_steps={ckpt_step + 2}"]) == 0
    assert f"resumed at step {ckpt_step} " in caplog.text
    assert newest_complete_checkpoint(run / "checkpoints", warn=False).step == ckpt_step + 2
    assert (run / "model" / "model.safetensors").is_file()


class _CtrlC(L.Callback):
    """Ctrl-C as Lightning sees it: a KeyboardInterrupt out of the training loop at step `at`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.at:
            raise KeyboardInterrupt


def test_interrupted_train_raises_with_the_step_and_checkpoint_and_gives_ctrl_c_back(tmp_path):
    """The Python API: TrainingInterrupted (a KeyboardInterrupt) instead of Lightning's sys.exit(1); the
    hook runs first; the SIGINT handler Lightning set to 'ignore' is the caller's again afterwards."""
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", TINY)
    heard = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingInterrupted) as stop:
        train(cfg, run_dir=tmp_path / "run", callbacks=[_CtrlC(5)], on_interrupt=heard.append)
    assert heard == [stop.value] and isinstance(stop.value, KeyboardInterrupt)
    assert (stop.value.step, stop.value.max_steps, stop.value.checkpoint.step) == (5, 100000, 4)
    assert stop.value.describe() == (f"interrupted at step 5 of 100000 (run directory {tmp_path / 'run'}); newest "
                                     "complete checkpoint: step 4 (checkpoints/last.ckpt), where --resume continues")
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(TrainingInterrupted) as early:  # before the first checkpoint: nothing to continue from
        train(cfg, run_dir=tmp_path / "early", callbacks=[_CtrlC(1)])
    assert early.value.checkpoint is None and "no checkpoint yet (the first is written at step 2" in \
        early.value.describe()
    assert not (tmp_path / "early").exists()  # a new run stopped before its first checkpoint leaves nothing


@pytest.mark.subprocess
def test_a_ctrl_c_shutdown_that_hangs_still_ends_with_130():
    """After the message, an interpreter shutdown that waits on a thread (seen once in CI: minutes) is cut
    short: the process ends with 130 within the grace period."""
    code = ("import threading, time\n"
            "from dnadiff.commands.train import end_within\n"
            "end_within(0.5, 130)\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()  # a non-daemon thread: shutdown waits\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert time.monotonic() - start < 30
