"""Caduceus or DiT for the cell-type-conditional DHS MDLM (issue 34 §2), chosen on the validation split.

    python benchmarks/dhs_backbone_choice.py --minutes 15 --threads 1 --out results/dhs_backbone_choice

Each candidate (configs/experiments/dhs_cond_mdlm.yaml: Caduceus-PS d64 x 2; dhs_cond_mdlm_dit.yaml:
DiT tiny, hidden 64 x 2 blocks) is trained for the same wall-clock budget on the same threads, one after
the other (`dnadiff train CONFIG train.max_minutes=M --run-dir WORK/NAME`; a finished run with the same
command is kept), then both score every chr2 validation sequence (4,053 x 200 bp) under their own label
(the conditional bound, MDLM eq. 10 with the data's cell type): the same seed per batch, so the t and mask
draws are the same for both and the per-sequence difference (dnadiff/eval/paired.py) carries little
Monte-Carlo noise. The choice: the lower bound if the paired difference is beyond 2 SE, else the shipped
Caduceus (RC-equivariant by construction, and the backbone of every other DNA recipe). The test split is
not read. Needs the DHS table (`dnadiff data dhs`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from dnadiff.utils import atomic_write, write_json

REPO = Path(__file__).resolve().parent.parent
CANDIDATES = {"caduceus": "experiments/dhs_cond_mdlm", "dit": "experiments/dhs_cond_mdlm_dit"}


def conditional_bound(model, dataset, t_samples: int = 2, batch_size: int = 64, seed: int = 0,
                      labelled: bool = True) -> dict:
    """Per-sequence MDLM bound of `model` on `dataset` ({input_ids, attention_mask, labels} items), each
    sequence under its own label (labelled) or the null label: dnadiff.eval.perplexity.evaluate_bound batch by
    batch (its denoiser carries the batch's labels), batch b drawing its t and masks from a generator seeded
    seed + b, so two models scored with the same arguments see the same draws.
    Returns {"sequence_nats", "sequence_tokens", "bits_per_base"} (dnadiff.eval.paired reads the first two)."""
    import math

    import torch

    from dnadiff.eval.perplexity import evaluate_bound

    nats, tokens = [], []
    for b, start in enumerate(range(0, len(dataset), batch_size)):
        items = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
        x0 = torch.stack([it["input_ids"] for it in items])  # (B, L)
        mask = torch.stack([it["attention_mask"] for it in items])  # (B, L)
        labels = torch.stack([it["labels"] for it in items]) if labelled else None
        out = evaluate_bound(model.make_denoiser(labels=labels), model.objective, [(x0, mask)],
                             num_samples=t_samples, generator=torch.Generator().manual_seed(seed + b),
                             per_sequence=True)
        nats += out["sequence_nats"]
        tokens += out["sequence_tokens"]
    return {"sequence_nats": nats, "sequence_tokens": tokens,
            "bits_per_base": sum(nats) / sum(tokens) / math.log(2.0)}


def train(name: str, config: str, minutes: float, work: Path, threads: int, log) -> dict:
    run_dir = work / name
    argv = ["dnadiff", "train", config, f"train.max_minutes={minutes:g}", "--run-dir", str(run_dir),
            "--threads", str(threads), "--overwrite", "-q"]
    command = " ".join(argv)
    stamp = run_dir / "command.json"
    metrics_path = run_dir / "model" / "metrics.json"
    if metrics_path.is_file() and stamp.is_file() and json.loads(stamp.read_text()).get("command") == command:
        log(f"{name}: kept {run_dir} (same command)")
        kept = json.loads(stamp.read_text())
    else:
        log(f"{name}: {command}")
        t0, c0 = time.time(), os.times()
        subprocess.run(argv, check=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        c1 = os.times()
        kept = {"command": command, "wall_s": round(time.time() - t0, 1),
                "cpu_s": round(c1.children_user - c0.children_user + c1.children_system - c0.children_system, 1)}
        write_json(stamp, kept)
    metrics = json.loads(metrics_path.read_text())
    return kept | {"config": f"configs/{config}.yaml", "steps": metrics.get("steps"),
                   "parameters": metrics.get("parameters"),
                   "train_wall_s": metrics.get("wall_seconds_this_session"),
                   "run_valid_bits": metrics.get("val_bits_per_token")}


def choose(diff: dict) -> tuple[str, str]:
    """(chosen candidate, why): DiT only when its bound is lower by more than 2 paired SE."""
    if diff["beyond_2se"] and diff["mean"] < 0:
        return "dit", "DiT's bound is lower by more than 2 paired SE"
    if diff["beyond_2se"]:
        return "caduceus", "Caduceus's bound is lower by more than 2 paired SE"
    return "caduceus", "within 2 SE: the shipped Caduceus (RC-equivariant) is kept"


def render(result: dict) -> str:
    d = result["dit_minus_caduceus"]
    lines = ["# Caduceus or DiT for the conditional DHS MDLM (issue 34 §2), on validation", "",
             f"`{result['command']}`  ",
             f"{result['wall_s']:.0f} s wall; {result['machine']}; load before {result['load_before']}, "
             f"after {result['load_after']}.", "",
             f"Each candidate trained {result['minutes']:g} min wall on {result['threads']} thread(s), one after the "
             f"other; the bound of all {result['n_valid']:,} chr2 validation sequences under their own cell-type "
             f"label, {result['t_samples']} t-samples each, the same draws for both (paired).", "",
             "| candidate | config | parameters | steps | train wall (s) | valid bits/base (± SE) | "
             "run's own valid (256 seq.) |", "|---|---|---|---|---|---|---|"]
    for name, row in result["rows"].items():
        lines.append(f"| {name} | {row['config']} | {row['parameters']:,} | {row['steps']:,} | "
                     f"{row['train_wall_s']:.0f} | {row['valid_bits']:.4f} ± {row['valid_se']:.4f} | "
                     f"{row['run_valid_bits']:.4f} |")
    lines += ["", f"DiT − Caduceus: {d['mean']:+.4f} ± {d['std_error']:.4f} bits/base (paired over "
              f"{d['n_windows']:,} sequences; DiT lower on {100 * d['wins']:.0f} %).", "",
              f"**Chosen: {result['chosen']}** ({result['why']})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=15.0, help="training wall clock per candidate")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--t-samples", type=int, default=2, help="t draws per validation sequence")
    ap.add_argument("--work", default="runs/dhs_backbone_choice")
    ap.add_argument("--out", default="results/dhs_backbone_choice", help="path without extension")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from dnadiff.checkpoint import load
    from dnadiff.data.dhs import DHSDataset, load_dhs
    from dnadiff.eval.paired import paired_difference
    from dnadiff.machine import describe_machine, load_average

    torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0, load_before = time.time(), load_average()
    valid = DHSDataset(load_dhs(), "valid")
    rows, scored = {}, {}
    for name, config in CANDIDATES.items():
        rows[name] = train(name, config, args.minutes, work, args.threads, lambda m: print(m, flush=True))
        model = load(work / name / "model")
        model.backbone.eval()
        scored[name] = conditional_bound(model, valid, t_samples=args.t_samples)
        bits = np.asarray(scored[name]["sequence_nats"]) / np.asarray(scored[name]["sequence_tokens"]) / np.log(2)
        rows[name].update(valid_bits=scored[name]["bits_per_base"],
                          valid_se=float(bits.std(ddof=1) / np.sqrt(bits.size)))
        print(f"{name}: valid {rows[name]['valid_bits']:.4f} bits/base, {rows[name]['steps']} steps", flush=True)
    diff = paired_difference(scored["dit"], scored["caduceus"])
    chosen, why = choose(diff)
    result = {"command": "python benchmarks/dhs_backbone_choice.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "minutes": args.minutes, "threads": args.threads, "t_samples": args.t_samples,
              "n_valid": len(valid), "rows": rows, "dit_minus_caduceus": diff, "chosen": chosen, "why": why,
              "wall_s": time.time() - t0, "machine": describe_machine(), "load_before": load_before,
              "load_after": load_average()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out.with_name(out.name + ".json"), result)
    atomic_write(out.with_name(out.name + ".md"), render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
