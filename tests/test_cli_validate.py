"""Bad requests are refused in one line before any heavy work, and the
config loader is bounded (alias bombs, huge documents, Trainer-facing values)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError


def _no_model_load(monkeypatch):
    """Make any model load fail loudly: a check that passes this ran before the load."""
    import dnadiff.checkpoint

    def boom(*a, **k):
        raise AssertionError("the model was loaded before the request was checked")

    monkeypatch.setattr(dnadiff.checkpoint, "load_for_inference", boom)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in err and "__init__()" not in err and "unexpected keyword" not in err
    return err


@pytest.mark.parametrize("argv, expect", [
    (["--sampler", "nope"], "choose one of: analytic, ancestral"),
    (["--option", "foo=1"], "valid options: steps (int, default 128), temperature (float"),
    (["--sampler", "remdm", "--option", "eta=abc"], "--option eta='abc': sampler 'remdm' expects float"),
    (["--sampler", "remdm", "--option", "bogus=1"], "eta (float, default 0.008)"),
    (["--length", "0"], "--length must be positive, got 0"),
    (["--num", "0"], "--num must be positive"),
    (["--steps", "0"], "--steps must be positive"),
    (["--temperature", "0"], "temperature must be > 0"),
    (["--prefix", ""], "--prefix/--suffix: empty sequence"),
])
def test_sample_request_refused_before_model_load(model, tmp_path, capsys, monkeypatch, argv, expect):
    _no_model_load(monkeypatch)
    rc = main(["sample", model, "--out", str(tmp_path / "x.fa"), *argv])
    assert rc == 2
    assert expect in _one_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_sampler_option_of_the_right_type_passes(model, tmp_path, capsys):
    assert main(["sample", model, "-n", "1", "--length", "8", "--steps", "2", "--sampler", "remdm",
                 "--option", "eta=0.02", "--out", str(tmp_path / "x.fa")]) == 0
    header, seq = (tmp_path / "x.fa").read_text().splitlines()
    assert header.startswith(">sample_0 sampler=remdm length=8") and len(seq) == 8 and set(seq) <= set("ACGTN")


@pytest.mark.subprocess
def test_train_without_arguments_says_config_required_overrides_optional():
    proc = subprocess.run([sys.executable, "-m", "dnadiff", "train"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "CONFIG is required" in proc.stderr and "overrides after it are optional" in proc.stderr
    assert "required: config, overrides" not in proc.stderr  # argparse's wording before the fix


@pytest.mark.parametrize("override, expect", [
    ("data.fasta=/nonexistent/g.fa", "data.fasta: /nonexistent/g.fa: genome FASTA not found"),
    ("sample.sampler=nope", "unknown sampler 'nope'"),
    ("model.backbone=transformer_xl", "unknown backbone 'transformer_xl'"),
    ("train.devices=abc", "train.devices: must be auto, a positive number of devices"),
    ("train.accelerator=xpu", "train.accelerator: must be one of auto, cpu"),
    ("train.precision=8bit", "train.precision: must be one of"),
    ("train.num_nodes=0", "train.num_nodes: must be >= 1"),
    ("train.threads=0", "train.threads: must be > 0 or null"),
])
def test_train_refused_before_lightning_starts(tmp_path, capsys, monkeypatch, override, expect):
    import dnadiff.training

    monkeypatch.setattr(dnadiff.training, "train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    extra = ["data.bed=/nonexistent/g.bed"] if override.startswith("data.fasta") else []
    rc = main(["train", "experiments/tiny_dna_mdlm", f"out_dir={tmp_path}", override, *extra])
    assert rc == 2
    assert expect in _one_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_devices_forms_lightning_accepts_still_load():
    for value, devices in (("auto", "auto"), ("1", 1), ("-1", -1), ("[0,1]", [0, 1]), ("'0,1'", "0,1")):
        cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"train.devices={value}"])
        assert cfg.train.devices == devices, value
    assert load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.precision=32"]).train.precision == "32"


def _bomb(levels: int = 9) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghijk"[:levels - 1]:
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text


def test_yaml_alias_bomb_fails_fast_in_one_line(tmp_path):
    # before the fix: `dnadiff train bomb.yaml` was still busy expanding 9^9 values after 2 minutes
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    start = time.time()
    with pytest.raises(DnadiffError, match="aliases expand to more than 100,000 values"):
        load_config(RunConfig, path)
    assert time.time() - start < 5


def test_small_aliases_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("defaults: [experiments/tiny_dna_mdlm]\nx: &lr 0.002\ntrain: {lr: *lr, betas: [0.9, 0.95]}\n")
    with pytest.raises(DnadiffError, match="unknown config key x"):  # the alias resolved; the extra key is refused
        load_config(RunConfig, path)
    path.write_text("defaults: [experiments/tiny_dna_mdlm]\ntrain: &t {lr: 0.002}\n")
    assert load_config(RunConfig, path).train.lr == 0.002


def test_ten_megabyte_config_is_one_line(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text('name: "' + "x" * 10_000_000 + '"\n')
    assert main(["train", str(path)]) == 2
    assert "too large for a config" in _one_error(capsys)


def test_long_string_value_is_refused(tmp_path, capsys):
    assert main(["train", "experiments/tiny_dna_mdlm", f"out_dir={tmp_path}", "name=" + "x" * 5000]) == 2
    assert "name: a 5,000-character string (at most 4,096)" in _one_error(capsys)


def test_override_alias_bomb_is_bounded():
    value = "[" + ",".join(["&a [1,1,1,1,1,1,1,1,1,1]"] + ["*a"] * 5) + "]"
    load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"data.text={{train: {value}}}"])  # small: fine (a typed key)
    bomb = _bomb().replace("\n", ", ").rstrip(", ")
    with pytest.raises(DnadiffError, match="aliases expand"):
        load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.text={" + bomb + "}"])
