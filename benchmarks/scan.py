"""Selective-scan benchmark: fwd+bwd time and peak memory on CPU, a fair race.

    python benchmarks/scan.py [--lengths 256 1024 4096] [--threads 1] [--repeats 7] [--busy 0] [--json F]

One fwd+bwd = the whole S6 layer core at B=4, d_inner=236, d_state=16 (Caduceus' 467K DNA model):
Δ = softplus(delta + delta_bias), the scan, + D u, the silu(z) gate, then the backward of a fixed
random projection of the output, gradients for all eight inputs. Every contender does that same work:
- `compiled`: dnadiff's numba kernels (dnadiff/backbones/scan_compiled.py, the CPU default);
- `chunked`: dnadiff's pure-PyTorch chunked scan (the fallback without numba);
- `mambapy`: the pip package's parallel scan `mambapy.pscan.pscan` wrapped as its `selective_scan`
  does (materialises exp(ΔA), ΔBu and the states, all (B, L, E, N)), plus the same softplus, bias,
  D and gate in PyTorch;
- `reference`: dnadiff's sequential `selective_scan_ref` under autograd (only L <= --ref-max-len).

Time: all contenders run interleaved in this one process (round r runs each once), after one
warm-up each; the figure is the minimum over --repeats rounds (the least-disturbed run on a shared
machine), with the median beside it. --threads sets torch's (and so the compiled kernel's) threads.
--busy K starts K CPU-bound processes for the duration (a machine kept busy by another user).
Peak memory: a fresh subprocess per (contender, L) reports the growth of its peak resident set
(VmHWM, reset first; getrusage elsewhere) across one fwd+bwd, after a warm-up at L=32 and with the inputs allocated.
The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import resource
import statistics
import subprocess
import sys
import time

B, E, N = 4, 236, 16
IMPLS = ("compiled", "chunked", "mambapy", "reference")


def make_inputs(length: int, seed: int = 0):
    """(u, delta, A, B, C, D, z, delta_bias) as a Mamba layer at init produces them, and dout."""
    import torch

    g = torch.Generator().manual_seed(seed)
    u = torch.randn(B, length, E, generator=g)
    # delta + bias: bias = softplus^{-1}(dt), dt log-uniform in [1e-3, 1e-1] (Mamba's dt_proj init)
    dt = torch.exp(torch.rand(E, generator=g) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    bias = dt + torch.log(-torch.expm1(-dt))
    delta = 0.5 * torch.randn(B, length, E, generator=g)
    a = -torch.arange(1, N + 1, dtype=torch.float32).repeat(E, 1)  # A = -exp(A_log) at init
    bm = torch.randn(B, length, N, generator=g)
    cm = torch.randn(B, length, N, generator=g)
    d = torch.ones(E)
    z = torch.randn(B, length, E, generator=g)
    gy = torch.randn(B, length, E, generator=g)
    return [t.requires_grad_() for t in (u, delta, a, bm, cm, d, z, bias)], gy


def scan_fn(name: str):
    import torch
    import torch.nn.functional as F

    if name in ("compiled", "chunked", "reference"):
        from dnadiff.backbones import scan

        impl = {"compiled": "compiled", "chunked": "chunked", "reference": "ref"}[name]
        return lambda u, dl, a, b, c, d, z, bias: scan.selective_scan(u, dl, a, b, c, d, z, bias,
                                                                      delta_softplus=True, impl=impl)
    if name == "mambapy":
        from mambapy.pscan import pscan

        def run(u, dl, a, b, c, d, z, bias):
            delta = F.softplus(dl + bias)  # (B, L, E)
            da = torch.exp(delta.unsqueeze(-1) * a)  # (B, L, E, N)
            bu = delta.unsqueeze(-1) * b.unsqueeze(2) * u.unsqueeze(-1)  # (B, L, E, N)
            hs = pscan(da, bu)  # (B, L, E, N)
            y = (hs @ c.unsqueeze(-1)).squeeze(3) + d * u
            return y * F.silu(z)

        return run
    raise SystemExit(f"unknown implementation {name}")


def _fwd_bwd(fn, inputs, gy):
    for t in inputs:
        t.grad = None
    fn(*inputs).backward(gy)


def memory_worker(name: str, length: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    fn = scan_fn(name)
    _fwd_bwd(fn, *make_inputs(32, seed=1))  # one-time allocations (BLAS, autograd, kernel compile)
    inputs, gy = make_inputs(length)
    from dnadiff.machine import memory_kib, reset_peak_memory

    def peak_kib() -> int:
        return memory_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    reset_peak_memory()
    before = peak_kib()
    _fwd_bwd(fn, inputs, gy)
    return {"impl": name, "L": length, "peak_mib": (peak_kib() - before) / 1024}


def _busy_loop():  # a competing user's CPU-bound job
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def race(impls, length: int, repeats: int) -> dict:
    """{impl: [seconds per round]}: each round runs every contender once, in turn."""
    fns = {name: scan_fn(name) for name in impls}
    inputs, gy = make_inputs(length)
    for fn in fns.values():  # warm-up (and numba's compile / cache load)
        _fwd_bwd(fn, inputs, gy)
    times = {name: [] for name in impls}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            _fwd_bwd(fn, inputs, gy)
            times[name].append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--impls", nargs="+", default=["compiled", "chunked", "mambapy"], choices=IMPLS)
    ap.add_argument("--ref-max-len", type=int, default=256, help="run the sequential reference only up to this L")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--busy", type=int, default=0, help="competing CPU-bound processes during the race")
    ap.add_argument("--no-memory", action="store_true", help="skip the per-contender memory subprocesses")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--memory-worker", nargs=2, metavar=("IMPL", "L"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_worker:
        print(json.dumps(memory_worker(args.memory_worker[0], int(args.memory_worker[1]), args.threads)))
        return
    import torch

    from dnadiff.machine import describe_machine, load_average

    torch.set_num_threads(args.threads)
    load_before = load_average()
    busy = [mp.Process(target=_busy_loop, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    rows = []
    try:
        for length in args.lengths:
            impls = [i for i in args.impls if i != "reference" or length <= args.ref_max_len]
            times = race(impls, length, args.repeats)
            for name in impls:
                rows.append({"impl": name, "L": length, "min_s": min(times[name]),
                             "median_s": statistics.median(times[name]), "runs": len(times[name])})
                print(f"  {name:9s} L={length:5d}  min {rows[-1]['min_s']:.4f} s", file=sys.stderr)
    finally:
        for p in busy:
            p.terminate()
    load_after = load_average()
    if not args.no_memory:
        for r in rows:
            cmd = [sys.executable, __file__, "--memory-worker", r["impl"], str(r["L"]), "--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r["peak_mib"] = json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]
    print(f"\nselective scan fwd+bwd (softplus, bias, D, z gate), B={B}, d_inner={E}, d_state={N}, "
          f"{describe_machine()}, {args.threads} thread(s), {args.busy} competing busy process(es)")
    print(f"before: {load_before}\nafter:  {load_after}\n")
    print(f"| L | impl | min of {args.repeats} (s) | median (s) | peak mem growth (MiB) | speed-up vs mambapy (min) |")
    print("|---|---|---|---|---|---|")
    by = {(r["impl"], r["L"]): r for r in rows}
    for r in rows:
        mpy = by.get(("mambapy", r["L"]))
        sp = f"{mpy['min_s'] / r['min_s']:.1f}x" if mpy else ""
        mem = f"{r['peak_mib']:.0f}" if "peak_mib" in r else ""
        print(f"| {r['L']} | {r['impl']} | {r['min_s']:.4f} | {r['median_s']:.4f} | {mem} | {sp} |")
    if args.json:
        from dnadiff.machine import machine_info
        from dnadiff.utils import portable_paths, write_json

        write_json(args.json, portable_paths({"machine": machine_info(), "threads": args.threads, "busy": args.busy,
                               "load_before": load_before, "load_after": load_after, "rows": rows}))


if __name__ == "__main__":
    main()
