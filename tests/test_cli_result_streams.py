"""Results on stdout, progress and logs on stderr (issue 49, item 4): `dnadiff design` printed its table
through the log (stderr), so `dnadiff design ... > table.txt` kept nothing; every command that prints a
result table prints it on stdout, as `sample` does its FASTA."""

from __future__ import annotations

import json

import torch

from dnadiff.cli import main


def _columns(table: str) -> list[str]:
    return table.strip().splitlines()[0].split()


def test_design_table_goes_to_stdout_and_progress_to_stderr(model, tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "d.fa"
    assert main(["design", model, "--reward", "gc:0.6", "--method", "none", "--num", "2", "--length", "16",
                 "--steps", "2", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert _columns(captured.out)[:4] == ["method", "reward", "num", "length"]
    assert "reward_mean" in captured.out and "reward_mean" not in captured.err  # before: the table was on stderr
    assert "designing 2 sequence(s)" in captured.err and "wrote" in captured.err  # the logs stay on stderr
    mean = json.loads(out.with_suffix(".json").read_text())["summary"]["reward_mean"]
    row = captured.out.strip().splitlines()[2].split()
    assert float(row[4]) == float(f"{mean:.4g}")  # the row printed is the run's summary


def test_metrics_and_eval_tables_go_to_stdout(model, tmp_path, capsys):
    rng = torch.Generator().manual_seed(0)
    seqs = ["".join("ACGT"[int(i)] for i in torch.randint(0, 4, (48,), generator=rng)) for _ in range(6)]
    samples, reference = tmp_path / "s.fa", tmp_path / "r.fa"
    samples.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(seqs[:2])))
    reference.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(seqs[2:])))
    assert main(["metrics", str(samples), "--reference", str(reference), "--no-motifs", "--no-plots", "--no-floor",
                 "--kmax", "2", "--markov-order", "1", "--out", str(tmp_path / "m")]) == 0
    captured = capsys.readouterr()
    assert "kmer" in captured.out.lower() and "kmer" not in captured.err.lower()
    assert main(["eval", model, "--records", str(reference), "--seq-len", "16", "--max-windows", "2"]) == 0
    captured = capsys.readouterr()
    assert "bits_per_base" in captured.out and "bits_per_base" not in captured.err


def test_edit_table_goes_to_stdout(model, tmp_path, capsys):
    """`dnadiff edit` (a later command) logged its table too."""
    inp = tmp_path / "in.fa"
    inp.write_text(">a\nACGTTGCAATATTAGC\n>b\nTTTTAAAACCCCGGGG\n")
    assert main(["edit", model, "--in", str(inp), "--reward", "gc", "--max-edits", "2", "--method", "greedy",
                 "--out", str(tmp_path / "e.fa")]) == 0
    captured = capsys.readouterr()
    assert _columns(captured.out)[:5] == ["method", "reward", "sequences", "max_edits", "edits_mean"]
    assert captured.out.strip().splitlines()[2].split()[:4] == ["greedy", "gc", "2", "2"]
    assert "edits_mean" not in captured.err  # before: the table was on stderr
    assert "wrote" in captured.err and "wrote" not in captured.out
