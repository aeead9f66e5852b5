"""Shipped configs do not depend on the current directory: their relative data paths resolve against
one data root (data.root, else $DNADIFF_DATA, else the data bundled in the package); paths typed as
key=value overrides stay relative to the current directory."""

import json
import os
from pathlib import Path

import pytest

from dnadiff.classifier_tuning.config import load_finetune_config
from dnadiff.config import RunConfig, load_config
from dnadiff.data_root import bundled_data_root, data_root

BUNDLED = Path(bundled_data_root())


def test_bundled_root_holds_the_tiny_configs_data():
    assert (BUNDLED / "chr22_sample" / "sequences.bed").is_file()
    for name in ("human_chr22_repeats", "leptospira_coding_vs_intergenic"):
        assert (BUNDLED / "benchmarks" / name / "train").is_dir() and (BUNDLED / "benchmarks" / name / "test").is_dir()


def test_default_root_is_the_bundled_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # any directory: nothing beside it
    ft = load_finetune_config("experiments/tiny_finetune")
    assert ft.data.dataset == str(BUNDLED / "benchmarks" / "human_chr22_repeats") and ft.data.root == str(BUNDLED)
    cfg = load_config(RunConfig, "experiments/tiny_cfg_leptospira")
    assert cfg.data.benchmark == str(BUNDLED / "benchmarks" / "leptospira_coding_vs_intergenic")
    sub = load_config(RunConfig, "experiments/cpu_dna_mdlm")  # from a `defaults:` file too
    assert sub.data.fasta == str(BUNDLED / "hg19_chr22_subset" / "chr22.fa.gz")
    assert sub.data.bed == str(BUNDLED / "hg19_chr22_subset" / "sequences.bed")
    text = load_config(RunConfig, "text/cpu_fortunes_mdlm")
    assert text.data.text["path"] == str(BUNDLED / "text" / "fortunes")
    assert load_config(RunConfig, "experiments/tiny_dna_mdlm").data.fasta is None  # null = the bundled sample


def test_environment_and_data_root_move_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DNADIFF_DATA", "/srv/dna")
    cfg = load_config(RunConfig, "experiments/cpu_dna_mdlm")
    assert cfg.data.fasta == "/srv/dna/hg19_chr22_subset/chr22.fa.gz" and cfg.data.root == "/srv/dna"
    cfg = load_config(RunConfig, "experiments/cpu_dna_mdlm", ["data.root=mydata"])  # wins over the variable
    assert cfg.data.fasta == str(tmp_path / "mydata" / "hg19_chr22_subset" / "chr22.fa.gz")
    ft = load_finetune_config("experiments/tiny_finetune", ["data.root=/x"])
    assert ft.data.dataset == "/x/benchmarks/human_chr22_repeats"
    assert data_root() == "/srv/dna"


def test_command_line_paths_stay_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(RunConfig, "experiments/cpu_dna_mdlm", ["data.fasta=g.fa", "data.bed=g.bed"])
    assert (cfg.data.fasta, cfg.data.bed) == ("g.fa", "g.bed")
    ft = load_finetune_config("experiments/tiny_finetune", ["data.dataset=my/bench"])
    assert ft.data.dataset == "my/bench"
    named = load_finetune_config("finetune/finetune_human_enhancers_cohn")  # a Genomic Benchmarks name, not a path
    assert named.data.dataset == "human_enhancers_cohn"


def test_a_config_file_of_the_user_resolves_against_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("defaults: [experiments/tiny_finetune]\ndata:\n  root: /data\n  dataset: b/x\n")
    ft = load_finetune_config(str(tmp_path / "mine.yaml"))
    assert ft.data.dataset == "/data/b/x"


@pytest.mark.training
def test_tiny_finetune_runs_from_another_directory(tmp_path, monkeypatch, capsys):
    from dnadiff.cli import main

    monkeypatch.chdir(tmp_path)
    rc = main(["finetune", "experiments/tiny_finetune", "data.max_train=40", "data.max_test=20", "protocol.seeds=[0]",
               "train.batch_size=8", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "runs" / "finetune" / "tiny_finetune" / "results.json").read_text())
    assert res["dataset"] == str(BUNDLED / "benchmarks" / "human_chr22_repeats")
    assert res["num_train"] == 40 and res["num_test"] == 20


def test_a_model_directory_records_data_paths_relative_to_the_data_root(tmp_path, monkeypatch):
    """A model directory's config names no folder of the machine that wrote it (issue 49: it recorded the
    absolute data root): its data paths are relative to the data root, resolved again when it is loaded,
    under the reader's data root, from any current directory."""
    from dnadiff.backbones import build_backbone
    from dnadiff.modelio.model_dir import load_config_of, save_model_dir

    monkeypatch.chdir(tmp_path)
    cfg = load_config(RunConfig, "experiments/tiny_cfg_leptospira")
    save_model_dir(tmp_path / "m", cfg, build_backbone("dit", preset="tiny", vocab_size=12))
    raw = json.loads((tmp_path / "m" / "config.json").read_text())
    assert raw["data"]["root"] is None and raw["data"]["benchmark"] == "benchmarks/leptospira_coding_vs_intergenic"
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    again = load_config_of(tmp_path / "m")
    assert again.data.benchmark == str(BUNDLED / "benchmarks" / "leptospira_coding_vs_intergenic")
    assert os.path.isdir(again.data.benchmark) and again.data.root == str(BUNDLED)
    monkeypatch.setenv("DNADIFF_DATA", str(tmp_path / "data"))  # another machine's data root
    assert load_config_of(tmp_path / "m").data.benchmark == str(tmp_path / "data" / "benchmarks" /
                                                                "leptospira_coding_vs_intergenic")
