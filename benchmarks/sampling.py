"""Sampler speed: wall time and NFE per sample for every sampler on one backbone.

    python benchmarks/sampling.py                         # tiny Caduceus, L = 1024, T = 1000
    python benchmarks/sampling.py --samplers ancestral,cached --num 1 --threads 1 --out bench.json

The model is randomly initialised: NFE and time do not depend on what it learned (the unmasking
rate is fixed by the schedule), only on its cost. For `cached`, NFE should be the number of steps at
which a token changed + 1 (reported as `changed_steps` from the ancestral run with the same seed),
and wall time should drop accordingly, since the model call dominates a step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.backbones import build_backbone  # noqa: E402
from dnadiff.diffusion import build_schedule  # noqa: E402
from dnadiff.samplers import build_sampler  # noqa: E402
from dnadiff.utils import format_table, write_json  # noqa: E402

MASK_ID, VOCAB = 3, 12  # the DNA tokenizer's ids


def sampler_options(name: str, steps: int, length: int) -> dict:
    if name == "semi_ar":
        return {"inner": "cached", "window": length // 2, "stride": length // 4, "inner_options": {"steps": steps // 2}}
    if name == "first_hitting":
        return {}
    if name == "remdm":
        return {"steps": steps, "schedule": "cap", "eta": 0.008}
    return {"steps": steps}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backbone", default="caduceus")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--num", type=int, default=1, help="samples per sampler (one batch)")
    p.add_argument("--samplers", default="ancestral,cached,analytic,first_hitting,confidence,remdm,semi_ar")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = build_backbone(args.backbone, preset=args.preset, vocab_size=VOCAB).to(args.device).eval()
    schedule = build_schedule("loglinear", eps=1e-3)
    rows = []
    changed = None
    for name in args.samplers.split(","):
        sampler = build_sampler(name, **sampler_options(name, args.steps, args.length))
        g = torch.Generator(device=args.device).manual_seed(args.seed)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        x = sampler.generate(model, schedule, MASK_ID, (args.num, args.length), generator=g)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        if name == "ancestral":
            changed = sampler.last_changed_steps
        row = {
            "sampler": name,
            "nfe": sampler.last_nfe,
            "wall_s": wall,
            "wall_s_per_sample": wall / args.num,
            "tokens_per_s": args.num * args.length / wall,
            "masked_left": int((x == MASK_ID).sum()),
        }
        if name == "cached" and changed is not None:
            row["ancestral_changed_steps"] = changed
        rows.append(row)
        print(format_table([row]), flush=True)
    by = {r["sampler"]: r for r in rows}
    summary = {}
    if "ancestral" in by and "cached" in by:
        summary["cached_speedup"] = by["ancestral"]["wall_s"] / by["cached"]["wall_s"]
        summary["cached_nfe"] = by["cached"]["nfe"]
        summary["ancestral_changed_steps_plus_one"] = (changed or 0) + 1
    print()
    print(format_table(rows))
    if summary:
        print(json.dumps(summary, indent=1))
    if args.out:
        write_json(args.out, {"settings": vars(args), "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
