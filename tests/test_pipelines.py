"""The paper pipelines (pipelines/*.py): every row of every scale builds and steps (--dry-run), the
error bars are the range max − min over seeds (the paper's "±", tab. 6/7), and finished runs
re-render from their JSON. No test here reads ../shared/data."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pipeline(name: str):
    """pipelines/NAME.py as a module (pipelines/ is on sys.path in the tests: pyproject.toml)."""
    return importlib.import_module(name)


# ----------------------------------------------------------------------------- dry runs


def _results_listing() -> list[Path]:
    """What results/ holds now (the tables of finished runs): a dry run must leave it as it was."""
    return sorted((REPO / "results").rglob("*")) if (REPO / "results").is_dir() else []


def _params(model_dir: Path) -> int:
    return json.loads((model_dir / "metrics.json").read_text())["parameters"]


@pytest.mark.training
@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_dna_perplexity_dry_run_builds_and_steps_every_row(scale, tmp_path):
    """Every row of tab. 6 at the scale's presets: trained one step, evaluated (the paper scale asked for
    a Mamba preset that did not exist, after four rows of training)."""
    dp = pipeline("dna_perplexity")
    before = _results_listing()
    assert dp.main(["--scale", scale, "--dry-run", "--out-dir", str(tmp_path)]) == 0
    keys = [s["key"] for s in dp.row_specs(dp.SCALES[scale])]
    for key in keys:
        m = json.loads((tmp_path / f"{key}_seed0" / "model" / "metrics.json").read_text())
        assert m["steps"] == 1
    # the Markov rows are fitted on the same sample (orders 0, 3 and the best of 0..3 on valid)
    for key in ("markov_k0", "markov_k3", "markov_best"):
        assert (tmp_path / key / "model" / "metrics.json").is_file()
    if scale == "paper":  # the paper's sizes (tab. 6): Caduceus "467K", Mamba "465K", HyenaDNA tiny-1k
        assert _params(tmp_path / "caduceus_mlm_seed0" / "model") == 470_702
        assert _params(tmp_path / "caduceus_d3pm_seed0" / "model") == 470_702
        assert _params(tmp_path / "mamba_ar_seed0" / "model") == 468_608
        assert _params(tmp_path / "hyena_ar_seed0" / "model") == 436_096
        assert _params(tmp_path / "plaid_seed0" / "model") == 500_720  # Plaid "507K": a DiT h96 x 3 on embeddings
        # the Caduceus of tab. 7's Plaid column, post-hoc RC (Plaid reads embeddings), with Plaid's own parts
        assert _params(tmp_path / "plaid_caduceus_seed0" / "model") == 496_696
    assert _results_listing() == before  # a dry run writes no table


@pytest.mark.training
def test_dna_perplexity_only_takes_the_rows_it_starts_from(tmp_path, capsys):
    dp = pipeline("dna_perplexity")
    assert dp.main(["--scale", "cpu", "--dry-run", "--out-dir", str(tmp_path / "a"), "--only", "caduceus_sedd"]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    # --only picks neural rows; the Markov rows (count fits, no --only key) stay unless --no-markov
    assert [n for n in names if not n.startswith("markov")] == ["caduceus_mlm_seed0", "caduceus_sedd_seed0"]
    assert [n for n in names if n.startswith("markov")] == ["markov_best", "markov_k0", "markov_k3"]
    assert dp.main(["--scale", "cpu", "--dry-run", "--out-dir", str(tmp_path / "b"), "--only", "caduceus_sedd",
                    "--no-markov"]) == 0
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["caduceus_mlm_seed0", "caduceus_sedd_seed0"]
    assert dp.main(["--scale", "cpu", "--dry-run", "--only", "nope"]) == 2
    assert "error: --only: unknown row key(s) nope" in capsys.readouterr().err


@pytest.mark.training
@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_genomic_benchmarks_dry_run(scale, capsys):
    """Stand-in inits from the DNA pipeline's dry run, synthetic sets (paper: the 8 sets of tab. 7 with
    their recipes), one step per cell; nothing written outside a temporary folder."""
    gb = pipeline("genomic_benchmarks_table")
    before = sorted((REPO / "results").iterdir())
    assert gb.main(["--scale", scale, "--dry-run"]) == 0
    out = capsys.readouterr().out
    n_sets = 8 if scale == "paper" else 1
    # rows: scratch, mlm, mdlm, ar, plaid (the Caduceus-PH inside the Plaid model) and the k-mer LR baseline
    assert f"dry run ({scale}): 6 rows x {n_sets} data sets configured, {6 + n_sets - 1} cells" in out
    assert "| k-mer LR |" in out and "| plaid |" in out
    plaid = next(line for line in out.splitlines() if "plaid_caduceus_seed0" in line and "model.init_from" in line)
    assert "loaded caduceus backbone" in plaid and "dropped Plaid's embedding table" in plaid
    if scale == "paper":
        assert "human_ensembl_regulatory: 24 train / 6 test, classes ['class0', 'class1', 'class2']" in out
    assert sorted((REPO / "results").iterdir()) == before


@pytest.mark.training
@pytest.mark.parametrize("scale", ["cpu", "paper", "gpu"])
def test_text_lm_dry_run(scale, capsys, monkeypatch):
    """Both settings x mdlm/ar/sedd (+ ssdlm in the OWT-style one), eval, T sweep and samples on a corpus the
    pipeline writes; at paper scale the DiT-small rows are counted at full size on the meta device and a
    shrunken copy steps.
    `gpu` is the old name of `paper`."""
    if scale == "gpu":  # the alias only: parse and map (the run itself is the paper row's; no second dry run)
        tl = pipeline("text_lm")
        assert tl.main(["--scale", "gpu", "--from-json", "/nonexistent.json"]) == 2
        assert "error: --from-json /nonexistent.json" in capsys.readouterr().err
        seen = []
        monkeypatch.setattr(tl, "_main", lambda args, command, dry_root=None: seen.append(args.scale) or 0)
        assert tl.main(["--scale", "gpu"]) == 0
        assert seen == ["paper"]
        return
    tl = pipeline("text_lm")
    assert tl.main(["--scale", scale, "--dry-run"]) == 0
    out = capsys.readouterr().out
    # lm1b: mdlm, ar, sedd; owt: those and ssdlm (tab. 5's SSD-LM row: samples only, no bound)
    assert "dry run (" + scale + "): 7 rows trained one step" in out
    assert "| ssdlm | 1 |" in out and "n/a (no likelihood bound)" in out and "ssdlm_semi_ar" in out
    if scale == "paper":
        assert "text/lm1b_mdlm: 92,700,368 parameters at its configured size" in out  # DiT small, vocab 300
        assert "## lm1b" in out and "## owt" in out and "mdlm_semi_ar" in out
    else:
        assert "## lm1b_style" in out and "| sedd | 1 |" in out


# ----------------------------------------------------------------------------- Mamba tab. 6 preset


def test_mamba_dna_465k_preset_is_the_tab6_ar_model():
    """MDLM tab. 6's AR Mamba: d128 x 4, 468,608 parameters with the DNA vocabulary (the paper says 465K;
    its Caduceus "467K" is 470,702 by the same count)."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config

    m = build_backbone("mamba", preset="dna-465k", vocab_size=12)
    assert (m.config.d_model, m.config.n_layer) == (128, 4)
    assert sum(p.numel() for p in m.parameters()) == 468_608
    cfg = load_config(RunConfig, "model/mamba_465k")
    assert (cfg.model.backbone, cfg.model.preset, cfg.objective.name) == ("mamba", "dna-465k", "ar")
    assert pipeline("dna_perplexity").SCALES["paper"]["presets"]["mamba"] == "dna-465k"


