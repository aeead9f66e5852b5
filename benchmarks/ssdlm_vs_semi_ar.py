"""Seconds per sequence of SSD-LM decoding vs MDLM semi-AR at equal length (the MDLM paper's tab. 5: SSD-LM
2,473.9 s vs MDLM 89.3 s per 2,048-token sequence, 28x), on the same untrained network (speed does not depend on
training): a time-conditioned DiT (tiny by default) as an mdlm model and as an ssdlm model.

    python benchmarks/ssdlm_vs_semi_ar.py                        # L 2048, window 1024, stride 512, 20 steps
    python benchmarks/ssdlm_vs_semi_ar.py --steps 20 --out results/ssdlm_vs_semi_ar.json

The paper's settings scaled in steps only: MDLM semi-AR with windows of L = 1024 that add L' = 512 tokens each
(tab. 5's 2048/512), SSD-LM in blocks of 25 reading at most L - 25 finished tokens; both `--steps` per window /
block (the paper: 1,000 each). The expected ratio is the network calls': SSD-LM makes ceil(2048/25) = 82 blocks
x steps calls, MDLM 1 + (2048 - 1024)/512 = 3 windows x steps, 27x, each call on at most 1,024 tokens. Writes
the figures, the NFE and the machine load (JSON with --out, a table on stdout).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.machine import describe_machine, load_average  # noqa: E402
from dnadiff.utils import format_table, portable_paths, write_json  # noqa: E402


def model_for(objective: str, preset: str):
    """A DiffusionModel over an untrained time-conditioned DiT with the DNA tokenizer."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.model import DiffusionModel
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, f"experiments/tiny_dna_{objective}", [f"model.preset={preset}"])
    tok = DNATokenizer()
    backbone = build_backbone("dit", preset=preset, vocab_size=tok.vocab_size, time_conditioning=True)
    return DiffusionModel(cfg, backbone.eval(), tok)


def main(argv: list[str] | None = None) -> int:
    import dnadiff

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, default=2048)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--stride", type=int, default=512)
    ap.add_argument("--block", type=int, default=25)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    runs = {
        "mdlm_semi_ar": (model_for("mdlm", args.preset),
                         dict(sampler="semi_ar", steps=args.steps, window=args.window, stride=args.stride)),
        "ssdlm": (model_for("ssdlm", args.preset),
                  dict(sampler="ssdlm", steps=args.steps, block_size=args.block, context=args.window - args.block)),
    }
    rows = []
    for name, (model, opts) in runs.items():
        start = time.time()
        res = dnadiff.sample(model, 1, args.length, seed=0, **opts)
        wall = time.time() - start
        rows.append({"sampler": name, "length": args.length, "seconds_per_sequence": round(wall, 2),
                     "nfe_per_sequence": int(res.sampler.last_nfe_per_row[0]), "steps": args.steps})
    ratio = rows[1]["seconds_per_sequence"] / rows[0]["seconds_per_sequence"]
    nfe_ratio = rows[1]["nfe_per_sequence"] / rows[0]["nfe_per_sequence"]
    print(format_table(rows))
    print(f"ssdlm / mdlm semi-AR: {ratio:.1f}x the seconds, {nfe_ratio:.1f}x the network calls "
          f"(paper, tab. 5: 28x at 1,000 steps each); {load_average()}")
    if args.out:
        write_json(args.out, portable_paths({
            "command": "python benchmarks/ssdlm_vs_semi_ar.py " + " ".join(argv or sys.argv[1:]),
            "machine": describe_machine(), "load_average_at_end": load_average(), "rows": rows,
            "seconds_ratio": ratio, "nfe_ratio": nfe_ratio}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
