"""Run-directory lock, launcher ranks and the Trainer settings of a run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError
from dnadiff.training import train
from dnadiff.training.rundir import RunDirLock, launch_rank
from helpers.fake_trainer import Stopped, record_trainer_kwargs

TINY = ["train.max_steps=2", "train.batch_size=2", "data.seq_len=32", "train.val_every=2", "train.val_batches=1",
        "train.ckpt_every=2", "train.threads=1", "train.progress=false", "train.accelerator=cpu"]


def test_second_train_into_a_locked_run_dir_stops_before_touching_it(tmp_path, capsys):
    run = tmp_path / "run"
    with RunDirLock(run):  # another dnadiff train holds the directory (flock: per open file, also in-process)
        rc = main(["train", "experiments/tiny_dna_mdlm", *TINY, "--run-dir", str(run)])
        err = capsys.readouterr().err
        assert rc == 2 and "in use by another dnadiff process" in err and "Traceback" not in err
        assert not run.exists()


@pytest.mark.training
def test_concurrent_overwrite_leaves_the_running_run_alone(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("the run that is training now\n")
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", TINY)
    with RunDirLock(run):
        with pytest.raises(DnadiffError, match="in use"):
            train(cfg, overwrite=True, run_dir=run)
    assert (run / "config.yaml").read_text() == "the run that is training now\n"
    result = train(cfg, overwrite=True, run_dir=run)  # lock released: --overwrite proceeds
    assert result.metrics["steps"] == 2 and (run / "model" / "model.safetensors").is_file()


@pytest.mark.subprocess
def test_lock_is_released_when_its_holder_is_killed(tmp_path):
    run = tmp_path / "run"
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).resolve().parent.parent)!r})
        from dnadiff.training.rundir import RunDirLock
        RunDirLock(__import__('pathlib').Path({str(run)!r})).acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    with RunDirLock(run) as lock:  # the kernel dropped the dead holder's lock
        assert lock.path.is_file()


def test_launch_rank_from_launcher_variables(monkeypatch):
    for var in ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert launch_rank() == 0
    monkeypatch.setenv("LOCAL_RANK", "0")  # Lightning's ddp launcher marks rank 0 as well
    assert launch_rank() == 0
    monkeypatch.setenv("LOCAL_RANK", "1")  # the copy of the command it starts
    assert launch_rank() == 1
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("SLURM_PROCID", "3")  # srun task 3
    assert launch_rank() == 3


def test_config_reaches_the_trainer(tmp_path, monkeypatch):
    """Multi-node settings (README "Several GPUs and SLURM"): what the config says is what Lightning gets."""
    import lightning

    seen = record_trainer_kwargs(monkeypatch)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [*TINY, "train.strategy=ddp", "train.devices=4",
                                                               "train.num_nodes=3", "train.precision=bf16-mixed",
                                                               "train.accumulate=5", "train.grad_clip=0.5"])
    with pytest.raises(Stopped):
        train(cfg, run_dir=tmp_path / "run")
    assert (seen["strategy"], seen["devices"], seen["num_nodes"]) == ("ddp", 4, 3)
    assert seen["precision"] == "bf16-mixed" and seen["sync_batchnorm"] is False
    assert seen["accumulate_grad_batches"] == 5 and seen["gradient_clip_val"] == 0.5
    assert seen["use_distributed_sampler"] is False  # the data module strides the stream itself
    assert seen["val_check_interval"] == cfg.train.val_every * 5  # in micro-batches
    monkeypatch.undo()
    # and Lightning accepts them (building a Trainer starts no process)
    from dnadiff.training.run import trainer_kwargs

    kw = trainer_kwargs(cfg, tmp_path / "run")
    kw.update(accelerator="cpu", precision="32-true")
    trainer = lightning.Trainer(**kw, logger=False, enable_checkpointing=False)
    assert trainer.num_nodes == 3 and trainer.num_devices == 4 and trainer.accumulate_grad_batches == 5
    assert type(trainer.strategy).__name__ == "DDPStrategy"
    assert trainer._accelerator_connector._layer_sync is None  # sync_batchnorm off


def test_markov_train_into_a_locked_run_dir_is_refused(tmp_path, capsys):
    """The Markov count fit takes the run-directory lock too (it wrote past a running train before)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("the run that is training now\n")
    with RunDirLock(run):
        rc = main(["train", "experiments/tiny_dna_markov", "model.overrides.max_order=1", "--run-dir", str(run),
                   "--overwrite"])
        err = capsys.readouterr().err
        assert rc == 2 and "in use by another dnadiff process" in err and "Traceback" not in err
    assert (run / "config.yaml").read_text() == "the run that is training now\n"


def test_file_lock_waits_or_refuses_and_names_its_holder(tmp_path):
    """The one lock helper of the run directory (non-blocking) and tokenizer training (blocking)."""
    import os
    import threading

    from dnadiff.data.file_lock import FileLock

    path = tmp_path / "sub" / "x.lock"
    first = FileLock(path)
    assert first.acquire() and path.read_text() == str(os.getpid())
    other = FileLock(path, blocking=False)
    assert not other.acquire() and other.holder == str(os.getpid())
    waiter = FileLock(path)
    got = threading.Event()
    thread = threading.Thread(target=lambda: waiter.acquire() and got.set())
    thread.start()
    assert not got.wait(0.3)  # blocking: still waiting for the holder
    first.release()
    thread.join(10)
    assert got.is_set()
    waiter.release()
    assert not path.exists() and FileLock(path, blocking=False).acquire()


def test_released_locks_leave_no_file_and_still_exclude_each_other(tmp_path):
    """Issue 49: a released lock removes its file (none pile up under the cache's locks/ folder), and
    removing it lets no two holders in at once: waiters blocked on the removed file retry on the new one."""
    import threading
    import time

    from dnadiff.data.file_lock import FileLock

    path = tmp_path / "locks" / "x.lock"
    inside, overlaps, rounds = [], [], 150

    def worker() -> None:
        for _ in range(rounds):
            with FileLock(path):
                inside.append(1)
                time.sleep(0.0005)  # let the other threads run while this one holds the lock
                if len(inside) > 1:
                    overlaps.append(len(inside))
                inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(4)]  # flock is per open file: threads contend too
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and overlaps == []
    assert list(path.parent.iterdir()) == []  # every holder removed its file
    run = tmp_path / "run"
    with RunDirLock(run) as lock:
        assert lock.path.is_file()
        with pytest.raises(DnadiffError, match="in use"):
            RunDirLock(run).acquire()
    assert not lock.path.exists()
