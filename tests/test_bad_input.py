"""Bad-input audit: every command answers malformed input with ONE line
`error: ...` naming the problem, exit code 2, no traceback and no (partial) output file.

Each case is a parametrize id; the case table below is the list the issue asks for. Inputs that
must WORK (Windows line endings, lower case, IUPAC codes) are checked at the end.
Commands run in-process through dnadiff.cli.main (the same code path as the `dnadiff` script).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from dnadiff.cli import main as cli_main
from helpers.legacy_layout import to_legacy_layout

FAST = ["data.seq_len=32", "train.batch_size=4", "train.val_every=100", "train.val_batches=1", "train.ckpt_every=1",
        "train.log_every=1", "train.progress=false", "train.warmup_steps=1", "train.max_steps=2"]
TRAIN = ["train", "experiments/tiny_dna_mdlm", *FAST]
REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "dnadiff" / "assets" / "benchmarks" / "human_chr22_repeats"  # the subset bundled with the package
FT = ["finetune", "experiments/tiny_finetune", f"data.dataset={BENCH}", "data.max_train=16", "data.max_test=8",
      "train.progress=false",
      "protocol.seeds=[0]"]


def _finetune_on(dataset: str) -> list[str]:
    """`dnadiff finetune` on one of the broken benchmark folders the workspace fixture writes (WS/bench/...)."""
    return [*FT, "--dataset", f"{{ws}}/bench/{dataset}", "--out", "{out}/ft"]


def _eval_records(name: str) -> list[str]:
    """`dnadiff eval` of the workspace's model on one of its FASTA files (WS/files/NAME)."""
    return ["eval", "{ws}/model", "--records", f"{{ws}}/files/{name}"]


def _sample(*options: str) -> list[str]:
    """`dnadiff sample` of the workspace's model with `options`, to OUT/s.fa."""
    return ["sample", "{ws}/model", *options, "--out", "{out}/s.fa"]


def _metrics(samples: str, reference: str, *options: str) -> list[str]:
    """`dnadiff metrics` of two of the workspace's FASTA files (WS/files/NAME) with `options`, to OUT/m."""
    return ["metrics", f"{{ws}}/files/{samples}", "--reference", f"{{ws}}/files/{reference}", *options,
            "--out", "{out}/m"]


