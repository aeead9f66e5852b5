"""The DHS 4-way cell-type classification benchmark with a learning curve (issue 34 §6).

    python pipelines/dhs_classification.py --scale cpu --rows kmer_lr              # k-mer LR rows, a few CPU-min
    python pipelines/dhs_classification.py --scale cpu --rows scratch,pretrained --resume   # neural rows
    python pipelines/dhs_classification.py --scale cpu --table-only                # the table of the rows done
    python pipelines/dhs_classification.py --scale cpu --dry-run                    # every method built, one step
    python pipelines/dhs_classification.py --scale tiny                             # the 300-row fixture (tests)

Needs the DHS table in dnadiff's cache (`dnadiff data dhs` once); --scale tiny builds a temporary cache from
tests/data/dhs/dhs_fixture.txt and trains its own tiny "pretrained" MDLM on it (one step).

Rows (methods x training-set sizes): the same 4-way task (GM12878 / HepG2 / K562 / hESC, 200 bp) through
`dnadiff finetune finetune/finetune_dhs` with
- kmer_lr: the k-mer logistic regression (k = 3-6 frequencies of both strands; dnadiff/classifier_tuning/kmer_lr.py);
- scratch: a Caduceus classifier trained from random weights, with the pretrained model's exact backbone
  configuration (its config passed as model.overrides);
- pretrained: the same classifier started from the DHS MDLM of pipelines/dhs_benchmark.py (`--pretrained`,
  default runs/dhs_benchmark/models/cg/model: the unconditional Caduceus-PS MDLM of
  configs/experiments/dhs_mdlm.yaml, trained on the DHS training split), `model.init_from`;
each at 1,000 / 4,000 / all training sequences: `data.max_train=N`, a stratified random subset of the training
split (dnadiff.data.splits.stratified_subsample, seed data.subsample_seed = 0; the same subset for every method).

Protocol (issue 34: every setting chosen on the validation split, the test split read once per row): each run is
`dnadiff finetune ... data.dataset=dhs:valid protocol.seeds=[0]`: the run trains on the subset less a hold-out
(protocol.valid_frac = min(0.1, 1000 / N): a neural run keeps its best epoch on it, the k-mer LR is fitted on the
rest) and reports its scores on the validation split (chr2). The setting with the best chr2 accuracy is chosen
(ties: first in the grid): C of the k-mer LR from a small grid at every size; the learning rate of a neural row
from its grid at the smallest size, then kept for the larger ones (the one-core budget). The chosen run's saved
classifier (OUT/.../classifier) then scores the test split (chr1) once: 4-way accuracy, per-cell-type accuracy
(recall), macro-F1, MCC; its predictions are kept in OUT/<method>/<size>/test_predictions.csv.

Neural budget (one CPU core): every run at most train.epochs x train.max_steps_per_epoch steps of batch_size
sequences (cpu: 2 x 40 x 32 = 2,560 sequences seen); the larger subsets are then seen less than once: at this
budget the neural rows are compute-bound, which the table says. Cost, estimated from the d64 x 2 Caduceus-PS
classifier's measured CPU cost on a contended core (~35 ms a sequence a training step, ~22 ms a sequence a
forward pass): 1.5-2 CPU-min a run at 1,000 / 4,000, ~4 at all, ~1.7 for each row's test split (4,565): the
ten runs and six test passes of the neural rows ~30 CPU-min, under the 6 minutes a run this budget states.

Rows are kept as OUT/rows/<method>_<size>.json, so `--rows` runs some and the table lists every row done so far;
`--resume` keeps rows already done with the same settings. Writes results/dhs_classification.{md,json} and
results/dhs_classification.png (--scale tiny: OUT/dhs_classification.*).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import sys
import time
from pathlib import Path

import common
import numpy as np
from dhs_classification_report import HOLDOUT_MAX, LABELS, METHODS, markdown, plot

REPO = Path(__file__).resolve().parent.parent
CONFIG = "finetune/finetune_dhs"
KMER = ["model.backbone=kmer_lr", "model.overrides.ks=[3,4,5,6]", "model.overrides.both_strands=true"]
SCALES = {
    "cpu": {"out": "runs/dhs_classification", "results": "results/dhs_classification", "sizes": [1000, 4000, None],
            "pretrained": "runs/dhs_benchmark/models/cg/model", "c_grid": [1e-4, 1e-3, 1e-2, 1e-1],
            "lr_grid": [1e-3, 3e-3], "epochs": 2, "max_steps_per_epoch": 40, "batch_size": 32,
            "neural_valid_max": 1000},  # chr2 subsample (stratified) for a neural run's selection score
    "tiny": {"out": "runs/dhs_classification_tiny", "results": None, "sizes": [20, 40, None], "pretrained": None,
             "c_grid": [1e-3, 1e-1], "lr_grid": [1e-3, 3e-3], "epochs": 1, "max_steps_per_epoch": 2,
             "batch_size": 8, "neural_valid_max": 40},
}
TINY_PRETRAIN = ["train.max_steps=1", "train.val_every=1", "train.ckpt_every=1", "train.val_batches=1",
                 "train.warmup_steps=0", "train.max_minutes=null", "train.batch_size=8",
                 "model.overrides.d_model=32"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_common_options(
        p, scales=SCALES, threads_help="CPU threads of every run",
        results_help="results path without extension (default results/dhs_classification; tiny: OUT/...)",
        resume_help="keep the rows already in OUT/rows with the same settings",
        dry_run_help="every method at the smallest size, one setting, one step; no test split, no table")
    p.add_argument("--rows", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    p.add_argument("--out", default=None, help="work folder (default runs/dhs_classification[_tiny])")
    p.add_argument("--pretrained", default=None, help="pretrained dnadiff model directory (default cpu: "
                   "runs/dhs_benchmark/models/cg/model; tiny: one trained on the fixture into OUT/pretrained)")
    p.add_argument("--table-only", action="store_true", help="run nothing: write the table from the rows in OUT/rows")
    args = p.parse_args(argv)
    args.methods = [m.strip() for m in args.rows.split(",") if m.strip()]
    bad = [m for m in args.methods if m not in METHODS]
    if bad or not args.methods:
        p.error(f"--rows: unknown row(s) {', '.join(bad) or '(none)'}; choose from {', '.join(METHODS)}")
    return args


def size_label(n: int | None) -> str:
    return "all" if n is None else str(n)


def dnadiff(argv: list, log) -> dict:
    """One in-process `dnadiff` command (an error stops the pipeline): its command line and wall / CPU seconds."""
    from dnadiff.cli import main as dnadiff_main

    argv = [str(a) for a in argv]
    w0, c0 = time.time(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):  # the command's table: its results.json keeps it
        code = dnadiff_main(argv)
    if code != 0:
        raise SystemExit(f"error: `dnadiff {' '.join(argv)}` exited with {code}")
    out = {"command": "dnadiff " + " ".join(argv), "wall_s": round(time.time() - w0, 1),
           "cpu_s": round(time.process_time() - c0, 1)}
    log(f"  {out['command']}  ({out['wall_s']} s wall)")
    return out


def pretrained_model(args, scale: dict, out: Path, log) -> dict:
    """The pretrained model directory: --pretrained, the scale's default, or (tiny) one trained here."""
    path = args.pretrained or scale["pretrained"]
    info: dict = {}
    if path is None:
        run_dir = out / "pretrained"
        info = dnadiff(["train", "experiments/dhs_mdlm", *TINY_PRETRAIN, "--run-dir", run_dir, "--threads",
                        args.threads, "--overwrite", "-q"], log)
        path = str(run_dir / "model")
    if not (Path(path) / "config.json").is_file():
        from dnadiff.errors import DnadiffError

        raise DnadiffError(f"--pretrained: {path}: not a dnadiff model directory (no config.json); train it with "
                           "`python pipelines/dhs_benchmark.py --rows cg` or name one")
    metrics_file = Path(path) / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
    cfg = json.loads((Path(path) / "config.json").read_text())
    return {"dir": str(path), "name": cfg.get("name"), "steps": metrics.get("steps"),
            "val_bits_per_base": metrics.get("val_bits_per_token"), **info}


