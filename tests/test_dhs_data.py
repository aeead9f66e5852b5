"""The DHS table (dnadiff/data/dhs*.py, `dnadiff data dhs`): parsing, the sha256 check, the sources
(--from a text file, a wheel, a folder; pip download), the offline message, atomic stores, the loader
and `data=dhs` training, on the 300-row fixture cut from the real table (tests/data/dhs/README.md).
The slow test reads the real table when it is on this machine."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from dnadiff.cli import main
from dnadiff.data import dhs, dhs_fetch
from dnadiff.data.dhs import CELL_TYPES, DHS_MEMBER, SPLITS, DHSDataset, load_dhs, parse_dhs_table, stored_meta
from dnadiff.errors import DnadiffError

FIXTURE = Path(__file__).resolve().parent / "data" / "dhs" / "dhs_fixture.txt"
FIXTURE_SHA256 = "5016907cfaf6c8a45cdc80c219d2bfc1d7ed2e9914cabc0f1644e8fe56bd49b4"
TAG_CELL = {"GM12878_ENCLB441ZZZ": "GM12878", "HepG2_ENCLB029COU": "HepG2", "K562_ENCLB843GMH": "K562",
            "hESCT0_ENCLB449ZZZ": "hESC"}
LABEL_SPLIT = {"training": "train", "validation": "valid", "test": "test"}


def fixture_rows() -> list[dict[str, str]]:
    """The fixture read independently of dnadiff (csv module): the reference the parser is compared with."""
    with open(FIXTURE, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh dnadiff cache folder, with the fixture's sha256 as the pinned one."""
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dhs_fetch, "DHS_SHA256", FIXTURE_SHA256)
    return tmp_path / "cache"


