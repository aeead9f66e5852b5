"""Tab. 7 of the MDLM paper: Genomic Benchmarks accuracy for several initialisations of one backbone.

    # CPU scale: the two shared benchmarks, tiny models from the DNA perplexity pipeline (<= 45 min, 2 cores)
    python pipelines/genomic_benchmarks_table.py --scale cpu \
        --init mlm=results/dna_perplexity_models/mlm --init mdlm=results/dna_perplexity_models/mdlm \
        --init ar=results/dna_perplexity_models/ar --init plaid=results/dna_perplexity_models/plaid_caduceus
    # paper scale: the 8 Genomic Benchmarks (in ~/.genomic_benchmarks, or --download), tab. 7 recipe
    python pipelines/genomic_benchmarks_table.py --scale paper --init mlm=PATH --init mdlm=PATH --init ar=PATH
    # every row and data set built and stepped once on tiny synthetic sets (seconds), no table written
    python pipelines/genomic_benchmarks_table.py --scale paper --dry-run
    # re-render the table of a finished run from its JSON (no training)
    python pipelines/genomic_benchmarks_table.py --from-json results/genomic_benchmarks_cpu.json
    # (re)run only the k-mer LR baseline row and merge it into the stored rows of the table
    python pipelines/genomic_benchmarks_table.py --scale cpu --only-baselines
    # add one initialisation's row to the stored table (the other rows kept as they were measured)
    python pipelines/genomic_benchmarks_table.py --scale cpu --add-inits \
        --init plaid=runs/dna_perplexity_cpu/plaid_caduceus_seed0/model

Every initialisation NAME=PATH is a model directory (dnadiff, or official Caduceus/HyenaDNA);
`scratch` is added automatically: the architecture of the first --init (or the config's default
backbone when none is given) with fresh weights. Each (init, data set) cell runs the `paper`
protocol of `dnadiff finetune` (seeds x random 90/10 split, best validation accuracy epoch scored
on the shuffled test set) and reports test accuracy as mean ± range, the range being max − min
over the runs (the paper's tab. 7 "±"); results.json of every cell also holds MCC, macro-F1 and AUROC.
A classical baseline row, `k-mer LR` (k-mer frequencies k = 3..6 on both strands + L2 logistic
regression, dnadiff/classifier_tuning/kmer_lr.py), runs under the same protocol, subsamples, seeds and
splits (--no-kmer-lr skips it; --only-baselines runs only it and keeps the other rows of OUT.json;
--add-inits runs only the --init rows and keeps the other rows of OUT.json).

--scale cpu sizes (chosen to fit 45 minutes on 2 shared CPU cores with 4 inits x 2 data sets):
stratified subsamples of 1,000 train / 500 test sequences, 1 epoch, 3 seeds, one learning rate
(2e-3), batch 16, 1 torch thread. Measured: a tiny Caduceus-PS (28K parameters) run of 56 steps
plus validation and test takes ~80 s on this machine (2.3 s per 32x200 training step, a busy
shared CPU), so a Caduceus cell is ~4 min, a tiny Mamba one ~1.5 min: ~30 min for the table.
With no --init, the models of `pipelines/dna_perplexity.py` at the same --scale are used: mlm, mdlm,
ar and plaid = runs/dna_perplexity_<scale>/{caduceus_mlm,caduceus_mdlm,mamba_ar,plaid_caduceus}_seed0/model.
The plaid row (tab. 7's Plaid column) fine-tunes the Caduceus that Plaid trained there, post-hoc RC (Plaid
feeds its backbone embeddings, so no RC-equivariant PS): `dnadiff finetune` takes it out of the Plaid network
and drops Plaid's embedding table, noise schedule and input/time maps (its init_from line says so), so every
Caduceus column fine-tunes a Caduceus, as the paper's. The DiT of the perplexity table's other Plaid row:
--init plaid_dit=runs/dna_perplexity_<scale>/plaid_seed0/model.

--dry-run: with no --init, stand-ins for those three models are made by the DNA perplexity
pipeline's own --dry-run at the same scale (same presets, one step), and with no --datasets tiny
synthetic sets in the genomic-benchmarks layout are written (cpu: one 2-class set; paper: the 8
sets of tab. 7 under their names, so each set's finetune_<set>.yaml recipe is loaded). Every
(init, set) cell's recipe is capped to one run, one lr, one epoch of one step (batch 4), in a
temporary folder. Every (init, set) config is built; the cells trained are every init on the
first set and every set with the first row (scratch): the model and the set vary independently;
the k-mer LR row is configured and fitted like any other row.
Writes OUT.md and OUT.json (default results/genomic_benchmarks_cpu) with the command, wall
time, machine and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import common
from genomic_benchmarks_inits import RUNS, choose_inits, pick_scratch_architecture, scratch_overrides
from genomic_benchmarks_report import KMER_ROW, _range, render, rerender, with_full_range, write_outputs  # noqa: F401  (genomic_benchmarks_recipe.py's gb.*)

from dnadiff.machine import describe_machine, load_average

REPO = Path(__file__).resolve().parent.parent

# the full sets
SHARED_BENCHMARKS = Path(os.environ.get("DNADIFF_DATA") or REPO.parent / "shared" / "data") / "benchmarks"
PAPER_SETS = [
    "dummy_mouse_enhancers_ensembl", "demo_coding_vs_intergenomic_seqs", "demo_human_or_worm",
    "human_enhancers_cohn", "human_enhancers_ensembl", "human_ensembl_regulatory",
    "human_nontata_promoters", "human_ocr_ensembl",
]


def cached_result(cell_dir: Path, cfg) -> dict | None:
    """A cell's results.json from an earlier (interrupted) pipeline run with the identical config."""
    from dnadiff.config import to_dict

    f = cell_dir / "results.json"
    if not f.is_file():
        return None
    try:
        res = json.loads(f.read_text())
    except json.JSONDecodeError:
        return None
    return res if res.get("config") == json.loads(json.dumps(to_dict(cfg))) else None