def scratch_overrides(pretrained: str) -> list[str]:
    """model.* overrides that build the pretrained model's backbone with fresh weights: its registry name and
    preset (config.json) plus the config fields that differ from that preset; checked to rebuild the same config."""
    import dataclasses

    from dnadiff.backbones import BACKBONES, build_backbone
    from dnadiff.checkpoint import load_backbone
    from dnadiff.errors import DnadiffError

    _, backbone = load_backbone(pretrained)
    name = BACKBONES.name_of(backbone)
    preset = json.loads((Path(pretrained) / "config.json").read_text())["model"]["preset"]
    want = dataclasses.asdict(backbone.config)
    base = dataclasses.asdict(build_backbone(name, preset=preset, vocab_size=want["vocab_size"]).config)
    diff = {k: v for k, v in sorted(want.items()) if base.get(k) != v}
    rebuilt = build_backbone(name, preset=preset, **{"vocab_size": want["vocab_size"], **diff}).config
    if dataclasses.asdict(rebuilt) != want:
        raise DnadiffError(f"--pretrained: {pretrained}: its backbone config cannot be rebuilt from preset {preset}")
    return [f"model.backbone={name}", f"model.preset={preset}",
            *(f"model.overrides.{k}={json.dumps(v)}" for k, v in diff.items())]


