"""The cpu-hour recipe, the Genomic Benchmarks recipe and the sample-quality pipelines: every --dry-run
builds, trains a step or two, scores and renders, on the data bundled in the package, writing nothing
under results/; the wall-clock budget stops a training run; one-line errors for bad options."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pipeline(name: str):
    """pipelines/NAME.py as a module (pipelines/ is on sys.path in the tests: pyproject.toml)."""
    return importlib.import_module(name)


def _results_listing() -> list[Path]:
    return sorted((REPO / "results").rglob("*")) if (REPO / "results").is_dir() else []


@pytest.mark.training
def test_cpu_hour_dry_run_table_paired_comparison_and_plot(tmp_path, capsys):
    ch = pipeline("cpu_hour")
    before = _results_listing()
    assert ch.main(["--dry-run", "--results", str(tmp_path / "res"), "--out-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "res" / "cpu_hour.json").read_text())
    assert [r["key"] for r in summary["rows"]] == ["mamba_ar", "caduceus_mdlm"]
    markov = summary["markov"][0]
    for r in summary["rows"]:
        # the same test windows for every row (Markov included): the paired difference is their mean difference
        assert r["test"]["sequence_tokens"] == markov["test"]["sequence_tokens"]
        per_a = [n / t for n, t in zip(r["test"]["sequence_nats"], r["test"]["sequence_tokens"])]
        per_b = [n / t for n, t in zip(markov["test"]["sequence_nats"], markov["test"]["sequence_tokens"])]
        mean = sum(a - b for a, b in zip(per_a, per_b)) / len(per_a) / 0.6931471805599453
        assert r["paired"]["mean"] == pytest.approx(mean, rel=1e-4)
        assert r["train_wall_seconds"] > 0 and r["curve"], "the validation curve has wall-clock points"
        assert all("wall_seconds" in p for p in r["curve"])
    mdlm = summary["rows"][1]["test"]
    assert mdlm["num_samples"] == 2 and mdlm["stratified_repeats"] is True  # K stratified t-samples per window
    assert (tmp_path / "res" / "cpu_hour_valid_curve.png").stat().st_size > 1000
    assert "Mamba AR (cpu-hour) − Markov" in out
    assert _results_listing() == before


@pytest.mark.training
def test_cpu_hour_continued_row_starts_from_its_parent(tmp_path, capsys):
    """caduceus_mdlm_nwin: initialised from the parent's model, its own settings, its curve after the parent's."""
    ch = pipeline("cpu_hour")
    runs = tmp_path / "runs"
    assert ch.main(["--dry-run", "--rows", "caduceus_mdlm,caduceus_mdlm_nwin", "--results", str(tmp_path / "res"),
                    "--out-dir", str(runs), "--stem", "nwin"]) == 0
    summary = json.loads((tmp_path / "res" / "nwin.json").read_text())
    parent, child = summary["rows"]
    assert child["key"] == "caduceus_mdlm_nwin" and child["curve"][:len(parent["curve"])] == parent["curve"]
    assert child["curve"][-1]["wall_seconds"] > parent["curve"][-1]["wall_seconds"]
    assert child["wall_before_seconds"] == parent["curve"][-1]["wall_seconds"] and parent["wall_before_seconds"] == 0
    # --replot: the rows of one or more tables in one PNG, no training; a missing table is a one-line error
    assert ch.main(["--replot", "nwin", "--results", str(tmp_path / "res"), "--stem", "again"]) == 0
    assert (tmp_path / "res" / "again_valid_curve.png").stat().st_size > 1000
    assert ch.main(["--replot", "nwin,none", "--results", str(tmp_path / "res")]) == 2
    assert "--replot none: cannot read" in capsys.readouterr().err
    import yaml

    cfg = yaml.safe_load((runs / "caduceus_mdlm_nwin" / "config.yaml").read_text())
    assert cfg["model"]["init_from"] == str(runs / "caduceus_mdlm" / "model")
    assert cfg["data"]["max_n_frac"] == 1.0 and cfg["train"]["lr_schedule"] == "cosine"
    assert "caduceus_mdlm_nwin: 35 min" in summary["settings"]
    assert ch.main(["--rows", "caduceus_mdlm_nwin,caduceus_mdlm", "--dry-run"]) == 2
    assert "caduceus_mdlm_nwin continues caduceus_mdlm: list caduceus_mdlm first" in capsys.readouterr().err
    assert ch.main(["--rows", "caduceus_mdlm_2h", "--out-dir", str(tmp_path / "none")]) == 2
    assert "is not a model directory (train caduceus_mdlm first" in capsys.readouterr().err


def _two_stage_dry_run(tmp_path, key: str, suffix: str) -> tuple[dict, dict, dict]:
    """A two-stage cpu_hour row's dry run: its results row and both stages' run configs."""
    import yaml

    runs = tmp_path / "runs"
    assert pipeline("cpu_hour").main(["--dry-run", "--rows", key, "--results", str(tmp_path / "res"),
                                      "--out-dir", str(runs), "--stem", key]) == 0
    (row,) = json.loads((tmp_path / "res" / f"{key}.json").read_text())["rows"]
    first = yaml.safe_load((runs / f"{key}_{suffix}" / "config.yaml").read_text())
    return row, first, yaml.safe_load((runs / key / "config.yaml").read_text())


@pytest.mark.training
def test_cpu_hour_two_stage_row_mlm_then_mdlm_from_its_weights(tmp_path):
    """caduceus_mlm_mdlm: an MLM stage on a quarter of the budget, then MDLM from its weights on the rest; the
    row's steps and wall time are both stages', its curve starts after the MLM stage."""
    runs = tmp_path / "runs"
    row, mlm, mdlm = _two_stage_dry_run(tmp_path, "caduceus_mlm_mdlm", "mlm")
    assert mlm["objective"]["name"] == "mlm" and mdlm["objective"]["name"] == "mdlm"
    from dnadiff.utils import portable_paths

    assert mdlm["model"]["init_from"] == str(runs / "caduceus_mlm_mdlm_mlm" / "model")  # the run: absolute
    assert row["first_stage"]["model_dir"] == portable_paths(mdlm["model"]["init_from"])  # results: no machine path
    assert mlm["data"]["max_n_frac"] == mdlm["data"]["max_n_frac"] == 1.0
    # a dry run's budget, 0.5 min (its 2 steps end each stage first): a quarter for the MLM stage, the rest after
    assert (mlm["train"]["max_minutes"], mdlm["train"]["max_minutes"]) == (0.125, 0.375)
    assert row["steps"] == row["first_stage"]["step"] + 2 and row["first_stage"]["step"] == 2
    assert row["train_wall_seconds"] >= row["first_stage"]["wall_seconds"]
    assert row["curve"] and min(p["wall_seconds"] for p in row["curve"]) > row["first_stage"]["wall_seconds"]
    assert min(p["step"] for p in row["curve"]) >= row["first_stage"]["step"]


@pytest.mark.training
def test_cpu_hour_ar_adaptation_row_trains_the_ar_then_adapts_it(tmp_path):
    """caduceus_mdlm_from_ar: the Mamba AR on half the budget, then an MDLM that starts as that AR."""
    runs = tmp_path / "runs"
    row, ar, mdlm = _two_stage_dry_run(tmp_path, "caduceus_mdlm_from_ar", "ar")
    assert (ar["objective"]["name"], ar["model"]["backbone"], ar["train"]["lr"]) == ("ar", "mamba", 3e-3)
    assert mdlm["objective"]["name"] == "mdlm" and mdlm["model"]["adapt_ar"] and mdlm["train"]["lr"] == 3e-4
    assert mdlm["model"]["init_from"] == str(runs / "caduceus_mdlm_from_ar_ar" / "model")
    model = json.loads((runs / "caduceus_mdlm_from_ar" / "model" / "config.json").read_text())["model"]
    assert model["backbone"] == "caduceus" and model["overrides"]["ar_shift"] and not model["overrides"]["rcps"]
    assert (ar["train"]["max_minutes"], mdlm["train"]["max_minutes"]) == (0.25, 0.25)
    assert row["steps"] == row["first_stage"]["step"] + 2


def test_cpu_hour_dit_row_and_its_sweep_candidates_build_dit_configs(tmp_path):
    """dit_mdlm (issue 33 §3): the cpu-hour data, objective and windows with a DiT; its dry-run width and each
    sweep candidate's settings reach the config (the Caduceus-only dry-run keys would be refused by a DiT)."""
    ch, rows = pipeline("cpu_hour"), pipeline("cpu_hour_rows")
    cad = ch.row_config("caduceus_mdlm", tmp_path, [], 60.0, [], False)
    dit = ch.row_config("dit_mdlm", tmp_path, [], 60.0, [], False)
    assert (dit.model.backbone, dit.model.preset, dit.model.overrides, dit.train.lr) == ("dit", "tiny", {}, 3e-3)
    assert (dit.objective, dit.data, dit.schedule) == (cad.objective, cad.data, cad.schedule)
    assert dit.train.max_minutes == cad.train.max_minutes == 60
    dry = ch.row_config("dit_mdlm", tmp_path, [], 0.5, [], True)
    assert dry.model.overrides["hidden_size"] == 16 and dry.train.max_steps == 2
    for name, extra in rows.SWEEP["dit_mdlm"].items():
        cfg = ch.row_config("dit_mdlm", tmp_path / name, [], 8.0, ["train.threads=1", *extra], False)
        assert cfg.model.backbone == "dit" and cfg.train.threads == 1 and cfg.train.max_minutes == 8.0, name
    big = ch.row_config("dit_mdlm", tmp_path, [], 8.0, rows.SWEEP["dit_mdlm"]["h128x4_lr1e-3"], False)
    assert (big.model.overrides["hidden_size"], big.model.overrides["n_blocks"], big.train.lr) == (128, 4, 1e-3)


