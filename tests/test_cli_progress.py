"""Progress of the long commands: bars that stay within their totals (sampling), a design bar with
steps, designs done and the reward so far, fine-tuning's bar in epochs and steps that mean
something, plain lines without cursor codes when stderr is not a terminal, and the demo's results
on stdout."""

from __future__ import annotations

import io
import sys

import pytest
import torch
import tqdm.auto
import tqdm.std

from dnadiff.cli import main
from helpers.cli_model import tiny_model_dir


class Recorded(tqdm.std.tqdm):
    """A tqdm bar that remembers its description, total, every position and its postfix."""

    bars: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.positions, self.totals, self.descriptions = [], [self.total], [self.desc]
        Recorded.bars.append(self)

    def update(self, n=1):
        out = super().update(n)
        self.positions.append(self.n)
        self.totals.append(self.total)
        self.descriptions.append(self.desc)
        return out


@pytest.fixture
def recorded(monkeypatch):
    Recorded.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    return Recorded.bars


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("progress"), seq_len=16)


def test_sampling_bar_never_overruns_its_total(model, tmp_path, recorded):
    """4 steps per batch, 2 batches: the bar ends at 8/8, never above. With eps = 0.4 the last step
    leaves positions masked, so a noise-removal pass (a 5th network call per batch) follows it: it
    is not a step."""
    torch.set_num_threads(1)
    out = tmp_path / "x.fa"
    assert main(["sample", model, "--num", "3", "--batch-size", "2", "--length", "16", "--steps", "4",
                 "--option", "eps=0.4", "--out", str(out)]) == 0
    import json

    assert json.loads(out.with_suffix(".json").read_text())["nfe_total"] == 2 * 5  # the extra pass did run
    (bar,) = [b for b in recorded if b.desc.startswith("sampling")]
    assert set(bar.totals) == {8} and bar.positions[-1] == 8 and max(bar.positions) == 8
    assert bar.positions == sorted(bar.positions)


@pytest.mark.parametrize("method,options", [("svdd", ["--option", "candidates=2"]), ("best_of_n", ["--option", "n=2"]),
                                            ("smc", ["--option", "particles=2"]), ("cg", ["--option", "scale=5"]),
                                            ("none", [])])
def test_design_shows_steps_designs_and_reward(model, tmp_path, recorded, method, options):
    torch.set_num_threads(1)
    out = tmp_path / "d.fa"
    assert main(["design", model, "--reward", "gc", "--method", method, *options, "--num", "3", "--batch-size", "2",
                 "--length", "16", "--steps", "4", "--out", str(out)]) == 0
    (bar,) = [b for b in recorded if b.desc.startswith("design")]
    assert set(bar.totals) == {8} and bar.n == 8 and max(bar.positions) == 8
    assert bar.positions == sorted(bar.positions) and len(set(bar.positions)) >= 6  # step by step, not per batch
    import json

    mean = json.loads(out.with_suffix(".json").read_text())["summary"]["reward_mean"]
    assert bar.postfix == f"designs 3/3  reward mean {mean:.4g}"


