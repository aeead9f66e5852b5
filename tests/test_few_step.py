"""pipelines/few_step.py --scale tiny (issue 36 §3) on the in-repo fixtures (the bundled chr22 sample,
tests/data/text/fortunes): every family x call-count cell of both domains is in the table, each cell's
recorded network calls match its call count (exactly for the udlm sampler, K or K + 1 for the masked ones),
the validation choices come from their grids, the first-reach rule holds, and the markdown has its columns."""

from __future__ import annotations

import importlib
import json

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    few_step = importlib.import_module("few_step")
    work = tmp_path_factory.mktemp("few_step")
    assert few_step.main(["--scale", "tiny", "--work-dir", str(work), "--results", str(work / "res")]) == 0
    return few_step, work, json.loads((work / "res.json").read_text())


@pytest.mark.training
def test_every_family_and_call_count_is_in_the_table(tiny):
    few_step, work, res = tiny
    size = few_step.SCALES["tiny"]
    calls = sorted(set(size["calls"]) | {size["length"]})
    families = [f[0] for f in few_step.FAMILIES]
    assert set(res["results"]) == {"dna", "text"}
    for domain, r in res["results"].items():
        assert r["calls"] == calls
        assert sorted((row["family"], row["calls"]) for row in r["rows"]) == sorted(
            (f, k) for f in families for k in calls)
        for row in r["rows"]:
            assert all(s["n"] == len(size["seeds"]) for s in row["summary"].values())
            assert row["wall_seconds_per_1000"] > 0 and row["cpu_seconds_per_1000"] > 0
        labels = [ref["label"] for ref in r["references"]]
        assert labels[0].startswith("real")
        if domain == "dna":  # the floor and the two Markov rows
            assert len(labels) == 3 and labels[1].startswith("Markov k=") and labels[2].startswith("Markov best k")
            for row in r["rows"]:
                assert -1 <= row["summary"]["3-mer Pearson r"]["mean"] <= 1
                assert row["summary"]["kmer JS k=3 (bits)"]["mean"] >= 0
        else:
            for row in r["rows"]:
                assert row["summary"]["gen_ppl"]["mean"] > 1 and row["summary"]["entropy"]["mean"] >= 0
    assert (work / "res.png").stat().st_size > 1000


@pytest.mark.training
def test_recorded_network_calls_match_the_call_count(tiny):
    _, _, res = tiny
    for r in res["results"].values():
        for row in r["rows"]:
            k = row["calls"]
            if row["sampler"] == "udlm":  # every position stays editable: exactly K calls, no extra pass
                assert row["nfe_per_sequence"] == [k] * len(row["nfe_per_sequence"])
                assert row["nfe_per_sequence_min"] == row["nfe_per_sequence_max"] == k
            else:  # masked samplers: K steps (or fewer once nothing is masked) + at most one noise-removal call
                assert all(s <= k for s in row["steps_used"])
                assert row["nfe_per_sequence_min"] >= min(row["steps_used"])
                assert row["nfe_per_sequence_max"] <= max(row["steps_used"]) + 1
                assert all(min(row["steps_used"]) <= v <= k + 1 for v in row["nfe_per_sequence"])


@pytest.mark.training
def test_choices_from_the_grids_and_first_reach_rule(tiny):
    few_step, _, res = tiny
    size = few_step.SCALES["tiny"]
    for domain, ch in res["choices"].items():
        assert ch["remdm"]["chosen"] in size["remdm_grid"] and len(ch["remdm"]["grid"]) == len(size["remdm_grid"])
        for fam in ("sdtt", "duo"):
            assert ch[fam]["chosen"] in size["student_grid"]
            assert [g["student_steps"] for g in ch[fam]["grid"]] == size["student_grid"]
        r = res["results"][domain]
        metric, how = few_step.HEADLINE[domain]
        for fam, fr in r["first_reach"].items():
            by = {row["calls"]: row["summary"][metric] for row in r["rows"] if row["family"] == fam}
            last = by[r["calls"][-1]]
            ok = [k for k in r["calls"] if (by[k]["mean"] >= last["mean"] - last["range"] if how == "higher"
                                            else by[k]["mean"] <= last["mean"] + last["range"])]
            assert fr["calls"] == ok[0]  # the L-call cell itself always qualifies


@pytest.mark.training
def test_markdown_has_the_columns_and_first_reach_lines(tiny):
    _, work, res = tiny
    md = (work / "res.md").read_text()
    for col in ("| row", "calls", "NFE per sequence", "k-mer JS k=3", "k-mer JS k=6", "3-mer Pearson",
                "motif Spearman", "GC W1", "gen PPL (AR judge)", "unigram entropy", "wall s / 1,000 seqs",
                "CPU s / 1,000 seqs"):
        assert col in md, col
    assert md.count("First reaches its own L-call quality") == 2 and "uniform vs masking" in md
    assert "L=32" in md and res["command"].startswith("python pipelines/few_step.py")


def test_budget_clock_reaches_the_train_command():
    """--budget-clock cpu adds train.budget_clock=cpu beside the minutes; no minutes, no clock either."""
    few_step = importlib.import_module("few_step")
    size = {"train": ["train.max_steps=100000"]}
    assert few_step.budget(size, 5.0) == ["train.max_steps=100000", "train.max_minutes=5"]
    assert few_step.budget(size, 5.0, "cpu") == ["train.max_steps=100000", "train.max_minutes=5",
                                                 "train.budget_clock=cpu"]
    assert few_step.budget(size, None, "cpu") == ["train.max_steps=100000"]
    assert few_step.parse_args(["--budget-clock", "cpu"]).budget_clock == "cpu"
    assert few_step.parse_args([]).budget_clock == "wall"