def test_cpu_hour_bad_options_are_one_line_errors(capsys):
    ch = pipeline("cpu_hour")
    assert ch.main(["--rows", "nope"]) == 2
    assert "error: --rows: unknown row(s) nope" in capsys.readouterr().err
    assert ch.main(["--minutes", "0", "--dry-run"]) == 2
    assert "error: --minutes 0: must be a positive number of minutes" in capsys.readouterr().err
    assert ch.main(["--sweep", "nope"]) == 2
    assert "error: --sweep: unknown row 'nope'" in capsys.readouterr().err


@pytest.mark.training
def test_genomic_benchmarks_recipe_dry_runs(capsys):
    gr = pipeline("genomic_benchmarks_recipe")
    before = _results_listing()
    assert gr.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "| dry_run_two_classes | full_mean_e1 |" in out and "| dry_run_two_classes | k-mer LR |" in out
    assert "dry run: 3 cells trained one step" in out
    assert gr.main(["--dry-run", "--learning-curve", "--recipe", "head_only_e3"]) == 0
    out = capsys.readouterr().out
    assert "| data set | row | n=4 | n=12 |" in out and "head_only_e3 (neural)" in out
    assert gr.main(["--dry-run", "--learning-curve", "--recipe", "nope"]) == 2
    assert "error: --recipe 'nope': not a candidate" in capsys.readouterr().err
    assert _results_listing() == before


