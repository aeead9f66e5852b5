"""Paired comparisons from the command line (issue 32, item 8): `dnadiff compare A B` for two finetune
outputs (accuracy per test sequence) or two eval JSONs (bits/base per window), `dnadiff eval --out`
recording per-window values and taking --stratified, and the k-mer LR table naming its C column."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dnadiff.cli import main
from dnadiff.eval.paired import paired_accuracy, paired_difference
from helpers.cli_model import tiny_model_dir

LN2 = math.log(2.0)


def _finetune_result(folder, correct_runs, name="row", dataset="/data/benchmarks/human_chr22_repeats", num_test=None,
                     max_test=8, backbone="Caduceus"):
    folder.mkdir(parents=True, exist_ok=True)
    runs = [{"run": f"seed{i}", "seed": i, "lr": 1e-3, "best_epoch": 1, "val_acc": 0.5,
             "test": {"accuracy": float(np.mean(c)), "mcc": 0.0, "f1_macro": 0.5, "auroc": 0.5},
             "test_correct": list(c)} for i, c in enumerate(correct_runs)]
    result = {"name": name, "dataset": dataset, "classes": ["neg", "pos"],
              "num_test": num_test or len(correct_runs[0]), "selected_lr": 1e-3, "lr_grid": [1e-3], "runs": runs,
              "backbone": backbone, "config": {"data": {"max_test": max_test, "subsample_seed": 0}}}
    (folder / "results.json").write_text(json.dumps(result))
    return folder


def _eval_result(path, **changes):
    """An eval result JSON of 2 windows of 4 bases with their per-window values; `changes` replace fields
    (None drops one, as a result written before per-window values were recorded)."""
    fields = {"bits_per_base": 1.9, "num_windows": 2, "seq_len": 4, "data": "x.fa", "sequence_nats": [1.0, 2.0],
              "sequence_tokens": [4, 4], **changes}
    path.write_text(json.dumps({k: v for k, v in fields.items() if v is not None}))
    return path


def _run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _error_line(capsys, argv) -> str:
    code, _, err = _run(capsys, argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_compare_two_finetune_outputs_gives_the_paired_accuracy_difference(tmp_path, capsys):
    """Row a right on sequences {0,1,2} in both runs, b on {0} then {0,1}: per sequence a − b = (0, .5, 1, 0)."""
    a = _finetune_result(tmp_path / "ft_a", [[1, 1, 1, 0], [1, 1, 1, 0]])
    b = _finetune_result(tmp_path / "ft_kmer", [[1, 0, 0, 0], [1, 1, 0, 0]], backbone="kmer_lr")
    out = tmp_path / "diff.json"
    code, stdout, err = _run(capsys, ["compare", str(a), str(b / "results.json"), "--out", str(out)])
    assert code == 0, err
    res = json.loads(out.read_text())
    diffs = np.array([0.0, 0.5, 1.0, 0.0])
    assert res["kind"] == "finetune" and res["unit"] == "accuracy"
    assert res["mean"] == pytest.approx(0.375) and res["n_sequences"] == 4
    assert res["std_error"] == pytest.approx(diffs.std(ddof=1) / 2)
    assert res["a_mean"] == pytest.approx(0.75) and res["b_mean"] == pytest.approx(0.375)
    header, row = stdout.strip().splitlines()[0], stdout.strip().splitlines()[-1]
    assert "A − B" in header and "SE" in header and "test sequences" in header
    assert "ft_a" in row and "ft_kmer" in row and "0.375" in row and "within 2 SE" in row
    assert "ft_a − ft_kmer: +0.375" in err  # the one-line reading on stderr
    # the other order: the sign flips; an existing --out is kept unless --force
    assert "--force" in _error_line(capsys, ["compare", str(b), str(a), "--out", str(out)])
    assert _run(capsys, ["compare", str(b), str(a), "--out", str(out), "--force"])[0] == 0
    assert json.loads(out.read_text())["mean"] == pytest.approx(-0.375)


def test_compare_print_config_names_what_it_would_pair(tmp_path, capsys):
    import yaml

    a = _finetune_result(tmp_path / "a", [[1, 0]])
    b = _finetune_result(tmp_path / "b", [[0, 1]])
    code, out, _ = _run(capsys, ["compare", str(a), str(b / "results.json"), "--print-config"])
    assert code == 0
    assert yaml.safe_load(out) == {"compare": {
        "a": {"path": str(a), "file": str(a / "results.json"), "kind": "finetune"},
        "b": {"path": str(b / "results.json"), "file": str(b / "results.json"), "kind": "finetune"},
        "out": None, "force": False}}


def test_compare_refuses_results_that_do_not_pair(tmp_path, capsys):
    a = _finetune_result(tmp_path / "a", [[1, 1, 0, 0]])
    other_set = _finetune_result(tmp_path / "b", [[1, 1, 0, 0]], dataset="/data/benchmarks/leptospira")
    line = _error_line(capsys, ["compare", str(a), str(other_set)])
    assert "tested on different sequences (data set 'human_chr22_repeats' vs 'leptospira')" in line
    other_subsample = _finetune_result(tmp_path / "c", [[1, 1, 0, 0]], max_test=16)
    assert "data.max_test 8 vs 16" in _error_line(capsys, ["compare", str(a), str(other_subsample)])
    old = _finetune_result(tmp_path / "d", [[1, 1, 0, 0]])
    data = json.loads((old / "results.json").read_text())
    for r in data["runs"]:
        del r["test_correct"]
    (old / "results.json").write_text(json.dumps(data))
    assert "without per-sequence test outcomes" in _error_line(capsys, ["compare", str(a), str(old)])
    ev = _eval_result(tmp_path / "e.json")
    assert "is a finetune result and" in _error_line(capsys, ["compare", str(a), str(ev)])
    old_eval = _eval_result(tmp_path / "old.json", sequence_nats=None, sequence_tokens=None)
    assert "without per-window values" in _error_line(capsys, ["compare", str(ev), str(old_eval)])
    longer = _eval_result(tmp_path / "longer.json", seq_len=8, sequence_tokens=[8, 8])
    assert "scored different windows (seq_len 4 vs 8)" in _error_line(capsys, ["compare", str(ev), str(longer)])
    fewer = _eval_result(tmp_path / "fewer.json", sequence_tokens=[4, 3])
    assert "window 1 has 4 scored tokens in one run and 3" in _error_line(capsys, ["compare", str(ev), str(fewer)])
    assert "no results.json" in _error_line(capsys, ["compare", str(tmp_path), str(a)])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"steps": 3}))
    assert "neither a `dnadiff finetune` results.json nor" in _error_line(capsys, ["compare", str(other), str(a)])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("compare"), seq_len=16)


def test_eval_records_writes_per_window_values_that_compare_pairs(model, tmp_path, capsys):
    records = tmp_path / "r.fa"
    records.write_text("".join(f">r{i}\n{'ACGTTGCAACGGTTCA' * 2}\n" for i in range(5)))  # 10 windows of 16
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    base = ["eval", model, "--records", str(records), "--batch-size", "4", "--num-samples", "4", "-q"]
    assert main([*base, "--stratified", "--out", str(a)]) == 0
    assert main([*base, "--seed", "1", "--out", str(b)]) == 0
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ra["stratified"] is True and rb["stratified"] is None
    assert len(ra["sequence_nats"]) == len(ra["sequence_tokens"]) == ra["num_windows"] == 10
    assert ra["sequence_tokens"] == [16.0] * 10
    assert sum(ra["sequence_nats"]) / sum(ra["sequence_tokens"]) == pytest.approx(ra["nats_per_base"], rel=1e-9)
    table = capsys.readouterr().out
    assert "sequence_nats" not in table and "stratified" in table  # per-window values: JSON only
    out = tmp_path / "d.json"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    expect = paired_difference(ra, rb)
    bits = (np.array(ra["sequence_nats"]) - np.array(rb["sequence_nats"])) / 16 / LN2
    assert res["kind"] == "eval" and res["unit"] == "bits/base" and res["n_windows"] == 10
    assert res["mean"] == pytest.approx(expect["mean"]) and res["mean"] == pytest.approx(bits.mean())
    assert res["std_error"] == pytest.approx(bits.std(ddof=1) / math.sqrt(10))
    # a model against itself with the same seed: every window's difference is exactly 0
    assert main(["compare", str(a), str(a), "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["mean"] == 0.0


def test_eval_stratified_needs_repeats_of_a_continuous_bound(model, tmp_path, capsys):
    records = tmp_path / "r.fa"
    records.write_text(">r\n" + "ACGT" * 8 + "\n")
    line = _error_line(capsys, ["eval", model, "--records", str(records), "--stratified"])
    assert line.startswith("error: --stratified needs --num-samples K > 1") and "--num-samples 1" in line
    line = _error_line(capsys, ["eval", model, "--records", str(records), "--stratified", "--num-samples", "2",
                                "--T", "10"])
    assert "--T 10" in line


def test_paired_accuracy_of_compare_matches_the_library(tmp_path):
    from dnadiff.commands.compare import compare

    rng = np.random.default_rng(0)
    ca = rng.integers(0, 2, size=(3, 40)).tolist()
    cb = rng.integers(0, 2, size=(2, 40)).tolist()
    a = _finetune_result(tmp_path / "a", ca)
    b = _finetune_result(tmp_path / "b", cb)
    res = compare(str(a), str(b))
    lib = paired_accuracy([{"test_correct": c} for c in ca], [{"test_correct": c} for c in cb])
    assert {k: res[k] for k in lib} == lib


def test_kmer_lr_table_names_its_hyperparameter_c():
    from dnadiff.classifier_tuning.protocol import results_markdown, run_rows, select_on_validation

    test = {"accuracy": 0.7, "mcc": 0.4, "f1_macro": 0.7, "auroc": 0.8}
    grid = {c: [{"run": "seed0", "lr": c, "best_epoch": 0, "val_acc": v, "test": test}] for c, v in ((0.1, 0.6),
                                                                                                     (1.0, 0.7))}
    selection = select_on_validation(grid, [0.1, 1.0])
    result = {"name": "kmer", "dataset": "/x/human_chr22_repeats", "protocol": "paper", "num_train": 10,
              "num_test": 4, "majority_baseline": 0.5, "wall_s": 1.0, "machine": "cpu", "backbone": "kmer_lr",
              **selection}
    rows = run_rows(result)
    assert "C" in rows[0] and "lr" not in rows[0] and rows[0]["C"] == "1" and rows[-1]["C"] == "1"
    md = results_markdown(result)
    assert md.splitlines()[4].startswith("| run") and " C " in md.splitlines()[4] and " lr " not in md
    assert "paper protocol, 1 runs, C 1 (chosen on validation" in md
    neural = run_rows({**result, "backbone": "Caduceus"})
    assert "lr" in neural[0] and "C" not in neural[0]