# ----------------------------------------------------------------------------- error bars: range max − min


def test_dna_perplexity_table_reports_the_range(tmp_path):
    """Per-seed perplexities 3.0, 3.3, 3.1: mean 3.1333, range 0.3 (not the half, 0.15), from --from-json."""
    dp = pipeline("dna_perplexity")
    settings = {k: v for k, v in dp.SCALES["cpu"].items()}
    runs = {"mamba_ar": [{"seed": s, "perplexity": p, "bits_per_base": math.log2(p), "parameters": 20448}
                         for s, p in enumerate([3.0, 3.3, 3.1])]}
    summary = {"command": "python pipelines/dna_perplexity.py --scale cpu", "wall_seconds": 60.0, "machine": "m",
               "scale": "cpu", "settings": settings, "rows": [], "runs": runs}
    src = tmp_path / "dna_perplexity_cpu.json"
    src.write_text(json.dumps(summary))
    assert dp.main(["--from-json", str(src)]) == 0
    res = json.loads(src.read_text())
    (row,) = res["rows"]
    assert row["model"] == "Mamba AR" and row["perplexity"] == "3.1333"
    assert row["range (max−min)"] == "0.3000" and row["ppl_range"] == pytest.approx(0.3)
    assert row["bits_range"] == pytest.approx(math.log2(3.3) - math.log2(3.0))
    assert res["runs"] == runs and res["command"] == summary["command"] and res["seeds"] == 3
    md = (tmp_path / "dna_perplexity_cpu.md").read_text()
    assert "| model | kind | perplexity | range (max−min) |" in md and "| Mamba AR | exact | 3.1333 | 0.3000 |" in md
    assert "(max-min)/2" not in md and "re-rendered without training" in md


