"""Paper tab. 6: test-split perplexity of DNA models, one backbone family per row, same data/budget.

Rows (each over >= 3 seeds, mean ± (max-min)/2):
    Caduceus  MLM-pretrained -> fine-tuned with mdlm | sedd | d3pm (discrete T)   (bounds)
    Caduceus  MLM-pretrained (its masked-token CE, for reference; not a likelihood)
    Mamba     AR from scratch                                                       (exact)
    HyenaDNA  AR from scratch (causal)                                              (exact)
    HyenaDNA  bidirectional, mdlm from scratch                                      (bound)
AR rows get the whole budget (pretrain + fine-tune steps) so every row sees the same tokens.

    python pipelines/dna_perplexity.py --scale cpu      # ~40-60 min on 2 CPU cores, shared chr22 subset
    python pipelines/dna_perplexity.py --scale paper    # HG38, dna-467k models, L = 1024 (GPU cluster)

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
    ap.add_argument("--shared", default=os.environ.get("DNADIFF_DATA") or str(REPO.parent / "shared" / "data"),
                    help="the project's data folder (default: $DNADIFF_DATA, else ../shared/data)")
    ap.add_argument("--out-dir", default=None, help="where runs go (default runs/dna_perplexity_SCALE)")
    ap.add_argument("--results", default=str(REPO / "results"), help="where the table goes")
    ap.add_argument("--only", default=None, help="comma-separated row keys to run (debugging)")
    args = ap.parse_args()

    import torch

    from dnadiff.checkpoint import load
    from dnadiff.commands.eval import evaluate_model
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train
    from dnadiff.training.data import build_split_dataset
    from dnadiff.utils import format_table, markdown_table, write_json

    scale = SCALES[args.scale]
    seeds = args.seeds or scale["seeds"]
    out_dir = Path(args.out_dir or REPO / "runs" / f"dna_perplexity_{args.scale}")
    specs = row_specs(scale)
    if args.only:
        keep = set(args.only.split(","))
        specs = [s for s in specs if s["key"] in keep or any(s.get("init") == k for k in keep)]
    data = [d.format(shared=args.shared) for d in scale["data"]]
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
            cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", overrides)
            t0 = time.time()
            res = train(cfg, overwrite=True)
            train_s = time.time() - t0
            model = load(res.model_dir)
            test = build_split_dataset(model.config, model.tokenizer, "test")
            if scale["eval_windows"] and len(test) > scale["eval_windows"]:
                idx = np.linspace(0, len(test) - 1, scale["eval_windows"]).round().astype(int)
                test = torch.utils.data.Subset(test, sorted(set(int(i) for i in idx)))
            ev = evaluate_model(model, test, batch_size=64, seed=1000 + seed, progress=False)
            row = {"seed": seed, "perplexity": ev["perplexity"], "bits_per_base": ev["bits_per_token"],
                   "std_error_bits": ev["bits_std_error"], "bases": ev["num_tokens"], "train_seconds": round(train_s, 1),
                   "parameters": res.metrics["parameters"], "model_dir": str(res.model_dir)}
            results.setdefault(spec["key"], []).append(row)
            print(f"[{time.time() - start:7.0f}s] {spec['row']:<34} seed {seed}: ppl {ev['perplexity']:.4f} "
                  f"({ev['bits_per_token']:.4f} bits/base, train {train_s:.0f}s)", flush=True)

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
            "bits/base": f"{np.mean(bits):.4f}", "seeds": len(runs), "params": runs[0]["parameters"],
            "steps": spec["steps"], "ppl_mean": float(np.mean(ppl)),
        })
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]])
    summary = {"command": command, "wall_seconds": round(wall, 1), "machine": machine(), "scale": args.scale,
               "settings": {k: v for k, v in scale.items() if k != "presets"} | {"presets": scale["presets"]},
               "rows": table, "runs": results}
    os.makedirs(args.results, exist_ok=True)
    write_json(Path(args.results) / f"dna_perplexity_{args.scale}.json", summary)
    cols = ["model", "kind", "perplexity", "bits/base", "seeds", "params", "steps"]
    md = [f"# DNA perplexity (paper tab. 6), scale `{args.scale}`", "",
          f"Command: `{command}`  ", f"Wall time: {wall / 60:.1f} min  ", f"Machine: {machine()}  ",
          f"Data: {', '.join(data)}; test split, {scale['eval_windows'] or 'all'} windows; "
          f"mean ± (max-min)/2 over {seeds} seeds.", "", markdown_table(table, cols), ""]
    from dnadiff.utils import atomic_write

    atomic_write(Path(args.results) / f"dna_perplexity_{args.scale}.md", "\n".join(md))
    print(format_table(table, cols))
    print(f"\nwrote {args.results}/dna_perplexity_{args.scale}.md (.json); {wall / 60:.1f} min")


if __name__ == "__main__":
    main()
