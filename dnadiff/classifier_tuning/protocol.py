"""The Genomic Benchmarks protocol (tab. 7) every row follows, the neural heads (runs.py) and the
k-mer LR baseline (kmer_lr.py) alike: the data (stratified subsamples of the official splits), the
runs (seeds or folds), the hyperparameter chosen on validation, and the results table.

- `paper`: what the published "5-fold CV" is (docs/references.md "Genomic Benchmarks"): for each seed,
  a random 90/10 train/validation split of the official train set; train; keep the best
  validation-accuracy epoch; evaluate it on the official test set.
- `kfold`: true stratified k-fold cross-validation of the train set (every train example is in
  exactly one validation fold), same early stopping, each fold's model evaluated on the test set.
Runs are reported as mean ± range, the range being max − min over the runs (the paper's tab. 7 "±").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from dnadiff.data.splits import kfold_splits, paper_splits, stratified_subsample
from dnadiff.utils import markdown_table

if TYPE_CHECKING:
    from dnadiff.classifier_tuning.config import FinetuneConfig


def protocol_runs(cfg: FinetuneConfig, train_labels) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """(run name, training seed, train indices, valid indices) for the configured protocol."""
    p = cfg.protocol
    if p.name == "paper":
        splits = paper_splits(len(train_labels), list(p.seeds), p.valid_frac)
        runs = [(f"seed{s}", int(s), tr, va) for s, (tr, va) in zip(p.seeds, splits)]
    else:
        splits = kfold_splits(train_labels, p.folds, int(p.seeds[0]))
        runs = [(f"fold{f}", int(p.seeds[0]) + f, tr, va) for f, (tr, va) in enumerate(splits)]
    return runs[: p.max_runs] if p.max_runs else runs


def protocol_data(cfg: FinetuneConfig):
    """(benchmark root, tokenizer, train split, test split, kept train indices, kept test indices):
    the data every row of the protocol sees (neural heads and the k-mer LR baseline alike)."""
    from dnadiff.data.benchmarks import load_benchmark_split, resolve_benchmark
    from dnadiff.data.dhs import finetune_splits
    from dnadiff.tokenizers.dna import DNATokenizer

    tok = DNATokenizer()
    dhs = finetune_splits(cfg.data.dataset)  # `dhs` / `dhs:valid`: the table of `dnadiff data dhs`, no folder
    if dhs is not None:
        root, (train_all, test_all) = Path(cfg.data.dataset), dhs
    else:
        root = resolve_benchmark(cfg.data.dataset, download=cfg.data.download)
        train_all, test_all = load_benchmark_split(root, "train", tok), load_benchmark_split(root, "test", tok)
    train_keep = stratified_subsample(train_all.labels, cfg.data.max_train, cfg.data.subsample_seed)
    test_keep = stratified_subsample(test_all.labels, cfg.data.max_test, cfg.data.subsample_seed + 1)
    return root, tok, train_all, test_all, train_keep, test_keep


def select_on_validation(grid: dict[float, list[dict[str, Any]]], values: Sequence[float]) -> dict[str, Any]:
    """The hyperparameter (learning rate; C of the k-mer LR) with the highest mean best-validation
    accuracy over the runs (ties: first in `values`; test scores never enter the choice), and the
    result keys both rows share: lr_grid, val_acc_by_lr, selected_lr, runs (the chosen value's), summary.
    grid: value -> its runs as dicts with "val_acc" and "test" (metric -> score)."""
    from dnadiff.eval.classification import METRICS, summarize

    values = list(values)
    val_means = {v: float(np.mean([r["val_acc"] for r in rs])) for v, rs in grid.items()}
    chosen = max(values, key=lambda v: (val_means[v], -values.index(v)))
    runs = grid[chosen]
    summary = {m: summarize([r["test"][m] for r in runs]) for m in METRICS}
    summary["val_acc"] = summarize([r["val_acc"] for r in runs])
    return {"lr_grid": values, "val_acc_by_lr": {f"{v:g}": m for v, m in val_means.items()}, "selected_lr": chosen,
            "runs": runs, "summary": summary}


def hyperparameter(result: dict[str, Any]) -> str:
    """The name of the value chosen on validation, which a result keeps under `lr`: the learning rate of
    a neural row, C (inverse L2 strength) of the k-mer LR row (kmer_lr.py)."""
    return "C" if result.get("backbone") == "kmer_lr" else "lr"


def run_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-run rows plus a `mean ± range (max−min)` row, for the terminal and markdown tables."""
    from dnadiff.eval.classification import METRICS, RANGE_LABEL, format_range

    rows = []
    param = hyperparameter(result)
    for r in result["runs"]:
        rows.append({"run": r["run"], param: f"{r['lr']:g}", "best_epoch": r["best_epoch"], "val_acc": r["val_acc"],
                     **{m: r["test"][m] for m in METRICS}})
    s = result["summary"]
    rows.append({"run": f"mean ± {RANGE_LABEL}", param: f"{result['selected_lr']:g}", "best_epoch": "",
                 "val_acc": format_range(s["val_acc"]), **{m: format_range(s[m]) for m in METRICS}})
    return rows


def results_markdown(result: dict[str, Any]) -> str:
    head = (f"# {result['name']}: {Path(result['dataset']).name}\n\n"
            f"{result['protocol']} protocol, {len(result['runs'])} runs, {hyperparameter(result)} "
            f"{result['selected_lr']:g} "
            f"(chosen on validation from {result['lr_grid']}), {result['num_train']} train / "
            f"{result['num_test']} test, majority baseline {result['majority_baseline']:.3f}, "
            f"wall {result['wall_s']:.0f} s on {result['machine']}\n\n")
    return head + markdown_table(run_rows(result))
