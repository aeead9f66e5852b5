"""`dnadiff metrics SAMPLES --reference bundled`: the chr22 sample shipped with the package and its
BED, test split by default; the same numbers as naming that FASTA and BED by hand."""

from __future__ import annotations

import json

from dnadiff.cli import main
from dnadiff.data.fasta import bundled_genome

SEQ = "ACGTTGCAGGCTAACTTTGACCGTAGGCATCA" * 2  # 64 bp


def _samples(tmp_path):
    path = tmp_path / "s.fa"
    path.write_text("".join(f">s{i}\n{SEQ[i:] + SEQ[:i]}\n" for i in range(4)))
    return path


def _metrics(argv, out):
    assert main(["metrics", *argv, "--out", str(out), "--no-plots", "--kmax", "3",
                 "--max-reference-windows", "50"]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_bundled_reference_is_the_shipped_genome_test_split(tmp_path, capsys):
    samples = _samples(tmp_path)
    fasta, bed = bundled_genome()
    by_name = _metrics([str(samples), "--reference", "bundled"], tmp_path / "a")
    err = capsys.readouterr().err
    assert "reference: 48 windows of 64 bp from split 'test' of the bundled chr22 sample" in err
    by_hand = _metrics([str(samples), "--reference", fasta, "--bed", bed, "--split", "test"], tmp_path / "b")
    assert by_name["files"]["reference"] == by_hand["files"]["reference"] == fasta
    assert by_name["samples"] == by_hand["samples"] and by_name["reference_stats"] == by_hand["reference_stats"]
    valid = _metrics([str(samples), "--reference", "bundled", "--split", "valid"], tmp_path / "c")
    assert valid["reference_stats"] != by_name["reference_stats"]  # --split picks another part


def test_bundled_reference_refuses_a_bed(tmp_path, capsys):
    rc = main(["metrics", str(_samples(tmp_path)), "--reference", "bundled", "--bed", "x.bed"])
    assert rc == 2 and capsys.readouterr().err.startswith("error: --reference bundled comes with its own BED")