def subset_counts(table, n: int | None, seed: int = 0) -> dict:
    """Class counts of the stratified training subset `data.max_train=n` (protocol.protocol_data's)."""
    from dnadiff.data import CELL_TYPES, stratified_subsample

    labels = table.labels[table.indices("train")]
    keep = stratified_subsample(labels, n, seed)
    return {c: int((labels[keep] == k).sum()) for k, c in enumerate(CELL_TYPES)}


def finetune_run(method: str, n: int | None, setting: float, out: Path, scale: dict, extra: list[str],
                 threads: int, dry: bool, log) -> dict:
    """One `dnadiff finetune` on dhs:valid (scores on chr2) with one C (k-mer LR) or one lr (neural)."""
    total = n if n is not None else scale["n_train"]
    valid_frac = min(0.1, HOLDOUT_MAX / total)
    name = f"C{setting:g}" if method == "kmer_lr" else f"lr{setting:g}"
    run_dir = out / method / size_label(n) / name
    argv = ["finetune", CONFIG, "data.dataset=dhs:valid", "protocol.seeds=[0]", f"protocol.valid_frac={valid_frac:g}",
            f"train.threads={threads}", "data.subsample_seed=0"]
    if n is not None:
        argv.append(f"data.max_train={n}")
    if method == "kmer_lr":
        argv += [*KMER, f"model.overrides.c_grid=[{setting:g}]"]
    else:
        epochs, steps = (1, 1) if dry else (scale["epochs"], scale["max_steps_per_epoch"])
        argv += [f"train.lr={setting:g}", f"train.epochs={epochs}", f"train.max_steps_per_epoch={steps}",
                 f"train.batch_size={scale['batch_size']}", f"data.max_test={scale['neural_valid_max']}", *extra]
    info = dnadiff([*argv, "--out", run_dir, "--no-progress", "-q", "--overwrite"], log)
    res = json.loads((run_dir / "results.json").read_text())
    run = res["runs"][0]
    return {"setting": setting, **info, "valid_split_accuracy": run["test"]["accuracy"],
            "valid_split_f1_macro": run["test"]["f1_macro"], "valid_split_n": res["num_test"],
            "holdout_accuracy": run["val_acc"], "best_epoch": run["best_epoch"], "steps": run["steps"],
            "num_train": res["num_train"], "num_fit": run["num_train"], "num_holdout": run["num_valid"],
            "num_parameters": res["num_parameters"], "dir": str(run_dir)}


