"""Refusals that come first (issue 32, items 1, 3 and 4): a destination that would lose results, a
data folder one level too high, a BED naming a chromosome the genome lacks and a shared-data config
without its data are refused in one line (exit 2) before torch, the model or the data are loaded.

In-process tests make the thread set-up (the first heavy step of every computing command: it imports
torch) and the command's loaders raise if reached; one child process checks that torch itself is
never imported on the way to these refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dnadiff.cli import main
from dnadiff.data_root import bundled_data_root

BUNDLED = Path(bundled_data_root())
GENOME = BUNDLED / "chr22_sample" / "chr22_sample.fa.gz"  # one sequence, chr22 (with a .fai)


class Reached(Exception):
    pass


@pytest.fixture
def nothing_heavy(monkeypatch):
    """The thread set-up and the commands' loaders raise if reached: a refusal must come before."""
    import dnadiff.classifier_tuning.runs as finetune_runs
    import dnadiff.threads as threads
    import dnadiff.training.run as training_run

    def reached(*args, **kwargs):
        raise Reached("the command went past its early checks")

    monkeypatch.setattr(threads, "apply_threads", reached)
    monkeypatch.setattr(training_run, "train", reached)
    monkeypatch.setattr(finetune_runs, "run_finetune", reached)


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def _earlier_results(folder: Path) -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text('{"summary": "an earlier job"}\n')
    return (folder / "results.json").read_bytes()


# ------------------------------------------------------------------------------------ 1. finetune --out


def test_finetune_refuses_an_out_with_earlier_results(tmp_path, capsys, nothing_heavy):
    out = tmp_path / "ft"
    before = _earlier_results(out)
    assert main(["finetune", "experiments/tiny_finetune", "--out", str(out)]) == 2
    err = _error(capsys)
    assert f"{out}: holds the results of an earlier fine-tuning (results.json)" in err
    assert "--overwrite" in err and "--resume" in err
    assert (out / "results.json").read_bytes() == before


def test_finetune_refuses_an_interrupted_jobs_runs(tmp_path, capsys, nothing_heavy):
    out = tmp_path / "ft"
    (out / "runs" / "lr0.001").mkdir(parents=True)
    (out / "runs" / "lr0.001" / "seed0.json").write_text("{}")
    assert main(["finetune", "experiments/tiny_finetune", "--out", str(out)]) == 2
    assert "(runs/)" in _error(capsys)


def test_finetune_overwrite_and_resume_go_on(tmp_path, capsys, monkeypatch):
    """--overwrite or --resume passes the check (the run starts: here a stand-in that records it),
    both together are refused; an empty or new folder needs neither."""
    import dnadiff.classifier_tuning.runs as finetune_runs

    calls = []

    def fake_run(cfg, out, resume=False):
        calls.append((str(out), resume))
        raise Reached("started")

    monkeypatch.setattr(finetune_runs, "run_finetune", fake_run)
    out = tmp_path / "ft"
    _earlier_results(out)
    for flags, resume in ((["--overwrite"], False), (["--resume"], True)):
        with pytest.raises(Reached):
            main(["finetune", "experiments/tiny_finetune", "--out", str(out), *flags])
        assert calls[-1] == (str(out), resume)
    assert main(["finetune", "experiments/tiny_finetune", "--out", str(out), "--resume", "--overwrite"]) == 2
    assert "--resume and --overwrite exclude each other" in _error(capsys)
    with pytest.raises(Reached):
        main(["finetune", "experiments/tiny_finetune", "--out", str(tmp_path / "new")])