def fake_wheel(path: Path, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("dnadiffusion/__init__.py", "")
        zf.writestr(DHS_MEMBER, data)
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# ----------------------------------------------------------------------------- parsing


def test_fixture_is_the_documented_cut():
    data = FIXTURE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == FIXTURE_SHA256
    rows = fixture_rows()
    assert len(rows) == 300 and len(rows[0]) == 19
    groups = {}
    for r in rows:
        groups[(r["data_label"], r["TAG"])] = groups.get((r["data_label"], r["TAG"]), 0) + 1
    assert groups == {(label, tag): 25 for label in LABEL_SPLIT for tag in TAG_CELL}


def test_parse_matches_an_independent_reading():
    rows = fixture_rows()
    table = parse_dhs_table(FIXTURE.read_bytes(), str(FIXTURE), FIXTURE_SHA256)
    assert table.tokens.shape == (300, 200) and table.tokens.dtype == np.uint8
    assert [CELL_TYPES[i] for i in table.labels] == [TAG_CELL[r["TAG"]] for r in rows]
    assert [SPLITS[i] for i in table.splits] == [LABEL_SPLIT[r["data_label"]] for r in rows]
    assert table.sequences() == [r["sequence"] for r in rows]
    assert table.chrom.astype(str).tolist() == [r["chr"] for r in rows]
    assert table.start.tolist() == [int(r["start"]) for r in rows]
    assert table.counts() == {s: {c: 25 for c in CELL_TYPES} for s in SPLITS}
    # DNATokenizer ids: A7 C8 G9 T10
    assert table.tokens[0, :5].tolist() == ["ACGT".index(b) + 7 for b in rows[0]["sequence"][:5]]
    # the real split by chromosome: validation chr2, test chr1 (the wheel's README says the opposite)
    assert table.chromosomes()["valid"] == ["chr2"] and table.chromosomes()["test"] == ["chr1"]


def _edit_row(data: bytes, column: str, value: str) -> bytes:
    lines = data.decode().split("\n")
    header = lines[0].split("\t")
    fields = lines[5].split("\t")
    fields[header.index(column)] = value
    lines[5] = "\t".join(fields)
    return "\n".join(lines).encode()


@pytest.mark.parametrize("column,value,message", [
    ("TAG", "hESC", "line 6: TAG 'hESC' is not one of"),
    ("data_label", "train", "line 6: data_label 'train' is not one of training, validation, test"),
    ("sequence", "ACGT" * 49, "line 6: sequence of 196 bases, expected 200"),
    ("sequence", "ACGT" * 49 + "ACGR", "line 6: sequence: character 'R' at position 199 is not DNA"),
    ("start", "x", "line 6: start/end must be integers"),
])
def test_bad_rows_name_the_line(column, value, message):
    with pytest.raises(DnadiffError, match=message.replace("(", r"\(")):
        parse_dhs_table(_edit_row(FIXTURE.read_bytes(), column, value), "t.txt", "x")


def test_not_the_table():
    with pytest.raises(DnadiffError, match="not the DHS table .no column TAG"):
        parse_dhs_table(b"a\tsequence\tdata_label\tchr\tstart\tend\tdhs_id\n", "t.txt", "x")
    with pytest.raises(DnadiffError, match="t.txt: empty file"):
        parse_dhs_table(b"", "t.txt", "x")


# ----------------------------------------------------------------------------- dnadiff data dhs


def test_from_text_file_stores_and_prints_the_table(cache, capsys):
    assert main(["data", "dhs", "--from", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert f"sha256 {FIXTURE_SHA256} (checked)" in out
    assert "validation: chr2; test: chr1" in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()}
    assert lines["split"] == [*CELL_TYPES, "total"]
    assert lines["train"] == lines["valid"] == lines["test"] == ["25"] * 4 + ["100"]
    assert lines["all"] == ["75"] * 4 + ["300"]
    meta = json.loads((cache / "dhs" / "dhs.json").read_text())
    assert meta["sha256"] == FIXTURE_SHA256 and meta["rows"] == 300 and meta["cell_types"] == list(CELL_TYPES)
    stored = load_dhs()
    table = parse_dhs_table(FIXTURE.read_bytes(), "f", FIXTURE_SHA256)
    for name in ("tokens", "labels", "splits", "chrom", "start", "end"):
        assert np.array_equal(getattr(stored, name), getattr(table, name)), name
    assert sorted(os.listdir(cache / "dhs")) == ["dhs.json", "dhs.npz"]  # no temporary files left


def test_kept_unless_force(cache, capsys):
    assert main(["data", "dhs", "--from", str(FIXTURE)]) == 0
    before = (cache / "dhs" / "dhs.npz").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["data", "dhs"]) == 0  # no pip call: the store is there
    assert "already in" in capsys.readouterr().out
    assert (cache / "dhs" / "dhs.npz").stat().st_mtime_ns == before
    assert main(["data", "dhs", "--from", str(FIXTURE), "--force"]) == 0
    assert "(checked)" in capsys.readouterr().out


@pytest.mark.parametrize("as_folder", [False, True])
def test_from_a_wheel_or_its_folder(cache, tmp_path, capsys, as_folder):
    wheel = fake_wheel(tmp_path / dhs_fetch.WHEEL_NAME, FIXTURE.read_bytes())
    assert main(["data", "dhs", "--from", str(tmp_path if as_folder else wheel)]) == 0
    assert f"{wheel}:{DHS_MEMBER}" in capsys.readouterr().out
    assert len(load_dhs()) == 300


def test_sha_mismatch_is_one_line_and_stores_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))  # the real table's sha256 pinned
    assert main(["data", "dhs", "--from", str(FIXTURE)]) == 2
    line = one_error_line(capsys)
    assert f"sha256 {FIXTURE_SHA256} is not the DHS table's {dhs.DHS_SHA256}" in line and str(FIXTURE) in line
    assert stored_meta() is None


def test_zip_without_the_table(cache, tmp_path, capsys):
    path = tmp_path / "other.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("other/data.txt", "x")
    assert main(["data", "dhs", "--from", str(path)]) == 2
    assert f"{path}: a zip without {DHS_MEMBER}" in one_error_line(capsys)
    assert main(["data", "dhs", "--from", str(tmp_path / "nope.whl")]) == 2
    assert "nope.whl: file not found" in one_error_line(capsys)


def test_pip_download_path(cache, capsys, monkeypatch):
    """No --from: `python -m pip download dnadiffusion==0.0.0.dev0 --no-deps -d TMP` (replaced here by a
    stand-in that drops the wheel there), the table read out of it, the temporary folder removed."""
    calls = []

    def pip(argv):
        calls.append(argv)
        fake_wheel(Path(argv[argv.index("-d") + 1]) / dhs_fetch.WHEEL_NAME, FIXTURE.read_bytes())
        return 0, ""

    monkeypatch.setattr(dhs_fetch, "run_pip", pip)
    assert main(["data", "dhs"]) == 0
    assert calls[0][:3] == ["download", "dnadiffusion==0.0.0.dev0", "--no-deps"]
    assert "(pip download)" in capsys.readouterr().out
    assert sorted(os.listdir(cache / "dhs")) == ["dhs.json", "dhs.npz"]


