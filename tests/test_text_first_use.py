"""`dnadiff train text/cpu_fortunes_mdlm` on a fresh checkout: the tokenizer is built from the
training text on first use (once, under a lock), or the command stops with one line saying what
to do; the fortunes fixture (tests/data/text/fortunes) stands in for the full corpus."""

import threading
from pathlib import Path

import pytest

import dnadiff.data.tokenizer_training as tt
from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config

DATA = Path(__file__).resolve().parent / "data"  # holds text/fortunes, the layout of the data root
TINY = ["train.max_steps=2", "train.val_every=1", "train.ckpt_every=1", "train.val_batches=1", "train.batch_size=4",
        "train.warmup_steps=1", "train.log_every=1", "model.overrides.n_blocks=1", "model.overrides.hidden_size=32",
        "model.overrides.n_heads=2", "model.overrides.adaln_dim=16", "sample.steps=2"]


def _count_builds(monkeypatch):
    builds = []
    real = tt._build_bert_like

    def counting(*args, **kwargs):
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tt, "_build_bert_like", counting)
    return builds


@pytest.mark.training
def test_train_builds_the_tokenizer_on_first_use_then_reuses_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    builds = _count_builds(monkeypatch)
    args = ["train", "text/cpu_fortunes_mdlm", f"data.root={DATA}", *TINY]
    assert main(args) == 0, capsys.readouterr().err
    tok = tmp_path / "runs" / "text_cpu" / "tokenizers" / "bert-like"
    assert (tok / tt.STAMP).is_file() and builds == [1]
    assert "built a bert-like tokenizer" in capsys.readouterr().err
    model_tok = tmp_path / "runs" / "text_cpu" / "cpu_fortunes_mdlm" / "model" / "tokenizer"
    assert model_tok.is_dir()  # the model directory keeps its own copy
    assert main([*args, "name=second"]) == 0
    assert builds == [1]  # reused, not rebuilt
    from dnadiff.checkpoint import load

    model = load(tmp_path / "runs" / "text_cpu" / "second" / "model")
    assert model.tokenizer.decode(model.tokenizer.encode("a fortune")) == "a fortune"


def test_two_runs_at_once_build_the_tokenizer_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    builds = _count_builds(monkeypatch)
    cfg = load_config(RunConfig, "text/cpu_fortunes_mdlm", [f"data.root={DATA}", "tokenizer.train_vocab_size=500"])
    errors = []
    from transformers import PreTrainedTokenizerFast  # noqa: F401  (imported once: lazy imports race in threads)

    def worker():
        try:
            tt.ensure_tokenizer(cfg)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and builds == [1]
    from dnadiff.tokenizers import TextTokenizer

    assert TextTokenizer(cfg.tokenizer.path).vocab_size <= 501


def test_without_a_tokenizer_the_error_names_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["train", "text/cpu_fortunes_mdlm", f"data.root={DATA}", "tokenizer.train=null", *TINY])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert "tokenizer.train=bert-like" in err and "huggingface" not in err.lower()
    assert not (tmp_path / "runs" / "text_cpu" / "cpu_fortunes_mdlm").exists()


def test_missing_corpus_is_one_line_naming_the_data_root(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["train", "text/cpu_fortunes_mdlm", f"data.root={tmp_path / 'empty'}", *TINY])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{tmp_path}/empty/text/fortunes does not exist" in err
    monkeypatch.setenv("DNADIFF_DATA", str(tmp_path / "elsewhere"))
    rc = main(["train", "text/cpu_fortunes_mdlm", *TINY])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "elsewhere/text/fortunes" in err and "DNADIFF_DATA" in err


@pytest.mark.parametrize("name", ["bert-like", "nope"])
def test_tokenizer_train_is_validated(name):
    from dnadiff.errors import DnadiffError

    if name == "nope":
        with pytest.raises(DnadiffError, match="tokenizer.train"):
            load_config(RunConfig, "text/cpu_fortunes_mdlm", [f"tokenizer.train={name}"])
    else:
        assert load_config(RunConfig, "text/cpu_fortunes_mdlm").tokenizer.train == name
