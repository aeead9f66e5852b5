"""Backbone throughput: forward+backward tokens/s of every registered preset on CPU, plus Caduceus
`dna-467k` (both directions, RCPS) against transformers' unidirectional `MambaModel` of the same
width and depth (d_model 118, 4 layers, d_state 16, expand 2) on its pure-torch path.

    python benchmarks/backbones.py [--seq-len 1024] [--batch 2] [--threads 2] [--repeats 3]
                                   [--only dit:tiny,hyena] [--skip dit:small] [--out results.json]

Each measurement: one warm-up step, then the median of `--repeats` timed steps of
`loss = logsumexp(logits).mean(); loss.backward()` on random DNA token ids (vocab 12), train mode
(dropout on, as in training). Prints a table and the rows as JSON (also written to --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

import torch

from dnadiff.backbones import BACKBONES, build_backbone

VOCAB = 12


def time_fwd_bwd(model: torch.nn.Module, call: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                 repeats: int) -> float:
    """Median seconds of one forward+backward step."""
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        out = call(x)
        out.float().logsumexp(-1).mean().backward()

    step()  # warm-up (allocations, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _selected(name: str, preset: str, only: list[str], skip: list[str]) -> bool:
    def match(spec: str) -> bool:
        n, _, p = spec.partition(":")
        return n == name and (not p or p == preset)

    return (not only or any(match(s) for s in only)) and not any(match(s) for s in skip)


def bench_registry(args: argparse.Namespace) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (args.batch, args.seq_len), generator=g)  # A/C/G/T ids
    t = torch.rand(args.batch, generator=g)
    for name in BACKBONES.names():
        if not BACKBONES.get(name).neural:  # the Markov baseline has no forward/backward to time
            continue
        for preset in sorted(BACKBONES.get(name).PRESETS):
            if not _selected(name, preset, args.only, args.skip):
                continue
            torch.manual_seed(0)
            try:
                model = build_backbone(name, preset=preset, vocab_size=VOCAB)
                sec = time_fwd_bwd(model, lambda ids: model(ids, t), x, args.repeats)
            except Exception as exc:  # e.g. a preset whose maximum length is below --seq-len
                msg = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
                rows.append({"model": f"{name}:{preset}", "error": msg})
                print(f"{name}:{preset}: skipped ({msg})", file=sys.stderr, flush=True)
                continue
            rows.append(_row(f"{name}:{preset}", model, sec, args))
            print(_fmt(rows[-1]), file=sys.stderr, flush=True)
    return rows


def bench_caduceus_vs_mamba(args: argparse.Namespace) -> list[dict]:
    """Caduceus dna-467k (BiMamba + RCPS) vs transformers' MambaForCausalLM of the same width/depth."""
    if "caduceus" not in BACKBONES or "dna-467k" not in BACKBONES.get("caduceus").PRESETS:
        return []
    try:
        from transformers import MambaConfig, MambaForCausalLM
    except ImportError:
        print("transformers' Mamba is not available: comparison skipped", file=sys.stderr)
        return []
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (args.batch, args.seq_len), generator=g)
    torch.manual_seed(0)
    cad = build_backbone("caduceus", preset="dna-467k", vocab_size=VOCAB)
    d, n = cad.config.d_model, cad.config.n_layer
    hf = MambaForCausalLM(MambaConfig(
        vocab_size=16, hidden_size=d, num_hidden_layers=n, state_size=16, expand=2, conv_kernel=4,
        use_bias=False, use_conv_bias=True, tie_word_embeddings=True,
    ))
    rows = []
    for label, model, call in (
        ("caduceus:dna-467k (bidirectional, RCPS)", cad, lambda ids: cad(ids)),
        (f"transformers MambaForCausalLM d{d} x{n} (unidirectional)", hf, lambda ids: hf(input_ids=ids).logits),
    ):
        sec = time_fwd_bwd(model, call, x, args.repeats)
        rows.append(_row(label, model, sec, args))
        print(_fmt(rows[-1]), file=sys.stderr, flush=True)
    rows[0]["time_vs_transformers_mamba"] = round(rows[0]["seconds"] / rows[1]["seconds"], 3)
    return rows


def _row(label: str, model: torch.nn.Module, sec: float, args: argparse.Namespace) -> dict:
    tokens = args.batch * args.seq_len
    return {"model": label, "parameters": sum(p.numel() for p in model.parameters()),
            "batch": args.batch, "seq_len": args.seq_len, "seconds": round(sec, 4),
            "tokens_per_s": round(tokens / sec, 1), "threads": torch.get_num_threads()}


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"{r['model']:<58} skipped: {r['error']}"
    return f"{r['model']:<58} {r['parameters']:>12,} {r['seconds']:>9.3f} s {r['tokens_per_s']:>11,.0f} tok/s"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of name or name:preset to run (default: all)")
    ap.add_argument("--skip", default="", help="comma list of name or name:preset to leave out")
    ap.add_argument("--no-compare", action="store_true", help="skip the Caduceus vs transformers Mamba comparison")
    ap.add_argument("--out", default=None, help="write the JSON rows here")
    args = ap.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    args.skip = [s for s in args.skip.split(",") if s]
    torch.set_num_threads(args.threads)

    rows = bench_registry(args)
    compare = [] if args.no_compare else bench_caduceus_vs_mamba(args)
    print(f"\nforward+backward, B={args.batch}, L={args.seq_len}, {torch.get_num_threads()} threads, CPU")
    print(f"{'model':<58} {'params':>12} {'step':>11} {'throughput':>17}")
    for r in rows + compare:
        print(_fmt(r))
    if compare:
        print(f"Caduceus dna-467k / transformers Mamba time ratio: {compare[0]['time_vs_transformers_mamba']}")
    result = {"registry": rows, "caduceus_vs_transformers_mamba": compare}
    print(json.dumps(result))
    if args.out:
        from dnadiff.utils import write_json

        write_json(args.out, result)


if __name__ == "__main__":
    main()
