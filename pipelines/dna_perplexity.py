"""Paper tab. 6: test-split perplexity of DNA models, one backbone family per row, same data/budget.

Rows (each over >= 3 seeds: mean, and range = max − min over seeds, the paper's "±"):
    Caduceus  MLM-pretrained -> fine-tuned with mdlm | sedd | d3pm (discrete T)   (bounds)
    Caduceus  MLM-pretrained (its masked-token CE, for reference; not a likelihood)
    Mamba     AR from scratch                                                       (exact)
    HyenaDNA  AR from scratch (causal)                                              (exact)
    HyenaDNA  bidirectional, mdlm from scratch                                      (bound)
AR rows get the whole budget (pretrain + fine-tune steps) so every row sees the same tokens.

    python pipelines/dna_perplexity.py --scale cpu      # ~40-60 min on 2 CPU cores, shared chr22 subset
    python pipelines/dna_perplexity.py --scale paper    # HG38, dna-467k models, L = 1024 (GPU cluster)
    python pipelines/dna_perplexity.py --scale paper --dry-run   # every row: config, model, one step (seconds)
    python pipelines/dna_perplexity.py --from-json results/dna_perplexity_cpu.json   # re-render the table

`--dry-run` builds every row's config and model at the scale's sizes (paper presets included) and
runs one training step and a 2-window evaluation on the sample genome bundled in the package
(32-bp windows, batch 2, one seed, no ../shared/data), in a temporary folder; it writes no table.
`--from-json` rewrites the .md/.json table from the per-seed values a finished run stored, without
training.

Writes results/dna_perplexity_{scale}.md and .json (command, wall time, machine) and keeps every
model directory under runs/dna_perplexity_{scale}/ (the Genomic Benchmarks pipeline can use them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCALES = {
    # CPU: tiny networks (~20-30K parameters), 128-bp windows of the shared 21.6 Mb chr22 subset.
    "cpu": {
        "data": ["data.fasta={shared}/hg19_chr22_subset/chr22.fa.gz", "data.bed={shared}/hg19_chr22_subset/sequences.bed",
                 "data.seq_len=128", "data.rc_prob=0.5", "data.max_n_frac=0.1"],
        "train": ["train.batch_size=16", "train.lr=3e-3", "train.warmup_steps=20", "train.ema=0.99",
                  "train.val_every=100000", "train.ckpt_every=100000", "train.val_batches=1", "train.progress=false",
                  "train.log_every=10", "train.threads=1"],
        "pretrain_steps": 300, "finetune_steps": 300, "d3pm_T": 1000,
        "presets": {"caduceus": "tiny", "mamba": "tiny", "hyena": "tiny"},
        "eval_windows": 256, "seeds": 3,
    },
    # Paper (app. D.7): HG38, L = 1024, batch 1024, Caduceus dna-467k; MLM pretraining then fine-tuning.
    "paper": {
        "data": ["data.fasta=data/hg38/hg38.ml.fa", "data.bed=data/hg38/sequences_human.bed", "data.seq_len=1024",
                 "data.num_workers=8"],
        "train": ["train.batch_size=128", "train.accumulate=8", "train.lr=3e-4", "train.warmup_steps=2500",
                  "train.ema=0.9999", "train.val_every=1000", "train.ckpt_every=1000"],
        "pretrain_steps": 10000, "finetune_steps": 10000, "d3pm_T": 1000,
        # tab. 6 sizes: Caduceus-PS d118 x 4 (470,702), Mamba d128 x 4 (468,608), HyenaDNA tiny-1k (436,096)
        "presets": {"caduceus": "dna-467k", "mamba": "dna-465k", "hyena": "tiny-1k"},
        "eval_windows": 0, "seeds": 3,
    },
}


def row_specs(scale: dict) -> list[dict]:
    p, f, T = scale["pretrain_steps"], scale["finetune_steps"], scale["d3pm_T"]
    pre = scale["presets"]
    return [
        {"row": "Caduceus MLM (pretraining)", "key": "caduceus_mlm", "backbone": "caduceus", "preset": pre["caduceus"],
         "objective": "mlm", "steps": p, "kind": "masked-token CE (not a bound)"},
        {"row": "Caduceus MLM -> MDLM", "key": "caduceus_mdlm", "backbone": "caduceus", "objective": "mdlm",
         "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": "Caduceus MLM -> SEDD", "key": "caduceus_sedd", "backbone": "caduceus", "objective": "sedd",
         "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": f"Caduceus MLM -> D3PM (T={T})", "key": "caduceus_d3pm", "backbone": "caduceus", "objective": "d3pm",
         "T": T, "init": "caduceus_mlm", "steps": f, "kind": "bound"},
        {"row": "Mamba AR", "key": "mamba_ar", "backbone": "mamba", "preset": pre["mamba"], "objective": "ar",
         "steps": p + f, "kind": "exact"},
        {"row": "HyenaDNA AR", "key": "hyena_ar", "backbone": "hyena", "preset": pre["hyena"], "objective": "ar",
         "steps": p + f, "kind": "exact", "extra": ["model.overrides.causal=true"]},
        {"row": "HyenaDNA (bidirectional) MDLM", "key": "hyena_mdlm", "backbone": "hyena", "preset": pre["hyena"],
         "objective": "mdlm", "steps": p + f, "kind": "bound"},
    ]


# --dry-run: the scale's rows unchanged except data size and steps (the genome sample bundled in the package)
DRY_RUN = {
    "data": ["data.fasta=null", "data.bed=null", "data.seq_len=32", "data.num_workers=0"],
    "train": ["train.max_steps=1", "train.batch_size=2", "train.accumulate=1", "train.val_every=100000",
              "train.ckpt_every=100000", "train.val_batches=1", "train.progress=false", "train.threads=1"],
    "eval_windows": 2,
}


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}"


def summarize_rows(specs: list[dict], results: dict[str, list[dict]]) -> list[dict]:
    """One table row per spec: mean over seeds and the range max − min (the paper's tab. 6 "±")."""
    import numpy as np

    table = []
    for spec in specs:
        runs = results.get(spec["key"], [])
        if not runs:
            continue
        ppl = [r["perplexity"] for r in runs]
        bits = [r["bits_per_base"] for r in runs]
        table.append({
            "model": spec["row"], "kind": spec["kind"], "perplexity": f"{np.mean(ppl):.4f}",
            RANGE_COLUMN: f"{max(ppl) - min(ppl):.4f}", "bits/base": f"{np.mean(bits):.4f}",
            "seeds": len(runs), "params": runs[0]["parameters"], "steps": spec["steps"],
            "ppl_mean": float(np.mean(ppl)), "ppl_range": float(max(ppl) - min(ppl)),
            "bits_mean": float(np.mean(bits)), "bits_range": float(max(bits) - min(bits)),
        })
    return table


RANGE_COLUMN = "range (max−min)"
COLUMNS = ["model", "kind", "perplexity", RANGE_COLUMN, "bits/base", "seeds", "params", "steps"]


def write_outputs(summary: dict, results_dir: str, data: list[str]) -> None:
    """results/dna_perplexity_SCALE.json and .md from a summary (command, settings, rows, per-seed runs)."""
    from dnadiff.utils import atomic_write, markdown_table, write_json

    scale, wall, seeds = summary["scale"], summary["wall_seconds"], summary["seeds"]
    os.makedirs(results_dir, exist_ok=True)
    write_json(Path(results_dir) / f"dna_perplexity_{scale}.json", summary)
    md = [f"# DNA perplexity (paper tab. 6), scale `{scale}`", "",
          f"Command: `{summary['command']}`  ", f"Wall time: {wall / 60:.1f} min  ", f"Machine: {summary['machine']}  ",
          f"Data: {', '.join(data)}; test split, {summary['settings']['eval_windows'] or 'all'} windows; "
          f"perplexity and bits/base are means over {seeds} seeds, {RANGE_COLUMN} is the perplexity's "
          "max − min over the seeds (the paper's \"±\").", ""]
    if summary.get("table_rendered_by"):
        md += [f"Table re-rendered without training from the per-seed values in the JSON: "
               f"`{summary['table_rendered_by']}`", ""]
    md += [markdown_table(summary["rows"], COLUMNS), ""]
    atomic_write(Path(results_dir) / f"dna_perplexity_{scale}.md", "\n".join(md))


def rerender(path: str, results_dir: str | None, shared: str, command: str) -> int:
    """Rebuild the table of a finished run from the per-seed values its JSON stores (no training)."""
    from dnadiff.errors import DnadiffError
    from dnadiff.utils import format_table

    try:
        summary = json.loads(Path(path).read_text())
        settings, runs = summary["settings"], summary["runs"]
    except (OSError, ValueError, KeyError) as exc:
        raise DnadiffError(f"--from-json {path}: not a dna_perplexity results JSON ({exc})") from None
    specs = [s for s in row_specs(settings) if s["key"] in runs]
    summary["rows"] = summarize_rows(specs, runs)
    summary.setdefault("seeds", max(len(v) for v in runs.values()))
    summary["table_rendered_by"] = command
    data = summary.get("data") or [d.format(shared=shared) for d in settings["data"]]
    write_outputs(summary, results_dir or str(Path(path).parent), data)
    print(format_table(summary["rows"], COLUMNS))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Paper tab. 6: DNA perplexity of AR vs diffusion models")
    ap.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3)")
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"),
                    help="the project's data folder (default: $DNADIFF_DATA, else ../shared/data)")
    ap.add_argument("--out-dir", default=None, help="where runs go (default runs/dna_perplexity_SCALE)")
    ap.add_argument("--results", default=None, help="where the table goes (default results/)")
    ap.add_argument("--only", default=None,
                    help="comma-separated row keys to run, plus the rows they are initialised from (debugging)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build every row's config and model and run one step on the bundled sample genome")
    ap.add_argument("--from-json", default=None, metavar="JSON",
                    help="re-render the table from a finished run's JSON (per-seed values), no training")
    args = ap.parse_args(argv)
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO),
                                                            *(sys.argv[1:] if argv is None else argv)])
    from dnadiff.errors import DnadiffError

    try:
        if args.from_json:
            return rerender(args.from_json, args.results, args.shared, command)
        return run(args, command)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args, command: str) -> int:
    import tempfile

    from dnadiff.errors import DnadiffError
    import torch

    from dnadiff.checkpoint import load
    from dnadiff.commands.eval import evaluate_model
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train
    from dnadiff.training.data import build_split_dataset
    from dnadiff.utils import format_table

    scale = SCALES[args.scale]
    seeds = args.seeds or scale["seeds"]
    eval_windows = scale["eval_windows"]
    data = [d.format(shared=args.shared) for d in scale["data"]]
    tmp = None
    if args.dry_run:  # same rows, presets and recipe; tiny data and one step
        seeds, eval_windows = 1, DRY_RUN["eval_windows"]
        keys = {o.split("=")[0] for o in DRY_RUN["data"]}
        data = [d for d in data if d.split("=")[0] not in keys] + DRY_RUN["data"]
        if not args.out_dir:
            tmp = tempfile.TemporaryDirectory(prefix="dna_perplexity_dry_run_")
    out_dir = Path(args.out_dir or (tmp.name if tmp else REPO / "runs" / f"dna_perplexity_{args.scale}"))
    specs = row_specs(scale)
    if args.only:  # the rows asked for and the rows they are initialised from
        keep = set(args.only.split(","))
        unknown = keep - {s["key"] for s in specs}
        if unknown:
            raise DnadiffError(f"--only: unknown row key(s) {', '.join(sorted(unknown))}; "
                               f"rows: {', '.join(s['key'] for s in specs)}")
        keep |= {s["init"] for s in specs if s["key"] in keep and s.get("init")}
        specs = [s for s in specs if s["key"] in keep]
    start = time.time()
    results: dict[str, list[dict]] = {}
    import numpy as np

    for seed in range(seeds):
        for spec in specs:
            name = f"{spec['key']}_seed{seed}"
            overrides = [f"name={name}", f"out_dir={out_dir}", f"train.seed={seed}", f"train.max_steps={spec['steps']}",
                         f"model.backbone={spec['backbone']}", f"objective.name={spec['objective']}", *data, *scale["train"],
                         *spec.get("extra", [])]
            if spec.get("preset"):
                overrides.append(f"model.preset={spec['preset']}")
            if spec.get("T"):
                overrides.append(f"objective.T={spec['T']}")
            if spec.get("init"):
                overrides.append(f"model.init_from={out_dir / (spec['init'] + f'_seed{seed}') / 'model'}")
            if args.dry_run:
                overrides += DRY_RUN["train"]
            cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", overrides)
            t0 = time.time()
            res = train(cfg, overwrite=True)
            train_s = time.time() - t0
            model = load(res.model_dir)
            test = build_split_dataset(model.config, model.tokenizer, "test")
            if eval_windows and len(test) > eval_windows:
                idx = np.linspace(0, len(test) - 1, eval_windows).round().astype(int)
                test = torch.utils.data.Subset(test, sorted(set(int(i) for i in idx)))
            ev = evaluate_model(model, test, batch_size=64, seed=1000 + seed, progress=False)
            row = {"seed": seed, "perplexity": ev["perplexity"], "bits_per_base": ev["bits_per_token"],
                   "std_error_bits": ev["bits_std_error"], "bases": ev["num_tokens"], "train_seconds": round(train_s, 1),
                   "parameters": res.metrics["parameters"], "model_dir": str(res.model_dir)}
            results.setdefault(spec["key"], []).append(row)
            print(f"[{time.time() - start:7.0f}s] {spec['row']:<34} seed {seed}: ppl {ev['perplexity']:.4f} "
                  f"({ev['bits_per_token']:.4f} bits/base, train {train_s:.0f}s)", flush=True)

    wall = time.time() - start
    table = summarize_rows(specs, results)
    if args.dry_run:
        print(format_table([{"model": r["model"], "params": r["params"], "steps of the full run": r["steps"]}
                            for r in table]))
        print(f"\ndry run ({args.scale}): {len(table)} rows built, stepped once and evaluated in {wall:.1f} s")
        if tmp:
            tmp.cleanup()
        return 0
    summary = {"command": command, "wall_seconds": round(wall, 1), "machine": machine(), "scale": args.scale,
               "settings": {k: v for k, v in scale.items() if k != "presets"} | {"presets": scale["presets"]},
               "data": data, "seeds": seeds, "rows": table, "runs": results}
    results_dir = args.results or str(REPO / "results")
    write_outputs(summary, results_dir, data)
    print(format_table(table, COLUMNS))
    print(f"\nwrote {results_dir}/dna_perplexity_{args.scale}.md (.json); {wall / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
