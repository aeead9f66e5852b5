"""Errors that point further (issue 32, item 7): each mistake still gives one `error:` line and exit 2,
and the line says what the thing given is or what the closest right name is."""

from __future__ import annotations

import json

import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.errors import DnadiffError


def _error(capsys, argv) -> str:
    """Run the CLI in-process; exit code 2 and the stderr text."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    assert code == 2
    return capsys.readouterr().err


def _error_line(capsys, argv) -> str:
    err = _error(capsys, argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_typo_option_shows_the_subcommand_usage_and_the_closest_option(capsys):
    err = _error(capsys, ["sample", "MODEL", "--lenght", "5"])
    assert "usage: dnadiff sample" in err  # the subcommand's usage, not `dnadiff [-h] [--version] COMMAND`
    assert "COMMAND ..." not in err
    last = err.strip().splitlines()[-1]
    assert last == "dnadiff sample: error: unrecognized arguments: --lenght 5; did you mean --length?"
    err = _error(capsys, ["eval", "MODEL", "--sed", "1", "--max-windos", "3"])
    assert "usage: dnadiff eval" in err
    assert err.strip().endswith("did you mean --seed for --sed, --max-windows for --max-windos?")
    # nothing close: no guess
    assert _error(capsys, ["sample", "MODEL", "--zzzzzz"]).strip().endswith("unrecognized arguments: --zzzzzz")


def test_run_directory_given_as_model_suggests_run_model(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "config.yaml").write_text("name: run\n")
    (run / "model" / "config.json").write_text(json.dumps({"model_type": "dnadiff"}))
    line = _error_line(capsys, ["sample", str(run), "-n", "1"])
    assert f"{run}: missing config.json" in line
    assert f"it is a run directory, its model directory is {run / 'model'}" in line
    assert "run directory" in _error_line(capsys, ["eval", str(run)])


def test_classifier_directory_given_to_sample_says_what_it_is(tmp_path, capsys):
    clf = tmp_path / "ft" / "classifier"
    clf.mkdir(parents=True)
    (clf / "classifier.json").write_text(json.dumps({"format": "dnadiff-classifier"}))
    (clf / "classifier.pt").write_bytes(b"")
    line = _error_line(capsys, ["sample", str(clf)])
    assert "it is a classifier directory written by `dnadiff finetune`" in line
    assert "cannot generate" in line
    line = _error_line(capsys, ["sample", str(tmp_path / "ft")])  # the finetune output folder itself
    assert f"it is a `dnadiff finetune` output folder: its classifier is {clf}" in line
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _error_line(capsys, ["sample", str(plain)]).endswith("(not a dnadiff model directory)")


def test_metrics_reference_folder_is_called_a_folder(tmp_path, capsys):
    samples = tmp_path / "s.fa"
    samples.write_text(">a\nACGTACGT\n")
    line = _error_line(capsys, ["metrics", str(samples), "--reference", str(tmp_path), "--out", str(tmp_path / "m")])
    assert line == f"error: {tmp_path}: a folder, not a FASTA file (give a file inside it)"
    line = _error_line(capsys, ["metrics", str(samples), "--reference", str(tmp_path / "no.fa"),
                                "--out", str(tmp_path / "m")])
    assert line == f"error: {tmp_path / 'no.fa'}: FASTA file not found"


def test_misspelt_config_name_lists_the_closest_shipped_configs(capsys):
    line = _error_line(capsys, ["train", "experiments/tiny_dna_mdml"])
    assert line.startswith("error: experiments/tiny_dna_mdml: config file not found; closest shipped configs: "
                           "experiments/tiny_dna_mdlm")
    assert "`dnadiff configs`" in line
    # the name without its folder finds it too
    assert "closest shipped configs: experiments/tiny_dna_mdlm" in _error_line(capsys, ["train", "tiny_dna_mdlm"])
    assert "closest" not in _error_line(capsys, ["train", "qqqqqqqq"])


def test_invalid_yaml_gives_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntrain:\n  lr: [1, 2\nmodel:\n  backbone: dit\n")
    with pytest.raises(DnadiffError) as info:
        load_config(RunConfig, bad)
    msg = str(info.value)
    assert msg.startswith(f"{bad}: invalid YAML at line 4, column 6 (")
    assert "flow sequence that began at line 3" in msg
    bad.write_text("name: x\ntrain: lr: 1\n")
    with pytest.raises(DnadiffError, match=r"bad\.yaml: invalid YAML at line 2, column 10 \(mapping values"):
        load_config(RunConfig, bad)


def test_unknown_key_in_a_yaml_file_names_the_file(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text("defaults:\n  - experiments/tiny_dna_mdlm\ntrain:\n  learning_rate: 1.0e-3\n")
    with pytest.raises(DnadiffError) as info:
        load_config(RunConfig, child)
    assert str(info.value).startswith(f"{child}: unknown config key train.learning_rate (valid keys here:")
    child.write_text("defaults:\n  - experiments/tiny_dna_mdlm\ntrain:\n  lr: fast\n")
    with pytest.raises(DnadiffError, match=rf"^{child}: train.lr: expected a number, got 'fast'$"):
        load_config(RunConfig, child)
    # an override is no file: the message stays as it was
    with pytest.raises(DnadiffError, match=r"^unknown config key train.lrr "):
        load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.lrr=1"])