def _present(name: str) -> bool:
    from dnadiff.data import resolve_benchmark
    from dnadiff.errors import DnadiffError

    try:
        resolve_benchmark(name, download=False)
        return True
    except DnadiffError:
        return False


def cell_overrides(args, dataset: str, name: str, out_root: Path) -> list[str]:
    common = [f"name={name}", f"out_dir={out_root}", f"data.dataset={json.dumps(dataset)}",
              f"train.progress={str(args.progress).lower()}"]
    if args.scale == "paper":
        return common + (["data.download=true"] if args.download else [])
    return common + [
        f"data.max_train={args.max_train}", f"data.max_test={args.max_test}",
        f"protocol.seeds={json.dumps(list(range(args.seeds)))}", f"train.epochs={args.epochs}",
        f"train.batch_size={args.batch_size}", f"train.lr_grid=[{args.lr}]",
        *([f"data.max_len={args.max_len}"] if args.max_len else []),
    ]


DRY_SETS = {"cpu": {"dry_run_two_classes": 2},
            "paper": {name: 3 if name == "human_ensembl_regulatory" else 2 for name in PAPER_SETS}}


def make_dry_run_sets(root: Path, scale: str, per_class: tuple[int, int] = (8, 2), length: int = 32) -> list[str]:
    """Tiny synthetic sets in the genomic-benchmarks layout (class k: a GC content of its own)."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for name, classes in DRY_SETS[scale].items():
        for split, n in zip(("train", "test"), per_class):
            for k in range(classes):
                folder = root / name / split / f"class{k}"
                folder.mkdir(parents=True, exist_ok=True)
                gc = 0.3 + 0.4 * k / max(classes - 1, 1)
                for i in range(n):
                    seq = rng.choice(list("ACGT"), size=length, p=[(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2])
                    (folder / f"{i}.txt").write_text("".join(seq))
        out.append(str(root / name))
    return out


DRY_RUN_CAPS = ["protocol.max_runs=1", "train.epochs=1", "train.max_steps_per_epoch=1", "train.batch_size=4",
                "train.progress=false"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=["cpu", "paper"], default="cpu")
    p.add_argument("--init", action="append", default=[], metavar="NAME=PATH",
                   help="an initialisation to fine-tune (repeatable); scratch is always added")
    p.add_argument("--models-dir", default=None,
                   help="with no --init: use every model directory under this folder "
                        "(default runs/dna_perplexity_<scale>)")
    p.add_argument("--datasets", nargs="*", default=None, help="data set folders or names (default: per scale)")
    p.add_argument("--config", default=None, help="base finetune config (default: finetune/finetune_base)")
    p.add_argument("--out", default=None, help="output stem (default results/genomic_benchmarks_<scale>)")
    p.add_argument("--runs-dir", default=None, help="per-cell run folders (default runs/genomic_benchmarks_<scale>)")
    p.add_argument("--no-scratch", action="store_true", help="skip the scratch row")
    p.add_argument("--no-kmer-lr", action="store_true", help="skip the k-mer logistic-regression baseline row")
    p.add_argument("--only-baselines", action="store_true",
                   help="run only the k-mer LR row and merge it into the rows of the existing OUT.json (no neural "
                        "fine-tuning; same data sets, subsamples and seeds)")
    p.add_argument("--add-inits", action="store_true",
                   help="run only the --init rows (no scratch, no k-mer LR) and add them to the rows of the existing "
                        "OUT.json (same data sets, subsamples and seeds)")
    p.add_argument("--download", action="store_true", help="paper scale: download missing Genomic Benchmarks sets")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: 1 at --scale cpu and for --dry-run, where tiny models gain "
                        "nothing from more and a busy shared CPU slows badly with more; torch's default at --scale "
                        "paper)")
    p.add_argument("--progress", action="store_true", help="show Lightning progress bars")
    p.add_argument("--fresh", action="store_true",
                   help="rerun every cell (default: reuse a cell's results.json when its config is identical)")
    p.add_argument("--dry-run", action="store_true",
                   help="every (init, data set) cell built and trained for one step on tiny data; writes no table")
    p.add_argument("--from-json", default=None, metavar="JSON",
                   help="re-render the .md/.json of a finished run from its JSON (no training)")
    cpu = p.add_argument_group("--scale cpu sizes")
    cpu.add_argument("--max-train", type=int, default=1000)
    cpu.add_argument("--max-test", type=int, default=500)
    cpu.add_argument("--epochs", type=int, default=1)
    cpu.add_argument("--seeds", type=int, default=3)
    cpu.add_argument("--batch-size", type=int, default=16)
    cpu.add_argument("--lr", type=float, default=2e-3)
    cpu.add_argument("--max-len", type=int, default=None)
    args = p.parse_args(argv)
    if args.from_json:
        return rerender(args, common.command_line(__file__, argv))

    import torch

    threads = args.threads or (1 if args.scale == "cpu" or args.dry_run else None)
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        if not args.dry_run:
            return _run(args, argv)
        import tempfile

        with tempfile.TemporaryDirectory(prefix="genomic_benchmarks_dry_run_") as tmp:
            return _run(args, argv, Path(tmp))
    finally:
        torch.set_num_threads(before)


def choose_datasets(args, dry_root: Path | None) -> list[str]:
    """The data sets: --datasets, the dry run's synthetic ones, the shared full sets (cpu) or tab. 7's (paper)."""
    from dnadiff.errors import DnadiffError

    if args.datasets:
        return list(args.datasets)
    if dry_root is not None:
        return make_dry_run_sets(dry_root / "data", args.scale)
    if args.scale == "cpu":
        return [str(d) for d in sorted(SHARED_BENCHMARKS.iterdir()) if (d / "train").is_dir()]
    # the 8 sets of tab. 7 that are present locally (or all, with --download)
    datasets = PAPER_SETS if args.download else [d for d in PAPER_SETS if _present(d)]
    missing = sorted(set(PAPER_SETS) - set(datasets))
    if missing:
        print(f"skipping sets not in the genomic-benchmarks cache (use --download): {', '.join(missing)}")
    if not datasets:
        raise DnadiffError("no Genomic Benchmarks set found locally; pass --download or --datasets")
    return datasets


def plan_rows(args, inits: dict[str, str], prior: dict | None, datasets: list[str], out_stem: Path):
    """The rows to run now (name -> config overrides), the table and cells kept from a prior run, and
    the init whose architecture the scratch row copies."""
    from dnadiff.errors import DnadiffError

    rows: dict[str, list[str] | None] = {}
    table: dict[str, dict] = {}
    cells = []
    if prior:  # the other rows as the earlier run measured them; only the baseline (or the added inits) run now
        scratch_like = prior.get("scratch_architecture", prior.get("scratch_like"))
        redo = set(inits) if args.add_inits else {KMER_ROW}
        table = {k: v for k, v in prior["table"].items() if k not in redo}
        cells = [c for c in prior["cells"] if c["init"] not in redo]
        missing = sorted(set(prior["datasets"]) - {Path(d).name for d in datasets})
        option = "--add-inits" if args.add_inits else "--only-baselines"
        if missing:
            raise DnadiffError(f"{option}: {out_stem}.json has data sets {', '.join(missing)} not found now")
        if args.add_inits and prior.get("settings") != settings_of(args):
            raise DnadiffError(f"--add-inits: {out_stem}.json was made with other settings ({prior.get('settings')});"
                               " give the same --scale and sizes")
        if args.add_inits:  # only the added rows run: no scratch, no k-mer LR
            added = {name: [f"model.init_from={json.dumps(path)}"] for name, path in inits.items()}
            return added, table, cells, scratch_like
    else:
        scratch_like = pick_scratch_architecture(inits)
        if not args.no_scratch:
            rows["scratch"] = scratch_overrides(inits[scratch_like]) if scratch_like else []
        for name, path in inits.items():
            rows[name] = [f"model.init_from={json.dumps(path)}"]
    if not args.no_kmer_lr:
        rows[KMER_ROW] = ["model.backbone=kmer_lr", "model.init_from=null"]
    return rows, table, cells, scratch_like


def cell_config(args, init_over: list[str], ds: str, init_dir: Path, inits: dict, dry: bool):
    """The fine-tuning config of one (init, data set) cell."""
    from dnadiff.classifier_tuning import load_finetune_config
    from dnadiff.config import replace

    ds_name = Path(ds).name
    base = args.config or "finetune/finetune_base"
    if not args.config and args.scale == "paper" and ds_name in PAPER_SETS:
        base = f"finetune/finetune_{ds_name}"  # its max length
    over = cell_overrides(args, ds, ds_name, init_dir) + init_over
    if args.scale == "cpu" and not any(o.startswith("model.backbone") for o in init_over) and not inits:
        over.append("model.preset=tiny")  # scratch only: the tiny Caduceus-PS
    cfg = load_finetune_config(base, over + (DRY_RUN_CAPS if dry else []))
    if dry:  # the recipe's first learning rate only
        cfg = replace(cfg, **{"train.lr_grid": list(cfg.train.lr_grid[:1])})
    return cfg


def run_cell(args, init: str, cfg, cell_dir: Path, dry: bool) -> dict:
    """Fine-tune one cell (or reuse its finished results.json): its record in the results JSON."""
    from dnadiff.classifier_tuning import run_finetune

    res = None if args.fresh or dry else cached_result(cell_dir, cfg)
    print(f"== {init} on {cell_dir.name}" + (" (finished earlier: reusing its results.json)" if res else ""),
          flush=True)
    res = res or run_finetune(cfg, cell_dir)
    s = with_full_range(res["summary"])  # a reused results.json may predate the `range` key
    return {"init": init, "dataset": cell_dir.name, "init_from": cfg.model.init_from,
            "majority_baseline": res["majority_baseline"], "selected_lr": res["selected_lr"],
            "num_parameters": res["num_parameters"], "summary": s, "wall_s": res["wall_s"],
            "runs": [{k: r[k] for k in ("run", "seed", "best_epoch", "val_acc", "test")} for r in res["runs"]]}


def _run(args, argv, dry_root: Path | None = None) -> int:
    from dnadiff.errors import DnadiffError

    t0 = time.time()
    dry = dry_root is not None
    try:
        out_stem = Path(args.out or REPO / "results" / f"genomic_benchmarks_{args.scale}")
        prior, inits = choose_inits(args, out_stem, dry_root)
        datasets = choose_datasets(args, dry_root)
        rows, table, cells, scratch_like = plan_rows(args, inits, prior, datasets, out_stem)
        runs_dir = Path(args.runs_dir or (dry_root / "runs" if dry else RUNS / f"genomic_benchmarks_{args.scale}"))
        for init, init_over in rows.items():
            table[init] = {}
            init_dir = runs_dir / init.replace(" ", "_")  # "k-mer LR" -> k-mer_LR
            for ds in datasets:
                cfg = cell_config(args, init_over, ds, init_dir, inits, dry)
                # dry run: every row trains on the first set, every set's recipe trains with the first row;
                # the other cells only build their config (the model and the set vary independently)
                if dry and init != next(iter(rows)) and ds != datasets[0]:
                    continue
                cell = run_cell(args, init, cfg, init_dir / Path(ds).name, dry)
                table[init][cell["dataset"]] = {m: cell["summary"][m] for m in ("accuracy", "mcc", "f1_macro", "auroc")}
                cells.append(cell)
        if prior and args.add_inits:  # the added rows above the k-mer baseline, as in a full run
            table = {k: table[k] for k in sorted(table, key=lambda k: k == KMER_ROW)}
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    wall = time.time() - t0
    payload = run_payload(args, argv, wall, inits, scratch_like, datasets, table, cells, prior)
    md = render(payload)
    if dry:
        print(md)
        print(f"dry run ({args.scale}): {len(rows)} rows x {len(datasets)} data sets configured, {len(cells)} cells "
              f"trained one step in {wall:.1f} s; no table written")
        return 0
    write_outputs(payload, md, out_stem)
    return 0


def settings_of(args) -> str:
    """The settings line of a run (an added row must share it with the table it joins)."""
    if args.scale == "paper":
        return "tab. 7 recipe (finetune/finetune_<set>.yaml)"
    return (f"paper protocol, {args.seeds} seeds, {args.epochs} epochs, {args.max_train} train / {args.max_test} test "
            f"sequences (stratified subsamples), batch {args.batch_size}, lr {args.lr:g}")


def run_payload(args, argv, wall: float, inits: dict, scratch_like: str | None, datasets: list[str], table: dict,
                cells: list[dict], prior: dict | None) -> dict:
    """What OUT.json holds (render() adds the comparison note)."""
    command = common.command_line(__file__, argv)
    payload = {"command": command, "wall_s": round(wall, 1), "machine": describe_machine(), "scale": args.scale,
               "settings": settings_of(args), "inits": inits,
               "scratch_architecture": None if args.no_scratch else scratch_like,
               "datasets": [Path(d).name for d in datasets], "table": table, "cells": cells,
               "load_average": load_average()}
    if prior and args.add_inits:  # the page stays the earlier run's; the rows added are listed with their run
        added = {"inits": list(inits), "command": command, "wall_s": round(wall, 1), "machine": payload["machine"],
                 "load_average": payload["load_average"]}
        payload.update({k: prior[k] for k in ("command", "wall_s", "machine", "load_average", "neural_rows_from")
                        if k in prior})
        payload["added_inits"] = [*prior.get("added_inits", []), added]
    elif prior:
        payload["neural_rows_from"] = {k: prior.get(k) for k in ("command", "wall_s", "machine")}
    if prior:
        payload["inits"] = prior["inits"] | (inits if args.add_inits else {})
        payload["scratch_architecture"] = prior.get("scratch_architecture", prior.get("scratch_like"))
        # the datasets in the prior's order (the k-mer row covers every one of them)
        payload["datasets"] = list(dict.fromkeys([*prior["datasets"], *payload["datasets"]]))
    return payload


if __name__ == "__main__":
    sys.exit(main())
