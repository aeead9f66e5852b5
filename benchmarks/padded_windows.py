"""Windows with unscored positions (N runs, a [PAD] tail): how much of a model's gap to the Markov chain
they carry, and what scoring a [PAD]-tailed window at its own length (trim_tail_padding) changes.

    DNADIFF_DATA=/path/to/shared/data python benchmarks/padded_windows.py \
        --models runs/cpu_hour/caduceus_mdlm/model,runs/cpu_hour/mamba_ar/model \
        --markov runs/cpu_hour/markov_best/model --split valid --windows 512 --t-samples 16

Why: evaluation tiles each BED region into windows of every N fraction (N bases visible to the model,
never scored) and right-pads the last one of a region with [PAD]; training draws random full crops
with at most data.max_n_frac N (10% in the cpu-hour configs). A causal model (Mamba AR, Markov) reads
an N run only after it; a bidirectional denoiser (Caduceus MDLM) reads it from both sides at every
position. Per model, paired with the Markov chain on the same windows (dnadiff/eval/paired.py, mean
± SE over windows): all windows as scored by the pipelines, the full windows (every position scored),
the others (N runs or a [PAD] tail), and all windows with [PAD] tails trimmed (evaluate_bound's
trim_tail_padding). The same windows as pipelines/cpu_hour.py (n evenly spread over the split).
Prints a table and JSON; --out FILE writes the JSON (temporary name, then renamed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np


def windows_of(model, split: str, n: int):
    import torch

    from dnadiff.data import build_split_dataset

    data = build_split_dataset(model.config, model.tokenizer, split)
    if n and len(data) > n:
        idx = sorted(set(int(i) for i in np.linspace(0, len(data) - 1, n).round().astype(int)))
        data = torch.utils.data.Subset(data, idx)
    return data


def window_options(ap: argparse.ArgumentParser, windows: int, split: bool = True) -> None:
    """The options of the benchmarks that score models on evaluation windows (this one, ema_vs_raw.py,
    mlm_then_mdlm.py): the split (valid unless `split` is False), how many windows, the t draws, the JSON."""
    if split:
        ap.add_argument("--split", default="valid", choices=("valid", "test"))
    ap.add_argument("--windows", type=int, default=windows,
                    help=f"windows evenly spread over the split (0 = all; default {windows})")
    ap.add_argument("--t-samples", type=int, default=16, help="stratified t-samples per window (diffusion models)")
    ap.add_argument("--out", default=None, help="write the JSON here")


def paired(a_bits: np.ndarray, b_bits: np.ndarray, keep: np.ndarray) -> dict:
    d = a_bits[keep] - b_bits[keep]
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("nan")
    return {"mean": float(d.mean()), "std_error": se, "n": int(d.size), "beyond_2se": bool(abs(d.mean()) > 2 * se)}


def main(argv: list[str] | None = None) -> int:
    import _common

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="comma-separated model directories")
    ap.add_argument("--markov", required=True, help="the Markov model directory every model is paired with")
    window_options(ap, 2000)
    return _common.exit_on_error(run, ap.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Each model and the Markov chain on the same windows; the table, the JSON (stdout and --out)."""
    import _common

    from dnadiff.checkpoint import load
    from dnadiff.errors import DnadiffError
    from dnadiff.eval import evaluate_model, window_bits
    from dnadiff.utils import format_table

    t0 = time.time()
    markov = load(args.markov)
    models = {p: load(p) for p in args.models.split(",") if p}
    rows, out = [], {"split": args.split, "windows": args.windows, "t_samples": args.t_samples, "models": {}}
    ref = None
    for path, model in models.items():
        data = windows_of(model, args.split, args.windows)
        if ref is None:  # the Markov chain on these very windows (the first model's data settings)
            markov_res = evaluate_model(markov, windows_of(_with_data_of(markov, model), args.split, args.windows),
                                        batch_size=16, progress=False, per_sequence=True)
            ref, ref_tok = window_bits(markov_res)
        plain = evaluate_model(model, data, batch_size=16, num_samples=args.t_samples, stratify_repeats=True,
                               progress=False, per_sequence=True)
        trimmed = evaluate_model(model, data, batch_size=16, num_samples=args.t_samples, stratify_repeats=True,
                                 progress=False, per_sequence=True, trim_tail_padding=True)
        bits, tok = window_bits(plain)
        bits_t, _ = window_bits(trimmed)
        if not np.array_equal(tok, ref_tok):
            raise DnadiffError(f"{path}: its windows score other tokens than the Markov chain's")
        scored = tok > 0
        full = scored & (tok >= np.nanmax(tok))
        padded = scored & ~full
        pad_id = model.tokenizer.pad_id
        tailed = scored & np.array([bool((data[i]["input_ids"] == pad_id).any()) for i in range(len(data))])
        r = {"all windows": paired(bits, ref, scored), "full windows": paired(bits, ref, full),
             "windows with N or [PAD]": paired(bits, ref, padded),
             "of which [PAD]-tailed": paired(bits, ref, tailed),
             "all, [PAD] tails trimmed": paired(bits_t, ref, scored),
             "bits_per_token": plain["bits_per_token"], "bits_per_token_trimmed": trimmed["bits_per_token"]}
        out["models"][path] = r
        for key in ("all windows", "full windows", "windows with N or [PAD]", "of which [PAD]-tailed",
                    "all, [PAD] tails trimmed"):
            d = r[key]
            rows.append({"model": path, "windows": f"{key} ({d['n']})",
                         "vs Markov (paired bits/base)": f"{d['mean']:+.4f} ± {d['std_error']:.4f}",
                         "> 2 SE": "yes" if d["beyond_2se"] else "no"})
    out["markov_bits_per_token"] = float(markov_res["bits_per_token"])
    out["wall_seconds"] = round(time.time() - t0, 1)
    print(format_table(rows, list(rows[0])))
    print(json.dumps(out, indent=1))
    return _common.save(out, args.out)


def _with_data_of(markov, model):
    """The Markov model reading the other model's windows (its window length and data files)."""
    from dnadiff.config import replace

    markov.config = replace(markov.config, **{k: getattr(model.config.data, k.split(".")[1]) for k in
                                              ("data.seq_len", "data.fasta", "data.bed", "data.root")})
    return markov


if __name__ == "__main__":
    sys.exit(main())