def score_test(classifier: Path, table, folder: Path) -> dict:
    """The test split (chr1), read once: accuracy, per cell type, macro-F1, MCC; predictions to a CSV."""
    from dnadiff.data import CELL_TYPES
    from dnadiff.eval import accuracy_table, classification_metrics, load_oracle, predict_proba
    from dnadiff.utils import atomic_write

    model, meta = load_oracle(classifier)
    assert [str(c) for c in meta["classes"]] == list(CELL_TYPES), meta["classes"]
    rows = table.indices("test")
    labels = table.labels[rows].astype(np.int64)
    probs = predict_proba(model, table.sequences("test"))
    acc = accuracy_table(probs, labels, CELL_TYPES)
    metrics = classification_metrics(labels, probs, len(CELL_TYPES), probs=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["row", "label", "predicted", *(f"p_{c}" for c in CELL_TYPES)])
    pred = probs.argmax(axis=1)
    for i, r in enumerate(rows):
        w.writerow([int(r), CELL_TYPES[labels[i]], CELL_TYPES[pred[i]], *(f"{p:.6f}" for p in probs[i])])
    atomic_write(folder / "test_predictions.csv", buf.getvalue())
    return {**acc, "f1_macro": metrics["f1_macro"], "mcc": metrics["mcc"],
            "predictions": str(folder / "test_predictions.csv")}


def run_method(method: str, args, scale: dict, out: Path, table, pretrained: dict | None, dry: bool, command: str,
               log) -> list[dict]:
    from dnadiff.machine import load_average

    extra: list[str] = []
    if method == "pretrained":
        extra = [f"model.init_from={pretrained['dir']}"]
    elif method == "scratch":
        extra = scratch_overrides(pretrained["dir"])
    grid = scale["c_grid"] if method == "kmer_lr" else scale["lr_grid"]
    sizes = scale["sizes"][:1] if dry else scale["sizes"]
    rows, chosen_lr = [], None
    for n in sizes:
        label = size_label(n)
        settings = {"grid": grid, "epochs": scale["epochs"], "max_steps_per_epoch": scale["max_steps_per_epoch"],
                    "batch_size": scale["batch_size"], "neural_valid_max": scale["neural_valid_max"],
                    "pretrained": pretrained["dir"] if method != "kmer_lr" else None}
        row_file = out / "rows" / f"{method}_{label}.json"
        if args.resume and not dry and row_file.is_file():
            old = json.loads(row_file.read_text())
            if old.get("settings") == settings:
                log(f"{method} {label}: kept from {row_file}")
                rows.append(old)
                chosen_lr = old["chosen"]
                continue
        load_before, w0 = load_average(), time.time()
        values = grid[:1] if dry else (grid if (method == "kmer_lr" or chosen_lr is None) else [chosen_lr])
        runs = [finetune_run(method, n, v, out, scale, extra, args.threads, dry, log) for v in values]
        best = max(runs, key=lambda r: (r["valid_split_accuracy"], -runs.index(r)))  # ties: first in the grid
        if method != "kmer_lr" and chosen_lr is None:
            chosen_lr = best["setting"]
        if dry:
            continue
        test = score_test(Path(best["dir"]) / "classifier", table, out / method / label)
        row = {"method": method, "label": LABELS[method], "size": label, "num_train": best["num_train"],
               "subset_counts": subset_counts(table, n), "hyperparameter": "C" if method == "kmer_lr" else "lr",
               "runs": runs, "chosen": best["setting"], "chosen_valid_split_accuracy": best["valid_split_accuracy"],
               "lr_selected_at": None if method == "kmer_lr" else size_label(sizes[0]), "test": test,
               "classifier": str(Path(best["dir"]) / "classifier"), "settings": settings, "command": command,
               "pretrained": pretrained if method != "kmer_lr" else None,
               "wall_s": round(time.time() - w0, 1), "cpu_s": round(sum(r["cpu_s"] for r in runs), 1),
               "load_before": load_before, "load_after": load_average()}
        log(f"{method} {label}: {row['hyperparameter']} {best['setting']:g} (chr2 {best['valid_split_accuracy']:.4f}); "
            f"test accuracy {test['accuracy']:.4f}, macro-F1 {test['f1_macro']:.4f} ({row['wall_s']:.0f} s)")
        from dnadiff.utils import portable_paths, write_json

        write_json(row_file, portable_paths(row))
        rows.append(row)
    return rows


