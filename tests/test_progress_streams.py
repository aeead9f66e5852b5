"""Progress bars and output streams (issue 32, item 6): the motif scan's bar writes plain lines in a log
file, a terminal that reports 0 x 0 still gets a bar, `sample --out` prints its table on stdout, the
sampling bar says which batch and which step, and `design-finetune --resume` lets no raw Lightning
warning through."""

from __future__ import annotations

import io
import os
import pty
import select
import sys
import warnings

import pytest
import torch
import tqdm.auto
import tqdm.std

from dnadiff import logs
from dnadiff.cli import main


def _fasta(path, seqs):
    path.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(seqs)))
    return path


def test_metrics_motif_scan_bar_writes_plain_lines_off_a_terminal(tmp_path, capsys):
    rng = torch.Generator().manual_seed(0)
    seqs = ["".join("ACGT"[int(i)] for i in torch.randint(0, 4, (60,), generator=rng)) for _ in range(8)]
    samples, reference = _fasta(tmp_path / "s.fa", seqs[:4]), _fasta(tmp_path / "r.fa", seqs[4:])
    assert main(["metrics", str(samples), "--reference", str(reference), "--motif-ids", "MA0139.2", "--no-plots",
                 "--no-floor", "--out", str(tmp_path / "m"), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err  # tqdm's in-place redraws would be one endless line
    scans = [line for line in err.splitlines() if line.startswith("motif scan (samples)")]
    assert scans and "4/4" in scans[-1]


def _read_all(fd: int) -> str:
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


def test_a_terminal_of_size_zero_still_gets_a_bar(monkeypatch):
    """A new pseudo-terminal reports 0 columns and 0 rows (as under `script`, some CI, `docker -t`): tqdm
    sized its bar -1 wide in row -1 and showed nothing; the bar falls back to 80 columns."""
    master, slave = pty.openpty()
    try:
        assert os.get_terminal_size(slave) == os.terminal_size((0, 0))
        stream = os.fdopen(os.dup(slave), "w")
        monkeypatch.setattr(sys, "stderr", stream)
        with logs.progress_bar(total=3, desc="zero-size") as bar:
            for _ in range(3):
                bar.update(1)
        stream.flush()
        text = _read_all(master)
        stream.close()
    finally:
        os.close(master)
        os.close(slave)
    assert "zero-size" in text and "3/3" in text and "\r" in text  # a real bar, redrawn in place


class Recorded(tqdm.std.tqdm):
    """A tqdm bar that keeps every description it showed."""

    bars: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.descriptions = [self.desc]
        Recorded.bars.append(self)

    def update(self, n=1):
        out = super().update(n)
        self.descriptions.append(self.desc)
        return out


def test_sample_bar_shows_batches_and_steps(model, tmp_path, monkeypatch):
    """3 sequences in batches of 2 with 4 steps: `batch 1/2, step 1/4` ... `batch 2/2, step 4/4`, never a
    step above 4 (the bar's own count of 8 over both batches is not shown)."""
    Recorded.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(logs, "stderr_is_terminal", lambda: True)
    assert main(["sample", model, "--num", "3", "--batch-size", "2", "--length", "16", "--steps", "4",
                 "--out", str(tmp_path / "x.fa"), "--threads", "1"]) == 0
    (bar,) = [b for b in Recorded.bars if b.desc.startswith("sampling")]
    assert bar.total == 8 and bar.n == 8
    shown = [d for d in bar.descriptions if d != "sampling batch 1/2, step 0/4"]
    assert shown[0] == "sampling batch 1/2, step 1/4" and shown[-1] == "sampling batch 2/2, step 4/4"
    assert "sampling batch 2/2, step 1/4" in shown
    assert all(int(d.split("step ")[1].split("/")[0]) <= 4 for d in shown)
    text = err.getvalue()
    assert "batch 2/2, step 4/4" in text and "8/8" not in text


def test_one_batch_shows_steps_only(model, tmp_path, monkeypatch):
    Recorded.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    assert main(["sample", model, "--num", "2", "--length", "16", "--steps", "3", "--out", str(tmp_path / "x.fa"),
                 "--threads", "1"]) == 0
    (bar,) = [b for b in Recorded.bars if b.desc.startswith("sampling")]
    assert bar.descriptions[-1] == "sampling step 3/3"


def test_sample_out_prints_its_table_on_stdout(model, tmp_path, capsys):
    out = tmp_path / "x.fa"
    assert main(["sample", model, "--num", "2", "--length", "16", "--steps", "2", "--out", str(out),
                 "--threads", "1"]) == 0
    stdout, stderr = capsys.readouterr()
    assert stdout.startswith("sampler ") and "nfe_total" in stdout and "tokens_per_second" in stdout
    assert "nfe_total" not in stderr and f"wrote {out}" in stderr  # what was written: a message on stderr
    assert ">" not in stdout  # the FASTA is in the file


@pytest.mark.training
def test_design_finetune_resume_lets_no_lightning_warning_through(model, tmp_path):
    """`design-finetune --resume` printed Lightning's "Checkpoint directory ... exists and is not empty" and
    "Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided"
    (its ModelCheckpoint's state key held the interval, which follows --train-steps)."""
    fast = ["--sample-steps", "4", "--truncate-steps", "2", "--batch-size", "4", "--length", "12", "--lr", "1e-2",
            "--threads", "1", "-q", "--reward", "gc", "--method", "drakes", "--kl-weight", "0.2",
            "--target-samples", "8", "--eval-samples", "4"]
    out = tmp_path / "ft"
    assert main(["design-finetune", model, "--out", str(out), *fast, "--train-steps", "1"]) == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["design-finetune", model, "--out", str(out), *fast, "--train-steps", "3", "--resume"]) == 0
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "exists and is not empty" in m or "callbacks used to create" in m], messages
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["last.ckpt", "step3.ckpt"]  # state restored


@pytest.mark.parametrize("verbosity", [-1, 0])
def test_progress_bar_takes_disable_whether_or_not_progress_is_on(monkeypatch, verbosity):
    # A caller's disable=True once reached tqdm twice when --quiet had already turned progress off.
    monkeypatch.setattr(logs, "_PROGRESS", verbosity >= 0)
    bar = logs.progress_bar(range(3), disable=True, desc="x")
    assert list(bar) == [0, 1, 2]
    assert bar.disable
