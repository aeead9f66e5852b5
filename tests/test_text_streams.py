"""What `dnadiff train` / `dnadiff eval` of a text config print, as a user sees it in a log file
(issue 32, items 2 and 5): a progress line for training (the shipped text configs used to set
train.progress false: minutes of silence), no transformers "Token indices sequence length ..."
warning (the tokenizer is asked for whole documents on purpose, windows are cut afterwards), no
blank lines at the head of stdout (the Rust tokenizer trainer's progress bars off a terminal), and
eval naming the text split it scores (it said "bundled sample [test]").

The fortunes fixture plus one long document (over the tokenizer's model_max_length of 512 tokens,
as the real corpus has) in a temporary data root; the commands run as child processes so that
every byte written to the real stdout / stderr file descriptors is seen."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.subprocess_env import child_env

DATA = Path(__file__).resolve().parent / "data"
TINY = ["train.max_steps=2", "train.val_every=1", "train.ckpt_every=1", "train.val_batches=1", "train.batch_size=4",
        "train.warmup_steps=1", "train.log_every=1", "model.overrides.n_blocks=1", "model.overrides.hidden_size=32",
        "model.overrides.n_heads=2", "model.overrides.adaln_dim=16", "sample.steps=2"]
LONG_DOC = " ".join(f"fortune {i} favours the prepared mind" for i in range(300))  # ~1,800 tokens


def _dnadiff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dnadiff", *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """(train, eval) CompletedProcess of a 2-step text run on the fixture and its eval (JSON in eval.json)."""
    work = tmp_path_factory.mktemp("text_run")
    corpus = work / "root" / "text" / "fortunes"
    shutil.copytree(DATA / "text" / "fortunes", corpus)
    for split in ("train", "test"):
        with open(corpus / f"{split}.jsonl", "a") as fh:
            fh.write(json.dumps({"text": LONG_DOC}) + "\n")
    train = _dnadiff("train", "text/cpu_fortunes_mdlm", f"data.root={work / 'root'}", *TINY, "--threads", "1",
                     cwd=work)
    assert train.returncode == 0, train.stderr
    model = work / "runs" / "text_cpu" / "cpu_fortunes_mdlm" / "model"
    ev = _dnadiff("eval", str(model), "--out", "eval.json", "--threads", "1", cwd=work)
    assert ev.returncode == 0, ev.stderr
    return train, ev, work


@pytest.mark.subprocess
@pytest.mark.training
def test_text_train_and_eval_print_no_token_length_warning(text_run):
    train, ev, _ = text_run
    for proc in (train, ev):
        assert "Token indices sequence length" not in proc.stdout + proc.stderr
        assert "maximum sequence length" not in proc.stdout + proc.stderr


@pytest.mark.subprocess
@pytest.mark.training
def test_text_train_stdout_starts_with_the_table(text_run):
    train, ev, _ = text_run
    # no blank lines before the table (a summary wider than a terminal is shown as metric/value lines)
    assert train.stdout.startswith(("steps ", "metric ")), repr(train.stdout[:40])
    assert train.stdout.splitlines()[2].startswith("steps "), repr(train.stdout[:120])
    assert ev.stdout.startswith("seq_len "), repr(ev.stdout[:40])
    assert "built a bert-like tokenizer" in train.stderr  # the first use did build it (the blank lines' source)


@pytest.mark.subprocess
@pytest.mark.training
def test_text_train_shows_progress_off_a_terminal(text_run):
    train, _, _ = text_run
    # the step bar as plain lines in a log file (logs.LineStream): the last one at 2 of 2 steps
    assert re.search(r"^train: +100%.* 2/2 ", train.stderr, re.M), train.stderr
    assert "\r" not in train.stderr


def test_shipped_text_configs_show_progress():
    from dnadiff.config import RunConfig, load_config

    folder = Path(__file__).resolve().parents[1] / "dnadiff" / "configs" / "text"
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    assert "cpu_fortunes_mdlm" in names
    assert [n for n in names if not load_config(RunConfig, f"text/{n}").train.progress] == []


@pytest.mark.subprocess
@pytest.mark.training
def test_text_eval_names_the_split_it_scores(text_run):
    _, ev, work = text_run
    test_file = work / "root" / "text" / "fortunes" / "test.jsonl"
    assert "bundled sample" not in ev.stderr
    assert f"from {test_file} [test]" in ev.stderr
    assert json.loads((work / "eval.json").read_text())["data"] == f"{test_file} [test]"
    assert json.loads((work / "eval.json").read_text())["num_windows"] == 51  # 50 fixture documents + the long one
