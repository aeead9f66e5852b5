"""pipelines/block_diffusion.py: the dry run builds, trains, scores and pairs every kind of row on the data bundled
in the package (nothing under results/); bad options are one-line errors."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LN2 = 0.6931471805599453


def per_window_bits(res: dict) -> list[float]:
    return [n / t / LN2 for n, t in zip(res["sequence_nats"], res["sequence_tokens"])]


@pytest.mark.training
def test_dry_run_rows_pair_against_markov_and_the_ar(tmp_path, capsys):
    bd = importlib.import_module("block_diffusion")
    before = sorted((REPO / "results").rglob("*"))
    assert bd.main(["--dry-run", "--rows", "mamba_ar,bd3lm64,bd3lm16_from_ar", "--clip", "0.3,0.8", "--results",
                    str(tmp_path / "res"), "--out-dir", str(tmp_path / "runs"),
                    "--note", "Rows trained elsewhere."]) == 0
    summary = json.loads((tmp_path / "res" / "block_diffusion_cpu.json").read_text())
    rows = {r["key"]: r for r in summary["rows"]}
    assert list(rows) == ["mamba_ar", "bd3lm64", "bd3lm16_from_ar"]
    assert rows["bd3lm64"]["block_size"] == 32 and rows["bd3lm16_from_ar"]["block_size"] == 16  # dry: 32-bp windows
    assert rows["bd3lm64"]["clip"] == [0.3, 0.8] and rows["bd3lm16_from_ar"]["clip"] == [0.3, 0.8]
    ar = per_window_bits(rows["mamba_ar"]["test"])
    markov = per_window_bits(summary["markov"][0]["test"])
    for key in ("bd3lm64", "bd3lm16_from_ar"):
        r = rows[key]
        assert r["test"]["objective"] == "bd3lm" and r["test"]["stratified_repeats"] is True
        mine = per_window_bits(r["test"])
        assert r["paired"]["mean"] == pytest.approx(sum(a - b for a, b in zip(mine, markov)) / len(mine), rel=1e-4)
        assert r["paired_ar"]["mean"] == pytest.approx(sum(a - b for a, b in zip(mine, ar)) / len(mine), rel=1e-4)
        assert set(r["paired_ar"]) >= {"mean", "std_error"} and r["paired_ar"]["std_error"] > 0
    assert rows["bd3lm16_from_ar"]["first_stage"]["step"] == 2  # its AR stage ran first
    md = (tmp_path / "res" / "block_diffusion_cpu.md").read_text()
    assert "vs AR (paired)" in md and "Best block row" in md and md.rstrip().endswith("Rows trained elsewhere.")
    assert sorted((REPO / "results").rglob("*")) == before


@pytest.mark.parametrize("argv,match", [(["--rows", "nope"], "unknown row"), (["--clip", "0.9,0.1"], "--clip"),
                                        (["--clip", "a,b"], "two numbers"), (["--minutes", "0"], "--minutes")])
def test_bad_options_are_one_line_errors(argv, match, capsys):
    bd = importlib.import_module("block_diffusion")
    assert bd.main(["--dry-run", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and match in err and "\n" not in err


def test_variance_benchmark_measures_plain_and_clipped(tmp_path):
    """benchmarks/bd3lm_variance.py on an untrained block model: the plain row is the NELBO estimate, a
    clipped one draws only mask rates in [β, ω]: without the 1/t weights of small t it varies far less."""
    import sys

    from helpers.cli_model import tiny_model_dir

    sys.path.insert(0, str(REPO / "benchmarks"))
    bench = importlib.import_module("bd3lm_variance")
    model = tiny_model_dir(tmp_path, overrides=["model.backbone=mamba", "objective.name=bd3lm",
                                                "objective.block_size=8", "model.overrides.scan_impl=chunked"])
    rows = bench.measure(model, [(0.45, 0.95)], windows=8, batch_size=4, repeats=6)
    plain, clipped = rows
    assert plain["clip"] is None and clipped["clip"] == (0.45, 0.95) and plain["block_size"] == 8
    assert plain["batches"] == 2 and plain["windows"] == 8 and plain["variance_vs_plain"] == 1.0
    assert 0 < clipped["variance"] < plain["variance"] and 1.0 < plain["mean_loss"] < 5.0


def test_sample_quality_adds_bd3_rows_sampled_with_the_block_sampler(tmp_path):
    """pipelines/sample_quality.py --bd3-dir: a `BD3 ...` row per block model there, sampled by the model's own
    `block` sampler (its config's steps per block; B = 4 also with 2 calls per block), with calls and wall per
    sequence in the samples' JSON and the table's per-sequence line."""
    from helpers.cli_model import tiny_model_dir

    sq = importlib.import_module("sample_quality")
    report = importlib.import_module("sample_quality_report")
    tiny_model_dir(tmp_path / "bd3" / "bd3lm4", overrides=["model.backbone=mamba", "objective.name=bd3lm",
                                                           "objective.block_size=4", "sample.sampler=block",
                                                           "sample.steps=4"])
    models = {"markov5": "m5", "markov_best": "mb", "mamba_ar": "ar", "caduceus_mdlm": "mdlm"}
    rows = sq.sample_rows(models, 5, 9, None, [], str(tmp_path / "bd3"))
    bd3 = [r for r in rows if r[0].startswith("BD3")]
    assert [r[0] for r in bd3] == ["BD3 B=4 (cpu-hour)", "BD3 B=4 2-step blocks (cpu-hour)",
                                   "BD3 B=4 first-hitting inner (cpu-hour)"]
    assert [(r[2], r[3]) for r in bd3] == [(None, []), (None, ["--steps=2"]), (None, ["--inner=first_hitting"])]
    # first_hitting has no steps: one call per base, 4 per block of 4 (the calls bound below)
    for (name, model_dir, _, extra), steps, inner in zip(bd3, (4, 2, None), ("ancestral",) * 2 + ("first_hitting",)):
        fa = tmp_path / f"s{len(name)}" / "samples.fa"
        fa.parent.mkdir()
        sq.draw_samples(model_dir, fa, {"num": 2, "length": 40, "steps": 256}, 0, None, extra)
        stats = json.loads(fa.with_suffix(".json").read_text())
        assert stats["sampler"] == "block" and stats["steps"] == steps and stats["length"] == 40
        assert stats["options"].get("inner", "ancestral") == inner, stats["options"]
        # 10 blocks x `steps` calls (+ one pass per finished block at most)
        assert stats["nfe_per_sequence"] <= 10 * (steps or 4) + 10 and stats["seconds_per_sample"] > 0
    per_row = {"AR": {"sampling_seconds_per_seed": [2.0, 4.0], "network_calls_per_sequence": [1024, 1024]},
               "BD3": {"sampling_seconds_per_seed": [8.0], "network_calls_per_sequence": [300, 200]},
               "real": {"sampling_seconds_per_seed": None}}
    assert report.per_sequence_cost(per_row, num=2) == [
        "- per sequence (mean over seeds), sampling wall seconds / network calls: AR: 1.5 s / 1024; BD3: 4 s / 250"]
    size = {"seeds": 1, "num": 2, "length": 40, "steps": 4, "reference_windows": 3}
    page = report.render(argparse.Namespace(quick=False, embedder=None, note="Why the BD3 rows trail."), "cmd", 60.0,
                         size, {"fasta": "x.fa"}, [], 9, {}, [], [])
    assert page.endswith("\n\nWhy the BD3 rows trail.\n")


