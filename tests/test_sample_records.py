"""Each FASTA record of `dnadiff sample` names its random stream (seed and sequence index), and
`--seed S --first-index I --num 1` regenerates record I alone, the same sequence."""

from __future__ import annotations

import pytest
import torch

from dnadiff.cli import main
from dnadiff.data import read_fasta  # (full header line, sequence) with full_headers
from helpers.cli_model import tiny_model_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("records"), seq_len=16)


def fields(header: str) -> dict:
    return dict(part.split("=", 1) for part in header.split()[1:] if "=" in part)


@pytest.mark.parametrize("sampler,extra", [("ancestral", []), ("cached", ["--prefix", "ACG"]), ("remdm", []),
                                           ("ancestral", ["--template-fasta", "TEMPLATES"])])
def test_a_single_record_regenerates_from_its_header(model, tmp_path, sampler, extra):
    torch.set_num_threads(1)
    templates = tmp_path / "t.fa"
    templates.write_text(">a\nACGTNNNNNNNNGGCC\n>b\nNNNNNNNNTTTTNNNN\n>c\nNNNNNNNNNNNNNNNA\n")
    extra = [str(templates) if e == "TEMPLATES" else e for e in extra]
    common = ["--length", "16", "--steps", "5", "--sampler", sampler, *extra]
    full = tmp_path / "all.fa"
    assert main(["sample", model, *common, "--num", "5", "--seed", "11", "--batch-size", "2", "--out", str(full)]) == 0
    records = read_fasta(full, full_headers=True)
    assert [name.split()[0] for name, _ in records] == [f"sample_{i}" for i in range(5)]
    for i, (name, _) in enumerate(records):
        assert fields(name)["seed"] == "11" and fields(name)["index"] == str(i)
    assert len({seq for _, seq in records}) > 1  # distinct streams
    for i in (0, 3, 4):
        name, seq = records[i]
        one = tmp_path / f"one{i}.fa"
        assert main(["sample", model, *common, "--num", "1", "--seed", fields(name)["seed"],
                     "--first-index", fields(name)["index"], "--out", str(one)]) == 0
        ((again_name, again),) = read_fasta(one, full_headers=True)
        assert again == seq and again_name == name


def test_first_index_must_not_be_negative(model, tmp_path, capsys):
    assert main(["sample", model, "--first-index", "-1", "--out", str(tmp_path / "x.fa")]) == 2
    assert capsys.readouterr().err.strip() == "error: --first-index must be >= 0, got -1"
