"""Genomic Benchmarks: a neural fine-tuning recipe chosen on validation, against k-mer LR under the same
protocol and subsamples, and the learning curve (test accuracy vs training-set size) of both.

    # choose a recipe per data set on validation accuracy, score it, compare with k-mer LR (~1.5 h, 2 cores)
    python pipelines/genomic_benchmarks_recipe.py --init runs/cpu_hour/caduceus_mdlm/model
    # learning curve (250, 1,000, 4,000 training sequences) of the chosen recipe and k-mer LR (~1 h)
    python pipelines/genomic_benchmarks_recipe.py --learning-curve --init runs/cpu_hour/caduceus_mdlm/model
    python pipelines/genomic_benchmarks_recipe.py --dry-run                  # both modes, synthetic sets, seconds
    python pipelines/genomic_benchmarks_recipe.py --dry-run --learning-curve

Protocol (that of pipelines/genomic_benchmarks_table.py --scale cpu, so the numbers sit beside its table):
`dnadiff finetune`'s paper protocol, 3 seeds x a random 90/10 train/valid split of a stratified
subsample of --max-train training sequences (default 1,000), scored on a stratified subsample of
--max-test test sequences (500), each run's best-validation epoch scored on the test set.
Candidates (CANDIDATES below; each a set of finetune config overrides on top of the cpu protocol):
epochs (1, 3 or 5), the learning-rate grid (the protocol picks the lr on validation), full fine-tuning
vs head-only (a linear probe on frozen features), pooling (mean / last), reverse-complement averaging
(conjoin: the model's own RC handling at evaluation vs none) and RC augmentation. For each data set
the candidate with the best mean VALIDATION accuracy over the seeds is the recipe; only its test
accuracy is the reported neural row (the others' test values are kept in the JSON, not compared).
k-mer LR (k = 3..6, both strands, C chosen on validation) runs under the same protocol, seeds,
splits and subsamples.

--learning-curve: for n in --sizes (250, 1000, 4000), the chosen recipe of each data set (read from
the select run's JSON, or --recipe NAME for every set) and k-mer LR at --max-train n; same seeds,
test subsample and protocol.

--init: the pretrained model to fine-tune (a dnadiff model directory). Default: the cpu-hour MDLM
(runs/cpu_hour/caduceus_mdlm/model) when present, else the DNA perplexity pipeline's MDLM
(runs/dna_perplexity_cpu/caduceus_mdlm_seed0/model), else a tiny Caduceus-PS from scratch.
Writes results/genomic_benchmarks_recipe.{md,json} (--learning-curve: ..._learning_curve.*).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import common
import genomic_benchmarks_table as gb

from dnadiff.machine import describe_machine, load_average

REPO = Path(__file__).resolve().parent.parent

CANDIDATES = {
    "full_mean_e1": [],  # the cpu table's recipe: full fine-tuning, mean pooling, 1 epoch, lr 2e-3
    "full_mean_e3_lrgrid": ["train.epochs=3", "train.lr_grid=[1.0e-3,3.0e-3]"],
    "full_mean_e3_norcaug": ["train.epochs=3", "model.rc_aug=false"],
    "full_last_e3": ["train.epochs=3", "model.pooling=last"],
    "full_mean_e3_noconjoin": ["train.epochs=3", "model.conjoin=none"],
    "head_only_e3": ["train.epochs=3", "model.freeze_backbone=true", "train.lr_grid=[1.0e-2,3.0e-2]"],
    "full_mean_e5_lrgrid": ["train.epochs=5", "train.lr_grid=[1.0e-3,3.0e-3]"],
}
SIZES = (250, 1000, 4000)
DRY = {"sizes": (4, 12), "train": ("full_mean_e1", "head_only_e3")}
DEFAULT_INITS = [REPO / "runs" / "cpu_hour" / "caduceus_mdlm" / "model",
                 REPO / "runs" / "dna_perplexity_cpu" / "caduceus_mdlm_seed0" / "model"]


def base_overrides(args, dataset: str, name: str, out_root: Path, max_train: int, init: str | None) -> list[str]:
    over = [f"name={name}", f"out_dir={out_root}", f"data.dataset={json.dumps(dataset)}",
            f"data.max_train={max_train}", f"protocol.seeds={json.dumps(list(range(args.seeds)))}",
            "train.epochs=1", f"train.batch_size={args.batch_size}", "train.lr_grid=[2.0e-3]", "train.progress=false"]
    if args.max_test:
        over.append(f"data.max_test={args.max_test}")
    if init:
        over.append(f"model.init_from={json.dumps(init)}")
    else:
        over.append("model.preset=tiny")
    return over


def run_cell(args, dataset: str, row: str, extra: list[str], max_train: int, init: str | None, runs: Path,
             dry: bool) -> dict:
    """One (row, data set, size) cell under the protocol: summary, per-run validation and test accuracy."""
    from dnadiff.classifier_tuning import load_finetune_config, run_finetune

    ds = Path(dataset).name
    over = base_overrides(args, dataset, ds, runs / row / f"n{max_train}", max_train, init) + extra
    cfg = load_finetune_config(args.config or "finetune/finetune_base",
                               over + (gb.DRY_RUN_CAPS + ["train.lr_grid=[2.0e-3]"] if dry else []))
    print(f"== {row} on {ds} (n = {max_train})", flush=True)
    res = run_finetune(cfg, runs / row / f"n{max_train}" / ds)
    s = gb.with_full_range(res["summary"])
    val = [r["val_acc"] for r in res["runs"]]
    return {"row": row, "dataset": ds, "max_train": max_train, "overrides": extra, "selected_lr": res["selected_lr"],
            "valid_accuracy": sum(val) / len(val), "test": s["accuracy"], "mcc": s["mcc"], "wall_s": res["wall_s"],
            "runs": [{k: r[k] for k in ("seed", "best_epoch", "val_acc")}
                     | {"test_acc": r["test"]["accuracy"], "test_correct": r.get("test_correct", [])}
                     for r in res["runs"]]}


def pick_init(args) -> str | None:
    from dnadiff.errors import DnadiffError

    if args.init:
        if not Path(args.init).is_dir():
            raise DnadiffError(f"--init {args.init}: not a model directory")
        return args.init
    for p in DEFAULT_INITS:
        if (p / "config.json").is_file() or (p / "config.yaml").is_file():
            return str(p)
    return None


def paired_vs_kmer(neural: dict, kmer: dict) -> dict | None:
    """The neural cell's accuracy minus k-mer LR's, paired per test sequence (None: a cell without outcomes)."""
    from dnadiff.eval import paired_accuracy

    if not all(r.get("test_correct") for c in (neural, kmer) for r in c["runs"]):
        return None
    return paired_accuracy(neural["runs"], kmer["runs"])


def gap_line(ds: str, neural: dict, kmer: dict) -> str:
    from dnadiff.eval import describe_accuracy_difference

    gap = neural["test"]["mean"] - kmer["test"]["mean"]
    spread = (gb._range(neural["test"]) + gb._range(kmer["test"])) / 2
    verdict = "within the run spread" if abs(gap) <= spread else ("neural better" if gap > 0 else "k-mer LR better")
    line = (f"- {ds}: recipe `{neural['row']}` {neural['test']['mean']:.3f} vs k-mer LR {kmer['test']['mean']:.3f}: "
            f"{gap:+.3f} ({verdict}; spread {spread:.3f} = half the summed ranges)")
    d = paired_vs_kmer(neural, kmer)
    return line + (f"; paired: {describe_accuracy_difference(d, 'recipe', 'k-mer LR')}" if d else "")


def select(args, datasets: list[str], init: str | None, runs: Path, dry: bool) -> dict:
    from dnadiff.eval import format_range

    cells, chosen, lines, table = [], {}, [], []
    for ds in datasets:
        name = Path(ds).name
        todo = {k: CANDIDATES[k] for k in args.candidates}
        if dry:  # every candidate's config is checked; the shipped one and the head-only probe are trained
            from dnadiff.classifier_tuning import load_finetune_config

            for extra in CANDIDATES.values():
                load_finetune_config(args.config or "finetune/finetune_base",
                                     base_overrides(args, ds, name, runs, args.max_train, init) + extra)
            todo = {k: v for k, v in CANDIDATES.items() if k in DRY["train"]}
        cand = [run_cell(args, ds, row, extra, args.max_train, init, runs, dry) for row, extra in todo.items()]
        kmer = run_cell(args, ds, gb.KMER_ROW, ["model.backbone=kmer_lr", "model.init_from=null"], args.max_train,
                        None, runs, dry)
        best = max(cand, key=lambda c: c["valid_accuracy"])  # chosen on validation only
        chosen[name] = best["row"]
        cells += cand + [kmer]
        for c in cand:
            table.append({"data set": name, "candidate": c["row"], "valid acc (mean)": f"{c['valid_accuracy']:.3f}",
                          "lr": f"{c['selected_lr']:g}", "chosen": "yes" if c is best else "",
                          "test acc": format_range(c["test"]) if c is best else "(not read for the choice)"})
        table.append({"data set": name, "candidate": gb.KMER_ROW, "valid acc (mean)": f"{kmer['valid_accuracy']:.3f}",
                      "lr": f"C={kmer['selected_lr']:g}", "chosen": "baseline", "test acc": format_range(kmer["test"])})
        lines.append(gap_line(name, best, kmer))
    return {"cells": cells, "chosen": chosen, "table": table, "note": lines}


def learning_curve(args, datasets: list[str], init: str | None, runs: Path, dry: bool, sizes) -> dict:
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import format_range

    chosen = {}
    if args.recipe:
        if args.recipe not in CANDIDATES:
            raise DnadiffError(f"--recipe {args.recipe!r}: not a candidate ({', '.join(CANDIDATES)})")
        chosen = {Path(d).name: args.recipe for d in datasets}
    else:
        f = Path(args.from_select or REPO / "results" / "genomic_benchmarks_recipe.json")
        if dry:
            chosen = {Path(d).name: next(iter(CANDIDATES)) for d in datasets}
        elif not f.is_file():
            raise DnadiffError(f"--learning-curve: {f} not found (run the recipe selection first, or give --recipe)")
        else:
            chosen = json.loads(f.read_text()).get("chosen", {})
    cells, table = [], []
    for ds in datasets:
        name = Path(ds).name
        if name not in chosen:
            raise DnadiffError(f"--learning-curve: no chosen recipe for {name} (give --recipe)")
        row = {"data set": name, "row": f"{chosen[name]} (neural)"}
        krow = {"data set": name, "row": gb.KMER_ROW}
        drow = {"data set": name, "row": "neural − k-mer LR (paired per test sequence, ± SE)"}
        for n in sizes:
            c = run_cell(args, ds, chosen[name], CANDIDATES[chosen[name]], n, init, runs, dry)
            k = run_cell(args, ds, gb.KMER_ROW, ["model.backbone=kmer_lr", "model.init_from=null"], n, None, runs, dry)
            cells += [c, k]
            row[f"n={n}"], krow[f"n={n}"] = format_range(c["test"]), format_range(k["test"])
            d = paired_vs_kmer(c, k)
            drow[f"n={n}"] = f"{d['mean']:+.3f} ± {d['std_error']:.3f}" if d else "-"
        table += [row, krow, drow]
    return {"cells": cells, "chosen": chosen, "table": table, "note": []}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--init", default=None, help="model directory to fine-tune (default: see the docstring)")
    p.add_argument("--datasets", nargs="*", default=None, help="benchmark folders (default: the shared ones)")
    p.add_argument("--config", default=None, help="base finetune config (default finetune/finetune_base)")
    p.add_argument("--candidates", default=",".join(CANDIDATES),
                   help="comma-separated candidates of the selection (default: all of CANDIDATES)")
    p.add_argument("--learning-curve", action="store_true", help="accuracy vs training-set size (--sizes)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="training-set sizes of the learning curve")
    p.add_argument("--recipe", default=None, help="--learning-curve: this candidate for every set")
    p.add_argument("--from-select", default=None, help="--learning-curve: the selection run's JSON")
    p.add_argument("--max-train", type=int, default=1000)
    p.add_argument("--max-test", type=int, default=500)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="output stem (default results/genomic_benchmarks_recipe[...])")
    p.add_argument("--runs-dir", default=None, help="cell folders (default runs/genomic_benchmarks_recipe)")
    p.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                   help="one table from runs of one mode on different data sets (their JSON files; --out names it)")
    p.add_argument("--dry-run", action="store_true", help="synthetic sets, one step per run, no table written")
    args = p.parse_args(argv)
    import torch

    from dnadiff.errors import DnadiffError

    before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="gb_recipe_dry_run_") if args.dry_run else None
    try:
        return run(args, argv, Path(tmp.name) if tmp else None)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        torch.set_num_threads(before)
        if tmp:
            tmp.cleanup()


def run(args, argv, dry: Path | None) -> int:
    from dnadiff.errors import DnadiffError

    t0 = time.time()
    if args.combine:
        return write(args, combine(args.combine, common.command_line(__file__, argv)))
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    except ValueError:
        raise DnadiffError(f"--sizes {args.sizes!r}: expected comma-separated integers") from None
    if not sizes or min(sizes) <= 0:
        raise DnadiffError(f"--sizes {args.sizes!r}: positive training-set sizes needed")
    args.candidates = [c for c in args.candidates.split(",") if c]
    unknown = sorted(set(args.candidates) - set(CANDIDATES))
    if unknown or not args.candidates:
        raise DnadiffError(f"--candidates: unknown {', '.join(unknown) or '(none)'}; "
                           f"candidates: {', '.join(CANDIDATES)}")
    if dry is not None:
        datasets = args.datasets or gb.make_dry_run_sets(dry / "data", "cpu", per_class=(8, 4))
        args.max_train, args.max_test, args.seeds = 12, None, 1
        sizes = DRY["sizes"]
        init = args.init
    else:
        datasets = args.datasets or [str(d) for d in sorted(gb.SHARED_BENCHMARKS.iterdir()) if (d / "train").is_dir()]
        init = pick_init(args)
    runs = Path(args.runs_dir) if args.runs_dir else (
        dry / "runs" if dry else REPO / "runs" / "genomic_benchmarks_recipe")
    mode = learning_curve(args, datasets, init, runs, dry is not None, sizes) if args.learning_curve else \
        select(args, datasets, init, runs, dry is not None)
    payload = {"mode": "learning_curve" if args.learning_curve else "select",
               "command": common.command_line(__file__, argv), "wall_s": round(time.time() - t0, 1),
               "machine": describe_machine(), "load_average": load_average(),
               "init": init or "scratch (tiny Caduceus-PS)", "datasets": [Path(d).name for d in datasets],
               "protocol": f"paper protocol, {args.seeds} seeds x 90/10 split, {args.max_train} train (stratified "
                           f"subsample) / {args.max_test or 'all'} test sequences, batch {args.batch_size}",
               "sizes": list(sizes) if args.learning_curve else None,
               "candidates": {k: CANDIDATES[k] for k in args.candidates}, **mode}
    if dry is not None:
        print(render(payload))
        print(f"dry run: {len(mode['cells'])} cells trained one step in {payload['wall_s']:.1f} s; no table written")
        return 0
    return write(args, payload)


def render(payload: dict) -> str:
    from dnadiff.utils import markdown_table

    lc = payload["mode"] == "learning_curve"
    title = "learning curve (test accuracy vs training sequences)" if lc else \
        "a fine-tuning recipe chosen on validation vs k-mer LR"
    commands = payload["command"] if isinstance(payload["command"], list) else [payload["command"]]
    md = [f"# Genomic Benchmarks: {title}", "", *[f"- command: `{c}`" for c in commands],
          f"- wall time: {payload['wall_s'] / 60:.1f} min"
          + (f" (summed over the {len(payload['combined_from'])} runs combined)"
             if payload.get("combined_from") else "")
          + f"; machine: {payload['machine']}; {payload['load_average']}",
          f"- pretrained model: {payload['init']}", f"- protocol: {payload['protocol']}"
          + (f"; sizes {', '.join(map(str, payload['sizes']))}" if lc else ""),
          "- test accuracy: mean ± range (max − min) over runs", "", markdown_table(payload["table"]), "",
          *payload["note"]]
    return "\n".join(md) + "\n"


def combine(paths: list[str], command: str) -> dict:
    """--combine: the tables of runs of one mode on different data sets (e.g. one process per data set) as one."""
    from dnadiff.errors import DnadiffError

    parts = []
    for f in paths:
        try:
            parts.append(json.loads(Path(f).read_text()))
        except (OSError, ValueError) as exc:
            raise DnadiffError(f"--combine {f}: not a readable JSON result ({exc})") from None
    for f, p in zip(paths, parts):
        missing = [k for k in ("command", "wall_s", "init", "protocol", "datasets", "cells", "table", "note", "chosen")
                   if not isinstance(p, dict) or k not in p]
        if missing:
            raise DnadiffError(f"--combine {f}: not a result of this pipeline (no {', '.join(missing)})")
        # a JSON written before "mode" and "sizes" were recorded: read them off its cells
        p.setdefault("mode", "learning_curve" if any(k.startswith("n=") for r in p["table"] for k in r) else "select")
        p.setdefault("sizes", sorted({c["max_train"] for c in p["cells"]}) if p["mode"] == "learning_curve" else None)
    for key in ("mode", "init", "protocol", "sizes"):
        if len({json.dumps(p.get(key)) for p in parts}) > 1:
            raise DnadiffError(f"--combine: the runs differ in {key!r}: {', '.join(map(str, paths))}")
    out = dict(parts[0], command=[p["command"] for p in parts] + [command],
               wall_s=round(sum(p["wall_s"] for p in parts), 1), load_average=parts[-1]["load_average"],
               combined_from=[str(f) for f in paths])
    for key in ("datasets", "cells", "table", "note"):
        out[key] = [x for p in parts for x in p[key]]
    out["chosen"] = {k: v for p in parts for k, v in p["chosen"].items()}
    return out


def write(args, payload: dict) -> int:
    lc = payload["mode"] == "learning_curve"
    stem = Path(args.out or REPO / "results" / ("genomic_benchmarks_recipe" + ("_learning_curve" if lc else "")))
    text = render(payload)
    common.write_results(stem, payload, text)
    print(text)
    print(f"wrote {stem}.md and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
