"""Fine-tuning protocols: split logic, configs, and a short real run that beats the majority class."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dnadiff.classifier_tuning.config import FinetuneConfig, load_finetune_config
from dnadiff.classifier_tuning.protocol import protocol_runs
from dnadiff.config import CONFIG_ROOT
from dnadiff.data.splits import kfold_splits, paper_splits, stratified_subsample
from dnadiff.errors import DnadiffError


def test_paper_splits_disjoint_90_10_deterministic():
    n = 1003
    splits = paper_splits(n, [0, 1, 2], 0.1)
    for train, valid in splits:
        assert len(valid) == 100 and len(train) == n - 100
        assert len(np.intersect1d(train, valid)) == 0
        assert np.array_equal(np.union1d(train, valid), np.arange(n))
    again = paper_splits(n, [0, 1, 2], 0.1)
    for (t1, v1), (t2, v2) in zip(splits, again):
        assert np.array_equal(t1, t2) and np.array_equal(v1, v2)
    assert not np.array_equal(splits[0][1], splits[1][1])  # seeds give different splits


def test_kfold_stratified_each_example_validated_once():
    rng = np.random.default_rng(0)
    labels = rng.choice(3, size=517, p=[0.6, 0.3, 0.1])
    folds = kfold_splits(labels, 5, seed=7)
    seen = np.zeros(len(labels), dtype=int)
    sizes = []
    for train, valid in folds:
        assert len(np.intersect1d(train, valid)) == 0
        assert np.array_equal(np.union1d(train, valid), np.arange(len(labels)))
        seen[valid] += 1
        sizes.append(len(valid))
        for c in range(3):  # per-class counts differ from the ideal share by less than one
            assert abs((labels[valid] == c).sum() - (labels == c).sum() / 5) < 1
    assert (seen == 1).all()
    assert max(sizes) - min(sizes) <= 1
    again = kfold_splits(labels, 5, seed=7)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    with pytest.raises(DnadiffError):
        kfold_splits(labels[:3], 5)


def test_stratified_subsample_and_protocol_runs():
    labels = np.array([0] * 700 + [1] * 300)
    idx = stratified_subsample(labels, 100, seed=1)
    assert len(idx) == 100 and (labels[idx] == 0).sum() == 70 and len(np.unique(idx)) == 100
    assert np.array_equal(stratified_subsample(labels, None), np.arange(1000))
    cfg = load_finetune_config(None, ["protocol.name=kfold", "protocol.folds=4", "protocol.max_runs=3"])
    runs = protocol_runs(cfg, labels)
    assert [r[0] for r in runs] == ["fold0", "fold1", "fold2"] and [r[1] for r in runs] == [0, 1, 2]
    paper = protocol_runs(load_finetune_config(None, ["protocol.seeds=[3, 5]"]), labels)
    assert [(r[0], r[1], len(r[3])) for r in paper] == [("seed3", 3, 100), ("seed5", 5, 100)]


MY_CONFIGS = sorted([*Path(CONFIG_ROOT, "finetune").glob("*.yaml"),
                     Path(CONFIG_ROOT, "experiments", "tiny_finetune.yaml")])


@pytest.mark.parametrize("path", MY_CONFIGS, ids=lambda p: p.name)
def test_finetune_configs_load(path):
    cfg = load_finetune_config(path)
    assert isinstance(cfg, FinetuneConfig)
    assert "finetune" in path.name  # tests/test_configs_load.py skips these by name


def test_eight_genomic_benchmarks_configs():
    names = {load_finetune_config(p).data.dataset for p in MY_CONFIGS if p.parent.name == "finetune"}
    assert names >= {"dummy_mouse_enhancers_ensembl", "demo_coding_vs_intergenomic_seqs", "demo_human_or_worm",
                     "human_enhancers_cohn", "human_enhancers_ensembl", "human_ensembl_regulatory",
                     "human_nontata_promoters", "human_ocr_ensembl"}


def test_config_errors_name_the_key():
    with pytest.raises(DnadiffError, match="protocol.name"):
        load_finetune_config(None, ["protocol.name=loo"])
    with pytest.raises(DnadiffError, match="train.lr_grid"):
        load_finetune_config(None, ["train.lr_grid=[]"])
    with pytest.raises(DnadiffError, match="unknown config key"):
        load_finetune_config(None, ["train.learning_rate=1e-3"])  # train.lr is a key (as in `dnadiff train`)


def test_cli_bad_dataset_is_a_one_line_error(tmp_path, capsys):
    from dnadiff.cli import main

    rc = main(["finetune", "experiments/tiny_finetune", f"data.dataset={tmp_path}/nope", "--out", str(tmp_path)])
    assert rc == 2 and "benchmark folder not found" in capsys.readouterr().err


@pytest.mark.training
def test_bundled_subset_beats_majority_baseline(tmp_path, capsys):
    """4 epochs of a tiny HyenaDNA on the 500 repeats-vs-unique windows bundled with the package (the
    config's default data), end to end through the CLI."""
    from dnadiff.cli import main

    out = tmp_path / "ft"
    rc = main(["finetune", "experiments/tiny_finetune", "model.backbone=hyena", "protocol.seeds=[0]",
               "train.batch_size=16", "train.lr_grid=[3e-3]", "train.epochs=4", "--out", str(out), "--no-progress"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["dataset"].endswith("assets/benchmarks/human_chr22_repeats")
    assert res["majority_baseline"] == 0.5 and res["num_test"] == 120 and res["num_train"] == 500
    run = res["runs"][0]
    assert run["num_train"] == 450 and run["num_valid"] == 50 and run["steps"] == 4 * 29
    assert run["test"]["accuracy"] > res["majority_baseline"] + 0.08
    assert run["test"]["mcc"] > 0.1 and run["test"]["auroc"] > 0.6
    assert (out / "logs" / "lr0.003" / "seed0" / "metrics.csv").is_file()
    assert "mean ± range (max−min)" in capsys.readouterr().out


@pytest.mark.training
@pytest.mark.slow
def test_one_epoch_beats_majority_baseline(shared_data, tmp_path, capsys):
    """1 epoch of a tiny HyenaDNA on 2,000 repeats-vs-unique windows of the full set, through the CLI."""
    from dnadiff.cli import main

    out = tmp_path / "ft"
    rc = main(["finetune", "experiments/tiny_finetune", "model.backbone=hyena", "data.max_train=2000",
               "data.max_test=400", "protocol.seeds=[0]", "train.batch_size=16", "train.lr_grid=[3e-3]",
               "--dataset", str(shared_data / "benchmarks" / "human_chr22_repeats"), "--out", str(out),
               "--no-progress"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["majority_baseline"] == 0.5 and res["num_test"] == 400 and res["num_train"] == 2000
    run = res["runs"][0]
    assert run["num_train"] == 1800 and run["num_valid"] == 200 and run["steps"] == 113
    assert run["test"]["accuracy"] > res["majority_baseline"] + 0.08
    assert run["test"]["mcc"] > 0.1 and run["test"]["auroc"] > 0.6
    assert (out / "logs" / "lr0.003" / "seed0" / "metrics.csv").is_file()
    assert "mean ± range (max−min)" in (out / "results.md").read_text()
    assert "mean ± range (max−min)" in capsys.readouterr().out


@pytest.mark.training
def test_genomic_benchmarks_pipeline_smoke(benchmarks_dir, tmp_path):
    """pipelines/genomic_benchmarks_table.py --scale cpu end to end with one scratch cell (tiny sizes)."""
    import genomic_benchmarks_table as gb  # pipelines/ is on sys.path in the tests (pyproject.toml)

    out = tmp_path / "gb"
    rc = gb.main(["--scale", "cpu", "--config", "experiments/tiny_finetune", "--models-dir", str(tmp_path / "none"),
                  "--datasets", str(benchmarks_dir / "leptospira_coding_vs_intergenic"), "--max-train", "200",
                  "--max-test", "100", "--epochs", "1", "--seeds", "1", "--out", str(out),
                  "--runs-dir", str(tmp_path / "runs")])
    assert rc == 0
    res = json.loads(out.with_suffix(".json").read_text())
    assert list(res["table"]) == ["scratch", "k-mer LR"] and res["datasets"] == ["leptospira_coding_vs_intergenic"]
    assert res["cells"][0]["summary"]["accuracy"]["n"] == 1 and "command" in res and res["wall_s"] > 0
    md = out.with_suffix(".md").read_text()
    assert "| scratch |" in md and "wall time" in md


def test_init_from_model_dir_copies_weights_per_run(tmp_path):
    """model.init_from: every run starts from the saved weights (a fresh copy), scratch re-initialises."""
    import torch

    from dnadiff.backbones import build_backbone
    from dnadiff.classifier_tuning.runs import (
        build_backbone_template,
        classifier_factory,
    )
    from dnadiff.config import RunConfig, from_dict
    from dnadiff.modelio.model_dir import save_model_dir

    torch.manual_seed(0)
    bb = build_backbone("caduceus", preset="tiny", vocab_size=12)
    save_model_dir(tmp_path / "m", from_dict(RunConfig, {"model": {"backbone": "caduceus", "preset": "tiny"}}), bb)
    cfg = load_finetune_config("experiments/tiny_finetune", [f"model.init_from={tmp_path / 'm'}"])
    make = classifier_factory(cfg, build_backbone_template(cfg), 2)
    a, b = make(), make()
    assert a.conjoin == "ps" and a.training
    for k, v in bb.state_dict().items():
        assert torch.equal(a.backbone.state_dict()[k], v)
    a.backbone.backbone.embeddings.word_embeddings.embedding.weight.data.zero_()  # runs do not share weights
    assert not torch.equal(b.backbone.backbone.embeddings.word_embeddings.embedding.weight,
                           a.backbone.backbone.embeddings.word_embeddings.embedding.weight)
    scratch = load_finetune_config("experiments/tiny_finetune")
    torch.manual_seed(1)
    s1 = classifier_factory(scratch, None, 2)()
    torch.manual_seed(2)
    s2 = classifier_factory(scratch, None, 2)()
    assert not torch.equal(s1.head.dense.weight, s2.head.dense.weight)
    with pytest.raises(DnadiffError, match="init_from"):
        build_backbone_template(load_finetune_config(None, [f"model.init_from={tmp_path / 'missing'}"]))


def _variable_length_benchmark(root: Path, n_per_class: int = 24, seed: int = 0) -> Path:
    """A tiny 2-class set in the genomic-benchmarks layout with lengths 8..60 (heavy batch padding):
    class `gc` draws bases GC-rich, class `at` AT-rich."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_per_class), ("test", n_per_class // 2)):
        for cls, p in (("at", [0.35, 0.15, 0.15, 0.35]), ("gc", [0.15, 0.35, 0.35, 0.15])):
            d = root / split / cls
            d.mkdir(parents=True)
            for i in range(n):
                length = int(rng.integers(8, 61))
                (d / f"{i}.txt").write_text("".join(rng.choice(list("ACGT"), size=length, p=p)))
    return root


@pytest.mark.training
@pytest.mark.parametrize("backbone,preset", [("caduceus", "tiny"), ("hyena", "tiny")])
def test_finetune_metrics_do_not_depend_on_eval_batch_size_or_order(tmp_path, backbone, preset):
    """Validation (which picks the best epoch) and test metrics are the same whether
    the eval batches hold 1 or 16 sequences (different padding), and in any order."""
    import torch
    from torch.utils.data import DataLoader

    from dnadiff.classifier_tuning.runs import (
        build_backbone_template,
        classifier_factory,
        run_finetune,
    )
    from dnadiff.data.benchmarks import (
        SequenceClassificationDataset,
        load_benchmark_split,
        pad_batch,
    )
    from dnadiff.training.classifier_loop import predict_logits

    data = _variable_length_benchmark(tmp_path / "bench")
    results = []
    for eval_bs in (1, 16):
        cfg = load_finetune_config("experiments/tiny_finetune", [
            f"data.dataset={data}", "data.max_train=null", "data.max_test=null", f"model.backbone={backbone}",
            f"model.preset={preset}", "protocol.seeds=[0]", "train.epochs=2", "train.batch_size=8",
            f"train.eval_batch_size={eval_bs}", "train.progress=false", "train.lr_grid=[3e-3]"])
        results.append(run_finetune(cfg, tmp_path / f"out{eval_bs}", echo=lambda *a: None))
    a, b = (r["runs"][0] for r in results)
    assert [h["val_acc"] for h in a["history"]] == [h["val_acc"] for h in b["history"]]
    for h_a, h_b in zip(a["history"], b["history"]):
        assert abs(h_a["val_loss"] - h_b["val_loss"]) < 1e-5
    assert a["best_epoch"] == b["best_epoch"]
    for k, v in a["test"].items():
        assert abs(v - b["test"][k]) < 1e-6, k
    # per test sequence outcomes (for paired comparisons of rows): the same in both, and they add up to accuracy
    assert a["test_correct"] == b["test_correct"] and set(a["test_correct"]) <= {0, 1}
    assert sum(a["test_correct"]) / len(a["test_correct"]) == pytest.approx(a["test"]["accuracy"], abs=1e-9)
    # the same model's test logits: batch 1 in order vs batch 7 in reverse order
    torch.manual_seed(0)
    model = classifier_factory(cfg, build_backbone_template(cfg), 2)().eval()
    test = SequenceClassificationDataset(load_benchmark_split(data, "test"))
    collate = lambda items: pad_batch(items, 4)  # noqa: E731
    one, _ = predict_logits(model, DataLoader(test, batch_size=1, collate_fn=collate))
    rev = torch.utils.data.Subset(test, list(range(len(test)))[::-1])
    many, _ = predict_logits(model, DataLoader(rev, batch_size=7, collate_fn=collate))
    torch.testing.assert_close(many.flip(0), one, rtol=0, atol=1e-5)


def test_finetune_threads_are_split_between_its_processes(monkeypatch):
    """train.threads null: the free cores divided among the node's processes, as `dnadiff train` does
    (each of 2 DDP processes took every core before)."""
    import torch

    import dnadiff.machine
    from dnadiff.classifier_tuning import runs as finetune_protocol

    seen = []
    monkeypatch.setattr(dnadiff.machine, "available_cores", lambda: 8)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: all 8 cores are free
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(finetune_protocol, "_run_finetune", lambda *a, **k: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    for devices in (1, 2):
        finetune_protocol.run_finetune(load_finetune_config(None, [f"train.devices={devices}"]))
    finetune_protocol.run_finetune(load_finetune_config(None, ["train.devices=2", "train.threads=3"]))
    assert seen == [8, 4, 3] and torch.get_num_threads() == before
