"""Tab. 7 of the MDLM paper: Genomic Benchmarks accuracy for several initialisations of one backbone.

    # CPU scale: the two shared benchmarks, tiny models from the DNA perplexity pipeline (<= 45 min, 2 cores)
    python pipelines/genomic_benchmarks.py --scale cpu \
        --init mlm=results/dna_perplexity_models/mlm --init mdlm=results/dna_perplexity_models/mdlm \
        --init ar=results/dna_perplexity_models/ar
    # paper scale: the 8 Genomic Benchmarks (in ~/.genomic_benchmarks, or --download), tab. 7 recipe
    python pipelines/genomic_benchmarks.py --scale paper --init mlm=PATH --init mdlm=PATH --init ar=PATH

Every initialisation NAME=PATH is a model directory (dnadiff, or official Caduceus/HyenaDNA);
`scratch` is added automatically: the architecture of the first --init (or the config's default
backbone when none is given) with fresh weights. Each (init, data set) cell runs the `paper`
protocol of `dnadiff finetune` (seeds x random 90/10 split, best validation accuracy epoch scored
on the shuffled test set) and reports test accuracy mean ± (max − min)/2; results.json of every
cell also holds MCC, macro-F1 and AUROC.

--scale cpu sizes (chosen to fit 45 minutes on 2 shared CPU cores with 4 inits x 2 data sets):
stratified subsamples of 1,000 train / 500 test sequences, 1 epoch, 3 seeds, one learning rate
(2e-3), batch 16, 1 torch thread. Measured: a tiny Caduceus-PS (28K parameters) run of 56 steps
plus validation and test takes ~80 s on this machine (2.3 s per 32x200 training step, a busy
shared CPU), so a Caduceus cell is ~4 min, a tiny Mamba one ~1.5 min: ~30 min for the table.
With no --init, the models of `pipelines/dna_perplexity.py --scale cpu` are used: mlm, mdlm
and ar = runs/dna_perplexity_cpu/{caduceus_mlm,caduceus_mdlm,mamba_ar}_seed0/model.
Writes OUT.md and OUT.json (default results/genomic_benchmarks_cpu) with the command, wall
time and machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARED_BENCHMARKS = REPO.parent / "shared" / "data" / "benchmarks"
PAPER_SETS = [
    "dummy_mouse_enhancers_ensembl", "demo_coding_vs_intergenomic_seqs", "demo_human_or_worm",
    "human_enhancers_cohn", "human_enhancers_ensembl", "human_ensembl_regulatory",
    "human_nontata_promoters", "human_ocr_ensembl",
]
DEFAULT_MODELS = REPO / "runs" / "dna_perplexity_cpu"  # written by pipelines/dna_perplexity.py --scale cpu
# tab. 7 rows -> the DNA perplexity pipeline's run keys (seed 0 of each): MLM-pretrained Caduceus, the
# same model fine-tuned with MDLM, and the AR baseline (Mamba)
DEFAULT_INITS = {"mlm": "caduceus_mlm", "mdlm": "caduceus_mdlm", "ar": "mamba_ar"}
KMER_ROW = "k-mer LR"  # the classical baseline row (dnadiff/baselines/kmer_lr.py), same cells and protocol


def parse_inits(items: list[str]) -> dict[str, str]:
    from dnadiff.errors import DnadiffError

    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise DnadiffError(f"--init {item!r}: expected NAME=PATH")
        if name == "scratch":
            raise DnadiffError("--init: the name 'scratch' is reserved (it is added automatically)")
        if not Path(path).is_dir():
            raise DnadiffError(f"--init {name}: {path} is not a model directory")
        out[name] = path
    return out


def _is_model_dir(p: Path) -> bool:
    return p.is_dir() and ((p / "config.yaml").is_file() or (p / "config.json").is_file())


def discover_inits(root: Path) -> dict[str, str]:
    """The DNA perplexity pipeline's models (DEFAULT_INITS, seed 0) under `root` when present,
    else every model directory (NAME/ or NAME/model/) directly under `root`, by folder name."""
    if not root.is_dir():
        return {}
    known = {name: root / f"{key}_seed0" / "model" for name, key in DEFAULT_INITS.items()}
    found = {name: str(p) for name, p in known.items() if _is_model_dir(p)}
    if found:
        return found
    out = {}
    for p in sorted(root.iterdir()):
        if _is_model_dir(p):
            out[p.name] = str(p)
        elif _is_model_dir(p / "model"):
            out[p.name] = str(p / "model")
    return out


def scratch_overrides(init_path: str) -> list[str]:
    """Config overrides that rebuild the architecture of a model directory with fresh weights."""
    from dnadiff.checkpoint import load_backbone

    name, backbone = load_backbone(init_path)
    fields = dataclasses.asdict(backbone.config)
    import yaml

    # YAML flow style, not JSON: YAML 1.1 reads JSON's 1e-05 as a string, yaml.safe_dump writes 1.0e-05
    flow = yaml.safe_dump(fields, default_flow_style=True, width=10**9).strip()
    return [f"model.backbone={name}", f"model.overrides={flow}", "model.init_from=null"]


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
    from dnadiff.data.benchmarks import resolve_benchmark
    from dnadiff.errors import DnadiffError

    try:
        resolve_benchmark(name, download=False)
        return True
    except DnadiffError:
        return False


def pick_scratch_architecture(inits: dict[str, str]) -> str | None:
    """The init whose architecture the scratch row copies: the first bidirectional one (else the first)."""
    from dnadiff.checkpoint import load_backbone

    for name, path in inits.items():
        if not getattr(load_backbone(path)[1], "is_causal", False):
            return name
    return next(iter(inits), None)


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


def compare_note(table: dict, datasets: list[str]) -> str:
    """One sentence per data set: the inits ranked by mean accuracy, and whether gaps exceed the spread."""
    lines = []
    for ds in datasets:
        cells = [(init, row[ds]["accuracy"]) for init, row in table.items() if ds in row]
        cells.sort(key=lambda c: -c[1]["mean"])
        if not cells:
            continue
        order = " > ".join(f"{i} {s['mean']:.3f}" for i, s in cells)
        detail = []
        by = dict(cells)
        for other in ("mlm", "scratch", KMER_ROW.lower()):
            for mdlm in [k for k in by if "mdlm" in k.lower()]:
                match = [k for k in by if k.lower() == other or k.lower().startswith(other)]
                for o in match:
                    gap = by[mdlm]["mean"] - by[o]["mean"]
                    spread = by[mdlm]["pm"] + by[o]["pm"]
                    verdict = "within the run spread" if abs(gap) <= spread else ("better" if gap > 0 else "worse")
                    detail.append(f"{mdlm} vs {o}: {gap:+.3f} ({verdict}, spread {spread:.3f})")
        lines.append(f"- {ds}: {order}" + (f"; {'; '.join(detail)}" if detail else ""))
    return "\n".join(lines)


def load_prior(out_stem: Path) -> dict:
    """The results JSON an earlier full run wrote (its neural rows are kept by --only-baselines)."""
    from dnadiff.errors import DnadiffError

    f = Path(str(out_stem) + ".json")
    if not f.is_file():
        raise DnadiffError(f"--only-baselines: {f} not found (run the full pipeline once first)")
    try:
        prior = json.loads(f.read_text())
        prior["table"], prior["cells"], prior["inits"], prior["datasets"]  # noqa: B018  (the keys it needs)
    except (json.JSONDecodeError, KeyError, TypeError):
        raise DnadiffError(f"--only-baselines: {f} is not a results file of this pipeline") from None
    return prior


def kmer_note(cells: list[dict]) -> str:
    """How the k-mer LR row was made (k, strands, the C chosen per data set on validation)."""
    chosen = ", ".join(f"{c['dataset']} C={c['selected_lr']:g}" for c in cells if c["init"] == KMER_ROW)
    return ("k-mer frequencies k = 3..6 on both strands + L2 logistic regression (scikit-learn), C chosen on "
            f"mean validation accuracy from 1e-4..10 ({chosen}); same subsamples, seeds and splits as the other rows")


def load_average() -> str:
    try:
        a, b, c = os.getloadavg()
        return f"load average {a:.2f}, {b:.2f}, {c:.2f} (1, 5, 15 min) on {os.cpu_count()} CPUs"
    except OSError:
        return "n/a"


def machine() -> str:
    import torch

    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU, {os.cpu_count()} cores"
    return f"{platform.node()} ({platform.machine()}, {dev}), torch {torch.__version__}, {torch.get_num_threads()} threads"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=["cpu", "paper"], default="cpu")
    p.add_argument("--init", action="append", default=[], metavar="NAME=PATH",
                   help="an initialisation to fine-tune (repeatable); scratch is always added")
    p.add_argument("--models-dir", default=str(DEFAULT_MODELS),
                   help="with no --init: use every model directory under this folder (default %(default)s)")
    p.add_argument("--datasets", nargs="*", default=None, help="data set folders or names (default: per scale)")
    p.add_argument("--config", default=None, help="base finetune config (default: finetune/finetune_base)")
    p.add_argument("--out", default=None, help="output stem (default results/genomic_benchmarks_<scale>)")
    p.add_argument("--runs-dir", default=None, help="per-cell run folders (default runs/genomic_benchmarks_<scale>)")
    p.add_argument("--no-scratch", action="store_true", help="skip the scratch row")
    p.add_argument("--download", action="store_true", help="paper scale: download missing Genomic Benchmarks sets")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: 1 at --scale cpu, where tiny models gain nothing from more and "
                        "a busy shared CPU slows badly with more; torch's default at --scale paper)")
    p.add_argument("--progress", action="store_true", help="show Lightning progress bars")
    p.add_argument("--no-kmer-lr", action="store_true", help="skip the k-mer logistic-regression baseline row")
    p.add_argument("--only-baselines", action="store_true",
                   help="run only the k-mer LR row and merge it into the rows of the existing OUT.json (no neural "
                        "fine-tuning; same data sets, subsamples and seeds)")
    p.add_argument("--fresh", action="store_true",
                   help="rerun every cell (default: reuse a cell's results.json when its config is identical)")
    cpu = p.add_argument_group("--scale cpu sizes")
    cpu.add_argument("--max-train", type=int, default=1000)
    cpu.add_argument("--max-test", type=int, default=500)
    cpu.add_argument("--epochs", type=int, default=1)
    cpu.add_argument("--seeds", type=int, default=3)
    cpu.add_argument("--batch-size", type=int, default=16)
    cpu.add_argument("--lr", type=float, default=2e-3)
    cpu.add_argument("--max-len", type=int, default=None)
    args = p.parse_args(argv)

    import torch

    threads, before = args.threads or (1 if args.scale == "cpu" else None), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _run(args, argv, threads)
    finally:
        torch.set_num_threads(before)


def _run(args, argv, threads) -> int:
    from dnadiff.errors import DnadiffError
    from dnadiff.heads.config import load_finetune_config
    from dnadiff.training.finetune_protocol import run_finetune
    from dnadiff.utils import atomic_write, markdown_table, write_json

    t0 = time.time()
    try:
        out_stem = Path(args.out or REPO / "results" / f"genomic_benchmarks_{args.scale}")
        prior = load_prior(out_stem) if args.only_baselines else None
        if prior:
            inits = prior["inits"]
        else:
            inits = parse_inits(args.init) if args.init else discover_inits(Path(args.models_dir))
        if args.datasets:
            datasets = list(args.datasets)
        elif args.scale == "cpu":
            datasets = [str(d) for d in sorted(SHARED_BENCHMARKS.iterdir()) if (d / "train").is_dir()]
        else:  # the 8 sets of tab. 7 that are present locally (or all, with --download)
            datasets = PAPER_SETS if args.download else [d for d in PAPER_SETS if _present(d)]
            missing = sorted(set(PAPER_SETS) - set(datasets))
            if missing:
                print(f"skipping sets not in the genomic-benchmarks cache (use --download): {', '.join(missing)}")
            if not datasets:
                raise DnadiffError("no Genomic Benchmarks set found locally; pass --download or --datasets")
        rows: dict[str, list[str] | None] = {}
        table: dict[str, dict] = {}
        cells = []
        if prior:  # the neural rows as the earlier run measured them; only the baseline runs now
            scratch_like = prior.get("scratch_like", next(iter(inits), None))
            table = {k: v for k, v in prior["table"].items() if k != KMER_ROW}
            cells = [c for c in prior["cells"] if c["init"] != KMER_ROW]
            missing = sorted(set(prior["datasets"]) - {Path(d).name for d in datasets})
            if missing:
                raise DnadiffError(f"--only-baselines: {out_stem}.json has data sets {', '.join(missing)} not found now")
        else:
            scratch_like = pick_scratch_architecture(inits)
            if not args.no_scratch:
                rows["scratch"] = scratch_overrides(inits[scratch_like]) if scratch_like else []
            for name, path in inits.items():
                rows[name] = [f"model.init_from={json.dumps(path)}"]
        if not args.no_kmer_lr:
            rows[KMER_ROW] = ["model.backbone=kmer_lr", "model.init_from=null"]
        runs_dir = Path(args.runs_dir or REPO / "runs" / f"genomic_benchmarks_{args.scale}")
        for init, init_over in rows.items():
            table[init] = {}
            for ds in datasets:
                ds_name = Path(ds).name
                base = args.config or "finetune/finetune_base"
                if not args.config and args.scale == "paper" and ds_name in PAPER_SETS:
                    base = f"finetune/finetune_{ds_name}"  # its max length
                over = cell_overrides(args, ds, ds_name, runs_dir / init.replace(" ", "_")) + init_over
                if args.scale == "cpu" and not any(o.startswith("model.backbone") for o in init_over) and not inits:
                    over.append("model.preset=tiny")  # scratch only: the tiny Caduceus-PS
                cfg = load_finetune_config(base, over)
                cell_dir = runs_dir / init.replace(" ", "_") / ds_name
                res = None if args.fresh else cached_result(cell_dir, cfg)
                print(f"== {init} on {ds_name}" + (" (finished earlier: reusing its results.json)" if res else ""),
                      flush=True)
                res = res or run_finetune(cfg, cell_dir)
                s = res["summary"]
                table[init][ds_name] = {m: s[m] for m in ("accuracy", "mcc", "f1_macro", "auroc")}
                cells.append({"init": init, "dataset": ds_name, "init_from": cfg.model.init_from,
                              "majority_baseline": res["majority_baseline"], "selected_lr": res["selected_lr"],
                              "num_parameters": res["num_parameters"], "summary": s, "wall_s": res["wall_s"],
                              "runs": [{k: r[k] for k in ("run", "seed", "best_epoch", "val_acc", "test")}
                                       for r in res["runs"]]})
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    wall = time.time() - t0
    ds_names = [Path(d).name for d in datasets]
    md_rows = []
    for init, row in table.items():
        md_rows.append({"init": init, **{ds: f"{row[ds]['accuracy']['mean']:.3f} ± {row[ds]['accuracy']['pm']:.3f}"
                                         for ds in ds_names if ds in row}})
    baseline = {c["dataset"]: c["majority_baseline"] for c in cells}
    md_rows.append({"init": "(majority class)", **{ds: f"{baseline[ds]:.3f}" for ds in ds_names if ds in baseline}})
    mcc_rows = [{"init": init, **{ds: f"{row[ds]['mcc']['mean']:.3f} ± {row[ds]['mcc']['pm']:.3f}"
                                  for ds in ds_names if ds in row}} for init, row in table.items()]
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *(argv or sys.argv[1:])])
    note = compare_note(table, ds_names)
    settings = ("tab. 7 recipe (finetune/finetune_<set>.yaml)" if args.scale == "paper" else
                f"paper protocol, {args.seeds} seeds, {args.epochs} epochs, {args.max_train} train / "
                f"{args.max_test} test sequences (stratified subsamples), batch {args.batch_size}, lr {args.lr:g}")
    md = "\n".join([
        f"# Genomic Benchmarks fine-tuning ({args.scale} scale; MDLM paper tab. 7)", "",
        f"- command: `{command}`",
        f"- wall time: {wall / 60:.1f} min (the cells' own run time adds up to "
        f"{sum(c['wall_s'] for c in cells) / 60:.1f} min; a cell finished by an earlier, interrupted run is reused); "
        f"machine: {machine()}",
        f"- settings: {settings}",
        "- initialisations: " + ", ".join(
            [f"scratch = fresh weights ({'architecture of ' + scratch_like if scratch_like else 'config default'})"]
            * ("scratch" in table) + [f"{k} = {v}" for k, v in inits.items()]),
        *([f"- {KMER_ROW}: {kmer_note(cells)}"] if KMER_ROW in table else []),
        *([f"- machine load at the end (`uptime`): {load_average()}"]),
        *([f"- rows other than {KMER_ROW} reused from the earlier run `{prior['command']}` "
           f"({prior.get('wall_s', 0) / 60:.1f} min on {prior.get('machine', '?')}); this run added the baseline only"]
          if prior else []),
        "", "Test accuracy, mean ± (max − min)/2 over runs:", "", markdown_table(md_rows), "",
        "Test MCC:", "", markdown_table(mcc_rows), "",
        "Comparison (mean test accuracy):", "", note, "",
    ])
    atomic_write(str(out_stem) + ".md", md)
    write_json(str(out_stem) + ".json", {"command": command, "wall_s": round(wall, 1), "machine": machine(),
                                         "scale": args.scale, "settings": settings, "inits": inits,
                                         "datasets": ds_names, "table": table, "cells": cells, "note": note,
                                         "scratch_like": scratch_like, "load_average": load_average(),
                                         **({"neural_rows_from": {k: prior.get(k) for k in ("command", "wall_s", "machine")}}
                                            if prior else {})})
    print(md)
    print(f"wrote {out_stem}.md and {out_stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