def test_dna_perplexity_rerender_merges_markov_rows_and_compares(tmp_path):
    """Neural rows (3 seeds) and a Markov best-k row (one exact fit) in one JSON: the Markov row has no
    seeds and no range, and the comparison lines are recomputed from the per-seed bits."""
    dp = pipeline("dna_perplexity")
    settings = {k: v for k, v in dp.SCALES["cpu"].items()}
    runs = {"mamba_ar": [{"seed": s, "perplexity": 2 ** b, "bits_per_base": b, "parameters": 20448}
                         for s, b in enumerate([1.80, 1.84, 1.82])],
            "caduceus_mdlm": [{"seed": s, "perplexity": 2 ** b, "bits_per_base": b, "parameters": 28000}
                              for s, b in enumerate([1.84, 1.90, 1.87])],
            "markov_best": [{"seed": "-", "perplexity": 2 ** 1.85, "bits_per_base": 1.85, "parameters": 1398100,
                             "order": 9}]}
    summary = {"command": "python pipelines/dna_perplexity.py --scale cpu", "wall_seconds": 60.0, "machine": "m",
               "scale": "cpu", "settings": settings, "rows": [], "runs": runs,
               "versus_markov": ["stale line"], "load_average_at_end": "load average 1.00, 2.00, 3.00 (1, 5, 15 min)"}
    src = tmp_path / "dna_perplexity_cpu.json"
    src.write_text(json.dumps(summary))
    assert dp.main(["--from-json", str(src)]) == 0
    res = json.loads(src.read_text())
    assert [r["model"] for r in res["rows"]] == ["Caduceus MLM -> MDLM", "Mamba AR", "Markov best k on valid (0..10)"]
    markov = res["rows"][-1]
    assert markov["seeds"] == "- (exact fit)" and markov["steps"] == "counts, k=9" and markov["bits/base"] == "1.8500"
    assert res["seeds"] == 3
    v = res["versus_markov"]
    assert "k = 9" in v[0] and "1.8500" in v[0] and len(v) == 3
    assert v[1].startswith("- Caduceus MLM -> MDLM: 1.8700 bits/base (+0.0200") and "ties it" in v[1]
    assert v[2].startswith("- Mamba AR: 1.8200 bits/base (-0.0300") and v[2].endswith("beats it")
    md = (tmp_path / "dna_perplexity_cpu.md").read_text()
    assert "| Markov best k on valid (0..10) | exact | 3.6050 | - | 1.8500 | - (exact fit) |" in md
    assert v[2] in md and "stale line" not in md and "load average 1.00, 2.00, 3.00" in md


