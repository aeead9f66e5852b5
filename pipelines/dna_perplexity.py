"""Paper tab. 6: test-split perplexity of DNA models, one backbone family per row, same data/budget.

Rows (each over >= 3 seeds, mean ± (max-min)/2):
    Caduceus  MLM-pretrained -> fine-tuned with mdlm | sedd | d3pm (discrete T)   (bounds)
    Caduceus  MLM-pretrained (its masked-token CE, for reference; not a likelihood)
    Mamba     AR from scratch                                                       (exact)
    HyenaDNA  AR from scratch (causal)                                              (exact)
    HyenaDNA  bidirectional, mdlm from scratch                                      (bound)
AR rows get the whole budget (pretrain + fine-tune steps) so every row sees the same tokens.
Classical baselines (pipelines/perplexity_baselines.py): order-k Markov chains (interpolated
Kneser-Ney) for k = 0, 3, 5, 8 and the k chosen on the valid split, same train split and test windows.

    python pipelines/dna_perplexity.py --scale cpu --only-baselines    # add the Markov rows to the stored table
    python pipelines/dna_perplexity.py --scale cpu --budget-minutes 60 --seeds 1 --only caduceus_mdlm,mamba_ar
        # a wall-clock budget split over the training runs (paper sizes and 1024-bp windows from 60 min)

    python pipelines/dna_perplexity.py --scale cpu      # ~40-60 min on 2 CPU cores, shared chr22 subset
    python pipelines/dna_perplexity.py --scale paper    # HG38, dna-467k models, L = 1024 (GPU cluster)

Writes results/dna_perplexity_{scale}.md and .json (with --budget-minutes N: dna_perplexity_cpu_budgetNmin.*;
command, wall time, machine, load) and keeps every
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
sys.path.insert(0, str(Path(__file__).resolve().parent))  # perplexity_baselines beside this file

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
        "presets": {"caduceus": "dna-467k", "mamba": "dna-467k", "hyena": "tiny-1k"},
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


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description="Paper tab. 6: DNA perplexity of AR vs diffusion models")
    ap.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3)")
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="the shared data folder")
    ap.add_argument("--out-dir", default=None, help="where runs go (default runs/dna_perplexity_SCALE)")
    ap.add_argument("--results", default=str(REPO / "results"), help="where the table goes")
    ap.add_argument("--only", default=None, help="comma-separated row keys to run (debugging)")
    ap.add_argument("--no-markov", action="store_true", help="skip the Markov baseline rows")
    ap.add_argument("--only-baselines", action="store_true",
                    help="fit and score only the Markov rows; keep the neural rows of the existing results JSON")
    ap.add_argument("--budget-minutes", type=float, default=None,
                    help="cpu scale: neural training wall clock in minutes, split over the runs by step share "
                         "(each run stops on time, not steps); from 60 min the defaults become --sizes paper --seq-len 1024")
    ap.add_argument("--sizes", choices=["tiny", "paper"], default=None,
                    help="cpu scale: tiny presets, or the paper's ~470K models (Caduceus-PS dna-467k, Mamba AR "
                         "gb-d128 = 468,608 parameters, HyenaDNA tiny-1k)")
    ap.add_argument("--seq-len", type=int, default=None, help="cpu scale: window length (default 128)")
    args = ap.parse_args()
    if args.budget_minutes is not None and (args.scale != "cpu" or args.budget_minutes <= 0):
        ap.error("--budget-minutes needs --scale cpu and a positive number")

    import torch

    from dnadiff.checkpoint import load
    from dnadiff.commands.eval import evaluate_model
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train
    from dnadiff.training.data import build_split_dataset
    from dnadiff.utils import format_table, markdown_table, write_json
    from perplexity_baselines import (budget_seconds, compare_with_markov, markov_specs, run_markov_rows,
                                      timer_callback)

    scale = dict(SCALES[args.scale])
    big = args.budget_minutes is not None and args.budget_minutes >= 60
    if args.scale == "cpu" and ((args.sizes or "paper") if big else args.sizes) == "paper":
        scale["presets"] = {"caduceus": "dna-467k", "mamba": "gb-d128", "hyena": "tiny-1k"}
    seq_len = args.seq_len or (1024 if big and args.scale == "cpu" else None)
    if seq_len:
        scale["data"] = [d for d in scale["data"] if not d.startswith("data.seq_len=")] + [f"data.seq_len={seq_len}"]
    seeds = args.seeds or scale["seeds"]
    # a budget run is its own experiment: its table does not replace the step-budget one
    stem = f"dna_perplexity_{args.scale}" + (f"_budget{args.budget_minutes:g}min" if args.budget_minutes else "")
    out_dir = Path(args.out_dir or REPO / "runs" / stem)
    specs = row_specs(scale)
    if args.only:
        keep = set(args.only.split(","))
        needed = {s["init"] for s in specs if s["key"] in keep and s.get("init")}  # a kept row's pretraining
        specs = [s for s in specs if s["key"] in keep | needed or any(s.get("init") == k for k in keep)]
    data = [d.format(shared=args.shared) for d in scale["data"]]
    start = time.time()
    results: dict[str, list[dict]] = {}
    import numpy as np

    def evaluate_dir(model_dir, seed: int) -> dict:
        model = load(model_dir)
        test = build_split_dataset(model.config, model.tokenizer, "test")
        if scale["eval_windows"] and len(test) > scale["eval_windows"]:
            idx = np.linspace(0, len(test) - 1, scale["eval_windows"]).round().astype(int)
            test = torch.utils.data.Subset(test, sorted(set(int(i) for i in idx)))
        ev = evaluate_model(model, test, batch_size=64, seed=1000 + seed, progress=False)
        return {"seed": seed, "perplexity": ev["perplexity"], "bits_per_base": ev["bits_per_token"],
                "std_error_bits": ev["bits_std_error"], "bases": ev["num_tokens"]}

    prior = None
    results_json = Path(args.results) / f"{stem}.json"
    if args.only_baselines:  # the neural rows as the earlier run measured them
        if not results_json.is_file():
            sys.exit(f"error: --only-baselines: {results_json} not found (run the pipeline once first)")
        prior = json.loads(results_json.read_text())
        if prior.get("settings", {}).get("data") != scale["data"]:
            sys.exit(f"error: --only-baselines: {results_json} was made with other data settings")
        results = {k: v for k, v in prior["runs"].items() if not k.startswith("markov")}
        specs = [s for s in specs if s["key"] in results]
    budget = budget_seconds(specs, args.budget_minutes, seeds) if args.budget_minutes else {}
    for seed in range(seeds if prior is None else 0):
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
            if budget:  # time, not steps, ends the run
                overrides.append("train.max_steps=1000000")
            cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", overrides)
            t0 = time.time()
            res = train(cfg, overwrite=True, callbacks=[timer_callback(budget[spec["key"]])] if budget else None)
            train_s = time.time() - t0
            row = evaluate_dir(res.model_dir, seed)
            row.update(train_seconds=round(train_s, 1), parameters=res.metrics["parameters"],
                       steps_done=res.metrics["steps"], model_dir=str(res.model_dir))
            results.setdefault(spec["key"], []).append(row)
            print(f"[{time.time() - start:7.0f}s] {spec['row']:<34} seed {seed}: ppl {row['perplexity']:.4f} "
                  f"({row['bits_per_base']:.4f} bits/base, train {train_s:.0f}s, {row['steps_done']} steps)", flush=True)
    if not args.no_markov:
        specs = specs + markov_specs()
        results.update(run_markov_rows(data, out_dir, evaluate_dir, echo=lambda m: print(
            f"[{time.time() - start:7.0f}s] {m}", flush=True)))

    wall = time.time() - start
    table = []
    for spec in specs:
        runs = results.get(spec["key"], [])
        if not runs:
            continue
        ppl = [r["perplexity"] for r in runs]
        bits = [r["bits_per_base"] for r in runs]
        table.append({
            "model": spec["row"], "kind": spec["kind"], "perplexity": f"{np.mean(ppl):.4f} ± {(max(ppl) - min(ppl)) / 2:.4f}",
            "bits/base": f"{np.mean(bits):.4f}", "seeds": len(runs) if not spec.get("markov") else "- (exact fit)",
            "params": runs[0]["parameters"],
            "steps": (round(float(np.mean([r["steps_done"] for r in runs]))) if budget else spec["steps"])
            if not spec.get("markov") else f"counts, k={runs[0]['order']}",
            "ppl_mean": float(np.mean(ppl)), "key": spec["key"],
        })
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]])
    load_avg = "load average {:.2f}, {:.2f}, {:.2f} (1, 5, 15 min)".format(*os.getloadavg())
    versus = compare_with_markov(table, results)
    stored = Path(args.results) / f"dna_perplexity_{args.scale}.json"  # --no-markov: the table's own Markov row
    if args.no_markov and not versus and stored.is_file() and stored != results_json:
        ref = json.loads(stored.read_text())
        if ref.get("settings", {}).get("data") == scale["data"] and "markov_best" in ref.get("runs", {}):
            versus = compare_with_markov(table, {**results, "markov_best": ref["runs"]["markov_best"]})
            versus[0] += f" (fitted by `{ref['command']}`, same data and test windows)"
    summary = {"command": command, "wall_seconds": round(wall, 1), "machine": machine(), "scale": args.scale,
               "settings": {k: v for k, v in scale.items() if k != "presets"} | {"presets": scale["presets"]},
               "rows": table, "runs": results, "load_average_at_end": load_avg, "versus_markov": versus,
               "budget_minutes": args.budget_minutes, "budget_seconds_per_run": budget}
    if prior:
        summary["neural_rows_from"] = {k: prior.get(k) for k in ("command", "wall_seconds", "machine")}
    os.makedirs(args.results, exist_ok=True)
    write_json(Path(args.results) / f"{stem}.json", summary)
    cols = ["model", "kind", "perplexity", "bits/base", "seeds", "params", "steps"]
    md = [f"# DNA perplexity (paper tab. 6), scale `{args.scale}`", "",
          f"Command: `{command}`  ", f"Wall time: {wall / 60:.1f} min  ", f"Machine: {machine()}; {load_avg} at the end  ",
          *([f"Neural rows reused from `{prior['command']}` ({prior.get('wall_seconds', 0) / 60:.1f} min); this run "
             f"fitted the Markov rows only.  "] if prior else []),
          *([f"Budget: {args.budget_minutes:g} min of neural training split over the runs by step share "
             f"({', '.join(f'{k} {v:.0f}s' for k, v in budget.items())}); steps = steps done (mean).  "] if budget else []),
          f"Data: {', '.join(data)}; test split, {scale['eval_windows'] or 'all'} windows; "
          f"mean ± (max-min)/2 over {seeds if prior is None else len(next(iter(results.values()), []))} seeds.",
          "", markdown_table(table, cols), "", *versus, ""]
    from dnadiff.utils import atomic_write

    atomic_write(Path(args.results) / f"{stem}.md", "\n".join(md))
    print(format_table(table, cols))
    print(f"\nwrote {args.results}/{stem}.md (.json); {wall / 60:.1f} min")


if __name__ == "__main__":
    main()