def _write_benchmark(root, n=24, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    for split, count in (("train", n), ("test", 8)):
        for label, p in (("neg", [0.4, 0.1, 0.1, 0.4]), ("pos", [0.1, 0.4, 0.4, 0.1])):
            d = root / split / label
            d.mkdir(parents=True)
            for i in range(count):
                (d / f"{i}.txt").write_text("".join(rng.choice(list("ACGT"), size=24, p=p)))
    return root


@pytest.mark.training
def test_finetune_bar_counts_epochs_from_one_and_steps(tmp_path, recorded, capsys):
    """2 epochs of ceil(43/8) = 6 steps: the bar says epoch 1/2 then 2/2 (not "Epoch 0/0"), counts
    12 optimizer steps, and no logger version ("v_num") is shown."""
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.classifier_tuning.runs import run_finetune

    data = _write_benchmark(tmp_path / "bench")
    cfg = load_finetune_config("experiments/tiny_finetune", [
        f"data.dataset={data}", "data.max_train=null", "data.max_test=null", "protocol.seeds=[0]", "train.epochs=2",
        "train.batch_size=8", "train.progress=true", "train.lr_grid=[3e-3]"])
    run_finetune(cfg, tmp_path / "out", echo=lambda *a: None)
    bars = [b for b in recorded if "finetune" in b.desc]
    assert len(bars) == 1
    bar = bars[0]
    steps = -(-int(round(48 * 0.9)) // 8)  # the paper protocol's 90 % training part, batches of 8
    assert set(bar.totals) == {2 * steps} and bar.n == 2 * steps
    epochs = [d.split("epoch ")[1] for d in bar.descriptions if "epoch " in d]
    assert epochs[0] == "1/2" and epochs[-1] == "2/2" and set(epochs) == {"1/2", "2/2"}
    assert "v_num" not in capsys.readouterr().err and "v_num" not in str(bar.postfix)


class FakeTrainer:
    is_global_zero, sanity_checking, global_step, max_steps, num_val_batches = True, False, 0, 3, [2]
    callback_metrics = {"train/loss": 1.5}


def test_training_bars_write_plain_lines_when_stderr_is_a_file(monkeypatch):
    """With stderr redirected, the training bar and its validation bar leave no carriage returns
    and no cursor-up codes (`[A`): each refresh is a line of its own, the nested bar is left out."""
    from dnadiff.training.progress import StepProgressBar

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    pb, trainer = StepProgressBar(), FakeTrainer()
    pb._trainer = trainer
    pb.on_train_start(trainer, None)
    for step in (1, 2):
        trainer.global_step = step
        pb.on_train_batch_end(trainer, None, None, None, step)
    pb.on_validation_start(trainer, None)
    pb.on_validation_batch_end(trainer, None, None, None, 0)
    pb.on_validation_end(trainer, None)
    trainer.global_step = 3
    pb.on_train_batch_end(trainer, None, None, None, 3)
    pb.on_train_end(trainer, None)
    text = err.getvalue()
    assert "\x1b" not in text and "\r" not in text and "[A" not in text
    lines = text.splitlines()
    assert lines[0].startswith("train:   0%") and "3/3" in lines[-1] and "loss 1.5" in lines[-1]
    assert not any("validate" in line for line in lines) and len(lines) == len(set(lines))


def test_bars_on_a_terminal_are_tqdm_bars(monkeypatch):
    """On a terminal the bar redraws in place as usual; under --quiet there is none."""
    from dnadiff import logs

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(logs, "stderr_is_terminal", lambda: True)
    with logs.progress_bar(total=2, desc="x") as bar:
        bar.update(2)
    assert "\r" in err.getvalue() and "2/2" in err.getvalue()
    monkeypatch.setattr(logs, "_PROGRESS", False)
    err.truncate(0)
    with logs.progress_bar(total=2, desc="x") as bar:
        bar.update(2)
    assert err.getvalue().strip("\x00") == ""


def test_demo_results_go_to_stdout_and_progress_to_stderr(tmp_path, capsys):
    assert main(["demo", "--summary-only", "--out", str(tmp_path / "demo")]) == 0
    out, err = capsys.readouterr()
    assert "split" in out and "train" in out and "test" in out and "genome_summary.json" in out
    assert "[1/4] bundled genome" in err and "[1/4]" not in out
    assert "genome_summary.json" not in err


def test_demo_summary_counts_the_windows_the_demo_trains_on(tmp_path, capsys):
    """Issue 49: the summary said `windows@1024` while the demo trains on 128 bp windows; by default it
    now counts those, and its label names the length (a brute-force count from the BED here)."""
    import json

    from dnadiff.data.fasta import bundled_genome

    assert main(["demo", "--summary-only", "--out", str(tmp_path / "demo")]) == 0
    out, err = capsys.readouterr()
    rows = json.loads((tmp_path / "demo" / "genome_summary.json").read_text())["splits"]
    lengths: dict = {}
    for line in open(bundled_genome()[1]):
        chrom, start, end, split = line.split()[:4]
        lengths.setdefault(split, []).append(int(end) - int(start))
    assert {r["split"]: r["windows_128bp"] for r in rows} == {k: sum(-(-n // 128) for n in v)
                                                               for k, v in lengths.items()}
    assert "windows_128bp" in out and "1024" not in out and "in 128 bp windows (the windows the model trains on)" in err
    assert main(["demo", "--summary-only", "--out", str(tmp_path / "demo"), "--force", "--seq-len", "1024"]) == 0
    out, err = capsys.readouterr()
    assert "windows_1024bp" in out and "trains on" not in err  # another length: labelled as what it is


def test_training_eta_leaves_the_warm_up_step_out(monkeypatch):
    """Issue 49: `dnadiff demo`'s first line promised 1:00:38 because the first step (loading, the first
    forward/backward, numba's compile) took 24 s; the rate and the ETA now count the steps after it."""
    from dnadiff import logs
    from dnadiff.training.progress import StepProgressBar

    now = [1000.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: now[0])  # the bars' clock
    monkeypatch.setattr(logs, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    pb, trainer = StepProgressBar(), FakeTrainer()
    trainer.max_steps = 150
    pb._trainer = trainer
    pb.on_train_start(trainer, None)
    for step, seconds in [(1, 24.0), (2, 0.2), (3, 0.2), (4, 0.2), (5, 0.2)]:
        now[0] += seconds
        trainer.global_step = step
        pb.on_train_batch_end(trainer, None, None, None, step)
        shown = pb._bar.format_dict
        line = pb._bar.format_meter(**shown)
        if step == 1:  # nothing timed yet: no ETA rather than one from the warm-up
            assert "1/150" in line and "<?" in line and "00:24" in line
    assert shown["rate"] == pytest.approx(5.0)  # steps per second after the warm-up
    assert "<00:29" in line  # 145 steps at 0.2 s (with the warm-up in the rate: 15 minutes and more)
    pb.on_train_end(trainer, None)