def test_unreachable_registry_says_what_to_do(cache, capsys, monkeypatch):
    err = ("WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(...: Failed to "
           "establish a new connection: [Errno 111] Connection refused')'\n"
           "ERROR: No matching distribution found for dnadiffusion==0.0.0.dev0\n")
    monkeypatch.setattr(dhs_fetch, "run_pip", lambda argv: (1, err))
    assert main(["data", "dhs"]) == 2
    line = one_error_line(capsys)
    assert "(no package index could be reached)" in line
    assert "python -m pip download dnadiffusion==0.0.0.dev0 --no-deps -d DIR" in line
    assert "dnadiff data dhs --from dnadiffusion-0.0.0.dev0-py3-none-any.whl" in line
    assert not (cache / "dhs").exists() or os.listdir(cache / "dhs") == []  # the pip folder removed


@pytest.mark.subprocess
def test_real_pip_without_an_index(cache, capsys, monkeypatch):
    """The real `python -m pip download` with no reachable index (a closed local port, pip's own
    configuration ignored) ends in the same one-line message."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    assert main(["data", "dhs"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: cannot download dnadiffusion==0.0.0.dev0 with pip (") and "--from" in line


def test_store_is_all_or_nothing(cache, monkeypatch):
    """A store that fails half-way leaves the previous one whole and no temporary files."""
    table = parse_dhs_table(FIXTURE.read_bytes(), "f", FIXTURE_SHA256)
    dhs.store_dhs(table)
    old = {p.name: p.read_bytes() for p in (cache / "dhs").iterdir()}
    other = parse_dhs_table(FIXTURE.read_bytes(), "f", "0" * 64)

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: boom() if str(b).endswith(".commit") else real_replace(a, b))
    with pytest.raises(DnadiffError, match="No space left"):
        dhs.store_dhs(other)
    monkeypatch.setattr(os, "replace", real_replace)
    assert {p.name: p.read_bytes() for p in (cache / "dhs").iterdir()} == old
    assert stored_meta()["sha256"] == FIXTURE_SHA256


def test_bad_table_stores_nothing(cache, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(_edit_row(FIXTURE.read_bytes(), "TAG", "hESC"))
    monkeypatch.setattr(dhs_fetch, "DHS_SHA256", hashlib.sha256(bad.read_bytes()).hexdigest())
    assert main(["data", "dhs", "--from", str(bad)]) == 2
    assert f"{bad}: line 6: TAG 'hESC'" in one_error_line(capsys)
    assert stored_meta() is None


# ----------------------------------------------------------------------------- the loader and training


@pytest.fixture
def stored(cache):
    table = parse_dhs_table(FIXTURE.read_bytes(), str(FIXTURE), FIXTURE_SHA256)
    dhs.store_dhs(table)
    return table


def test_dataset_items(stored):
    rows = fixture_rows()
    valid = DHSDataset(load_dhs(), "valid")
    expect = [r for r in rows if r["data_label"] == "validation"]
    assert len(valid) == 100 and valid.classes == list(CELL_TYPES)
    item = valid[3]
    assert set(item) == {"input_ids", "attention_mask", "labels"}
    assert item["input_ids"].shape == (200,) and item["input_ids"].dtype == torch.long
    assert valid.tokenizer.decode(item["input_ids"]) == expect[3]["sequence"]
    assert int(item["labels"]) == CELL_TYPES.index(TAG_CELL[expect[3]["TAG"]])
    assert bool(item["attention_mask"].all())
    assert valid.labels.tolist() == [CELL_TYPES.index(TAG_CELL[r["TAG"]]) for r in expect]
    assert len(DHSDataset(load_dhs(), None)) == 300
    short, long = DHSDataset(load_dhs(), "test", seq_len=128), DHSDataset(load_dhs(), "test", seq_len=256)
    assert short[0]["input_ids"].tolist() == long[0]["input_ids"][:128].tolist()
    assert (long[0]["input_ids"][200:] == long.tokenizer.pad_id).all()
    assert long[0]["attention_mask"].tolist() == [1] * 200 + [0] * 56
    with pytest.raises(DnadiffError, match="DHS split must be one of train, valid, test"):
        DHSDataset(load_dhs(), "validation")

    class TextTokenizer:
        kind = "hf"

    with pytest.raises(DnadiffError, match="data.kind=dhs needs tokenizer.kind dna, got 'hf'"):
        DHSDataset(load_dhs(), "train", tokenizer=TextTokenizer())


def test_missing_store_says_how_to_make_it(cache):
    with pytest.raises(DnadiffError, match=r"no DHS data here; run `dnadiff data dhs` first"):
        load_dhs()


def test_data_dhs_config_builds_the_splits(stored):
    from dnadiff.config import RunConfig, load_config, resolve_config_path
    from dnadiff.data import build_split_dataset
    from dnadiff.tokenizers.dna import DNATokenizer

    cfg = load_config(RunConfig, resolve_config_path("experiments/tiny_dna_mdlm"), ["data=dhs"])
    assert cfg.data.kind == "dhs" and cfg.data.seq_len == 200
    sets = {s: build_split_dataset(cfg, DNATokenizer(), s) for s in ("train", "valid", "test")}
    assert {s: len(d) for s, d in sets.items()} == {"train": 100, "valid": 100, "test": 100}
    assert sets["train"][0]["input_ids"].shape == (200,)


def test_train_without_the_store_is_one_line(cache, tmp_path, capsys):
    code = main(["train", "experiments/tiny_dna_mdlm", "data=dhs", "--run-dir", str(tmp_path / "run")])
    assert code == 2
    assert "data.kind=dhs: the DHS table is not in" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


@pytest.mark.training
def test_conditional_training_step_on_dhs(stored, tmp_path):
    run = tmp_path / "run"
    code = main(["train", "experiments/tiny_cfg_leptospira", "data=dhs", "model.num_classes=4", "train.max_steps=2",
                 "train.val_every=2", "train.ckpt_every=2", "train.val_batches=1", "train.progress=false",
                 "--run-dir", str(run), "--threads", "1", "-q"])
    assert code == 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert json.dumps(list(CELL_TYPES)) in json.dumps(config)  # class names recorded for --class
    code = main(["train", "experiments/tiny_cfg_leptospira", "data=dhs", "model.num_classes=2",
                 "--run-dir", str(tmp_path / "run2"), "-q"])
    assert code == 2


# ----------------------------------------------------------------------------- fine-tuning folder


def test_export_benchmark(stored, tmp_path, capsys):
    from dnadiff.data.benchmarks import load_benchmark_split

    out = tmp_path / "bench"
    assert main(["data", "dhs", "--export-benchmark", str(out), "--benchmark-test", "valid"]) == 0
    rows = fixture_rows()
    train = load_benchmark_split(out, "train")
    assert train.classes == list(CELL_TYPES) and train.counts() == {c: 25 for c in CELL_TYPES}
    expect = sorted((CELL_TYPES.index(TAG_CELL[r["TAG"]]), r["sequence"]) for r in rows
                    if r["data_label"] == "training")
    assert sorted(zip(train.labels, train.sequences)) == expect
    test = load_benchmark_split(out, "test")
    assert sorted(test.sequences) == sorted(r["sequence"] for r in rows if r["data_label"] == "validation")
    capsys.readouterr()
    assert main(["data", "dhs", "--export-benchmark", str(out)]) == 2
    assert "exists (use --force" in one_error_line(capsys)
    assert main(["data", "dhs", "--export-benchmark", str(out), "--force", "--from", str(FIXTURE)]) == 0
    test = load_benchmark_split(out, "test")
    assert sorted(test.sequences) == sorted(r["sequence"] for r in rows if r["data_label"] == "test")


# ----------------------------------------------------------------------------- the real table


def _real_sources() -> list[Path]:
    """Where the real table may be on this machine: $DNADIFF_DHS_WHEEL (the wheel or the .txt), else the
    user's dnadiff cache (the default one: the tests' own DNADIFF_CACHE is a fresh folder)."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dnadiff" / "dhs"
    found = [Path(os.environ["DNADIFF_DHS_WHEEL"])] if os.environ.get("DNADIFF_DHS_WHEEL") else []
    return found + ([home] if stored_meta(home) else [])


