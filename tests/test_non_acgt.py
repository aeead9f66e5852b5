"""Bases that are not A/C/G/T (issue 32, item 5): `eval --records` and `metrics` read IUPAC codes as N
(or skip them) and used to say nothing (59 % of a test file's bases dropped, rc 0). Each now writes one
stderr line with the count, the letters and what was done with them, and keeps the count in its JSON."""

from __future__ import annotations

import json

from dnadiff.cli import main
from dnadiff.data.base_census import BaseCensus

# record a: R Y K M and two N among 18 bases; record b (lower case): S W B D H V among 10
IUPAC_FASTA = ">a\nACGTRYKMACGTNNACGT\n>b\nacgtswbdhv\n"
LETTERS = {"N": 2, "B": 1, "D": 1, "H": 1, "K": 1, "M": 1, "R": 1, "S": 1, "V": 1, "W": 1, "Y": 1}


def test_census_counts_letters_case_folded():
    census = BaseCensus.of(["ACGTRYKMACGTNNACGT", b"acgtswbdhv"])
    assert (census.total, census.non_acgt) == (28, 12)
    assert census.letters() == LETTERS and list(census.letters())[0] == "N"  # most frequent first
    assert census.line("x.fa", "kept") == ("x.fa: 12 of 28 bases (42.9%) are not A/C/G/T (N 2, B 1, D 1, H 1, K 1, "
                                           "M 1, R 1, S 1, V 1, W 1, Y 1): kept")
    assert BaseCensus.of(["ACGT", "acgt"]).line("x.fa", "kept") is None
    assert BaseCensus.of(["ACNNT"]).only_n() and not census.only_n()


def test_eval_records_reports_the_non_acgt_bases(model, tmp_path, capsys):
    fasta = tmp_path / "iupac.fa"
    fasta.write_text(IUPAC_FASTA)
    out = tmp_path / "eval.json"
    assert main(["eval", model, "--records", str(fasta), "--out", str(out), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "not A/C/G/T" in line]
    assert lines == [f"{fasta}: 12 of 28 bases (42.9%) are not A/C/G/T (N 2, B 1, D 1, H 1, K 1, M 1, R 1, S 1, V 1, "
                     "W 1, Y 1): IUPAC codes read as N; N not scored (data.mask_n)"]
    res = json.loads(out.read_text())
    assert res["non_acgt"] == {"bases": 28, "non_acgt": 12, "letters": LETTERS,
                               "treatment": "IUPAC codes read as N; N not scored (data.mask_n)"}
    assert res["num_bases"] == 28 - 12  # what the line says: the 12 are not scored


def test_eval_records_of_plain_dna_says_nothing_and_counts_zero(model, tmp_path, capsys):
    fasta = tmp_path / "plain.fa"
    fasta.write_text(">a\nACGTACGTACGT\n")
    out = tmp_path / "eval.json"
    assert main(["eval", model, "--records", str(fasta), "--out", str(out), "--threads", "1"]) == 0
    assert "not A/C/G/T" not in capsys.readouterr().err
    assert json.loads(out.read_text())["non_acgt"]["non_acgt"] == 0


def test_metrics_reports_the_non_acgt_bases(tmp_path, capsys):
    samples = tmp_path / "samples.fa"
    samples.write_text(IUPAC_FASTA)
    reference = tmp_path / "ref.fa"
    reference.write_text("".join(f">r{i}\n{'ACGGTCAT' * 4}\n" for i in range(4)) + ">n\nACGTNNNNACGT\n")
    out = tmp_path / "m"
    assert main(["metrics", str(samples), "--reference", str(reference), "--no-motifs", "--no-plots", "--no-floor",
                 "--out", str(out), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    treatment = "left out of the k-mer, GC, entropy, Markov, memorisation and motif figures (A/C/G/T only)"
    assert [line for line in err.splitlines() if "not A/C/G/T" in line] == [
        f"{samples}: 12 of 28 bases (42.9%) are not A/C/G/T (N 2, B 1, D 1, H 1, K 1, M 1, R 1, S 1, V 1, W 1, Y 1): "
        + treatment,
        f"reference {reference}: 4 of 140 bases (2.86%) are not A/C/G/T (N 4): " + treatment]
    res = json.loads((out / "metrics.json").read_text())
    assert res["non_acgt"]["samples"] == {"bases": 28, "non_acgt": 12, "letters": LETTERS, "treatment": treatment}
    assert res["non_acgt"]["reference"]["non_acgt"] == 4 and res["non_acgt"]["reference"]["bases"] == 140
