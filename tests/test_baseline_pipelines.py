"""The baseline parts of the tab. 6 / tab. 7 pipelines: Markov rows, the time budget, --only-baselines merging."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import perplexity_baselines as pb  # pipelines/ is on sys.path in the tests (pyproject.toml)
import pytest

REPO = Path(__file__).resolve().parent.parent


def test_budget_split_by_step_share():
    specs = [{"key": "mlm", "steps": 300}, {"key": "mdlm", "steps": 300, "init": "mlm"}, {"key": "ar", "steps": 600},
             *pb.markov_specs()]
    got = pb.budget_seconds(specs, minutes=12, seeds=2)
    assert set(got) == {"mlm", "mdlm", "ar"}  # Markov rows are fits, not timed training
    assert got["ar"] == pytest.approx(2 * got["mlm"]) and got["mlm"] == pytest.approx(got["mdlm"])
    assert 2 * sum(got.values()) == pytest.approx(12 * 60)  # every seed's runs fill the budget exactly


def test_compare_with_markov_verdicts():
    results = {pb.MARKOV_BEST: [{"bits_per_base": 1.85, "order": 9}],
               "ar": [{"bits_per_base": 1.80}, {"bits_per_base": 1.84}],
               "mdlm": [{"bits_per_base": 1.84}, {"bits_per_base": 1.90}],
               "hy": [{"bits_per_base": 1.90}]}
    table = [{"model": "AR", "key": "ar", "kind": "exact"}, {"model": "MDLM", "key": "mdlm", "kind": "bound"},
             {"model": "Hy", "key": "hy", "kind": "exact"}, {"model": "Markov", "key": pb.MARKOV_BEST, "kind": "exact"}]
    lines = pb.compare_with_markov(table, results)
    assert "k = 9" in lines[0] and len(lines) == 4
    assert "AR: 1.8200 bits/base (-0.0300" in lines[1] and lines[1].endswith("beats it")
    assert "ties it" in lines[2] and "upper bound" in lines[2]
    assert "does not beat it" in lines[3]


def test_markov_rows_fit_on_the_same_data_and_pick_the_valid_best(tmp_path):
    seen = []

    def evaluate(model_dir, seed):
        import dnadiff

        seen.append(dnadiff.load(model_dir).config.data.seq_len)
        return {"perplexity": 3.5, "bits_per_base": 1.9, "seed": seed}

    res = pb.run_markov_rows(["data.seq_len=64"], tmp_path, evaluate, echo=lambda m: None, orders=(0, 2), max_order=2)
    assert set(res) == {"markov_k0", "markov_k2", pb.MARKOV_BEST}
    assert res["markov_k0"][0]["order"] == 0 and res["markov_k2"][0]["order"] == 2
    by = {int(k): v for k, v in res[pb.MARKOV_BEST][0]["valid_bits_per_base_by_order"].items()}
    assert res[pb.MARKOV_BEST][0]["order"] == min(by, key=by.get)
    assert seen == [64, 64, 64]


def test_genomic_benchmarks_only_baselines_merges_the_kmer_row(tmp_path):
    import genomic_benchmarks_table as gb
    from test_kmer_lr import make_benchmark

    bench = make_benchmark(tmp_path / "toy", n_train=30, n_test=10)
    stem = tmp_path / "tab7"
    neural = {"toy": {m: {"mean": 0.6, "pm": 0.01, "min": 0.59, "max": 0.61, "n": 3}
                      for m in ("accuracy", "mcc", "f1_macro", "auroc")}}
    prior = {"command": "python pipelines/genomic_benchmarks_table.py --scale cpu", "wall_s": 600, "machine": "m",
             "inits": {"mdlm": "/gone/model"}, "datasets": ["toy"], "table": {"mdlm": neural},
             "cells": [{"init": "mdlm", "dataset": "toy", "wall_s": 60, "majority_baseline": 0.5}]}
    stem.with_suffix(".json").write_text(json.dumps(prior))
    rc = gb.main(["--scale", "cpu", "--only-baselines", "--datasets", str(bench), "--out", str(stem),
                  "--runs-dir", str(tmp_path / "runs"), "--seeds", "2"])
    assert rc == 0
    out = json.loads(stem.with_suffix(".json").read_text())
    assert out["table"]["mdlm"] == neural  # the stored neural row, untouched
    kmer = out["table"][gb.KMER_ROW]["toy"]["accuracy"]
    assert kmer["n"] == 2 and kmer["mean"] > 0.75
    md = Path(str(stem) + ".md").read_text()
    assert "| k-mer LR |" in md and "reused from the earlier run" in md and "mdlm vs k-mer LR" in md


@pytest.mark.subprocess
def test_genomic_benchmarks_script_does_not_shadow_the_package(tmp_path):
    """`python pipelines/genomic_benchmarks_table.py` puts pipelines/ first on sys.path: the
    `genomic_benchmarks` package, whose loc2seq --download uses, must still be the one imported (a
    stand-in package on PYTHONPATH here) after the script ran the way the command line runs it."""
    pkg = tmp_path / "site" / "genomic_benchmarks"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "loc2seq.py").write_text("def download_dataset(*a, **k):\n    return 'the package'\n")
    code = ("import runpy, sys\n"
            f"sys.path[0] = {str(REPO / 'pipelines')!r}  # what `python pipelines/genomic_benchmarks_table.py` sets\n"
            f"runpy.run_path({str(REPO / 'pipelines' / 'genomic_benchmarks_table.py')!r}, run_name='gb_cli')\n"
            "from genomic_benchmarks.loc2seq import download_dataset\n"
            "print(download_dataset())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO)]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "the package"


def test_no_pipeline_shadows_an_importable_module():
    """pipelines/ goes first on sys.path when a pipeline runs: no script there may take the name of a
    module importable without it (the Genomic Benchmarks table once hid the `genomic_benchmarks` package)."""
    here = REPO / "pipelines"
    elsewhere = [p for p in sys.path if Path(p or os.curdir).resolve() != here]
    for script in sorted(here.glob("*.py")):
        name = script.stem
        assert name not in sys.builtin_module_names, name
        assert importlib.machinery.PathFinder.find_spec(name, elsewhere) is None, f"pipelines/{name}.py shadows {name}"


def test_genomic_benchmarks_add_inits_adds_a_row_above_the_baseline(tmp_path, monkeypatch, capsys):
    """--add-inits runs only the --init rows (here a stand-in cell) and keeps the stored rows, the page's
    provenance and the k-mer baseline last; other settings than the stored table's are refused before any cell."""
    import genomic_benchmarks_table as gb
    from test_kmer_lr import make_benchmark

    bench = make_benchmark(tmp_path / "toy", n_train=30, n_test=10)
    stem = tmp_path / "tab7"
    row = {"toy": {m: {"mean": 0.6, "range": 0.02, "min": 0.59, "max": 0.61, "n": 3}
                   for m in ("accuracy", "mcc", "f1_macro", "auroc")}}
    settings = gb.settings_of(gb.argparse.Namespace(scale="cpu", seeds=2, epochs=1, max_train=1000, max_test=500,
                                                    batch_size=16, lr=2e-3))
    prior = {"command": "python pipelines/genomic_benchmarks_table.py --scale cpu", "wall_s": 600, "machine": "m",
             "load_average": "load average 1.00", "settings": settings, "scale": "cpu",
             "inits": {"mdlm": "/gone/model"}, "datasets": ["toy"], "table": {"mdlm": row, gb.KMER_ROW: row},
             "cells": [{"init": i, "dataset": "toy", "wall_s": 60, "majority_baseline": 0.5, "selected_lr": 1.0}
                       for i in ("mdlm", gb.KMER_ROW)]}
    stem.with_suffix(".json").write_text(json.dumps(prior))
    ran = []

    def fake_cell(args, init, cfg, cell_dir, dry):
        ran.append((init, cfg.model.init_from))
        return {"init": init, "dataset": cell_dir.name, "wall_s": 30, "majority_baseline": 0.5,
                "summary": {m: dict(row["toy"][m], mean=0.7) for m in ("accuracy", "mcc", "f1_macro", "auroc")}}

    monkeypatch.setattr(gb, "run_cell", fake_cell)
    model = tmp_path / "plaid_model"
    model.mkdir()
    argv = ["--scale", "cpu", "--add-inits", "--init", f"plaid={model}", "--datasets", str(bench), "--out", str(stem),
            "--runs-dir", str(tmp_path / "runs")]
    assert gb.main([*argv, "--only-baselines"]) == 2
    assert "--add-inits and --only-baselines: one at a time" in capsys.readouterr().err
    assert gb.main([*argv, "--seeds", "3"]) == 2
    assert "--add-inits: " in capsys.readouterr().err and not ran  # 3 seeds: not the stored table's 2
    assert gb.main([*argv, "--seeds", "2"]) == 0
    assert ran == [("plaid", str(model))]
    out = json.loads(stem.with_suffix(".json").read_text())
    assert list(out["table"]) == ["mdlm", "plaid", gb.KMER_ROW] and out["table"]["mdlm"] == row
    assert out["table"]["plaid"]["toy"]["accuracy"]["mean"] == 0.7
    assert out["command"] == prior["command"] and list(out["inits"]) == ["mdlm", "plaid"]
    assert out["inits"]["plaid"].endswith("/plaid_model")  # results name no absolute path ($TMPDIR/...)
    (added,) = out["added_inits"]
    assert added["inits"] == ["plaid"] and "--add-inits" in added["command"]
    md = Path(str(stem) + ".md").read_text()
    assert "| plaid | 0.700 ± 0.020 |" in md and "- row plaid added by `python pipelines/genomic_benchmarks" in md