@pytest.mark.slow
def test_the_real_table(tmp_path):
    sources = _real_sources()
    if not sources:
        pytest.skip("the real DHS table is not on this machine: run `dnadiff data dhs` (or set DNADIFF_DHS_WHEEL "
                    "to the dnadiffusion-0.0.0.dev0 wheel)")
    source = sources[0]
    if source.is_dir():  # a store made by `dnadiff data dhs`
        table = load_dhs(source)
    else:
        data, where = dhs_fetch.read_source(source)
        assert hashlib.sha256(data).hexdigest() == dhs.DHS_SHA256
        table = parse_dhs_table(data, where, dhs.DHS_SHA256)
    assert table.sha256 == dhs.DHS_SHA256 and len(table) == 47_872
    assert table.counts() == {
        "train": {"GM12878": 9903, "HepG2": 9833, "K562": 9769, "hESC": 9749},
        "valid": {"GM12878": 1021, "HepG2": 1177, "K562": 878, "hESC": 977},
        "test": {"GM12878": 1044, "HepG2": 958, "K562": 1321, "hESC": 1242},
    }
    assert {s: sum(c.values()) for s, c in table.counts().items()} == {"train": 39_254, "valid": 4_053, "test": 4_565}
    assert table.chromosomes()["valid"] == ["chr2"] and table.chromosomes()["test"] == ["chr1"]
    assert "chr1" not in table.chromosomes()["train"] and "chr2" not in table.chromosomes()["train"]
    assert set(np.unique(table.tokens).tolist()) == {7, 8, 9, 10}  # ACGT only, no N
    assert len({row.tobytes() for row in table.tokens}) == 47_872  # no duplicate sequence
    fixture = parse_dhs_table(FIXTURE.read_bytes(), "f", FIXTURE_SHA256)
    rows = {row.tobytes() for row in table.tokens}
    assert all(row.tobytes() in rows for row in fixture.tokens)  # the fixture is cut from it


