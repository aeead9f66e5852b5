"""What the paper's attention layout costs against dnadiff's causal stream, on the text table's DiT (issue 52).

Block diffusion trains in one pass per batch either way (diffusion/bd3lm.py `block_layout`): a bidirectional
DiT reads x_t ⊕ x_0 (2L tokens) under the block-causal mask (diffusion/bd3lm_attention.py); a causal DiT reads
the stream [x_t^b, x_t^b, x^b]... (3L tokens). Sampling: the attention model keeps a KV cache of the clean
blocks and runs only the noisy block each call (samplers/block_attention.py); `use_cache=False` recomputes the
whole prefix every call; the causal model steps its KV cache token by token (samplers/block.py).

This script times, on untrained networks of the cpu_fortunes size (DiT 4 x 128, 4 heads, vocabulary 2,048;
cost does not depend on the weights): one training step (loss forward + backward) per layout, and the sampling
wall per sequence (ancestral, 4 inner steps a block, blocks of 4) for the three sampling paths.

    python benchmarks/bd3lm_attention_cost.py                 # ~2 min on one thread
    python benchmarks/bd3lm_attention_cost.py --lengths 128 --sample-lengths 128 --repeats 2   # quicker

Writes results/bd3lm_attention_cost.json and .md (--stem), with the command, machine and load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from _common import median_seconds

REPO = Path(__file__).resolve().parent.parent
V, MASK = 2048, 3
SIZE = dict(hidden_size=128, n_heads=4, n_blocks=4, adaln_dim=64, dropout=0.0)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128], help="training lengths L")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=4)
    ap.add_argument("--sample-lengths", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--num", type=int, default=4, help="sequences per sampling batch")
    ap.add_argument("--repeats", type=int, default=3, help="timings per cell (the median is reported)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--results", default=str(REPO / "results"))
    ap.add_argument("--stem", default="bd3lm_attention_cost")
    return ap.parse_args(argv)


def network(causal: bool):
    from dnadiff.backbones import build_backbone
    from dnadiff.model import Denoiser

    torch.manual_seed(0)
    return Denoiser(build_backbone("dit", preset="tiny", vocab_size=V, causal=causal, **SIZE))


def train_step_seconds(causal: bool, L: int, args) -> float:
    from dnadiff.diffusion import build_objective, build_schedule

    den = network(causal).train()
    obj = build_objective("bd3lm", schedule=build_schedule("loglinear", eps=1e-3), mask_id=MASK, vocab_size=V,
                          block_size=args.block_size)
    x0 = torch.randint(7, V, (args.batch_size, L), generator=torch.Generator().manual_seed(1))

    def step():
        den.zero_grad()
        obj.loss(den, x0, generator=torch.Generator().manual_seed(2)).loss.backward()

    step()  # warm-up
    return median_seconds(step, args.repeats)


def sample_seconds(causal: bool, use_cache: bool, length: int, args) -> tuple[float, int]:
    from dnadiff.diffusion import build_schedule
    from dnadiff.samplers import build_sampler

    den = network(causal).eval()
    smp = build_sampler("block", block_size=args.block_size, inner="ancestral", steps=4, use_cache=use_cache)
    sched = build_schedule("loglinear", eps=1e-3)
    with torch.no_grad():
        wall = median_seconds(lambda: smp.generate(den, sched, MASK, (args.num, length), generator=0), args.repeats)
    return wall / args.num, int(smp.last_nfe)


def run(args, command: str) -> int:
    from dnadiff.machine import describe_machine, load_average
    from dnadiff.threads import apply_threads
    from dnadiff.utils import atomic_write, format_table, markdown_table, portable_paths, write_json

    apply_threads(args.threads)
    start, load_start = time.time(), load_average()
    train_rows, sample_rows = [], []
    for L in args.lengths:
        att, stream = train_step_seconds(False, L, args), train_step_seconds(True, L, args)
        train_rows.append({"L": L, "attention 2L (s/step)": round(att, 4),
                           "causal stream 3L (s/step)": round(stream, 4), "stream / attention": round(stream / att, 2)})
        print(f"[{time.time() - start:5.0f}s] train L={L}: {train_rows[-1]}", flush=True)
    paths = (("attention, KV cache of clean blocks", False, True), ("attention, recompute (use_cache=false)", False,
             False), ("causal stream, KV cache (token steps)", True, True))
    for length in args.sample_lengths:
        for name, causal, cache in paths:
            s, nfe = sample_seconds(causal, cache, length, args)
            sample_rows.append({"length": length, "path": name, "s/sequence": round(s, 4), "network calls": nfe})
            print(f"[{time.time() - start:5.0f}s] sample {sample_rows[-1]}", flush=True)
    summary = {"command": command, "wall_seconds": round(time.time() - start, 1), "machine": describe_machine(),
               "load_average_at_start": load_start, "load_average_at_end": load_average(), "network": SIZE,
               "vocab_size": V, "batch_size": args.batch_size, "block_size": args.block_size, "num": args.num,
               "train": train_rows, "sample": sample_rows}
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    md = ["# Block diffusion: the paper's attention layout vs the causal stream (cost)", "",
          f"Command: `{command}`  ", f"Machine: {summary['machine']}; {load_start} at the start, "
          f"{summary['load_average_at_end']} at the end; {summary['wall_seconds'] / 60:.1f} min", "",
          f"Untrained DiTs of the cpu_fortunes size ({SIZE['n_blocks']} x {SIZE['hidden_size']}, vocabulary {V}), "
          f"blocks of {args.block_size}; medians of {args.repeats} timings. Training: one bd3lm loss forward + "
          f"backward on a batch of {args.batch_size}.", "", markdown_table(train_rows, list(train_rows[0])), "",
          f"Sampling: `block` with 4 ancestral steps a block, {args.num} sequences a batch; wall per sequence.", "",
          markdown_table(sample_rows, list(sample_rows[0])), ""]
    write_json(out / f"{args.stem}.json", portable_paths(summary))
    atomic_write(out / f"{args.stem}.md", portable_paths("\n".join(md)))
    print(format_table(train_rows, list(train_rows[0])))
    print(format_table(sample_rows, list(sample_rows[0])))
    print(f"wrote {out / args.stem}.md (.json)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = "python benchmarks/bd3lm_attention_cost.py " + " ".join(sys.argv[1:] if argv is None else argv)
    return run(args, command.strip())


if __name__ == "__main__":
    sys.exit(main())
