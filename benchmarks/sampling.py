"""Sampler speed: wall time and NFE per sample for every sampler on one backbone.

    python benchmarks/sampling.py                         # tiny Caduceus, L = 1024, T = 1000
    python benchmarks/sampling.py --samplers ancestral,cached --num 1 --threads 1 --out bench.json

The model is randomly initialised: NFE and time do not depend on what it learned (the unmasking
rate is fixed by the schedule), only on its cost. For `cached`, NFE should be the number of steps at
which a token changed + 1 (reported as `changed_steps` from the ancestral run with the same seed),
and wall time should drop accordingly, since the model call dominates a step.

    python benchmarks/sampling.py --ar-decoding --out results/ar_decoding.json   # AR time per token

`--ar-decoding`: time per generated token of the `autoregressive` sampler for every causal
backbone (tiny presets) at L = 64 ... 1024, before (`use_cache=False`: the whole prefix re-run for
every token, O(L) per token for Mamba/Hyena, O(L^2) attention for DiT) and after (incremental
decoding through the backbones' `allocate_cache` / `step`: Mamba O(1), Hyena and DiT O(L)). Both
runs use the same seed and must give the same tokens (checked). Writes JSON and a markdown table.
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


def _sync(device: str) -> None:
    """Wait for queued CUDA kernels, so that a wall-clock interval covers the work it times."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


AR_BACKBONES = [("mamba", "tiny"), ("hyena", "tiny-causal"), ("dit", "tiny-causal")]


def ar_decoding(args) -> int:
    from dnadiff.machine import describe_machine, load_average, machine_info
    from dnadiff.model import Denoiser
    from dnadiff.utils import markdown_table

    lengths = [int(v) for v in args.lengths.split(",")]
    schedule = build_schedule("loglinear", eps=1e-3)
    rows = []
    for name, preset in AR_BACKBONES:
        torch.manual_seed(0)
        model = build_backbone(name, preset=preset, vocab_size=VOCAB).to(args.device).eval()
        den = Denoiser(model)
        for L in lengths:
            row = {"backbone": f"{name}:{preset}", "L": L}
            toks = {}
            for use_cache in (False, True):
                smp = build_sampler("autoregressive", first_token_ids=[7, 8, 9, 10], use_cache=use_cache)
                _sync(args.device)
                t0 = time.perf_counter()
                x = smp.generate(den, schedule, MASK_ID, (args.num, L), generator=args.seed)
                _sync(args.device)
                wall = time.perf_counter() - t0
                toks[use_cache] = x
                row["ms_per_token_" + ("cached" if use_cache else "rerun")] = 1e3 * wall / (L - 1)
            row["speedup"] = row["ms_per_token_rerun"] / row["ms_per_token_cached"]
            # the backbone alone: L single-token steps vs one full forward per token (no sampler overhead)
            ids = toks[True]
            with torch.no_grad():
                cache = model.allocate_cache(args.num, L)
                _sync(args.device)
                t0 = time.perf_counter()
                for i in range(L):
                    model.step(ids[:, i], cache)
                _sync(args.device)  # CUDA kernels run asynchronously: time them finished
                row["ms_per_token_step_only"] = 1e3 * (time.perf_counter() - t0) / L
                t0 = time.perf_counter()
                model(ids)
                _sync(args.device)
                row["ms_forward_full_L"] = 1e3 * (time.perf_counter() - t0)
            row["same_tokens"] = bool(torch.equal(toks[False], toks[True]))
            rows.append(row)
            print(format_table([row]), flush=True)
    load = load_average()
    meta = {"settings": vars(args), "machine": machine_info(), "load_average": load}
    print()
    print(format_table(rows))
    print(load)
    if args.out:
        write_json(args.out, {**meta, "rows": rows})
        md = os.path.splitext(args.out)[0] + ".md"
        lines = [
            "# AR decoding: time per token (ms), full re-run vs incremental decoding",
            "",
            f"`python benchmarks/sampling.py --ar-decoding --num {args.num} --threads {args.threads} "
            f"--device {args.device} --out {args.out}`; tiny presets, randomly initialised; batch {args.num}.",
            f"Machine: {describe_machine(meta['machine'])}; at the end, {load}.",
            "",
            "Columns: the whole sampler (draws included) per generated token, with the full re-run and",
            "with the cache; then the backbone alone: one `step` call, and one full forward at length L",
            "(what the re-run pays for the last token).",
            "",
            markdown_table([{"backbone": r["backbone"], "L": r["L"], "re-run ms/token": f"{r['ms_per_token_rerun']:.3f}",
                             "cached ms/token": f"{r['ms_per_token_cached']:.3f}", "speedup": f"{r['speedup']:.1f}",
                             "step only ms": f"{r['ms_per_token_step_only']:.3f}",
                             "full forward at L ms": f"{r['ms_forward_full_L']:.2f}", "same tokens": r["same_tokens"]}
                            for r in rows]),
        ]
        from dnadiff.utils import atomic_write

        atomic_write(md, "\n".join(lines) + "\n")
    return 0 if all(r["same_tokens"] for r in rows) else 1


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
    p.add_argument("--ar-decoding", action="store_true", help="AR time per token vs L, re-run vs cached")
    p.add_argument("--lengths", default="64,128,256,512,1024", help="--ar-decoding lengths")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.ar_decoding:
        return ar_decoding(args)
    model = build_backbone(args.backbone, preset=args.preset, vocab_size=VOCAB).to(args.device).eval()
    schedule = build_schedule("loglinear", eps=1e-3)
    rows = []
    changed = None
    for name in args.samplers.split(","):
        sampler = build_sampler(name, **sampler_options(name, args.steps, args.length))
        g = torch.Generator(device=args.device).manual_seed(args.seed)
        _sync(args.device)
        t0 = time.perf_counter()
        x = sampler.generate(model, schedule, MASK_ID, (args.num, args.length), generator=g)
        _sync(args.device)
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
