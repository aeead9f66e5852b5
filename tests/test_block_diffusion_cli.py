"""Block diffusion from the command line and the Python API: train (also from an AR model), eval, sample beyond
the training length with the model's own `block` sampler; bad input refused in one line before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dnadiff.cli import main as cli_main
from helpers.cli_errors import error_of

FAST = ["data.seq_len=32", "train.batch_size=4", "train.val_every=100", "train.val_batches=1", "train.ckpt_every=2",
        "train.log_every=1", "train.progress=false", "train.warmup_steps=1", "train.max_steps=2", "sample.steps=4"]
TINY = "experiments/tiny_dna_bd3lm"


def one_line_error(capsys, argv, match: str) -> None:
    err = error_of(capsys, argv)
    assert match in err, err


@pytest.mark.parametrize("overrides,match", [
    (["objective.block_size=0"], "objective.block_size: must be an integer >= 1"),
    (["objective.block_size=5"], "5 does not divide data.seq_len 32"),
    (["objective.name=mdlm", "objective.block_size=4"], "objective 'mdlm' has no blocks"),
    (["objective.name=ar", "objective.clip=[0.3,0.8]"], "objective 'ar' has no blocks"),
    (["objective.clip=[0.8,0.3]"], "0 <= beta < omega <= 1"),
    (["model.backbone=caduceus"], "needs a causal network"),
])
def test_bad_block_settings_are_one_line_errors(tmp_path, capsys, overrides, match):
    one_line_error(capsys, ["train", TINY, *FAST, f"out_dir={tmp_path}", *overrides], match)
    assert not any(tmp_path.iterdir())  # nothing written


def test_init_from_a_bidirectional_model_is_refused_before_loading(tmp_path, capsys):
    from helpers.cli_model import tiny_model_dir

    mdlm = tiny_model_dir(tmp_path / "mdlm")  # Caduceus MDLM
    one_line_error(capsys, ["train", TINY, *FAST, f"out_dir={tmp_path}/runs", f"model.init_from={mdlm}"],
                   "model.init_from")
    assert not (tmp_path / "runs").exists()


@pytest.mark.training
def test_train_eval_sample_and_finetune_from_ar(tmp_path, capsys):
    """A bd3lm model trains, evaluates its block bound and samples 100 tokens (> the 32 it trained on) with
    `block` by default, reporting calls and wall per sequence; another one starts from an AR's weights."""
    from helpers.cli_model import tiny_model_dir

    assert cli_main(["train", TINY, *FAST, f"out_dir={tmp_path}", "--threads", "1"]) == 0
    model = tmp_path / "tiny_dna_bd3lm" / "model"
    out = tmp_path / "s.fa"
    assert cli_main(["sample", str(model), "--num", "2", "--length", "100", "--out", str(out), "--threads", "1"]) == 0
    stats = json.loads(out.with_suffix(".json").read_text())
    assert stats["sampler"] == "block" and stats["length"] == 100
    assert 0 < stats["nfe_per_sequence"] < 100 and stats["seconds_per_sample"] > 0  # 7 blocks x 4 steps (+1)
    capsys.readouterr()
    one_line_error(capsys, ["sample", str(model), "--num", "1", "--length", "32", "--option", "block_size=4"],
                   "differs from the 16 this model was trained with")
    seqs = [line for line in out.read_text().splitlines() if not line.startswith(">")]
    assert len("".join(seqs)) == 200 and set("".join(seqs)) <= set("ACGT")
    capsys.readouterr()
    assert cli_main(["eval", str(model), "--out", str(tmp_path / "e.json"), "--max-windows", "16",
                     "--threads", "1"]) == 0
    ev = json.loads((tmp_path / "e.json").read_text())
    row = ev["rows"][0] if "rows" in ev else ev
    assert row["objective"] == "bd3lm" and 1.0 < row["bits_per_base"] < 8  # 2 training steps: near uniform

    ar = tiny_model_dir(tmp_path / "ar", overrides=["model.backbone=mamba", "objective.name=ar"])
    ar_w = dict(__import__("dnadiff").load(ar).backbone.state_dict())
    assert cli_main(["train", TINY, *FAST, "train.max_steps=1", "train.lr=1e-12", "train.ema=0", f"out_dir={tmp_path}",
                     "name=ft", f"model.init_from={ar}", "--threads", "1"]) == 0
    ft = __import__("dnadiff").load(tmp_path / "ft" / "model")
    assert ft.objective.name == "bd3lm" and ft.objective.block_size == 16
    for k, v in ft.backbone.state_dict().items():  # started from the AR (a step at lr 1e-12 moves nothing)
        torch.testing.assert_close(v, ar_w[k], rtol=0, atol=1e-6)
    assert Path(tmp_path / "ft" / "model" / "config.json").is_file()


@pytest.mark.slow  # ~15 s on an idle core (40 training steps), a minute on a loaded one
@pytest.mark.training
def test_text_dit_block_model_trains_and_samples_to_eos(tmp_path):
    """Text: a causal DiT trained with bd3lm on a small corpus; sampling 40 tokens (> the 16 trained on) stops
    at EOS ([SEP]: everything after a row's first one is [PAD]); the KV-cached path gives the samples of the
    full recompute."""
    import dnadiff
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train
    from helpers.word_corpus import tiny_text_dit, word_corpus

    tok = word_corpus(tmp_path)
    cfg = load_config(RunConfig, "text/cpu_fortunes_bd3lm", [f"out_dir={tmp_path}", *tiny_text_dit(tmp_path, tok),
                                                             "train.max_steps=40"])
    model = dnadiff.load(train(cfg).model_dir)
    eos, pad = model.tokenizer.eos_id, model.tokenizer.pad_id
    assert eos not in model.banned_ids()
    x, smp = model.generate(6, 40, generator=3, return_sampler=True)
    assert smp.name == "block" and smp.eos_id == eos and x.shape == (6, 40)
    for row in x.tolist():
        assert eos in row, row  # 40 tokens are far more than any training document
        assert all(t == pad for t in row[row.index(eos) + 1:])
    y = model.generate(6, 40, generator=3, use_cache=False)
    assert torch.equal(x, y)
