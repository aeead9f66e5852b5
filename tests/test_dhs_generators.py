"""Issue 34 §2/§4: the DHS generators (per-class Markov chains, class-conditional Mamba AR, the shipped configs)
and pipelines/dhs_benchmark.py, on the 300-row fixture (tests/data/dhs/)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.conditioning import ClassConditional
from dnadiff.backbones.markov import MarkovChain, MarkovConfig, count_ngrams
from dnadiff.backbones.markov_classes import ClassMarkovChains, ClassMarkovConfig
from dnadiff.cli import main
from dnadiff.data import dhs
from dnadiff.data.dhs import CELL_TYPES
from dnadiff.errors import DnadiffError

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "data" / "dhs" / "dhs_fixture.txt"
TAG_CELL = dict(dhs.TAGS)


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """The fixture as the DHS store of a fresh dnadiff cache."""
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    data = FIXTURE.read_bytes()
    table = dhs.parse_dhs_table(data, str(FIXTURE), hashlib.sha256(data).hexdigest())
    dhs.store_dhs(table)
    return table


def fixture_sequences(split: str, cell: str) -> list[str]:
    import csv

    with open(FIXTURE, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    name = {"train": "training", "valid": "validation", "test": "test"}[split]
    return [r["sequence"] for r in rows if r["data_label"] == name and TAG_CELL[r["TAG"]] == cell]


# ----------------------------------------------------------------------------- per-class Markov chains


def test_class_markov_routes_each_row_to_its_class_chain():
    rng = np.random.default_rng(0)
    chains = []
    for order in (1, 2, 0):
        c = MarkovChain(MarkovConfig(order=order))
        chains.append(c.set_counts(count_ngrams(rng.integers(0, 4, (6, 40)), order + 1)))
    model = ClassMarkovChains(ClassMarkovConfig(orders=(1, 2, 0))).set_chains(chains)
    assert model.num_classes == 2 and model.null_label == 2
    x = torch.randint(7, 11, (5, 30))
    labels = torch.tensor([1, 0, 2, 1, 0])
    out = model(x, labels=labels)
    for r, c in enumerate(labels.tolist()):
        assert torch.equal(out[r], chains[c](x[r : r + 1])[0])
    assert torch.equal(model(x), chains[2](x))  # no label: the pooled chain
    assert torch.equal(model(x, labels=0), chains[0](x))
    with pytest.raises(DnadiffError, match=r"labels must be 5 class ids in 0..2"):
        model(x, labels=torch.tensor([0, 1, 2, 3, 0]))
    with pytest.raises(DnadiffError, match="every order must be in 0..12"):
        ClassMarkovConfig(orders=(1, 13))
    with pytest.raises(DnadiffError, match="chains of orders"):
        ClassMarkovChains(ClassMarkovConfig(orders=(2, 2, 0))).set_chains(chains)


def test_class_markov_fit_sample_and_reload(stored, tmp_path, capsys):
    from dnadiff.checkpoint import load

    run = tmp_path / "mk"
    assert main(["train", "experiments/dhs_markov", "model.overrides.max_order=4", "--run-dir", str(run),
                 "--threads", "1", "-q"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["classes"] == list(CELL_TYPES)
    for cell in [*CELL_TYPES, "(pooled)"]:  # the order kept is the validation argmin (ties: the smaller k)
        by = {int(k): v for k, v in metrics["per_class"][cell]["valid_bits_per_base_by_order"].items()}
        assert sorted(by) == [0, 1, 2, 3, 4]
        assert metrics["per_class"][cell]["order"] == min(by, key=lambda k: (by[k], k))
    model = load(run / "model")
    assert model.config.model.class_names == list(CELL_TYPES) and model.config.model.num_classes == 4
    chains = model.backbone.chains
    # unigram counts: both strands of the class's 25 training sequences (an independent count), pooled = sum
    for k, cell in enumerate(CELL_TYPES):
        text = "".join(fixture_sequences("train", cell))
        expect = [text.count(b) + text.count(c) for b, c in zip("ACGT", "TGCA")]
        assert chains[k].counts_1.tolist() == expect
    pooled = sum(chains[k].counts_1 for k in range(4))
    assert torch.equal(chains[4].counts_1, pooled)
    # sampling a class draws from that class's chain only: the same stream through the chain alone agrees
    out = tmp_path / "k562.fa"
    assert main(["sample", str(run / "model"), "--class", "K562", "--num", "3", "--length", "50", "--seed", "7",
                 "--out", str(out), "--threads", "1", "-q"]) == 0
    text = out.read_text()
    assert text.count(">") == 3 and "class=K562" in text
    x = model.generate(3, 50, generator=7, label="K562")
    from dnadiff.data.records import read_fasta

    assert model.decode(x) == [s for _, s in read_fasta(out)]
    with pytest.raises(DnadiffError, match="unknown class 'liver'"):
        model.generate(1, 10, label="liver")


def test_class_markov_refuses_unlabelled_data(tmp_path):
    code = main(["train", "experiments/dhs_markov", "data=chr22_sample", "--run-dir", str(tmp_path / "x"), "-q"])
    assert code == 2


# ----------------------------------------------------------------------------- conditional AR


def test_conditional_mamba_step_matches_forward():
    torch.manual_seed(0)
    b = ClassConditional(build_backbone("mamba", preset="tiny", vocab_size=12, cond_dim=8), 3).eval()
    x = torch.randint(7, 11, (3, 12))
    labels = torch.tensor([0, 2, 3])  # 3: the null label
    with torch.no_grad():
        full = b(x, labels=labels)
        cache = b.allocate_cache(3, 12)
        steps = torch.stack([b.step(x[:, i], cache, labels=labels) for i in range(12)], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    hyena = ClassConditional(build_backbone("hyena", preset="tiny", vocab_size=12, cond_dim=8, causal=True), 2)
    assert hyena.allocate_cache(2, 8) is None  # its step takes no label: samplers re-run the prefix


@pytest.mark.training
def test_class_conditional_ar_learns_each_class(tmp_path):
    """The AR objective trains a class-conditional Mamba through the label embedding; each class samples its own
    composition (7/8 vs 1/8 A in the data) through the cached autoregressive sampler."""
    from dnadiff.checkpoint import load
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train
    from helpers.benchmark_files import write_two_class_benchmark

    write_two_class_benchmark(tmp_path / "bench")  # 64 A-rich and 64 C-rich 16-mers per split
    cfg = load_config(RunConfig, "model/mamba_ar", [
        f"out_dir={tmp_path}", "name=ar", "data.kind=benchmark", f"data.benchmark={tmp_path / 'bench'}",
        "data.seq_len=16", "train.batch_size=16", "train.max_steps=60", "train.lr=1e-2", "train.val_every=30",
        "train.ckpt_every=30", "train.progress=false", "train.warmup_steps=5", "model.num_classes=2",
        "model.overrides.cond_dim=16", "train.threads=1"])
    model = load(train(cfg).model_dir)
    assert model.config.model.class_names == ["a_rich", "c_rich"]
    assert model.denoiser.allocate_cache(2, 16) is not None
    frac_a = {name: (model.generate(32, 16, generator=0, label=name) == 7).float().mean().item()
              for name in ("a_rich", "c_rich")}
    assert frac_a["a_rich"] > 0.6 and frac_a["c_rich"] < 0.4, frac_a


def test_shipped_dhs_configs():
    from dnadiff.config import RunConfig, load_config

    cfgs = {n: load_config(RunConfig, f"experiments/{n}") for n in ("dhs_cond_mdlm", "dhs_mdlm", "dhs_cond_ar",
                                                                     "dhs_markov")}
    assert all(c.data.kind == "dhs" and c.data.seq_len == 200 for c in cfgs.values())
    assert cfgs["dhs_cond_mdlm"].model.num_classes == 4 and cfgs["dhs_cond_mdlm"].model.label_dropout == 0.1
    assert cfgs["dhs_mdlm"].model.num_classes == 0 and cfgs["dhs_mdlm"].model.backbone == "caduceus"
    assert cfgs["dhs_cond_ar"].objective.name == "ar" and cfgs["dhs_cond_ar"].model.num_classes == 4
    for n in ("dhs_cond_mdlm", "dhs_mdlm", "dhs_cond_ar"):  # the stated CPU budget: 60 minutes on one core
        assert cfgs[n].train.max_minutes == 60 and cfgs[n].train.threads == 1
    # the DiT candidate of §2's backbone choice differs from the Caduceus row in the network only
    dit = load_config(RunConfig, "experiments/dhs_cond_mdlm_dit")
    cad = cfgs["dhs_cond_mdlm"]
    assert (dit.model.backbone, dit.model.preset, dit.model.overrides) == ("dit", "tiny", {"cond_dim": 32})
    for part in ("objective", "data", "train", "schedule", "sample"):
        assert getattr(dit, part) == getattr(cad, part), part
    assert (dit.model.num_classes, dit.model.label_dropout) == (cad.model.num_classes, cad.model.label_dropout)


def test_backbone_choice_scores_paired_conditional_bounds(stored):
    """benchmarks/dhs_backbone_choice.py: the same seed gives the same draws (a model against itself differs
    by exactly 0), the label reaches the bound (own label vs null label differ once the label embedding is
    non-zero), and the choice keeps Caduceus unless DiT is lower beyond 2 SE."""
    from dnadiff.backbones.dit import DiT
    from dnadiff.config import RunConfig, load_config
    from dnadiff.eval.paired import paired_difference
    from dnadiff.model import DiffusionModel
    from dnadiff.tokenizers import DNATokenizer

    spec = importlib.util.spec_from_file_location("dhs_backbone_choice", REPO / "benchmarks" / "dhs_backbone_choice.py")
    choice = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(choice)
    cfg = load_config(RunConfig, "experiments/dhs_cond_mdlm_dit")
    torch.manual_seed(0)
    backbone = ClassConditional(build_backbone("dit", "tiny", vocab_size=DNATokenizer().vocab_size, cond_dim=32), 4)
    assert isinstance(backbone.backbone, DiT)
    with torch.no_grad():
        backbone.label_embed.weight.mul_(100.0)  # a label the network cannot ignore
        for p in backbone.backbone.parameters():  # DiT's zero-initialised output layers: give them weight
            if p.dim() > 1 and float(p.abs().max()) == 0.0:
                p.normal_(0.0, 0.05)
    model = DiffusionModel(cfg, backbone.eval(), DNATokenizer())
    valid = dhs.DHSDataset(stored, "valid")
    a = choice.conditional_bound(model, valid, t_samples=2, batch_size=16)
    b = choice.conditional_bound(model, valid, t_samples=2, batch_size=16)
    null = choice.conditional_bound(model, valid, t_samples=2, batch_size=16, labelled=False)
    assert len(a["sequence_nats"]) == len(valid) and a["sequence_nats"] == b["sequence_nats"]
    d = paired_difference(a, b)
    assert d["mean"] == 0.0 and d["std_error"] == 0.0
    assert a["sequence_tokens"] == null["sequence_tokens"] and a["sequence_nats"] != null["sequence_nats"]
    assert choice.choose({"beyond_2se": True, "mean": -0.01})[0] == "dit"
    assert choice.choose({"beyond_2se": False, "mean": -0.01})[0] == "caduceus"
    assert choice.choose({"beyond_2se": True, "mean": 0.01})[0] == "caduceus"


# ----------------------------------------------------------------------------- the benchmark pipeline


def test_benchmark_helpers_exact():
    bench = importlib.import_module("dhs_benchmark")
    a, c = "ACGT" * 5, "CCCC" * 5
    train = bench.onehot_rows(bench.codes_matrix([a, c]))
    rc = bench.onehot_rows(bench.codes_matrix(["ACGT" * 5, "GGGG" * 5]))  # reverse complements of a, c
    mutated = "T" + a[1:]  # 19 of 20 equal
    assert bench.max_identity([a, mutated, "GGGG" * 5, "NNNN" * 5], train, rc).tolist() == [1.0, 0.95, 1.0, 0.0]
    assert bench.mean_pairwise_identity([a, a, c]) == pytest.approx((1.0 + 0.25 + 0.25) / 3)
    assert bench.distinct_kmers(["AAAAAAA", "CCCCCCC"], 6) == 2 / 4096
    # >= 50 bp exact matches, either strand, against dna_metrics.longest_matches as the reference
    from dnadiff.eval.dna_metrics import longest_matches, reverse_complement

    rng = np.random.default_rng(1)
    train_seqs = ["".join(rng.choice(list("ACGT"), 120)) for _ in range(5)]
    fresh = "".join(rng.choice(list("ACGT"), 120))
    samples = [fresh[:30] + train_seqs[2][10:60] + fresh[80:],  # 50 bp of a training sequence
               fresh[:31] + train_seqs[2][10:59] + fresh[80:],  # 49 bp
               fresh[:20] + reverse_complement(train_seqs[4])[0:70] + fresh[90:],  # 70 bp, minus strand
               fresh[:50] + "N" + train_seqs[1][51:]]  # 69 bp after an N
    index = bench.training_kmer_index(train_seqs)
    expect = longest_matches(samples, train_seqs, both_strands=True) >= 50
    assert bench.shares_kmer(samples, index).tolist() == expect.tolist() == [True, False, True, True]


@pytest.mark.training
def test_benchmark_tiny_scale(tmp_path):
    import torch

    from dnadiff.eval.conv_judge import ConvJudge, ConvJudgeConfig, save_judge

    bench = importlib.import_module("dhs_benchmark")
    torch.manual_seed(0)  # a neural evaluation oracle beside the tiny k-mer LR one (issue 46): its own table
    save_judge(tmp_path / "b" / "oracles" / "neural_oracle",
               ConvJudge(4, ConvJudgeConfig(channels=4, blocks=1), list(CELL_TYPES)).eval(), {"role": "evaluation"})
    assert bench.main(["--scale", "tiny", "--out", str(tmp_path / "b")]) == 0
    r = json.loads((tmp_path / "b" / "dhs_tiny.json").read_text())
    assert r["oracles"]["neural"].endswith("neural_oracle")
    assert all(0.0 <= r["summary"][row]["overall"]["target_neural"]["mean"] <= 1.0 for row in bench.ROWS)
    assert r["rows"] == list(bench.ROWS) and r["seeds"] == [0, 1]
    for row in bench.ROWS:
        s = r["summary"][row]
        for part in [*CELL_TYPES, "overall"]:
            assert 0.0 <= s[part]["target"]["mean"] <= 1.0 and s[part]["target"]["n"] == 2
            assert 0.0 <= s[part]["js_k6"]["mean"] <= 1.0
        for e in r["per_seed"][row]:
            assert {c: e["per_class"][c]["n"] for c in CELL_TYPES} == {c: 4 for c in CELL_TYPES}
            assert e["overall"]["n"] == 16
    assert set(r["cfg_weights"]["chosen"].values()) <= {0.0, 1.0}
    assert set(r["cfg_chr22_weights"]["chosen"].values()) <= {0.0, 1.0}  # the chr22-started row: same protocol
    assert r["models"]["cfg_chr22"]["init_from"] == r["chr22_model"]
    assert r["chr22_model"].endswith("/b/models/chr22_start/model")  # trained a step here (the payload's paths are
    # portable: $TMPDIR for the temporary folder)
    md = (tmp_path / "b" / "dhs_tiny.md").read_text()
    assert "Target-cell-type rate" in md and "conditional Mamba AR" in md and "under the neural evaluation" in md
    for png in ("dhs_tiny_markers.png", "dhs_tiny_target_rate.png"):
        assert (tmp_path / "b" / png).is_file()
    # a rerun keeps each sample file whose command and model are unchanged, and remakes it when the model changed
    fasta = tmp_path / "b" / "samples" / "markov_seed0_HepG2.fa"
    made = fasta.read_text()
    assert bench.main(["--scale", "tiny", "--out", str(tmp_path / "b"), "--rows", "markov", "--seeds", "1"]) == 0
    part = json.loads((tmp_path / "b" / "partial_seeds_1.json").read_text())  # a seed subset: not the table
    assert part["seeds"] == [1] and part["generation"]["markov"] == r["generation"]["markov"][1:]
    assert bench.main(["--scale", "tiny", "--out", str(tmp_path / "b"), "--rows", "markov"]) == 0
    again = json.loads((tmp_path / "b" / "dhs_tiny.json").read_text())
    assert fasta.read_text() == made
    assert again["generation"]["markov"] == r["generation"]["markov"]  # the first run's commands and wall times
    assert again["summary"]["markov"]["overall"]["js_k6"] == r["summary"]["markov"]["overall"]["js_k6"]
    stamp = fasta.with_suffix(".done.json")
    record = json.loads(stamp.read_text())
    record["stamp"]["model"] = "another model"
    stamp.write_text(json.dumps(record))
    before = fasta.stat().st_mtime_ns
    assert bench.main(["--scale", "tiny", "--out", str(tmp_path / "b"), "--rows", "markov"]) == 0
    assert fasta.stat().st_mtime_ns != before and json.loads(stamp.read_text())["stamp"]["model"] != "another model"


@pytest.mark.slow  # 20+ s; test_benchmark_tiny_scale builds and runs every row already
@pytest.mark.training
def test_benchmark_cpu_dry_run_builds_every_row(stored, tmp_path, capsys):
    bench = importlib.import_module("dhs_benchmark")
    assert bench.main(["--scale", "cpu", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: rows real, markov, ar, bd3, cfg, cfg_chr22, cg built" in out
    assert "model.init_from=" in out  # cfg_chr22 starts from the chr22 MDLM trained a step here


def test_benchmark_chr22_row_is_skipped_without_a_chr22_model(tmp_path, monkeypatch, capsys):
    steps = importlib.import_module("dhs_benchmark_steps")
    monkeypatch.chdir(tmp_path)  # no runs/cpu_hour/caduceus_mdlm/model here
    assert steps.chr22_start(None, tmp_path, False, 1, print) is None
    assert "cfg_chr22: skipped: no chr22 MDLM at runs/cpu_hour/caduceus_mdlm/model" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--chr22-model nowhere: not a dnadiff model directory"):
        steps.chr22_start("nowhere", tmp_path, False, 1, print)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert steps.chr22_start(str(tmp_path / "m"), tmp_path, False, 1, print) == str(tmp_path / "m")


def test_benchmark_carry_from_adds_an_earlier_runs_rows_only_when_the_real_row_scores_alike(tmp_path):
    steps = importlib.import_module("dhs_benchmark_steps")
    report = importlib.import_module("dhs_benchmark_report")

    def run(rows: list[str], shift: float, real_shift: float = 0.0) -> dict:
        cells = ["GM12878", "HepG2", "K562", "hESC"]

        def stat(row):
            return {"mean": 0.5 + (real_shift if row == "real" else shift), "min": 0.4, "max": 0.6}

        summary = {row: {**{p: {"target": stat(row)} for p in [*cells, "overall"]},
                         "markers": {c: {m: stat(row) for m in cells} for c in cells}} for row in rows}
        return {"scale": "cpu", "seeds": [0, 1, 2], "num_per_cell_type": 256, "data": {"sha256": "abc"},
                "cell_types": cells, "command": f"run of {','.join(rows)}", "rows": rows, "summary": summary,
                "per_seed": {row: [] for row in rows}, "generation": {row: [] for row in rows},
                "models": {row: {"m": row} for row in rows if row != "real"},
                "cfg_weights": {"chosen": {"K562": 1.0}} if "cfg" in rows else None,
                "oracles": {"reward_meta": {"fingerprint": f"r{shift}"}, "evaluation_meta": {"fingerprint": "e"}}}

    old = tmp_path / "old.json"
    # the earlier run named a cell type hESCT0 (renamed hESC since): its carried rows get today's name
    earlier = steps.renamed(run(["real", "markov", "ar", "cfg"], 0.0), {"hESC": "hESCT0"})
    old.write_text(json.dumps({**earlier, "cell_types": ["GM12878", "HepG2", "K562", "hESCT0"]}))
    order = ("real", "markov", "ar", "bd3", "cfg")
    new = steps.carry_rows(run(["real", "markov", "bd3"], 0.25), str(old), order, lambda *_: None)
    assert new["rows"] == ["real", "markov", "ar", "bd3", "cfg"]  # the pipeline's row order
    assert new["models"]["ar"] == {"m": "ar"} and new["cfg_weights"] == {"chosen": {"K562": 1.0}}
    assert new["summary"]["ar"]["overall"]["target"]["mean"] == 0.5  # carried as it was
    assert new["summary"]["bd3"]["overall"]["target"]["mean"] == 0.75  # this run's own
    assert new["carried"]["rows"] == ["ar", "cfg"]
    assert new["carried"]["check"]["markov"] == {"metrics": 1, "max_abs_diff": 0.25, "worst_metric": "target"}
    assert new["carried"]["check"]["real"]["max_abs_diff"] == 0.0
    assert new["carried"]["oracle_fingerprints"]["reward"] == {"there": "r0.0", "here": "r0.25"}
    assert "hESC" in new["summary"]["ar"] and "hESCT0" not in new["summary"]["ar"]  # renamed since the old run
    text = "\n".join(report.carried_lines(new["carried"], report.ROW_LABELS))
    assert "conditional Mamba AR, conditional MDLM + CFG" in text and "max |difference| 0.25" in text
    assert new["carried"]["earlier"] is None and "Of those" not in text
    # carried twice: the rows the middle run had itself carried keep the command that made them
    middle = tmp_path / "middle.json"
    middle.write_text(json.dumps(new))
    again = steps.carry_rows(run(["real", "ar"], 0.0), str(middle), order, lambda *_: None)
    assert again["carried"]["rows"] == ["markov", "bd3", "cfg"]
    assert again["carried"]["earlier"] == {"command": "run of real,markov,ar,cfg", "earlier": None, "rows": ["cfg"]}
    text = "\n".join(report.carried_lines(again["carried"], report.ROW_LABELS))
    made = "Of those, conditional MDLM + CFG (w chosen on valid) were made by `run of real,markov,ar,cfg`."
    assert text.count(made) == 1
    # the real row scored differently: other judges, no shared table (a 1e-4 drift in 0.5 is within tolerance)
    assert steps.carry_rows(run(["real"], 0.0, 1e-4), str(old), order, lambda *_: None)["rows"][0] == "real"
    with pytest.raises(SystemExit, match="real row's overall target is 0.5 there and 0.51 here: the judges score"):
        steps.carry_rows(run(["real"], 0.0, 0.01), str(old), order, lambda *_: None)
    with pytest.raises(SystemExit, match="both runs need the real row"):
        steps.carry_rows(run(["markov"], 0.0), str(old), order, lambda *_: None)
    with pytest.raises(SystemExit, match="--carry-from .*nope.json: cannot read it as JSON"):
        steps.carry_rows(run(["real"], 0.0), str(tmp_path / "nope.json"), order, lambda *_: None)


def test_benchmark_from_json_rerenders_the_page_without_scoring(tmp_path, capsys):
    """--from-json writes a finished run's page and PNGs again from its JSON (no data, no models needed);
    what is not a dhs_benchmark JSON is one line, exit 2, nothing written."""
    bench = importlib.import_module("dhs_benchmark")
    r = json.loads((REPO / "results" / "dhs_cpu.json").read_text())
    r["summary"]["cg"]["overall"]["target_neural"]["mean"] = 0.1234  # what the page must now show
    given = tmp_path / "run.json"
    given.write_text(json.dumps(r))
    assert bench.main(["--from-json", str(given), "--results", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out.md").read_text()
    neural = md.split("under the neural evaluation oracle")[1].split("##")[0]
    assert "| unconditional MDLM + classifier guidance (reward classifier) |" in neural
    spread = r["summary"]["cg"]["overall"]["target_neural"]["range"]
    row = neural.split("classifier guidance (reward classifier) |")[1].splitlines()[0]
    assert row.endswith(f"| 0.123 ± {spread:.3f} |")
    assert json.loads((tmp_path / "out.json").read_text())["summary"] == r["summary"]
    assert (tmp_path / "out_target_rate.png").is_file() and (tmp_path / "out_markers.png").is_file()
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": ["real"], "summary": {}}))
    assert bench.main(["--from-json", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: --from-json {bad}: not a dhs_benchmark results JSON (no ")
    assert not (tmp_path / "bad.md").exists()
