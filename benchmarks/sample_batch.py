"""Denoiser throughput vs sequences per call on CPU: why `dnadiff sample` splits a diffusion run into
calls of about 8,192 tokens on a CPU (`dnadiff.commands.sample.CPU_TOKENS_PER_CALL`).

    python benchmarks/sample_batch.py                                   # untrained Caduceus-PS d64 x 2
    python benchmarks/sample_batch.py --model runs/cpu_hour/caduceus_mdlm/model --out results/sample_batch_cpu.json

For every length of --lengths and every batch size of --batches it times one full denoiser call
(the network a masked-diffusion sampler calls once per step) --repeats times after a warm-up, with
--threads threads, and reports tokens per second (batch x length / the median wall time) and the
process CPU seconds per 1,000 tokens (the steadier figure on a shared machine). A sampler's total
work is the same whatever the batch: only the cache behaviour of the activations changes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.machine import describe_machine, load_average  # noqa: E402
from dnadiff.utils import format_table, portable_paths, write_json  # noqa: E402


def load_backbone(model: str | None) -> torch.nn.Module:
    """The model's backbone, or an untrained Caduceus-PS of the cpu-hour size (d64 x 2)."""
    if model:
        import dnadiff

        return dnadiff.load(model).backbone.eval()
    from dnadiff.backbones import build_backbone

    return build_backbone("caduceus", preset="tiny", vocab_size=12, d_model=64, n_layer=2).eval()


def time_call(backbone, batch: int, length: int, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one forward pass on a (batch, length) input."""
    x = torch.randint(0, 4, (batch, length))
    walls, cpus = [], []
    with torch.no_grad():
        backbone(x)  # warm-up (compiled scan, allocator)
        for _ in range(repeats):
            w, c = time.perf_counter(), time.process_time()
            backbone(x)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a dnadiff model directory (default: untrained Caduceus-PS d64x2)")
    ap.add_argument("--lengths", default="1024,256")
    ap.add_argument("--batches", default="1,4,8,16,32,64")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON path (a markdown table is printed)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    backbone = load_backbone(args.model)
    rows = []
    for length in (int(v) for v in args.lengths.split(",")):
        for batch in (int(v) for v in args.batches.split(",")):
            wall, cpu = time_call(backbone, batch, length, args.repeats)
            rows.append({"length": length, "batch": batch, "tokens_per_call": batch * length,
                         "tokens_per_second": round(batch * length / wall),
                         "cpu_ms_per_1k_tokens": round(1000 * cpu / (batch * length) * 1000, 2)})
            print(f"L={length} B={batch}: {rows[-1]['tokens_per_second']} tokens/s", file=sys.stderr)
    print(format_table(rows))
    if args.out:
        write_json(args.out, portable_paths(
            {"command": "python benchmarks/sample_batch.py " + " ".join(argv or sys.argv[1:]),
                              "machine": describe_machine(), "load": load_average(), "threads": args.threads,
                              "model": args.model or "untrained caduceus d64x2", "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
