"""Selective-scan benchmark: fwd+bwd time and peak memory on CPU.

    python benchmarks/scan.py [--lengths 256 1024 4096] [--ref-max-len 256] [--repeats 3]

Scan from (x, Δ, A, B, C, D) to y, then backward of a random projection of y, at B=4, d_inner=236,
d_state=16 (the shapes of Caduceus' 467K DNA model). Implementations:
- `chunked`: dnadiff's default CPU scan (dnadiff/backbones/scan.py);
- `mambapy`: the pip package's parallel scan `mambapy.pscan.pscan` wrapped like its `selective_scan`
  (materialises exp(ΔA), ΔBx and the states, all (B, L, E, N));
- `reference`: dnadiff's sequential `selective_scan_ref` under autograd (slow: only up to --ref-max-len, default 1024).

Time: median wall time of --repeats fwd+bwd runs after one warm-up run, and the process CPU time
of that run (on a shared, loaded machine the CPU time is the steadier figure; with one thread it
is the work done).
Peak memory: each (implementation, L) runs in a fresh Python subprocess; the figure is the growth of
the process's peak resident set size (getrusage ru_maxrss, a high-water mark) from just before the
first fwd+bwd at that L (inputs allocated, one warm-up fwd+bwd at L=32 already done so one-time
library allocations are excluded) to just after it: the extra memory the scan and its autograd
graph needed at their peak. Threads: torch's default (set --threads to pin).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

B, E, N = 4, 236, 16


def make_inputs(length: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, length, E, generator=g)
    # Δ as the Mamba init produces it: softplus(noise + softplus^{-1}(dt)), dt log-uniform in [1e-3, 1e-1]
    dt = torch.exp(torch.rand(E, generator=g) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    raw = 0.5 * torch.randn(B, length, E, generator=g) + (dt + torch.log(-torch.expm1(-dt)))
    delta = torch.nn.functional.softplus(raw)
    a = -torch.arange(1, N + 1, dtype=torch.float32).repeat(E, 1)  # A = -exp(A_log) at init
    bm = torch.randn(B, length, N, generator=g)
    cm = torch.randn(B, length, N, generator=g)
    d = torch.ones(E)
    gy = torch.randn(B, length, E, generator=g)
    return [t.requires_grad_() for t in (x, delta, a, bm, cm, d)], gy


def scan_fn(name: str):
    import torch

    if name == "chunked":
        from dnadiff.backbones.scan import selective_scan_chunked

        return lambda x, dl, a, b, c, d: selective_scan_chunked(x, dl, a, b, c, d)
    if name == "reference":
        from dnadiff.backbones.scan import selective_scan_ref

        return lambda x, dl, a, b, c, d: selective_scan_ref(x, dl, a, b, c, d)
    if name == "mambapy":
        from mambapy.pscan import pscan

        def run(x, dl, a, b, c, d):
            da = torch.exp(dl.unsqueeze(-1) * a)  # (B, L, E, N)
            bx = dl.unsqueeze(-1) * b.unsqueeze(2) * x.unsqueeze(-1)  # (B, L, E, N)
            hs = pscan(da, bx)  # (B, L, E, N)
            return (hs @ c.unsqueeze(-1)).squeeze(3) + d * x

        return run
    raise SystemExit(f"unknown implementation {name}")


def worker(name: str, length: int, repeats: int, threads: int | None) -> dict:
    import torch

    if threads:
        torch.set_num_threads(threads)
    fn = scan_fn(name)
    small, gsmall = make_inputs(32, seed=1)  # warm-up: one-time allocations (BLAS, autograd engine)
    fn(*small).backward(gsmall)
    inputs, gy = make_inputs(length)

    def step():
        for t in inputs:
            t.grad = None
        y = fn(*inputs)
        y.backward(gy)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    step()
    first = (time.perf_counter() - t0, time.process_time() - c0)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    runs = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    runs = sorted(runs) if runs else [first]
    wall, cpu = runs[len(runs) // 2]
    return {"impl": name, "L": length, "time_s": wall, "cpu_s": cpu, "peak_mib": peak_kib / 1024,
            "threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--impls", nargs="+", default=["chunked", "mambapy", "reference"])
    ap.add_argument("--ref-max-len", type=int, default=1024, help="skip the sequential reference above this L")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "L"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.repeats, args.threads)))
        return
    rows = []
    for length in args.lengths:
        for impl in args.impls:
            if impl == "reference" and length > args.ref_max_len:
                rows.append({"impl": impl, "L": length, "time_s": None, "peak_mib": None})
                continue
            reps = 0 if impl == "reference" else args.repeats
            cmd = [sys.executable, __file__, "--worker", impl, str(length), "--repeats", str(reps),
                   "--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"  {impl:9s} L={length:5d}  {r['time_s']:.3f} s  peak +{r['peak_mib']:.0f} MiB", file=sys.stderr)
    import torch

    threads = rows[0].get("threads", torch.get_num_threads()) if rows else torch.get_num_threads()
    print(f"\nselective scan fwd+bwd, B={B}, d_inner={E}, d_state={N}, CPU, {threads} thread(s), "
          f"torch {torch.__version__}\n")
    print("| L | impl | wall (s) | CPU (s) | peak mem (MiB) | speed-up vs mambapy (wall / CPU) |")
    print("|---|---|---|---|---|---|")
    by = {(r["impl"], r["L"]): r for r in rows}
    for r in rows:
        mp = by.get(("mambapy", r["L"]))
        if r["time_s"] is None:
            print(f"| {r['L']} | {r['impl']} | skipped (> --ref-max-len) | | | |")
            continue
        sp = f"{mp['time_s'] / r['time_s']:.1f}x / {mp['cpu_s'] / r['cpu_s']:.1f}x" if mp and mp["time_s"] else ""
        print(f"| {r['L']} | {r['impl']} | {r['time_s']:.3f} | {r['cpu_s']:.3f} | {r['peak_mib']:.0f} | {sp} |")
    if args.json:
        from dnadiff.utils import write_json

        write_json(args.json, rows)


if __name__ == "__main__":
    main()
