"""Standard streams, gzip inputs, one overwrite rule, N as a position
to fill, genome references without a BED, an eval table without empty columns."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

import pytest

from dnadiff.cli import main
from dnadiff.data import bundled_genome, read_fasta


@pytest.mark.subprocess
def test_sample_without_out_writes_fasta_to_stdout(model, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dnadiff", "sample", model, "-n", "3", "--length", "16",
                           "--steps", "2"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    recs = list(read_fasta_text(proc.stdout))
    assert len(recs) == 3 and all(len(seq) == 16 and set(seq) <= set("ACGT") for _, seq in recs)
    assert "nfe_total" in proc.stderr and "sampling" in proc.stderr  # statistics and progress on stderr
    assert "sampling step 2/2 " in proc.stderr and ("step/s]" in proc.stderr or "s/step]" in proc.stderr)  # steps
    assert list(tmp_path.iterdir()) == []  # no file written


def read_fasta_text(text: str):
    from Bio import SeqIO

    for rec in SeqIO.parse(io.StringIO(text), "fasta"):
        yield rec.id, str(rec.seq)


def test_n_in_prefix_and_suffix_is_a_position_to_fill(model, tmp_path):
    out = tmp_path / "s.fa"
    assert main(["sample", model, "-n", "4", "--length", "20", "--steps", "4", "--prefix", "ACNNGT",
                 "--suffix", "TNA", "--out", str(out)]) == 0
    for _, seq in read_fasta(out):
        assert seq[:2] == "AC" and seq[4:6] == "GT" and seq[-3] == "T" and seq[-1] == "A"
        assert "N" not in seq  # before the fix N was kept as a fixed N token


def test_template_from_stdin_and_gzip(model, tmp_path, monkeypatch):
    tmpl = b">t\nACGTNNNNNNNNGGCC\n"
    (tmp_path / "t.fa.gz").write_bytes(gzip.compress(tmpl))
    out = tmp_path / "a.fa"
    assert main(["sample", model, "-n", "2", "--length", "16", "--steps", "2", "--template-fasta",
                 str(tmp_path / "t.fa.gz"), "--out", str(out)]) == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(tmpl)))
    out2 = tmp_path / "b.fa"
    assert main(["sample", model, "-n", "2", "--length", "16", "--steps", "2", "--template-fasta", "-",
                 "--out", str(out2)]) == 0
    for path in (out, out2):
        for _, seq in read_fasta(path):
            assert seq[:4] == "ACGT" and seq[-4:] == "GGCC" and "N" not in seq


@pytest.mark.parametrize("cmd", ["sample", "metrics", "eval"])
def test_existing_output_is_refused_unless_force(model, tmp_path, capsys, cmd):
    fasta, bed = bundled_genome()
    samples = tmp_path / "s.fa"
    samples.write_text(">a\n" + "ACGTTGCA" * 8 + "\n>b\n" + "GGCATTAC" * 8 + "\n")
    if cmd == "sample":
        target = tmp_path / "x.fa"
        argv = ["sample", model, "-n", "1", "--length", "8", "--steps", "2", "--out", str(target)]
    elif cmd == "metrics":
        target = tmp_path / "m" / "metrics.json"
        argv = ["metrics", str(samples), "--reference", str(samples), "--out", str(tmp_path / "m"), "--no-plots",
                "--no-floor", "--kmax", "2"]
    else:
        target = tmp_path / "e.json"
        argv = ["eval", model, "--records", str(samples), "--out", str(target)]
    target.parent.mkdir(exist_ok=True)
    target.write_text("old")
    assert main(argv) == 2
    assert "exists (use --force to overwrite it)" in capsys.readouterr().err
    assert target.read_text() == "old"
    assert main([*argv, "--force"]) == 0
    assert target.read_text() != "old"


def test_demo_refuses_a_non_empty_out(tmp_path, capsys):
    (tmp_path / "genome_summary.json").write_text("old")
    assert main(["demo", "--out", str(tmp_path), "--summary-only"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "genome_summary.json").read_text() == "old"
    assert main(["demo", "--out", str(tmp_path), "--summary-only", "--force"]) == 0
    assert json.loads((tmp_path / "genome_summary.json").read_text())["splits"]


def test_metrics_against_a_genome_without_bed_uses_windows_not_mostly_n(tmp_path, capsys):
    # a "genome": 2 kb of N, 4 kb of sequence, 2 kb of N (chromosome ends are gaps)
    seq_rng = "ACGTTGCAGGCTAACT" * 256  # 4096 bp
    genome = tmp_path / "g.fa.gz"
    genome.write_bytes(gzip.compress((">chrT\n" + "N" * 2048 + seq_rng + "N" * 2048 + "\n").encode()))
    samples = tmp_path / "s.fa"
    samples.write_text("".join(f">s{i}\n{seq_rng[i * 64:(i + 1) * 64]}\n" for i in range(4)))
    out = tmp_path / "m"
    assert main(["metrics", str(samples), "--reference", str(genome), "--out", str(out), "--no-plots",
                 "--kmax", "3"]) == 0
    err = capsys.readouterr().err
    assert ("64 windows of 64 bp used (at most --max-reference-windows 2,000), evenly spaced among the 64 windows "
            "with at most 10% N, out of all 128 non-overlapping 64-bp windows of the 1 record(s) at least 128 bp long"
            in err)
    res = json.loads((out / "metrics.json").read_text())
    assert res["samples"]["num_reference"] == 64  # before: 1 (the whole chromosome, half of it N)
    assert res["reference_stats"]["gc_mean"] == pytest.approx(0.5)  # every window is the 16-bp repeat, GC 1/2
    assert res["samples"]["kmer_js"]["1"] == pytest.approx(0.0, abs=1e-12)  # same base composition exactly


def test_metrics_samples_from_stdin(tmp_path, monkeypatch, capsys):
    text = ">a\n" + "ACGTTGCA" * 8 + "\n>b\n" + "GGCATTAC" * 8 + "\n"
    ref = tmp_path / "r.fa"
    ref.write_text(text)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(text.encode()))))
    out = tmp_path / "m"
    assert main(["metrics", "-", "--reference", str(ref), "--out", str(out), "--no-plots", "--no-floor",
                 "--kmax", "2"]) == 0
    res = json.loads((out / "metrics.json").read_text())
    assert res["files"]["samples"] == "stdin"

    # samples unlike the reference, piped and from a file: the same numbers, only the source's name differs
    samples = ">s1\n" + "AACCGTTA" * 8 + "\n>s2\n" + "GGGCATTT" * 8 + "\n"
    (tmp_path / "s.fa").write_text(samples)
    runs = {}
    for source in ("-", str(tmp_path / "s.fa")):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(samples.encode())))
        out = tmp_path / ("piped" if source == "-" else "file")
        assert main(["metrics", source, "--reference", str(ref), "--out", str(out), "--no-plots", "--no-floor",
                     "--kmax", "2"]) == 0
        runs[source] = json.loads((out / "metrics.json").read_text())
    piped, on_file = runs.values()
    assert piped["files"]["samples"] == "stdin" and on_file["files"]["samples"] == str(tmp_path / "s.fa")
    assert piped["samples"]["kmer_js"]["2"] > 0.01 and piped["samples"]["num_samples"] == 2  # not a trivial zero
    assert {**piped, "files": None} == {**on_file, "files": None}


def test_eval_table_has_no_empty_columns(model, tmp_path, capsys):
    recs = tmp_path / "r.fa"
    recs.write_text(">a\n" + "ACGTTGCA" * 8 + "\n")
    assert main(["eval", model, "--records", str(recs)]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert "bits_per_base" in header and "T" not in header and "quadrature" not in header


def test_eval_genome_from_stdin(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    fasta, bed = bundled_genome()
    with open(fasta, "rb") as fh:
        data = fh.read()  # bgzip bytes: decompressed on the way in
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    piped = tmp_path / "stdin.json"
    assert main(["eval", model, "--fasta", "-", "--bed", bed, "--max-windows", "2", "--seq-len", "32",
                 "--out", str(piped)]) == 0
    assert "bits_per_base" in capsys.readouterr().out
    # the same numbers as a run on the file
    on_file = tmp_path / "file.json"
    assert main(["eval", model, "--fasta", fasta, "--bed", bed, "--max-windows", "2", "--seq-len", "32",
                 "--out", str(on_file)]) == 0
    a, b = json.loads(piped.read_text()), json.loads(on_file.read_text())
    assert a["num_windows"] == b["num_windows"] == 2 and a["bits_per_base"] > 0 and len(a["sequence_nats"]) == 2
    assert a["data"] == "- [test]" and b["data"].endswith("chr22_sample.fa.gz [test]")
    assert {**a, "data": None} == {**b, "data": None}  # every number, per window too


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config
    from dnadiff.data.tokenizer_training import train_tokenizer
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import build_tokenizer

    root = tmp_path_factory.mktemp("text")
    words = "the cat sat on a mat while dogs ran far".split()
    with open(root / "train.jsonl", "w") as fh:
        for i in range(30):
            fh.write(json.dumps({"text": " ".join(words[(i + j) % len(words)] for j in range(6))}) + "\n")
    tok_dir = train_tokenizer([root / "train.jsonl"], root / "tok", "bert-like", 300, min_frequency=1)
    tok = build_tokenizer("text", str(tok_dir))
    cfg = load_config(RunConfig, None, ["name=t", "tokenizer.kind=text", f"tokenizer.path={tok_dir}",
                                        "model.backbone=dit", "model.preset=tiny", "data.kind=text", "data.seq_len=12",
                                        "sample.length=12"])
    backbone = build_backbone("dit", preset="tiny", vocab_size=tok.vocab_size)
    return str(save_model_dir(root / "model", cfg, backbone, tok))


def test_text_model_writes_jsonl_or_txt_not_fasta(text_model, tmp_path, capsys):
    base = ["sample", text_model, "-n", "2", "--length", "12", "--steps", "2"]
    assert main([*base, "--out", str(tmp_path / "t.fa")]) == 2
    assert "a text model writes .jsonl or .txt samples, not FASTA" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "t.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["sample_0", "sample_1"] and all(isinstance(r["text"], str) for r in rows)
    assert json.loads((tmp_path / "t.json").read_text())["num"] == 2
    assert main([*base, "--out", str(tmp_path / "u.txt")]) == 0
    txt = (tmp_path / "u.txt").read_text()
    assert txt.startswith("### sample_0 ") and "\n### sample_1 " in txt and ">" not in txt.split("\n")[0]
    capsys.readouterr()
    assert main(base) == 0  # stdout: JSONL
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["id"] == "sample_0"
