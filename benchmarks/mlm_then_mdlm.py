"""MLM -> MDLM vs MDLM from scratch at the same number of optimiser steps, scored on validation windows.

    DNADIFF_DATA=/path/to/shared/data python benchmarks/mlm_then_mdlm.py --steps 600 \
        --work runs/mlm_then_mdlm --out results/mlm_then_mdlm_valid.json

Two arms, each in its own process with one thread (both run at once on a 2-core machine), with the
cpu-hour MDLM config (configs/experiments/cpu_hour_caduceus_mdlm.yaml: Caduceus-PS d64 x 2, 128-bp
windows, batch 64, lr 3e-3 constant, EMA 0.999):
  mdlm       MDLM from scratch for 2 x --steps steps;
  mlm_mdlm   Caduceus-style masked LM (15% of positions, 80/10/10) for --steps steps, then MDLM for
             --steps steps initialised from it (fresh Adam and warm-up; the two-stage recipe of
             fine-tuning an MLM-pretrained Caduceus into a generator).
Step budgets, not minutes: an MLM step and an MDLM step cost the same network work, so the comparison
holds on a shared machine whatever else runs. Both final models are scored with the MDLM bound
(--t-samples stratified t-samples per window, the same seed: the same t and mask draws for both) on
--windows validation windows evenly spread over the split (the windows of pipelines/cpu_hour.py);
the paired difference is mean ± SE over windows (dnadiff/eval/paired.py). Validation only: the test
split is not read. Writes JSON (temporary name, then renamed) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CONFIG = "experiments/cpu_hour_caduceus_mdlm"
ARMS = ("mdlm", "mlm_mdlm")


def data_overrides() -> list[str]:
    shared = os.environ.get("DNADIFF_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    return [f"data.fasta={shared}/hg19_chr22_subset/chr22.fa.gz", f"data.bed={shared}/hg19_chr22_subset/sequences.bed"]


def train_stage(work: Path, name: str, steps: int, extra: list[str]) -> tuple[str, float]:
    """Train one stage; (its model directory, wall seconds)."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    over = [f"name={name}", f"out_dir={work}", *data_overrides(), f"train.max_steps={steps}", "train.max_minutes=600",
            f"train.val_every={steps}", "train.threads=1", "train.progress=false", *extra]
    t0 = time.time()
    res = train(load_config(RunConfig, CONFIG, over), overwrite=True)
    return str(res.model_dir), time.time() - t0


def run_arm(arm: str, steps: int, work: Path) -> dict:
    if arm == "mdlm":
        model, wall = train_stage(work, "mdlm", 2 * steps, [])
        return {"arm": arm, "model": model, "wall_seconds": round(wall, 1), "stages": [f"mdlm {2 * steps} steps"]}
    mlm, wall_a = train_stage(work, "mlm", steps, ["objective.name=mlm"])
    model, wall_b = train_stage(work, "mlm_mdlm", steps, [f"model.init_from={mlm}"])
    return {"arm": arm, "model": model, "wall_seconds": round(wall_a + wall_b, 1),
            "stages": [f"mlm {steps} steps", f"mdlm {steps} steps from the MLM weights"]}


def score(arms: dict, windows: int, t_samples: int) -> dict:
    """Both arms' MDLM bound on the same validation windows, paired (mlm_mdlm − mdlm)."""
    from padded_windows import windows_of

    from dnadiff.checkpoint import load
    from dnadiff.eval import evaluate_model, paired_difference

    res = {}
    for arm, rec in arms.items():
        model = load(rec["model"])
        res[arm] = evaluate_model(model, windows_of(model, "valid", windows), batch_size=16,
                                  num_samples=t_samples, stratify_repeats=True, progress=False, per_sequence=True)
        rec["valid_bits_per_base"] = float(res[arm]["bits_per_token"])
    p = paired_difference(res["mlm_mdlm"], res["mdlm"])  # dnadiff/eval/paired.py
    return {"mlm_mdlm_minus_mdlm": {"mean": p["mean"], "std_error": p["std_error"], "n": p["n_windows"],
                                    "beyond_2se": p["beyond_2se"]},
            "mlm_mdlm_lower_share": p["wins"]}


def main(argv: list[str] | None = None) -> int:
    import _common
    from padded_windows import window_options

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=600, help="steps per stage (the MDLM-only arm trains 2x)")
    ap.add_argument("--work", default="runs/mlm_then_mdlm")
    window_options(ap, 512, split=False)  # the valid split
    ap.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)  # a worker process: train one arm
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    if args.steps < 1:
        print(f"error: --steps {args.steps}: must be >= 1", file=sys.stderr)
        return 2
    if args.arm:  # worker: train, write its record, exit
        rec = run_arm(args.arm, args.steps, work)
        (work / f"{args.arm}.json").write_text(json.dumps(rec))
        return 0
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.utils import format_table

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = {arm: subprocess.Popen([sys.executable, __file__, "--arm", arm, "--steps", str(args.steps),
                                    "--work", str(work)], env=env,
                                   stdout=open(work / f"{arm}.log", "w"), stderr=subprocess.STDOUT)
             for arm in ARMS}
    for arm, p in procs.items():
        if p.wait():
            print(f"error: arm {arm} failed (exit {p.returncode}); see {work / (arm + '.log')}", file=sys.stderr)
            return 1
    arms = {arm: json.loads((work / f"{arm}.json").read_text()) for arm in ARMS}
    out = {"command": "python benchmarks/mlm_then_mdlm.py " + " ".join(argv or sys.argv[1:]),
           "machine": describe_machine(), "load": load_average(), "steps_per_stage": args.steps,
           "windows": args.windows, "t_samples": args.t_samples, "arms": arms,
           **score(arms, args.windows, args.t_samples), "wall_seconds": round(time.time() - t0, 1)}
    print(format_table([{"arm": a, "stages": "; ".join(r["stages"]),
                         "valid bits/base": f"{r['valid_bits_per_base']:.4f}", "train wall (s)": r["wall_seconds"]}
                        for a, r in arms.items()]))
    d = out["mlm_mdlm_minus_mdlm"]
    print(f"MLM->MDLM − MDLM: {d['mean']:+.4f} ± {d['std_error']:.4f} bits/base over {d['n']} valid windows")
    return _common.save(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