def test_finetune_help_names_overwrite_and_resume(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--overwrite" in text and "--resume" in text
    assert "refused unless --resume" in text


# ------------------------------------------------------------------------------------ 3. checks that come first


def test_train_refuses_an_existing_run_dir_first(tmp_path, capsys, nothing_heavy):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: earlier\n")
    assert main(["train", "experiments/tiny_dna_mdlm", "--run-dir", str(run)]) == 2
    assert _error(capsys) == (f"error: {run}: run directory exists (use --resume to continue or --overwrite "
                              "to replace it)")


def test_train_run_dir_from_the_config(tmp_path, capsys, nothing_heavy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "mine").mkdir(parents=True)
    (tmp_path / "out" / "mine" / "x").write_text("")
    assert main(["train", "experiments/tiny_dna_mdlm", "out_dir=out", "name=mine"]) == 2
    assert "out/mine: run directory exists" in _error(capsys)
    with pytest.raises(Reached):  # --overwrite: on to the work
        main(["train", "experiments/tiny_dna_mdlm", "out_dir=out", "name=mine", "--overwrite"])


def test_finetune_dataset_folder_one_level_too_high_lists_the_sets(tmp_path, capsys, nothing_heavy):
    high = BUNDLED / "benchmarks"
    assert main(["finetune", "experiments/tiny_finetune", "--dataset", str(high), "--out", str(tmp_path / "o")]) == 2
    err = _error(capsys)
    assert f"data.dataset: {high}: a folder of data sets, not one" in err
    assert "(it holds human_chr22_repeats, leptospira_coding_vs_intergenic)" in err
    assert f"e.g. --dataset {high / 'human_chr22_repeats'}" in err
    deep = BUNDLED / "benchmarks" / "human_chr22_repeats" / "train"
    assert main(["finetune", "experiments/tiny_finetune", "--dataset", str(deep), "--out", str(tmp_path / "o")]) == 2
    assert f"the train split of a data set; give the data set, --dataset {deep.parent}" in _error(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["finetune", "experiments/tiny_finetune", f"data.dataset={tmp_path / 'empty'}",
                 "--out", str(tmp_path / "o")]) == 2
    assert f"data.dataset: {tmp_path / 'empty' / 'train'}: split folder not found" in _error(capsys)


def test_design_finetune_refuses_an_existing_out_first(tmp_path, capsys, nothing_heavy, monkeypatch):
    import dnadiff.modelio.model_dir as model_dir

    monkeypatch.setattr(model_dir, "load_config_of", lambda *a, **k: (_ for _ in ()).throw(Reached("loaded")))
    out = tmp_path / "out"
    out.mkdir()
    (out / "finetune_config.yaml").write_text("{}")
    (tmp_path / "model").mkdir()  # present (a missing one is named first: tests/test_inputs_before_outputs.py)
    args = ["design-finetune", str(tmp_path / "model"), "--reward", "gc", "--method", "drakes", "--kl-weight", "0.1",
            "--out", str(out)]
    assert main(args) == 2
    assert _error(capsys) == (f"error: {out}: run directory exists (use --resume to continue or --overwrite "
                              "to replace it)")
    assert main([*args, "--resume", "--overwrite"]) == 2
    assert "exclude each other" in _error(capsys)


def _fasta(path: Path, records: dict[str, str]) -> str:
    path.write_text("".join(f">{name} some description\n{seq}\n" for name, seq in records.items()))
    return str(path)


def test_metrics_refuses_an_existing_out_first(tmp_path, capsys, nothing_heavy, monkeypatch):
    import dnadiff.data.records as records

    monkeypatch.setattr(records, "read_fasta", lambda *a, **k: (_ for _ in ()).throw(Reached("read")))
    samples = _fasta(tmp_path / "s.fa", {"a": "ACGT" * 8, "b": "TTGA" * 8})
    reference = _fasta(tmp_path / "r.fa", {"c": "ACGT" * 8})
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "metrics.json").write_text("{}")
    assert main(["metrics", samples, "--reference", reference, "--out", str(tmp_path / "m")]) == 2
    assert _error(capsys) == f"error: {tmp_path / 'm' / 'metrics.json'}: exists (use --force to overwrite it)"
    (tmp_path / "s_metrics").mkdir()  # the default OUT: SAMPLES_metrics/
    (tmp_path / "s_metrics" / "metrics.json").write_text("{}")
    assert main(["metrics", samples, "--reference", reference]) == 2
    assert "s_metrics/metrics.json: exists" in _error(capsys)


def _bed(path: Path, chroms: list[str]) -> str:
    path.write_text("# a comment\n" + "".join(f"{c}\t{100 * i}\t{100 * i + 80}\ttrain\n" for i, c in enumerate(chroms)))
    return str(path)


