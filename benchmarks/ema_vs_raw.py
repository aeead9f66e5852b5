"""EMA on or off: a training checkpoint's raw weights vs its EMA weights, paired per validation window.

    DNADIFF_DATA=/path/to/shared/data python benchmarks/ema_vs_raw.py \
        --model runs/cpu_hour/caduceus_mdlm/model --checkpoint runs/cpu_hour/caduceus_mdlm/checkpoints/last.ckpt \
        --split valid --windows 512 --t-samples 16 --out results/ema_vs_raw_valid.json

A dnadiff training checkpoint holds both: Lightning's `state_dict` (the optimiser's weights, what
training with train.ema=0 would export at that step) and `checkpoint["dnadiff"]["ema"]` (the EMA
shadow, what dnadiff exports and evaluates). The model directory gives the config and tokenizer.
Both weight sets score the same windows (n evenly spread over the split, as pipelines/cpu_hour.py)
with the same seed, so the MDLM bound's t and mask draws are the same for both and the paired
difference (dnadiff/eval/paired.py: mean ± SE over windows) carries little Monte-Carlo noise.
The validation split only: a choice made here may be reported on test once.
"""

from __future__ import annotations

import argparse
import sys
import time


def weight_sets(checkpoint: str) -> dict:
    """{"raw": backbone state dict, "ema": EMA shadow} of a dnadiff training checkpoint."""
    import torch

    from dnadiff.errors import DnadiffError

    try:
        ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError) as exc:
        raise DnadiffError(f"--checkpoint {checkpoint}: cannot read ({exc})") from None
    ema = ((ckpt.get("dnadiff") or {}).get("ema") or {}).get("shadow")  # training/ema.py: EMA.state_dict
    if not ema:
        raise DnadiffError(f"--checkpoint {checkpoint}: no EMA weights (trained with train.ema=0?)")
    # the Lightning module holds the backbone as `backbone`: its keys are backbone.<name>
    raw = {k.removeprefix("backbone."): v for k, v in ckpt["state_dict"].items() if k.startswith("backbone.")}
    return {"raw": raw, "ema": dict(ema), "step": int(ckpt.get("global_step", -1)),
            "ema_updates": int(ckpt["dnadiff"]["ema"].get("num_updates", -1))}


def main(argv: list[str] | None = None) -> int:
    import _common
    from padded_windows import window_options

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the run's model directory (config and tokenizer)")
    ap.add_argument("--checkpoint", required=True, help="a training checkpoint of that run (.ckpt)")
    window_options(ap, 512)
    return _common.exit_on_error(run, ap.parse_args(argv), argv)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Both weight sets on the same windows, paired; the table, the difference and the JSON (--out)."""
    import _common
    from padded_windows import windows_of

    from dnadiff.checkpoint import load
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import evaluate_model, paired_difference
    from dnadiff.utils import format_table

    t0 = time.time()
    model = load(args.model)
    sets = weight_sets(args.checkpoint)
    data = windows_of(model, args.split, args.windows)
    res = {}
    for name in ("raw", "ema"):
        missing = [k for k in sets[name] if k not in model.backbone.state_dict()]
        if missing:
            raise DnadiffError(f"--checkpoint: {name} weights {missing[:2]} are not in the model's backbone")
        model.backbone.load_state_dict(sets[name], strict=False)
        res[name] = evaluate_model(model, data, batch_size=16, num_samples=args.t_samples, stratify_repeats=True,
                                   progress=False, per_sequence=True)
    p = paired_difference(res["raw"], res["ema"])  # dnadiff/eval/paired.py: raw − EMA per window
    d = {"mean": p["mean"], "std_error": p["std_error"], "n": p["n_windows"], "beyond_2se": p["beyond_2se"]}
    out = {"command": _common.command_line(__file__, argv),
           "checkpoint": args.checkpoint, "step": sets["step"], "split": args.split, "windows": d["n"],
           "t_samples": args.t_samples, "raw_bits_per_token": float(res["raw"]["bits_per_token"]),
           "ema_bits_per_token": float(res["ema"]["bits_per_token"]), "raw_minus_ema": d,
           "raw_lower_share": p["wins"],
           "wall_seconds": round(time.time() - t0, 1)}
    print(format_table([{"weights": n, "bits/base": f"{out[f'{n}_bits_per_token']:.4f}"} for n in ("raw", "ema")]))
    print(f"raw − EMA at step {sets['step']}: {d['mean']:+.4f} ± {d['std_error']:.4f} bits/base over {d['n']} windows")
    return _common.save(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