CLEAN = "ACGTTGCAACGTAGCTAGCTAGGATCCGATCGATCGTAGCTAGCTAGCATCG" * 2  # 104 bp


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace of good and bad files: model directories (no training: saved directly), FASTAs, benchmarks."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    root = tmp_path_factory.mktemp("bad_input")
    tok = DNATokenizer()
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=32", "sample.length=32", "sample.steps=4"])
    torch.manual_seed(0)
    save_model_dir(root / "model", cfg, build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size), tok)
    hcfg = load_config(RunConfig, "experiments/tiny_dna_mdlm",
                       ["model.backbone=hyena", "data.seq_len=32", "sample.length=32", "sample.steps=4"])
    save_model_dir(root / "hyena", hcfg, build_backbone("hyena", preset="tiny", vocab_size=tok.vocab_size, l_max=64),
                   tok)
    # a model whose weights have another vocabulary than the DNA tokenizer
    save_model_dir(root / "vocab16", cfg, build_backbone("caduceus", preset="tiny", vocab_size=16), tok)

    def model_copy(name, mutate):
        d = root / name
        shutil.copytree(root / "model", d)
        mutate(d)
        return d

    model_copy("no_weights", lambda d: (d / "model.safetensors").unlink())
    model_copy("no_config", lambda d: (d / "config.json").unlink())
    model_copy("empty_weights", lambda d: (d / "model.safetensors").write_bytes(b""))
    model_copy("truncated_weights", lambda d: (d / "model.safetensors").write_bytes(
        (root / "model" / "model.safetensors").read_bytes()[:3000]))
    model_copy("bad_config_type", lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"max_steps": 150', '"max_steps": "lots"')))
    # a directory in the config.yaml layout of older versions, its YAML cut short
    model_copy("bad_config_yaml", lambda d: to_legacy_layout(d).write_text("train: [1, 2\n"))
    model_copy("bad_config_json",
               lambda d: (d / "config.json").write_text('{"model_type": "dnadiff", "train": [1, 2\n'))
    model_copy("bad_metrics", lambda d: (d / "metrics.json").write_text("{not json"))
    model_copy("unknown_objective", lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"name": "mdlm"', '"name": "diffusion9000"')))
    model_copy("unknown_backbone", lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"backbone": "caduceus"', '"backbone": "transformer_xl"')))
    model_copy("shape_mismatch", lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"d_model": 32', '"d_model": 48')))

    f = root / "files"
    f.mkdir()
    (f / "empty.fa").write_text("")
    (f / "blank.fa").write_text("\n\n  \n")
    (f / "no_header.fa").write_text(CLEAN + "\n")
    (f / "header_only.fa").write_text(">r1\n")
    (f / "binary.fa").write_bytes(bytes(range(256)) * 8)
    (f / "bad_chars.fa").write_text(">r1\nACGTXZ!!ACGT\n")
    (f / "protein.fa").write_text(">p1\nMKVLAAGIVQEEWWPRSTT\n")
    (f / "good.fa").write_text(f">r1\n{CLEAN}\n>r2\n{CLEAN[::-1]}\n")
    (f / "short.fa").write_text(">t1\nACGTNNNNACGT\n")
    gz = gzip.compress(f"> r1\n{CLEAN * 50}\n".encode())
    (f / "truncated.fa.gz").write_bytes(gz[: len(gz) // 2])
    (f / "empty.yaml").write_text("# nothing here\n")
    (f / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01" * 64)
    (f / "truncated.yaml").write_text("train:\n  lr: [1, 2\n")
    (f / "list.yaml").write_text("- a\n- b\n")
    (f / "bad_bed.bed").write_text("this is not a bed file\n")
    (f / "chr.fa").write_text(">chrZ\n" + CLEAN * 10 + "\n")
    (f / "one_split.bed").write_text("chrZ\t0\t500\ttrain\n")
    (f / "wrong_chrom.bed").write_text("chr1\t0\t500\ttrain\nchr1\t500\t900\tvalid\nchr1\t900\t1000\ttest\n")
    (f / "a_dir.fa").mkdir()

    b = root / "bench"
    for name, classes in {"one_class": {"train": ["a"], "test": ["a"]},
                          "mismatch": {"train": ["a", "b"], "test": ["a", "c"]},
                          "empty_class": {"train": ["a", "b"], "test": ["a", "b"]},
                          "bad_seq": {"train": ["a", "b"], "test": ["a", "b"]},
                          "empty_seq": {"train": ["a", "b"], "test": ["a", "b"]}}.items():
        for split, cls in classes.items():
            for c in cls:
                d = b / name / split / c
                d.mkdir(parents=True)
                if not (name == "empty_class" and c == "b" and split == "train"):
                    for i in range(4):
                        (d / f"{i}.txt").write_text(CLEAN[i:i + 40])
    (b / "bad_seq" / "train" / "a" / "0.txt").write_text("ACGT-JJJ-ACGT")
    (b / "empty_seq" / "train" / "b" / "1.txt").write_text("\n")
    (b / "no_test").mkdir()
    return root


# ----------------------------------------------------------------------------- the cases
# (id, argv with {ws} placeholders, substring the one-line error must contain, output path that must not appear)

CASES = [
    # --- train: configs
    ("train-config-missing", ["train", "{ws}/files/nope.yaml"], "config file not found", None),
    ("train-config-empty", ["train", "{ws}/files/empty.yaml"], "empty config", "{ws}/runs"),
    ("train-config-binary", ["train", "{ws}/files/binary.yaml"], "binary.yaml", "{ws}/runs"),
    ("train-config-truncated-yaml", ["train", "{ws}/files/truncated.yaml"], "invalid YAML", "{ws}/runs"),
    ("train-config-not-mapping", ["train", "{ws}/files/list.yaml"], "top level must be a mapping", "{ws}/runs"),
    ("train-config-is-directory", ["train", "{ws}/files/a_dir.fa"], "a_dir.fa: a folder, not a config file", None),
    ("train-wrong-type", [*TRAIN, "train.max_steps=abc"], "train.max_steps: expected an integer", "{ws}/runs"),
    ("train-wrong-type-bool", [*TRAIN, "train.progress=maybe"], "train.progress: expected true/false", "{ws}/runs"),
    ("train-out-of-range-lr", [*TRAIN, "train.lr=-1"], "train.lr: must be > 0", "{ws}/runs"),
    ("train-out-of-range-ema", [*TRAIN, "train.ema=1.5"], "train.ema", "{ws}/runs"),
    ("train-out-of-range-seq-len", [*TRAIN, "data.seq_len=0"], "data.seq_len", "{ws}/runs"),
    ("train-unknown-key", [*TRAIN, "train.learning_rate=1e-3"], "unknown config key train.learning_rate", "{ws}/runs"),
    ("train-override-not-kv", [*TRAIN, "train.lr"], "expected key=value", "{ws}/runs"),
    ("train-unknown-backbone", [*TRAIN, "model.backbone=transformer_xl"], "transformer_xl", "{ws}/runs/tiny_dna_mdlm"),
    ("train-unknown-preset", [*TRAIN, "model.preset=huge"], "huge", "{ws}/runs/tiny_dna_mdlm"),
    ("train-unknown-objective", [*TRAIN, "objective.name=diffusion9000"], "diffusion9000", "{ws}/runs/tiny_dna_mdlm"),
    ("train-unknown-schedule", [*TRAIN, "schedule.name=sawtooth"], "sawtooth", "{ws}/runs/tiny_dna_mdlm"),
    ("train-unknown-backbone-field", [*TRAIN, "model.overrides.n_heads=4"], "n_heads", "{ws}/runs/tiny_dna_mdlm"),
    ("train-seq-len-over-hyena-l-max", [*TRAIN, "model.backbone=hyena", "model.overrides.l_max=16"], "l_max",
     "{ws}/runs/tiny_dna_mdlm"),
    ("train-fasta-missing", [*TRAIN, "data.fasta={ws}/files/nope.fa", "data.bed={ws}/files/one_split.bed"],
     "nope.fa", "{ws}/runs/tiny_dna_mdlm"),
    ("train-fasta-without-bed", [*TRAIN, "data.fasta={ws}/files/chr.fa"], "data.bed", "{ws}/runs/tiny_dna_mdlm"),
    ("train-bed-not-bed", [*TRAIN, "data.fasta={ws}/files/chr.fa", "data.bed={ws}/files/bad_bed.bed"], "bad_bed.bed",
     "{ws}/runs/tiny_dna_mdlm"),
    ("train-bed-wrong-chrom", [*TRAIN, "data.fasta={ws}/files/chr.fa", "data.bed={ws}/files/wrong_chrom.bed"], "chr1",
     "{ws}/runs/tiny_dna_mdlm"),
    ("train-bed-no-valid-split", [*TRAIN, "data.fasta={ws}/files/chr.fa", "data.bed={ws}/files/one_split.bed"], "valid",
     "{ws}/runs/tiny_dna_mdlm"),
    ("train-fasta-truncated-gz", [*TRAIN, "data.fasta={ws}/files/truncated.fa.gz", "data.bed={ws}/files/one_split.bed"],
     "truncated.fa.gz", "{ws}/runs/tiny_dna_mdlm"),
    ("train-init-from-missing", [*TRAIN, "model.init_from={ws}/nope"], "nope", "{ws}/runs/tiny_dna_mdlm"),
    ("train-init-from-wrong-vocab", [*TRAIN, "model.init_from={ws}/vocab16"], "vocab", "{ws}/runs/tiny_dna_mdlm"),
    ("train-init-from-no-weights", [*TRAIN, "model.init_from={ws}/no_weights"], "model.safetensors",
     "{ws}/runs/tiny_dna_mdlm"),
    ("train-resume-not-a-run", [*TRAIN, "--resume", "--run-dir", "{ws}/files"], "not a dnadiff run directory", None),
    ("train-resume-and-overwrite", [*TRAIN, "--resume", "--overwrite"], "exclude each other", None),
    ("train-text-tokenizer-missing", [*TRAIN, "tokenizer.kind=text"], "tokenizer.path", "{ws}/runs/tiny_dna_mdlm"),
    # --- eval: model directories
    ("eval-model-dir-missing", ["eval", "{ws}/nope"], "model directory not found", None),
    ("eval-model-dir-is-file", ["eval", "{ws}/files/good.fa"], "expected a model directory", None),
    ("eval-missing-config", ["eval", "{ws}/no_config"], "missing config.json", None),
    ("eval-missing-weights", ["eval", "{ws}/no_weights"], "missing model.safetensors", None),
    ("eval-empty-weights", ["eval", "{ws}/empty_weights", "--out", "{out}/o.json"], "not a readable safetensors",
     "{out}/o.json"),
    ("eval-truncated-weights", ["eval", "{ws}/truncated_weights", "--out", "{out}/o.json"],
     "not a readable safetensors",
     "{out}/o.json"),
    ("eval-config-wrong-type", ["eval", "{ws}/bad_config_type"], "train.max_steps", None),
    ("eval-config-truncated-yaml", ["eval", "{ws}/bad_config_yaml"], "invalid YAML", None),
    ("eval-config-truncated-json", ["eval", "{ws}/bad_config_json"], "not valid JSON", None),
    ("eval-metrics-not-json", ["eval", "{ws}/bad_metrics"], "metrics.json", None),
    ("eval-unknown-objective", ["eval", "{ws}/unknown_objective"], "diffusion9000", None),
    ("eval-unknown-backbone", ["eval", "{ws}/unknown_backbone"], "transformer_xl", None),
    ("eval-weights-shape-mismatch", ["eval", "{ws}/shape_mismatch", "--out", "{out}/o.json"], "shape", "{out}/o.json"),
    ("eval-wrong-vocab-model", ["eval", "{ws}/vocab16", "--out", "{out}/o.json"], "vocab", "{out}/o.json"),
    # --- eval: data
    ("eval-records-empty", [*_eval_records("empty.fa"), "--out", "{out}/o.json"], "empty FASTA file", "{out}/o.json"),
    ("eval-records-blank", _eval_records("blank.fa"), "empty FASTA file", None),
    ("eval-records-no-header", _eval_records("no_header.fa"), "not a FASTA file", None),
    ("eval-records-header-only", _eval_records("header_only.fa"), "r1", None),
    ("eval-records-binary", _eval_records("binary.fa"), "binary.fa", None),
    ("eval-records-bad-chars", _eval_records("bad_chars.fa"), "bad_chars.fa", None),
    ("eval-records-protein", _eval_records("protein.fa"), "protein.fa", None),
    ("eval-records-truncated-gz", _eval_records("truncated.fa.gz"), "truncated.fa.gz", None),
    ("eval-records-missing", _eval_records("nope.fa"), "FASTA file not found", None),
    ("eval-records-is-directory", _eval_records("a_dir.fa"), "a_dir.fa", None),
    ("eval-fasta-without-bed", ["eval", "{ws}/model", "--fasta", "{ws}/files/chr.fa"], "--fasta and --bed", None),
    ("eval-seq-len-zero", ["eval", "{ws}/model", "--seq-len", "-4"], "--seq-len", None),
    ("eval-seq-len-over-hyena-l-max", ["eval", "{ws}/hyena", "--records", "{ws}/files/good.fa", "--seq-len", "100",
                                       "--out", "{out}/o.json"], "l_max", "{out}/o.json"),
    ("eval-batch-size-zero", ["eval", "{ws}/model", "--batch-size", "0"], "--batch-size", None),
    ("eval-T-zero", [*_eval_records("good.fa"), "--T", "0"], "T", None),
    # --- sample
    ("sample-unknown-sampler", _sample("--sampler", "telepathy"), "telepathy", "{out}/s.fa"),
    ("sample-bad-option", _sample("--option", "warp=9", "--steps", "2"), "warp", "{out}/s.fa"),
    ("sample-option-not-kv", _sample("--option", "eta"), "key=value", "{out}/s.fa"),
    ("sample-num-zero", _sample("--num", "0"), "--num", "{out}/s.fa"),
    ("sample-length-negative", _sample("--length", "-3"), "--length", "{out}/s.fa"),
    ("sample-steps-zero", _sample("--steps", "0"), "steps", "{out}/s.fa"),
    ("sample-temperature-zero", _sample("--temperature", "0", "--steps", "2"), "temperature", "{out}/s.fa"),
    ("sample-length-over-hyena-l-max", ["sample", "{ws}/hyena", "--length", "100", "--out", "{out}/s.fa"], "exceeds",
     "{out}/s.fa"),
    ("sample-prefix-bad-chars", _sample("--prefix", "ACGZ"), "--prefix", "{out}/s.fa"),
    ("sample-prefix-too-long", _sample("--length", "8", "--prefix", "ACGTACGTAC"), "do not fit", "{out}/s.fa"),
    ("sample-template-length", _sample("--template-fasta", "{ws}/files/short.fa"), "length", "{out}/s.fa"),
    ("sample-template-empty", _sample("--template-fasta", "{ws}/files/empty.fa"), "empty FASTA", "{out}/s.fa"),
    ("sample-out-is-directory", ["sample", "{ws}/model", "--steps", "2", "--out", "{ws}/files/a_dir.fa"], "a_dir.fa",
     None),
    ("sample-missing-weights", ["sample", "{ws}/no_weights", "--out", "{out}/s.fa"], "model.safetensors", "{out}/s.fa"),
    # --- finetune
    ("finetune-one-class", _finetune_on("one_class"), "at least 2 classes", "{out}/ft"),
    ("finetune-class-mismatch", _finetune_on("mismatch"), "differ", "{out}/ft"),
    ("finetune-empty-class", _finetune_on("empty_class"), "no sequences", "{out}/ft"),
    ("finetune-bad-sequence", _finetune_on("bad_seq"), "0.txt", "{out}/ft"),
    ("finetune-empty-sequence", _finetune_on("empty_seq"), "empty sequence", "{out}/ft"),
    ("finetune-no-test-split", _finetune_on("no_test"), "split folder not found", "{out}/ft"),
    ("finetune-dataset-missing", _finetune_on("nope"), "not found", "{out}/ft"),
    ("finetune-init-from-missing", [*FT, "--init-from", "{ws}/nope", "--out", "{out}/ft"], "nope", "{out}/ft"),
    ("finetune-init-from-no-weights", [*FT, "--init-from", "{ws}/no_weights", "--out", "{out}/ft"], "model.safetensors",
     "{out}/ft"),
    ("finetune-unknown-protocol", [*FT, "protocol.name=loo"], "protocol.name", None),
    ("finetune-unknown-backbone", [*FT, "model.backbone=lstm", "--out", "{out}/ft"], "lstm", "{out}/ft"),
    ("finetune-wrong-type", [*FT, "train.epochs=many"], "train.epochs: expected an integer", None),
    ("finetune-out-of-range", [*FT, "train.lr_grid=[-1]"], "train.lr_grid", None),
    ("finetune-max-len-over-hyena-l-max", [*FT, "data.max_len=64", "model.overrides.l_max=16", "--out", "{out}/ft"],
     "l_max", "{out}/ft"),
    # --- metrics
    ("metrics-samples-missing", _metrics("nope.fa", "good.fa"), "nope.fa", "{out}/m"),
    ("metrics-samples-empty", _metrics("empty.fa", "good.fa"), "empty FASTA", "{out}/m"),
    ("metrics-reference-not-fasta", _metrics("good.fa", "no_header.fa"), "not a FASTA", "{out}/m"),
    ("metrics-reference-binary", _metrics("good.fa", "binary.fa"), "binary.fa", "{out}/m"),
    ("metrics-kmax-out-of-range", _metrics("good.fa", "good.fa", "--kmax", "40"), "--kmax", "{out}/m"),
    ("metrics-label-without-classifier", _metrics("good.fa", "good.fa", "--label", "pos"),
     "--label needs --classifier", "{out}/m"),
    ("metrics-embedder-missing", _metrics("good.fa", "good.fa", "--embedder", "{ws}/files/nope"),
     "--embedder", "{out}/m"),
    ("metrics-unknown-jaspar-id", _metrics("good.fa", "good.fa", "--motif-ids", "MA0000.0"), "MA0000.0", "{out}/m"),
    # --- demo
    ("demo-seq-len-zero", ["demo", "--seq-len", "0", "--out", "{out}/demo"], "--seq-len", "{out}/demo"),
    ("demo-bad-override", ["demo", "--out", "{out}/demo", "--steps", "1", "train.lr=fast"], "train.lr", "{out}/demo"),
    ("demo-steps-zero", ["demo", "--out", "{out}/demo", "--steps", "0"], "--steps", "{out}/demo"),
]


def _fill(x: str, ws: Path, out: Path) -> str:
    return x.replace("{ws}", str(ws)).replace("{out}", str(out))


_PROGRESS = re.compile(r"\d+%\||\d+/\d+ \[|it/s\]|batch/s\]")  # tqdm bars share stderr


@pytest.mark.parametrize("argv, expect, must_not_exist", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_error(ws, tmp_path, capsys, monkeypatch, request, argv, expect, must_not_exist):
    import logging

    monkeypatch.chdir(ws)  # relative outputs (runs/) land in the workspace
    monkeypatch.setattr(logging, "raiseExceptions", False)  # Lightning's handlers may hold an earlier test's stderr
    argv = [_fill(a, ws, tmp_path) for a in argv]
    capsys.readouterr()
    rc = cli_main(argv)
    out, err = capsys.readouterr()
    lines = [line for line in re.split(r"[\r\n]", err) if line.strip() and not _PROGRESS.search(line)]
    if os.environ.get("DNADIFF_BAD_INPUT_REPORT"):  # the case list with what each returned (for the issue note)
        with open(os.environ["DNADIFF_BAD_INPUT_REPORT"], "a") as fh:
            shown = " | ".join(lines).replace(str(ws), "WS").replace(str(tmp_path), "OUT")
            fh.write(json.dumps({"case": request.node.callspec.id, "exit": rc, "stderr": shown}) + "\n")
    assert rc == 2, f"exit {rc}; stderr: {err[-500:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-800:]
    assert expect in lines[0], lines[0]
    assert "Traceback" not in err + out
    if must_not_exist:
        assert not os.path.exists(_fill(must_not_exist, ws, tmp_path)), f"partial output {must_not_exist} left behind"
    for leftover in Path(ws).rglob("*.tmp"):
        raise AssertionError(f"temporary file left behind: {leftover}")
    if os.path.isdir(ws / "runs"):
        shutil.rmtree(ws / "runs")  # the next case starts without a run directory


# ----------------------------------------------------------------------------- inputs that must work


def _eval_bits(ws, capsys, fasta: Path) -> float:
    out = ws / (fasta.stem + ".json")
    assert cli_main(["eval", str(ws / "model"), "--records", str(fasta), "--out", str(out), "--seed", "1"]) == 0
    capsys.readouterr()
    return json.loads(out.read_text())["bits_per_base"]


def test_crlf_lowercase_iupac_fasta_work(ws, capsys, tmp_path):
    """Windows line endings, lower case and IUPAC codes are read, not refused; the bound equals the clean file's."""
    clean, iupac = CLEAN, CLEAN[:10] + "RYKM" + CLEAN[14:]  # IUPAC codes become N (not scored)
    as_n = CLEAN[:10] + "NNNN" + CLEAN[14:]
    (tmp_path / "clean.fa").write_text(f">r1\n{clean}\n>r2\n{as_n}\n")
    (tmp_path / "crlf_lower.fa").write_bytes(f">r1\r\n{clean[:50].lower()}\r\n{clean[50:]}\r\n"
                                             f">r2\r\n{iupac.lower()}\r\n"
                                             .encode())
    bits = _eval_bits(ws, capsys, tmp_path / "clean.fa")
    assert _eval_bits(ws, capsys, tmp_path / "crlf_lower.fa") == bits
    # the same file works for metrics and as a sampling template
    assert cli_main(["metrics", str(tmp_path / "crlf_lower.fa"), "--reference", str(tmp_path / "clean.fa"),
                     "--out", str(tmp_path / "m"), "--no-plots", "--kmax", "2", "--markov-order", "1"]) == 0
    tmpl = tmp_path / "tmpl.fa"
    tmpl.write_bytes(b">t\r\nacgtnnnnacgtrykm\r\n")
    assert cli_main(["sample", str(ws / "model"), "--template-fasta", str(tmpl), "--length", "16", "--num", "2",
                     "--steps", "2", "--out", str(tmp_path / "s.fa")]) == 0
    seqs = [l for l in (tmp_path / "s.fa").read_text().splitlines() if not l.startswith(">")]
    assert len(seqs) == 2 and all(s[:4] == "ACGT" and s[8:12] == "ACGT" and set(s) <= set("ACGT") for s in seqs)


def test_strict_tokenizer_refuses_iupac(ws, capsys, tmp_path):
    """With tokenizer.strict the same IUPAC file is an error naming the record (and exit 2)."""
    from dnadiff.data.records import read_fasta
    from dnadiff.errors import DnadiffError
    from dnadiff.tokenizers import DNATokenizer

    f = tmp_path / "iupac.fa"
    f.write_text(">r1\nACGTRYACGT\n")
    assert read_fasta(f)[0][1] == "ACGTRYACGT"
    with pytest.raises(DnadiffError, match="r1"):
        read_fasta(f, DNATokenizer(strict=True))