def test_bed_chromosome_missing_from_the_fasta_is_refused_first(tmp_path, capsys, nothing_heavy, monkeypatch):
    import dnadiff.data.records as records

    monkeypatch.setattr(records, "read_fasta", lambda *a, **k: (_ for _ in ()).throw(Reached("read")))
    bed = _bed(tmp_path / "b.bed", ["chr22", "chr22", "chr1"])
    want = f"{bed}:4: chromosome 'chr1' is not in {GENOME} (its sequences: chr22)"
    assert main(["train", "experiments/tiny_dna_mdlm", f"data.fasta={GENOME}", f"data.bed={bed}",
                 "--run-dir", str(tmp_path / "run")]) == 2
    assert _error(capsys) == f"error: {want}"
    samples = _fasta(tmp_path / "s.fa", {"a": "ACGT" * 8})
    assert main(["metrics", samples, "--reference", str(GENOME), "--bed", bed, "--out", str(tmp_path / "m")]) == 2
    assert _error(capsys) == f"error: {want}"


def test_eval_refuses_its_out_and_a_bed_chromosome_first(tmp_path, capsys, nothing_heavy, monkeypatch):
    import dnadiff.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "load_for_inference", lambda *a, **k: (_ for _ in ()).throw(Reached("loaded")))
    (tmp_path / "e.json").write_text("{}")
    (tmp_path / "model").mkdir()  # present (a missing one is named first: tests/test_inputs_before_outputs.py)
    assert main(["eval", str(tmp_path / "model"), "--records", str(GENOME), "--out", str(tmp_path / "e.json")]) == 2
    assert _error(capsys) == f"error: {tmp_path / 'e.json'}: exists (use --force to overwrite it)"
    bed = _bed(tmp_path / "b.bed", ["chrX"])
    assert main(["eval", str(tmp_path / "model"), "--fasta", str(GENOME), "--bed", bed]) == 2
    assert _error(capsys) == f"error: {bed}:2: chromosome 'chrX' is not in {GENOME} (its sequences: chr22)"


def test_fasta_names_from_the_index_or_the_header_lines(tmp_path):
    from dnadiff.commands.preflight import fasta_names

    assert fasta_names(GENOME) == ["chr22"]  # its .fai
    plain = _fasta(tmp_path / "g.fa", {"chrA": "ACGT" * 30, "chrB": "GGCC"})  # no index: the '>' lines
    assert fasta_names(plain) == ["chrA", "chrB"]
    import gzip

    (tmp_path / "g.fa.gz").write_bytes(gzip.compress(Path(plain).read_bytes()))
    assert fasta_names(tmp_path / "g.fa.gz") == ["chrA", "chrB"]
    assert fasta_names(tmp_path / "missing.fa") is None and fasta_names("-") is None


def test_header_names_across_block_boundaries():
    """Headers read in blocks: the same names whatever block splits a header line or its '\\n>'."""
    import io

    from dnadiff.commands.preflight import _header_names

    data = b">a x\r\nACGT\nAC\n>bb\n\n>c\nGG\n>d last"  # CRLF, an empty line, no final newline
    for block in (1, 2, 3, 5, 7, 100):
        assert _header_names(io.BytesIO(data), block) == ["a", "bb", "c", "d"], block
    assert _header_names(io.BytesIO(b"ACGT\n>x\n"), 3) == ["x"]
    assert _header_names(io.BytesIO(b""), 3) == []