def test_dna_perplexity_baseline_options_are_one_line_errors(tmp_path, capsys):
    dp = pipeline("dna_perplexity")
    assert dp.main(["--scale", "paper", "--budget-minutes", "10"]) == 2
    assert "error: --budget-minutes, --sizes and --seq-len need --scale cpu" in capsys.readouterr().err
    assert dp.main(["--scale", "cpu", "--only-baselines", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only-baselines: ") and "not found" in err and err.count("\n") == 1


def test_dna_perplexity_add_rows_keeps_the_stored_rows(tmp_path, monkeypatch, capsys):
    """--add-rows trains only the --only rows (here: a stand-in that records its calls), keeps the stored table's
    other neural rows and their provenance, refits the Markov rows and says which rows it added."""
    dp = pipeline("dna_perplexity")
    settings = dict(dp.SCALES["cpu"])
    stored = {"caduceus_mdlm": [{"seed": s, "perplexity": 2 ** b, "bits_per_base": b, "parameters": 28000}
                                for s, b in enumerate([1.94, 1.95, 1.96])],
              "markov_best": [{"seed": "-", "perplexity": 9.0, "bits_per_base": 3.17, "parameters": 1, "order": 1}]}
    regen = {"rows": ["Mamba AR"], "command": "c", "wall_seconds": 60.0, "machine": "m", "why": "w"}
    (tmp_path / "dna_perplexity_cpu.json").write_text(json.dumps(
        {"command": "python pipelines/dna_perplexity.py --scale cpu --only-baselines", "wall_seconds": 60.0,
         "machine": "m", "settings": settings, "runs": stored, "regenerated_rows": regen,
         "neural_rows_from": {"command": "python pipelines/dna_perplexity.py --scale cpu", "wall_seconds": 2100.0,
                              "machine": "m"}}))
    trained = []

    def fake_train(spec, seed, overrides, budget, evaluate_dir, start):
        trained.append((spec["key"], seed))
        return {"seed": seed, "perplexity": 2 ** 2.0, "bits_per_base": 2.0, "parameters": 150000}

    markov = {"markov_best": [{"seed": "-", "perplexity": 2 ** 1.87, "bits_per_base": 1.87, "parameters": 1398100,
                               "order": 9}]}
    monkeypatch.setattr(dp, "train_row", fake_train)
    monkeypatch.setattr(dp.baselines, "run_markov_rows", lambda *a, **k: markov)
    monkeypatch.setattr(dp, "make_evaluator", lambda n: None)
    assert dp.main(["--scale", "cpu", "--only", "plaid", "--add-rows", "--no-markov", "--results", str(tmp_path)]) == 2
    assert "--add-rows needs --only ROWS" in capsys.readouterr().err and not trained
    assert dp.main(["--scale", "cpu", "--only", "plaid", "--add-rows", "--results", str(tmp_path),
                    "--out-dir", str(tmp_path / "runs")]) == 0
    assert trained == [("plaid", 0), ("plaid", 1), ("plaid", 2)]
    res = json.loads((tmp_path / "dna_perplexity_cpu.json").read_text())
    assert [r["model"] for r in res["rows"]] == ["Caduceus MLM -> MDLM", "Plaid (DiT on learned embeddings)",
                                                 "Markov best k on valid (0..10)"]
    assert res["runs"]["caduceus_mdlm"] == stored["caduceus_mdlm"]
    assert res["runs"]["markov_best"] == markov["markov_best"]
    assert res["regenerated_rows"] == regen and res["neural_rows_from"]["wall_seconds"] == 2100.0
    (added,) = res["added_rows"]
    assert added["rows"] == ["Plaid (DiT on learned embeddings)"] and "--add-rows" in added["command"]
    md = (tmp_path / "dna_perplexity_cpu.md").read_text()
    assert "this run fitted the Markov rows and trained the rows it adds (below)." in md
    assert "Plaid (DiT on learned embeddings) row added: `python pipelines/dna_perplexity.py" in md
    assert "| Plaid (DiT on learned embeddings) | bound | 4.0000 |" in md


def _gb_cell(init: str, accs: list[float], pm: bool) -> dict:
    from dnadiff.eval.classification import summarize

    s = {m: summarize(accs) for m in ("accuracy", "mcc", "f1_macro", "auroc", "val_acc")}
    if pm:  # a record written before the fix: the half-range under "pm", no "range"
        for v in s.values():
            v["pm"] = v.pop("range") / 2
    return {"init": init, "dataset": "ds", "init_from": None, "majority_baseline": 0.5, "selected_lr": 2e-3,
            "num_parameters": 100, "summary": s, "wall_s": 1.0,
            "runs": [{"run": f"seed{i}", "seed": i, "best_epoch": 0, "val_acc": a,
                      "test": {"accuracy": a, "mcc": a, "f1_macro": a, "auroc": a}} for i, a in enumerate(accs)]}


def test_genomic_benchmarks_rerender_reports_the_range(tmp_path):
    """An old results JSON (half-range `pm`) re-renders with the full range max − min."""
    gb = pipeline("genomic_benchmarks_table")
    cells = [_gb_cell("scratch", [0.80, 0.90, 0.85], pm=True), _gb_cell("mdlm", [0.70, 0.72, 0.74], pm=True)]
    payload = {"command": "python pipelines/genomic_benchmarks_table.py --scale cpu", "wall_s": 60.0, "machine": "m",
               "scale": "cpu", "settings": "s", "inits": {"mdlm": "/x"}, "datasets": ["ds"],
               "table": {c["init"]: {"ds": c["summary"]} for c in cells}, "cells": cells, "note": ""}
    src = tmp_path / "gb.json"
    src.write_text(json.dumps(payload))
    assert gb.main(["--from-json", str(src)]) == 0
    md = (tmp_path / "gb.md").read_text()
    assert "| scratch | 0.850 ± 0.100 |" in md and "| mdlm | 0.720 ± 0.040 |" in md
    assert "mean ± range (max−min)" in md and "(max − min)/2" not in md
    # verdict: gap −0.130 vs half the summed ranges (0.100 + 0.040) / 2 = 0.070
    assert "mdlm vs scratch: -0.130 (worse, spread 0.070)" in md
    res = json.loads(src.read_text())
    acc = res["table"]["scratch"]["ds"]["accuracy"]
    assert acc["range"] == pytest.approx(0.10) and "pm" not in acc
    assert res["cells"][0]["summary"]["val_acc"]["range"] == pytest.approx(0.10)


def test_finetune_summary_row_is_mean_and_range():
    from dnadiff.classifier_tuning.protocol import run_rows

    accs = [0.80, 0.90, 0.85]
    cell = _gb_cell("x", accs, pm=False)
    result = {"runs": [dict(r, lr=2e-3) for r in cell["runs"]], "summary": cell["summary"], "selected_lr": 2e-3}
    last = run_rows(result)[-1]
    assert last["run"] == "mean ± range (max−min)"
    assert last["accuracy"] == "0.850 ± 0.100" and last["val_acc"] == "0.850 ± 0.100"


def test_text_lm_rerender(tmp_path):
    tl = pipeline("text_lm")
    payload = {"scale": "cpu", "command": "python pipelines/text_lm.py --scale cpu", "wall_seconds": 5.0,
               "machine": {"platform": "p", "cpu_count": 2, "torch": "t", "torch_threads": 1, "gpu": None,
                           "load_average_at_start": [0, 0, 0]},
               "settings": [{"setting": "lm1b_style",
                             "rows": {"mdlm": {"train_metrics": {"steps": 3}, "train_seconds": 1.0,
                                               "eval": {"test": {"ppl": 12.5, "tokens": 7}}}}}],
               "notes": [], "num_samples": 2}
    src = tmp_path / "text_lm_cpu.json"
    src.write_text(json.dumps(payload))
    assert tl.main(["--from-json", str(src)]) == 0
    md = (tmp_path / "text_lm_cpu.md").read_text()
    assert "| mdlm | 3 | 1 | 12.50 | 7 |" in md and "re-rendered without training" in md


def test_pipelines_record_the_command_they_ran(monkeypatch):
    """One recorder for every pipeline: the script relative to the repository, arguments shell-quoted;
    main(argv) records argv, even an empty one (not the process's own arguments: pytest's, in a test),
    and main() the command line."""
    common = pipeline("common")
    script = REPO / "pipelines" / "genomic_benchmarks_table.py"
    monkeypatch.setattr("sys.argv", ["pipelines/genomic_benchmarks_table.py", "--scale", "cpu", "--out", "a b"])
    assert common.command_line(script, []) == "python pipelines/genomic_benchmarks_table.py"
    assert common.command_line(script, ["--seeds", "2"]) == "python pipelines/genomic_benchmarks_table.py --seeds 2"
    assert common.command_line(script, None) == "python pipelines/genomic_benchmarks_table.py --scale cpu --out 'a b'"
    for name in ("dna_perplexity", "genomic_benchmarks_table", "text_lm", "guided_design"):
        src = (REPO / "pipelines" / f"{name}.py").read_text()
        assert "common.command_line(__file__" in src and "sys.argv[1:]" not in src, name
