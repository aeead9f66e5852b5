"""Preemption-safe `--resume`: nothing to resume yet, the newest complete checkpoint, validation rows
that survive a kill, honest messages (no untrue Lightning warnings, one note of what resumed), a
pickled checkpoint refused in one clean line, and a full disk when the model directory is exported."""

from __future__ import annotations

import csv
import errno
import warnings
from pathlib import Path

import pytest
import torch

from dnadiff.cli import main as cli_main
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError
from dnadiff.training import train
from dnadiff.weights import read_weights

FAST = ["data.seq_len=32", "train.batch_size=2", "train.val_batches=1", "train.log_every=1", "train.warmup_steps=0",
        "train.progress=false", "train.threads=1", "train.accelerator=cpu"]


@pytest.fixture(autouse=True)
def _no_stale_log_handler():
    """cli_main installs a stderr handler on capsys' stream: drop it, or later tests log into a closed file."""
    yield
    from dnadiff.logs import log

    for handler in [h for h in log.handlers if getattr(h, "_dnadiff", False)]:
        log.removeHandler(handler)


def _cfg(*extra: str) -> RunConfig:
    return load_config(RunConfig, "experiments/tiny_dna_mdlm", [*FAST, *extra])


class _Killed(Exception):
    pass


def _kill_at(n: int):
    """A callback that stops the run after optimizer step n (an exception: Lightning's teardown runs)."""
    from lightning.pytorch.callbacks import Callback

    class K(Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step >= n:
                raise _Killed

    return K()


def _first_step_recorder(seen: list):
    from lightning.pytorch.callbacks import Callback

    class R(Callback):
        def on_train_start(self, trainer, *args):
            seen.append(int(trainer.global_step))

    return R()


def _rows(run: Path) -> list[dict]:
    """metrics.csv's rows without the wall-clock column (it differs between any two runs)."""
    with open(run / "logs" / "metrics.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k != "val/wall_seconds"} for row in csv.DictReader(fh)]


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = read_weights(a / "model" / "model.safetensors"), read_weights(b / "model" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


# ----------------------------------------------------------------------------- nothing to resume yet


@pytest.mark.training
def test_resume_without_run_directory_starts_afresh_and_says_so(tmp_path, capsys):
    run = tmp_path / "requeued"  # preempted before its run directory existed
    rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=2", "train.val_every=100",
                   "train.ckpt_every=2", "--run-dir", str(run), "--resume"])
    err = capsys.readouterr().err
    assert rc == 0, err
    said = [line for line in err.splitlines() if "nothing to resume" in line]
    assert len(said) == 1 and "starting the run afresh" in said[0] and not said[0].startswith("error")
    assert (run / "model" / "model.safetensors").is_file() and (run / "checkpoints" / "last.ckpt").is_file()


def test_resume_into_a_folder_that_is_not_a_run_is_refused_untouched(tmp_path, capsys):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=2", "--run-dir", str(folder),
                   "--resume"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "not a dnadiff run directory" in err and "\n" not in err
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


# ----------------------------------------------------------------------------- the newest complete checkpoint


@pytest.mark.training
def test_newest_complete_checkpoint_wins_over_an_older_last_ckpt(tmp_path, caplog):
    """Killed after step4.ckpt was written but before last.ckpt (step 2) was replaced, with a
    truncated step9.ckpt and half-written temporaries beside them: the resume continues at step 4."""
    cfg = _cfg("train.max_steps=6", "train.val_every=100", "train.ckpt_every=2")
    reference = train(cfg, run_dir=tmp_path / "ref")
    run = tmp_path / "run"
    with pytest.raises(_Killed):
        train(cfg, run_dir=run, callbacks=[_kill_at(3)])  # last.ckpt = step2.ckpt
    ckpts = run / "checkpoints"
    old_last = (ckpts / "last.ckpt").read_bytes()
    with pytest.raises(_Killed):
        train(cfg, run_dir=run, resume=True, callbacks=[_kill_at(5)])  # step4.ckpt, last.ckpt at step 4
    assert torch.load(ckpts / "step4.ckpt", weights_only=True)["global_step"] == 4
    (ckpts / "last.ckpt").write_bytes(old_last)  # the copy to last.ckpt never happened
    data = (ckpts / "step4.ckpt").read_bytes()
    (ckpts / "step9.ckpt").write_bytes(data[: len(data) // 2])  # truncated by a writer that was not atomic
    (ckpts / ".step6.ckpt.x1.tmp").write_bytes(data[:100])  # a half-written temporary: never a candidate
    (run / ".loss_curve.png.x2.tmp").write_bytes(b"")  # what a kill while drawing the curve left
    (run / "logs" / ".metrics.csv.x3.tmp").write_bytes(b"")

    from dnadiff.training.checkpoints import newest_complete_checkpoint

    with caplog.at_level("WARNING", logger="dnadiff"):
        point = newest_complete_checkpoint(ckpts)
    assert (point.path.name, point.step) == ("step4.ckpt", 4)
    assert "step9.ckpt: skipped, not a complete checkpoint" in caplog.text

    seen: list[int] = []
    with caplog.at_level("INFO", logger="dnadiff"):
        result = train(cfg, run_dir=run, resume=True, callbacks=[_first_step_recorder(seen)])
    assert seen == [4]  # before: 2 (last.ckpt), two finished steps trained again
    assert "resumed at step 4 (8 samples seen) from checkpoints/step4.ckpt" in caplog.text
    assert result.metrics["steps"] == 6
    _same_weights(run, reference.run_dir)
    left = [p.name for p in (run, run / "logs", ckpts) for p in p.iterdir() if p.name.endswith(".tmp")]
    assert left == []  # the killed sessions' temporaries are gone


def test_a_pickle_among_the_checkpoints_is_refused_whatever_its_step(tmp_path):
    import pickle

    from dnadiff.training.checkpoints import newest_complete_checkpoint

    torch.save({"global_step": 3, "state_dict": {}}, tmp_path / "last.ckpt")
    (tmp_path / "step7.ckpt").write_bytes(pickle.dumps({"global_step": 7}))
    with pytest.raises(DnadiffError, match=r"step7\.ckpt: cannot resume: it is a pickled Python object"):
        newest_complete_checkpoint(tmp_path)
    (tmp_path / "step7.ckpt").unlink()
    assert newest_complete_checkpoint(tmp_path).step == 3


# ----------------------------------------------------------------------------- validation rows survive a kill


@pytest.mark.training
def test_kill_after_a_checkpoint_cannot_lose_the_validation_row(tmp_path, monkeypatch):
    """A kill -9 right after the step-4 checkpoint: nothing logged but not yet flushed reaches the
    disk (simulated: the checkpoint writer raises once last.ckpt of step 4 is written, and the CSV
    writer writes nothing from then on). The resumed run's metrics.csv equals an uninterrupted run's."""
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    import dnadiff.training.checkpoint_io as checkpoint_io

    cfg = _cfg("train.max_steps=6", "train.val_every=2", "train.ckpt_every=2")
    reference = train(cfg, run_dir=tmp_path / "ref")
    expected = _rows(reference.run_dir)
    assert [r["step"] for r in expected if r["val/nats_per_token"]] == ["1", "3", "5"]

    killed = {"now": False}
    real_save, real_flush = checkpoint_io.AtomicCheckpointIO.save_checkpoint, ExperimentWriter.save

    def save_then_die(self, checkpoint, path, storage_options=None):
        real_save(self, checkpoint, path, storage_options)
        if Path(path).name == "last.ckpt" and checkpoint["global_step"] == 4:
            killed["now"] = True
            raise _Killed

    def flush_while_alive(self):
        if not killed["now"]:
            real_flush(self)

    monkeypatch.setattr(checkpoint_io.AtomicCheckpointIO, "save_checkpoint", save_then_die)
    monkeypatch.setattr(ExperimentWriter, "save", flush_while_alive)
    run = tmp_path / "run"
    with pytest.raises(_Killed):
        train(cfg, run_dir=run)
    monkeypatch.undo()
    train(cfg, run_dir=run, resume=True)
    assert _rows(run) == expected  # before: the validation row of step 4 (and the train row of step 4) were lost
    _same_weights(run, reference.run_dir)


# ----------------------------------------------------------------------------- messages of a resume


@pytest.mark.training
def test_resume_prints_a_note_and_no_untrue_lightning_warnings(tmp_path, capsys):
    """Every warning is recorded (pytest's own filters would hide them); stderr through the CLI's logging."""
    run = tmp_path / "run"
    args = ["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=4", "train.val_every=2",
            "train.ckpt_every=2", "--run-dir", str(run)]
    with pytest.raises(_Killed):
        train(load_config(RunConfig, "experiments/tiny_dna_mdlm", args[2:-2]), run_dir=run, callbacks=[_kill_at(3)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli_main([*args, "--resume"]) == 0
    err = capsys.readouterr().err + "\n".join(str(w.message) for w in caught)
    for untrue in ("not resumable", "exists and is not empty", "all_gather"):
        assert untrue not in err, err
    assert err.count("resumed at step 2 (4 samples seen) from checkpoints/") == 1, err


# ----------------------------------------------------------------------------- a pickled last.ckpt


@pytest.mark.parametrize("form", ["bare_pickle", "torch_archive"])
def test_pickled_last_ckpt_is_refused_in_one_whole_line(tmp_path, capsys, form):
    import pickle

    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "PWNED"), "w"))

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    ckpt = run / "checkpoints" / "last.ckpt"
    if form == "bare_pickle":
        ckpt.write_bytes(pickle.dumps({"weight": Payload()}))
    else:  # torch.save's zip archive holding an object weights_only refuses
        torch.save({"global_step": 1, "weight": Payload()}, ckpt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=2", "--run-dir", str(run),
                       "--resume"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"error: {ckpt}: cannot resume: ") and "\n" not in err
    assert err.endswith("(refusing to unpickle it)") or err.endswith("(refusing to unpickle them)"), err
    assert "weights_only" not in err and "argumen" not in err  # no torch advice, nothing cut mid-word
    assert not [w for w in caught if "pickle protocol" in str(w.message)]
    assert not (tmp_path / "PWNED").exists()


# ----------------------------------------------------------------------------- a full disk at export


def _no_space_safetensors(monkeypatch):
    """safetensors' writer on a full disk: a SafetensorError (not an OSError), its text from the OS error."""
    import safetensors
    import safetensors.torch

    def full(*args, **kwargs):
        raise safetensors.SafetensorError('Error while serializing: I/O error: No space left on device (os error 28) '
                                          'at path "model.safetensors"')

    monkeypatch.setattr(safetensors.torch, "save_file", full)


def _no_space_python(monkeypatch):
    """A Python write of the weights file (the canonical header rewrite) on a full disk: OSError(ENOSPC)."""
    real_write_bytes = Path.write_bytes

    def full(self, data):
        if self.name == "model.safetensors":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)


@pytest.mark.training
@pytest.mark.parametrize("fault", [_no_space_safetensors, _no_space_python])
def test_full_disk_at_export_is_one_line_and_nothing_half_written(tmp_path, capsys, monkeypatch, fault):
    run = tmp_path / "run"
    args = ["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=2", "train.val_every=100",
            "train.ckpt_every=2", "--run-dir", str(run)]
    fault(monkeypatch)
    rc = cli_main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, lines
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:] and "Traceback" not in str(lines)
    assert "No space left on device" in lines[-1] and str(run / "model") in lines[-1] and "--resume" in lines[-1]
    assert not (run / "model").exists() and not list(run.glob(".model*"))  # nothing half-written
    assert not (run / "loss_curve.png").exists() and not [p for p in run.rglob("*.tmp")]
    monkeypatch.undo()  # space freed: the same command with --resume writes the model directory
    assert cli_main([*args, "--resume"]) == 0
    assert read_weights(run / "model" / "model.safetensors")


def test_loss_curve_has_no_temporary_file_while_it_is_drawn(tmp_path, monkeypatch):
    """A kill while matplotlib renders must not leave an empty `.loss_curve.png.*.tmp`: the PNG is
    rendered in memory and its temporary file exists only while the bytes are copied."""
    import matplotlib.figure

    from dnadiff.training.plots import plot_loss_curve

    (tmp_path / "metrics.csv").write_text("step,train/loss,val/nats_per_token\n0,2.0,\n1,1.5,\n1,,1.4\n")
    real_savefig = matplotlib.figure.Figure.savefig
    during = []

    def watching_savefig(self, *args, **kwargs):
        during.append(sorted(p.name for p in tmp_path.iterdir()))
        return real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", watching_savefig)
    assert plot_loss_curve(tmp_path / "metrics.csv", tmp_path / "loss_curve.png")
    assert during == [["metrics.csv"]]  # before: a `.loss_curve.png.*.tmp` existed while rendering
    assert (tmp_path / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loss_curve.png", "metrics.csv"]
