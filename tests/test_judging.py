"""Issue 46 §3: the generation tables re-judged (pipelines/judging.py). The discriminator columns of few_step's DNA
rows and of reward_finetuning's rows equal a direct call of the classifier two-sample test on the same sequences
(a tiny judge on tiny synthetic rows); the neural evaluation oracle is found and scores as a direct call does;
tables of JSONs written before these columns still render, with "—" where a value is missing."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dnadiff.eval import DiscriminatorSettings, discriminator_test

REPO = Path(__file__).resolve().parent.parent
TINY = dict(folds=2, channels=4, blocks=1, epochs=2, patience=1, floor=False)  # a judge that fits in a second
judging = importlib.import_module("judging")


def iid(rng, n: int, length: int, gc: float = 0.5) -> list[str]:
    p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return ["".join(rng.choice(list("ACGT"), length, p=p)) for _ in range(n)]


def direct(seqs: list[str], reference: list[str]) -> dict:
    res = discriminator_test(seqs, reference, DiscriminatorSettings(**TINY))
    return {f"disc_{k}_{c}": res[c][key] for c in ("cnn", "kmer_lr")
            for k, key in (("auroc", "auroc"), ("se", "std_error"), ("p", "p_value"))}


def test_few_step_dna_rows_are_judged_like_a_direct_call(tmp_path):
    """Every DNA row (the real floor, a Markov row, a family row): its seeds' FASTAs pooled against held-out test
    windows; the numbers are those of discriminator_test on the same sets, the table shows them, the note the
    floor; a row too small for the folds shows —."""
    few_step = importlib.import_module("few_step")
    sq = importlib.import_module("sample_quality")
    from dnadiff.data import format_fasta

    fasta, bed = sq.genome_files(argparse.Namespace(quick=True), None)
    size = {"seeds": [0, 1], "num": 12, "length": 60}
    dom = few_step.Domain("dna", tmp_path, size, print, data={"fasta": fasta, "bed": bed})
    dom.markov_rows = [("Markov k=3", "markov5")]
    rng, base = np.random.default_rng(0), tmp_path / "samples" / "dna"
    files = {"real": [base / "real" / f"valid_seed{s}_n12_L60.fa" for s in (0, 1)],
             "markov": [base / "markov5" / f"seed{s}.fa" for s in (0, 1)],
             "mdlm": [base / "mdlm" / "calls4" / f"seed{s}.fa" for s in (0, 1)]}
    pooled = {}
    for key, paths in files.items():
        pooled[key] = []
        for i, path in enumerate(paths):
            seqs = iid(rng, 12, 60, gc=0.5 if key == "real" else 0.7)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(format_fasta([(f"s{i}_{j}", s) for j, s in enumerate(seqs)]))
            pooled[key] += seqs
    refs = [{"label": "real", "summary": {}}, {"label": "Markov k=3", "summary": {}}]
    rows = [{"family": "mdlm", "label": "MDLM", "calls": 4, "summary": {}}]
    few_step.judge_dna_rows(dom, refs, rows, DiscriminatorSettings(**TINY))
    reference = sq.real_windows(dom.data, "test", 60, 24, few_step.DISC_SEED)
    for row, key in ((refs[0], "real"), (refs[1], "markov"), (rows[0], "mdlm")):
        want = direct(pooled[key], reference)
        assert {k: row[k] for k in want} == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert rows[0]["disc_auroc_kmer_lr"] > 0.8  # GC 0.7 vs real chr22 windows: told apart
    table = few_step.domain_table("dna", {"references": refs, "rows": rows + [{"label": "old", "summary": {}}]}, 60)
    line = next(ln for ln in table.splitlines() if ln.startswith("| MDLM"))
    r = rows[0]
    assert f"{r['disc_auroc_cnn']:.3f} ± {r['disc_se_cnn']:.3f} (p {r['disc_p_cnn']:.2g})" in line
    assert next(ln for ln in table.splitlines() if ln.startswith("| old")).count("—") == 2
    assert f"{refs[0]['disc_auroc_kmer_lr']:.3f}" in judging.floor_line(refs[0], "valid vs test")
    assert judging.disc_columns(pooled["real"][:5], reference) == {}  # too few for the folds: the cells read —


def test_reward_finetuning_rows_are_judged_against_the_disjoint_reference(monkeypatch):
    rf = importlib.import_module("reward_finetuning_rows")
    report = importlib.import_module("reward_finetuning_report")
    monkeypatch.setattr(rf, "loglik_per_base", lambda model, seqs: np.zeros(len(seqs)))
    rng = np.random.default_rng(1)
    designs, reference = iid(rng, 30, 50, gc=0.6), iid(rng, 40, 50)
    ctx = {"pretrained": None, "real_pos": reference, "gc_range": (0.0, 1.0), "ll_floor": -1.0,
           "sc": {"gc": 0.6}, "disc_reference": reference, "disc_settings": DiscriminatorSettings(**TINY)}
    row = rf.judge("gc", designs, ctx)
    want = direct(designs, reference)
    assert {k: row[k] for k in want} == pytest.approx(want, rel=1e-12, abs=1e-12)
    cells = report._frontier_cells({"method": "x", **row}, "gc")
    assert cells["k-mer LR AUROC ± SE (p)"].startswith(f"{row['disc_auroc_kmer_lr']:.3f} ± ")
    assert "disc_auroc_cnn" not in rf.judge("gc", designs, {**ctx, "disc_reference": []})  # no reference: none


def test_old_reward_finetuning_json_renders_with_dashes(tmp_path):
    rf = importlib.import_module("reward_finetuning")
    shutil.copy(REPO / "results" / "reward_finetuning_cpu.json", tmp_path / "old.json")
    assert "disc_auroc_cnn" not in (tmp_path / "old.json").read_text()
    assert rf.main(["--render", "--out", str(tmp_path / "old")]) == 0
    md = (tmp_path / "old.md").read_text()
    header = next(ln for ln in md.splitlines() if ln.startswith("method"))
    assert header.rstrip().endswith("CNN AUROC ± SE (p)  k-mer LR AUROC ± SE (p)")
    unguided = next(ln for ln in md.splitlines() if ln.startswith("unguided"))
    assert unguided.rstrip().endswith("—                   —") and "Real-vs-real floor" in md


def test_neural_oracle_found_and_scores_as_a_direct_call(tmp_path):
    import torch

    from dnadiff.eval import predict_proba
    from dnadiff.eval.conv_judge import ConvJudge, ConvJudgeConfig, save_judge

    assert judging.neural_oracle(str(tmp_path)) == (None, None) and judging.neural_oracle(None) == (None, None)
    torch.manual_seed(0)
    classes = ["HepG2", "K562", "GM12878", "hESC"]
    save_judge(tmp_path / "neural_oracle", ConvJudge(4, ConvJudgeConfig(channels=4, blocks=1), classes).eval(),
               {"role": "evaluation"})
    model, folder = judging.neural_oracle(str(tmp_path))
    assert folder == str(tmp_path / "neural_oracle")
    seqs, targets = iid(np.random.default_rng(2), 40, 80), [0] * 20 + [2] * 20
    hit = predict_proba(model, seqs).argmax(axis=1) == np.array(targets)
    assert judging.target_rate_of(model, seqs, targets, classes) == pytest.approx(hit.mean())
    top = predict_proba(model, seqs).argmax(axis=1)
    assert judging.success_rate(model, seqs, 0) == pytest.approx((top == 0).mean())  # dhs_design's HepG2 success
    assert judging.success_rate(None, seqs, 0) is None
    assert "neural evaluation oracle" in judging.realistic_rule(True)
    assert "k-mer LR evaluation oracle" in judging.realistic_rule(False)


def test_old_dhs_tables_render_with_dashes():
    """A design table from before the neural oracle and the discriminator (results/dhs_design_cpu.json stripped of
    their fields, as the tables of 4 Dec were) renders with dashes; dhs_cpu.json's carried rows too (its rows made
    since have both)."""
    design, bench = importlib.import_module("dhs_design"), importlib.import_module("dhs_benchmark")
    r = json.loads((REPO / "results" / "dhs_design_cpu.json").read_text())
    row = next(ln for ln in design.markdown(r, None).splitlines() if ln.startswith("| unguided"))
    assert row.count("—") == 0  # the committed table is judged by every judge
    old_fields = ("success_neural", "disc_auroc_cnn", "disc_se_cnn", "disc_p_cnn",
                  "disc_auroc_kmer_lr", "disc_se_kmer_lr", "disc_p_kmer_lr")
    for x in r["rows"]:
        for k in old_fields:
            x.pop(k, None)
    r["oracles"].update(neural=None, realistic_rule=judging.realistic_rule(False))
    md = design.markdown(r, None)
    assert "success (neural oracle)" in md and "k-mer LR evaluation oracle" in md and "Real-vs-real floor" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| unguided"))
    assert row.count("—") == 3  # neural success, CNN and k-mer LR AUROC
    r["oracles"].update(neural="n", realistic_rule=judging.realistic_rule(True))
    r["rows"][0].update(success_neural=0.625, disc_auroc_cnn=0.75, disc_se_cnn=0.02, disc_p_cnn=1e-5)
    md = design.markdown(r, None)
    assert "0.625" in md and "0.750 ± 0.020 (p 1e-05)" in md and "neural_oracle, a CNN on half_b" in md
    b = json.loads((REPO / "results" / "dhs_cpu.json").read_text())
    assert b["carried"]["rows"] and "cfg" in b["rows"]
    for part in b["summary"]["cfg"].values():  # the CFG row as its 3 Dec samples were scored
        if isinstance(part, dict):
            for k in ("target_neural", "disc_auroc_cnn", "disc_auroc_kmer_lr"):
                part.pop(k, None)
    if "cfg" not in b["carried"]["rows"]:
        b["carried"]["rows"].append("cfg")
    md = bench.markdown(b, {})  # the rows judged by the neural oracle show it, the stale carried row reads n/a
    assert "| conditional MDLM + CFG (w chosen on valid) | n/a | n/a | n/a | n/a | n/a |" in md
    assert "| conditional Mamba AR | n/a" not in md and "--roles neural" not in md  # the AR row was re-judged
    carried = next(ln for ln in md.splitlines() if ln.startswith("Rows carried"))
    stale = carried.split("Of them, ")[1].split(" scored before")[0]
    assert "conditional MDLM + CFG (w chosen on valid)" in stale and "Mamba AR" not in stale
    report = importlib.import_module("dhs_benchmark_report")
    unjudged = report.unjudged_rows(b)
    assert "cfg" in unjudged and "ar" not in unjudged and "real" not in unjudged
    line = report.carried_lines(b["carried"], report.ROW_LABELS, [])[0]  # every carried row re-judged
    assert "scored by every judge" in line and "n/a" not in line.split("Rows made by both")[0]
    b["oracles"]["neural"] = None  # a table from before the neural oracle
    md = bench.markdown(b, {})
    assert "under the neural evaluation oracle" in md and "--roles neural" in md