def run(args: argparse.Namespace, command: str, dry: Path | None) -> int:
    import dhs_oracles

    from dnadiff.data import load_dhs
    from dnadiff.machine import load_average
    from dnadiff.threads import apply_threads

    scale = dict(SCALES[args.scale])
    out = dry if dry is not None else Path(args.out or scale["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else (Path(scale["results"]) if scale["results"]
                                                       else out / "dhs_classification")
    if args.scale == "tiny":
        os.environ["DNADIFF_CACHE"] = str(dhs_oracles._tiny_cache(out))
    apply_threads(args.threads)
    w0, load_before = time.time(), load_average()
    table = load_dhs()
    scale["n_train"] = int(len(table.indices("train")))
    methods = [] if args.table_only else args.methods
    pretrained = pretrained_model(args, scale, out, print) if any(m != "kmer_lr" for m in methods) else None
    for method in methods:
        print(f"{method}: sizes {', '.join(size_label(n) for n in scale['sizes'])}")
        run_method(method, args, scale, out, table, pretrained, dry is not None, command, print)
    if dry is not None:
        print(f"dry run: rows {', '.join(args.methods)} built and trained one step ({time.time() - w0:.0f} s)")
        return 0
    rows = [json.loads((out / "rows" / f"{m}_{size_label(n)}.json").read_text())
            for m in METHODS for n in scale["sizes"] if (out / "rows" / f"{m}_{size_label(n)}.json").is_file()]
    if pretrained is None:  # not loaded by this invocation: the one the neural rows recorded
        pretrained = next((row["pretrained"] for row in rows if row.get("pretrained")), None)
    result = {
        "scale": args.scale, "command": command, "threads": args.threads,
        "data": {"source": ("tests/data/dhs/dhs_fixture.txt (300-row fixture)" if args.scale == "tiny"
                            else "dnadiff cache ($DNADIFF_CACHE/dhs, written by `dnadiff data dhs`)"),
                 "sha256": table.sha256, "counts": table.counts(), "n_train": scale["n_train"]},
        "sizes": [size_label(n) for n in scale["sizes"]], "subset_seed": 0,
        "neural_budget": {k: scale[k] for k in ("epochs", "max_steps_per_epoch", "batch_size", "neural_valid_max",
                                                "lr_grid")},
        "c_grid": scale["c_grid"], "pretrained": pretrained, "rows": rows,
        "missing": [f"{m} {size_label(n)}" for m in METHODS for n in scale["sizes"]
                    if not any(r["method"] == m and r["size"] == size_label(n) for r in rows)],
        "wall_s": round(time.time() - w0, 1), "load_before": load_before, **common.stamp("load_after"),
    }
    plot(result, results.with_suffix(".png"))
    common.write_results(results.with_suffix(""), result, markdown(result, results.with_suffix(".png").name))
    print(f"wrote {results.with_suffix('.md')} ({result['wall_s']:.0f} s wall)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return common.main_with_dry_run(run, args, __file__, argv, "dhs_classification")


if __name__ == "__main__":
    sys.exit(main())