def test_command_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["data", "dhs", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "--from PATH" in out and "--export-benchmark DIR" in out


# ----------------------------------------------------------------------------- dnadiff finetune on `dhs`


def test_finetune_splits(stored):
    rows = fixture_rows()

    def expect(label):
        return [(CELL_TYPES.index(TAG_CELL[r["TAG"]]), r["sequence"]) for r in rows if r["data_label"] == label]

    train, test = dhs.finetune_splits("dhs")
    assert train.classes == test.classes == list(CELL_TYPES)
    assert list(zip(train.labels, train.sequences)) == expect("training")
    assert list(zip(test.labels, test.sequences)) == expect("test")
    _, valid = dhs.finetune_splits("dhs:valid")
    assert list(zip(valid.labels, valid.sequences)) == expect("validation")
    assert dhs.finetune_splits("benchmarks/human_chr22_repeats") is None


def test_finetune_kmer_lr_row_on_dhs(stored, tmp_path, capsys):
    out = tmp_path / "ft"
    code = main(["finetune", "finetune/finetune_dhs", "model.backbone=kmer_lr", "protocol.seeds=[0]",
                 "model.overrides.c_grid=[1.0]", "model.overrides.ks=[3]", "--out", str(out), "-q"])
    assert code == 0
    result = json.loads((out / "results.json").read_text())
    assert result["num_train"] == 100 and result["num_test"] == 100 and result["classes"] == list(CELL_TYPES)
    assert result["dataset"] == "dhs" and 0.0 <= result["summary"]["accuracy"]["mean"] <= 1.0


def test_print_config_and_quiet_after_the_data_set(cache, capsys):
    import yaml

    for argv in (["data", "dhs", "-q", "--print-config"], ["data", "-q", "--print-config", "dhs"]):
        assert main(argv) == 0
        printed = yaml.safe_load(capsys.readouterr().out)
        assert printed["quiet"] == 1 and printed["sha256"] == FIXTURE_SHA256 and printed["member"] == DHS_MEMBER
        assert printed["store"] == str(cache / "dhs")
    assert stored_meta() is None  # nothing fetched