def test_genomic_benchmarks_recipe_combines_runs_of_one_mode(tmp_path, capsys):
    gr = pipeline("genomic_benchmarks_recipe")
    part = {"mode": "select", "command": "run a", "wall_s": 60.0, "machine": "m", "load_average": "l", "init": "i",
            "protocol": "p", "sizes": None, "candidates": {}, "cells": [{"max_train": 12}], "datasets": ["a"],
            "chosen": {"a": "full_mean_e1"}, "table": [{"data set": "a", "candidate": "full_mean_e1"}], "note": ["- a"]}
    other = dict(part, command="run b", wall_s=30.0, datasets=["b"], chosen={"b": "head_only_e3"},
                 table=[{"data set": "b", "candidate": "head_only_e3"}], note=["- b"])
    del other["mode"], other["sizes"]  # an older JSON: the mode is read off its table
    (tmp_path / "a.json").write_text(json.dumps(part))
    (tmp_path / "b.json").write_text(json.dumps(other))
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    assert gr.main(["--combine", a, b, "--out", str(tmp_path / "ab")]) == 0
    both = json.loads((tmp_path / "ab.json").read_text())
    assert both["chosen"] == {"a": "full_mean_e1", "b": "head_only_e3"} and both["datasets"] == ["a", "b"]
    assert both["wall_s"] == 90.0 and both["command"][:2] == ["run a", "run b"]
    md = (tmp_path / "ab.md").read_text()
    assert "| a | full_mean_e1 |\n| b | head_only_e3 |" in md and "summed over the 2 runs combined" in md
    (tmp_path / "c.json").write_text(json.dumps(dict(part, init="another model")))
    capsys.readouterr()
    assert gr.main(["--combine", str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 2
    assert "error: --combine: the runs differ in 'init'" in capsys.readouterr().err
    assert gr.main(["--combine", str(tmp_path / "missing.json")]) == 2
    assert "error: --combine " in capsys.readouterr().err
    (tmp_path / "other.json").write_text(json.dumps({"table": []}))
    assert gr.main(["--combine", str(tmp_path / "other.json")]) == 2
    assert "not a result of this pipeline (no command, wall_s" in capsys.readouterr().err


@pytest.mark.training
def test_sample_quality_dry_run_every_row_and_metric(capsys):
    sq = pipeline("sample_quality")
    before = _results_listing()
    assert sq.main(["--dry-run", "--cpu-hour-dir", ""]) == 0
    out = capsys.readouterr().out
    for row in ("real test windows", "Markov k=5", "Mamba AR", "MDLM ancestral", "MDLM cached", "MDLM first-hitting",
                "MDLM ReMDM", "MDLM + RC-symmetric", "MDLM semi-AR (trained window)"):
        assert row in out
    # columns come from `dnadiff metrics` generically: k-mer JS, GC, memorisation, motifs and the oracle
    for metric in ("kmer JS k=3 (bits)", "GC Wasserstein-1", "longest match (max)", "motif hit-rate Spearman",
                   "oracle samples_bits_per_base"):
        assert f"| {metric}" in out
    assert _results_listing() == before


def test_sample_quality_semi_ar_row_uses_the_trained_window():
    from types import SimpleNamespace

    sq = pipeline("sample_quality")
    model = SimpleNamespace(config=SimpleNamespace(data=SimpleNamespace(seq_len=128)))
    assert sq.trained_window(model, {"length": 1024}, ["--trained-window"]) == {"window": 128, "stride": 64}
    assert sq.trained_window(model, {"length": 128}, ["--trained-window"]) == {}  # one window: the plain sampler
    assert sq.trained_window(model, {"length": 1024}, []) == {}
    assert ("MDLM semi-AR (trained window)", "semi_ar", ["--trained-window"]) in sq.MDLM_SAMPLERS
    l2r = ["--trained-window", "--left-to-right"]
    assert sq.trained_window(model, {"length": 1024}, l2r) == {"window": 128, "stride": 64, "inner": "ordered"}
    assert sq.trained_window(model, {"length": 128}, l2r) == {"inner": "ordered"}  # one window, still in order
    assert sq.trained_window(model, {"length": 1024}, [*l2r, "--quarter-stride"])["stride"] == 32


@pytest.mark.training
def test_max_minutes_stops_training_on_time(tmp_path):
    """train.max_minutes (Lightning max_time) ends a run long before max_steps; validation points carry
    their wall clock in logs/metrics.csv."""
    from dnadiff.config import RunConfig, load_config
    from dnadiff.errors import DnadiffError
    from dnadiff.training import train

    over = [f"out_dir={tmp_path}", "name=t", "train.max_steps=100000", "train.max_minutes=0.05", "train.val_every=2",
            "train.val_batches=1", "train.batch_size=2", "data.seq_len=32", "train.progress=false",
            "model.overrides.scan_impl=chunked", "train.threads=1"]
    res = train(load_config(RunConfig, "experiments/tiny_dna_mdlm", over))
    assert 0 < res.metrics["steps"] < 100000
    assert "val/wall_seconds" in (tmp_path / "t" / "logs" / "metrics.csv").read_text().splitlines()[0]
    with pytest.raises(DnadiffError, match="train.max_minutes: must be a positive number of minutes"):
        load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.max_minutes=0"])


@pytest.mark.training
def test_cpu_budget_clock_counts_compute_not_waiting(tmp_path):
    """train.budget_clock=cpu: time spent waiting (another process holding the core, here a sleep) does not
    count against max_minutes; the run that a 3-s wall budget would cut at ~6 steps runs all 10; and the
    callback stops a run whose CPU budget is spent at the next step, the count carried through a checkpoint."""
    import time
    from types import SimpleNamespace

    import lightning as L

    from dnadiff.config import RunConfig, load_config
    from dnadiff.errors import DnadiffError
    from dnadiff.training import train
    from dnadiff.training.progress import CpuBudget

    class Sleep(L.Callback):
        def on_train_batch_end(self, *args) -> None:
            time.sleep(0.5)

    over = [f"out_dir={tmp_path}", "name=t", "train.max_steps=10", "train.max_minutes=0.05", "train.val_every=100",
            "train.val_batches=1", "train.batch_size=2", "data.seq_len=32", "train.progress=false",
            "model.overrides.scan_impl=chunked", "train.threads=1", "train.budget_clock=cpu"]
    res = train(load_config(RunConfig, "experiments/tiny_dna_mdlm", over), callbacks=[Sleep()])
    assert res.metrics["steps"] == 10

    budget = CpuBudget(max_minutes=1.0)
    budget.load_state_dict({"cpu_seconds_used": 59.9})
    budget.on_train_start(None, None)
    trainer = SimpleNamespace(should_stop=False, global_step=3, strategy=SimpleNamespace(broadcast=lambda v, src: v))
    while not trainer.should_stop and budget.used_s() < 61:
        budget.on_train_batch_end(trainer, None, None, None, 0)
        sum(i * i for i in range(10000))  # burn CPU until the last 0.1 s is spent
    assert trainer.should_stop and 60.0 <= budget.state_dict()["cpu_seconds_used"] < 61
    with pytest.raises(DnadiffError, match="train.budget_clock: must be wall or cpu"):
        load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.budget_clock=gpu"])


def test_sample_quality_names_the_model_behind_a_linked_models_dir(tmp_path):
    """A --models-dir of symbolic links (to other runs' models): the table's model line names the link's target;
    a plain path (even one through '..') names nothing more."""
    sq = pipeline("sample_quality")
    (tmp_path / "runs" / "real_model").mkdir(parents=True)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "caduceus_mdlm").symlink_to(tmp_path / "runs" / "real_model")
    assert sq.linked_to(str(tmp_path / "links" / "caduceus_mdlm")) == f" (→ {tmp_path / 'runs' / 'real_model'})"
    assert sq.linked_to(str(tmp_path / "links" / ".." / "runs" / "real_model")) == ""
    (tmp_path / "links" / "mamba_ar").symlink_to(sq.REPO / "pipelines")  # a target inside the repository: relative
    assert sq.linked_to(str(tmp_path / "links" / "mamba_ar")) == " (→ pipelines)"
    assert sq.linked_to(str(sq.REPO / "pipelines")) == ""


def test_sample_quality_resume_reuses_only_a_matching_seed(tmp_path):
    sq = pipeline("sample_quality")
    size = {"num": 4, "length": 32, "steps": 8}
    (tmp_path / "samples.fa").write_text(">s\nACGT\n")
    meta = {"model": "/m", "sampler": "ancestral", "num": 4, "length": 32, "steps": 8, "seed": 1}
    (tmp_path / "samples.json").write_text(json.dumps(meta))
    assert sq._samples_reusable(tmp_path, "/m", "ancestral", size, 1)
    assert not sq._samples_reusable(tmp_path, "/m", "ancestral", size, 2)  # another seed
    assert not sq._samples_reusable(tmp_path, "/m", "remdm", size, 1)  # another sampler
    assert not sq._samples_reusable(tmp_path, "/m", "ancestral", {**size, "steps": 16}, 1)  # other sizes
    assert not sq._samples_reusable(tmp_path, "/other", "ancestral", size, 1)
    assert sq._samples_reusable(tmp_path, None, None, size, 1)  # real windows: cut again from the seed
    # written by the pipeline: the row's sampling options must match too (semi-AR random order vs left to right)
    (tmp_path / "samples.json").write_text(json.dumps({**meta, "row_options": ["--trained-window"]}))
    assert sq._samples_reusable(tmp_path, "/m", "ancestral", size, 1, ["--trained-window"])
    assert not sq._samples_reusable(tmp_path, "/m", "ancestral", size, 1, ["--trained-window", "--left-to-right"])
    (tmp_path / "samples.fa").unlink()
    assert not sq._samples_reusable(tmp_path, "/m", "ancestral", size, 1)
    # metrics: current only when computed with the same options
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.json").write_text("{}")
    assert not sq._metrics_current(tmp_path, ["--no-plots"])  # no record of the options
    (tmp_path / "metrics_args.json").write_text(json.dumps(["--no-plots"]))
    assert sq._metrics_current(tmp_path, ["--no-plots"])
    assert not sq._metrics_current(tmp_path, ["--no-plots", "--embedder", "/e"])


def test_sample_quality_resume_rescores_kept_samples_when_metric_options_change(tmp_path, monkeypatch):
    """A seed whose samples match is not sampled again; its metrics are recomputed only when the metric
    options changed (e.g. --embedder added), and then recorded."""
    sq = pipeline("sample_quality")
    size = {"seeds": 2, "num": 1, "length": 4, "steps": 2}
    calls = []

    def fake_draw(model_dir, fa, size, seed, sampler, extra):  # dnadiff.sample's files, as `dnadiff sample`'s
        calls.append("sample")
        fa.write_text(">s\nACGT\n")
        (fa.parent / "samples.json").write_text(json.dumps({"model": "/m", "sampler": "ancestral", "num": 1,
                                                            "length": 4, "steps": 2, "seed": seed}))

    def fake_cli(argv):
        calls.append(argv[0])
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(exist_ok=True)
        (out / "metrics.json").write_text("{}")

    monkeypatch.setattr(sq, "draw_samples", fake_draw)
    monkeypatch.setattr(sq, "cli", fake_cli)
    monkeypatch.setattr(sq, "metric_values", lambda res: {"m": 1.0})
    row = ("MDLM ancestral", "/m", "ancestral", [])
    sq.score_row(row, size, tmp_path, {"fasta": "ref.fa"}, ["--a"], print, resume=True)
    assert calls == ["sample", "metrics", "sample", "metrics"]
    calls.clear()
    sq.score_row(row, size, tmp_path, {"fasta": "ref.fa"}, ["--a"], print, resume=True)
    assert calls == []  # everything current
    sq.score_row(row, size, tmp_path, {"fasta": "ref.fa"}, ["--a", "--embedder", "/e"], print, resume=True)
    assert calls == ["metrics", "metrics"]  # samples kept, metrics recomputed
    calls.clear()
    sq.score_row(row, size, tmp_path, {"fasta": "ref.fa"}, ["--a", "--embedder", "/e"], print, resume=False)
    assert calls == ["sample", "metrics", "sample", "metrics"]  # without --resume: everything again


def test_sample_quality_row_seeds():
    from dnadiff.errors import DnadiffError

    sq = pipeline("sample_quality")
    names = ["Mamba AR", "MDLM first-hitting"]
    assert sq.parse_row_seeds("MDLM first-hitting=2", names) == {"MDLM first-hitting": 2}
    assert sq.parse_row_seeds(None, names) == {} and sq.parse_row_seeds("", None) == {}
    assert sq.parse_row_seeds("a=b=3", None) == {"a=b": 3}  # the count follows the last '='
    with pytest.raises(DnadiffError, match="no row 'MDLM cached' in this run"):
        sq.parse_row_seeds("MDLM cached=2", names)
    with pytest.raises(DnadiffError, match="want NAME=N, the seed count a positive integer"):
        sq.parse_row_seeds("Mamba AR=0", None)
    with pytest.raises(DnadiffError, match="want NAME=N, the seed count a positive integer"):
        sq.parse_row_seeds("Mamba AR", names)


def test_sample_quality_bad_embedder_is_a_one_line_error(tmp_path, capsys):
    sq = pipeline("sample_quality")
    assert sq.main(["--embedder", str(tmp_path / "missing"), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "--embedder" in err and "not a folder" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written