@pytest.mark.subprocess
def test_refusals_import_no_torch(tmp_path):
    """Each refusal, in a fresh interpreter: exit 2 and neither torch nor lightning imported."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "x").write_text("")
    ft = tmp_path / "ft"
    _earlier_results(ft)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "metrics.json").write_text("{}")
    samples = _fasta(tmp_path / "s.fa", {"a": "ACGT" * 8})
    bed = _bed(tmp_path / "b.bed", ["chr1"])
    (tmp_path / "model").mkdir()  # the input present: the refusals below are of the outputs and the BED
    cases = {
        "train run dir": ["train", "experiments/tiny_dna_mdlm", "--run-dir", str(run)],
        "finetune results": ["finetune", "experiments/tiny_finetune", "--out", str(ft)],
        "finetune dataset": ["finetune", "experiments/tiny_finetune", "--dataset", str(BUNDLED / "benchmarks"),
                             "--out", str(tmp_path / "new")],
        "design-finetune out": ["design-finetune", str(tmp_path / "model"), "--reward", "gc", "--method", "drakes",
                                "--kl-weight", "0.1", "--out", str(run)],
        "metrics out": ["metrics", samples, "--reference", samples, "--out", str(tmp_path / "m")],
        "train bed": ["train", "experiments/tiny_dna_mdlm", f"data.fasta={GENOME}", f"data.bed={bed}",
                      "--run-dir", str(tmp_path / "new")],
        "eval bed": ["eval", str(tmp_path / "model"), "--fasta", str(GENOME), "--bed", bed],
        "metrics bed": ["metrics", samples, "--reference", str(GENOME), "--bed", bed, "--out", str(tmp_path / "new")],
    }
    script = (
        "import contextlib, io, json, sys\n"
        "from dnadiff.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    rc = main(json.loads(sys.argv[1]))\n"
        "print(json.dumps({'rc': rc, 'err': err.getvalue(),\n"
        "                  'heavy': [m for m in ('torch', 'lightning', 'numpy') if m in sys.modules]}))\n")
    from helpers.subprocess_env import child_env

    for name, argv in cases.items():
        proc = subprocess.run([sys.executable, "-c", script, json.dumps(argv)], capture_output=True, text=True,
                              env=child_env(), timeout=600)
        assert proc.returncode == 0, (name, proc.stderr)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got["rc"] == 2 and got["err"].startswith("error: "), (name, got)
        assert got["heavy"] == [], (name, got)


# ------------------------------------------------------------------------------------ 4. shared data without the data


def test_shared_data_config_without_dnadiff_data_says_how_to_set_it(tmp_path, capsys, nothing_heavy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "experiments/cpu_dna_mdlm"]) == 2  # its data: hg19_chr22_subset/, not bundled
    err = _error(capsys)
    fasta = BUNDLED / "hg19_chr22_subset" / "chr22.fa.gz"
    assert err.startswith(f"error: data.fasta: {fasta}: genome FASTA not found (")
    assert "resolve against $DNADIFF_DATA or data.root; DNADIFF_DATA is not set" in err
    assert "the data bundled with the package was used" in err
    assert "`export DNADIFF_DATA=/path/to/data` or add data.root=/path/to/data" in err
    assert "the folder that holds hg19_chr22_subset/" in err


def test_shared_data_config_with_a_wrong_dnadiff_data_names_it(tmp_path, capsys, nothing_heavy, monkeypatch):
    monkeypatch.setenv("DNADIFF_DATA", str(tmp_path / "data"))
    assert main(["train", "experiments/cpu_dna_mdlm"]) == 2
    err = _error(capsys)
    assert f"here $DNADIFF_DATA ({tmp_path / 'data'})" in err and "the folder that holds hg19_chr22_subset/" in err
    assert main(["train", "experiments/cpu_dna_mdlm", f"data.root={tmp_path / 'other'}"]) == 2
    assert f"here data.root ({tmp_path / 'other'})" in _error(capsys)


def test_print_config_warns_of_missing_data(tmp_path, capsys, monkeypatch):
    import yaml

    monkeypatch.chdir(tmp_path)
    assert main(["train", "experiments/cpu_dna_mdlm", "--print-config"]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["data"]["fasta"] == str(BUNDLED / "hg19_chr22_subset" / "chr22.fa.gz")
    lines = err.strip().splitlines()
    assert [line.split(":", 2)[:2] for line in lines] == [["warning", " data.fasta"], ["warning", " data.bed"]]
    assert "DNADIFF_DATA is not set" in lines[0] and "`export DNADIFF_DATA=/path/to/data`" in lines[0]
    assert main(["train", "experiments/tiny_dna_mdlm", "--print-config"]) == 0  # bundled data: no warning
    assert capsys.readouterr().err == ""
    assert main(["finetune", "experiments/tiny_finetune", "--print-config", "--dataset", "my/set"]) == 0
    assert capsys.readouterr().err.startswith("warning: data.dataset: my/set not found")
