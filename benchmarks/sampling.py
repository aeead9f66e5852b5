"""Sampler speed: denoiser rows evaluated and wall time, each sampler with and without the output cache.

    python benchmarks/sampling.py                        # ancestral vs cached, B = 16 and 1, L = T = 1024
    python benchmarks/sampling.py --cells 16:256:256,1:1024:1024 --repeats 3 --out results/sampling_cache_cpu.json
    python benchmarks/sampling.py --denoiser table --repeats 10   # a cheap denoiser: the row counts only

A cell is B:L:T (batch, length, steps). For every sampler of --samplers it runs the sampler as it
is and with `cache=True` (for `ancestral` that is the `cached` sampler), interleaved, --repeats
times with seeds seed, seed + 1, ... (per-sequence counter-based streams), and reports:
  rows      denoiser rows evaluated (`last_rows`: sequences pushed through the network, summed over
            calls), and the cached run's rows as a fraction of the plain run's (mean, min, max over
            the repeats);
  calls     batched denoiser calls (`last_nfe`); per-row NFE mean / min / max of the cached run;
  time      wall and process CPU seconds per run, min and median over the repeats (one thread:
            the CPU time is the work done, the steadier figure on a shared machine);
  same      whether both runs returned identical tokens (they must: the cache is exact).
The denoiser is the untrained tiny Caduceus (`--denoiser caduceus:tiny`, 28K parameters; rows and
calls do not depend on what a model learned: the unmasking times are set by the schedule), or
`table`, a cheap time-independent per-row function of the neighbouring tokens whose cost is
negligible (for the row counts over many seeds; its times measure the sampler's own overhead).

    python benchmarks/sampling.py --ar-decoding --out results/ar_decoding.json   # AR time per token

`--ar-decoding`: time per generated token of the `autoregressive` sampler for every causal
backbone (tiny presets) at L = 64 ... 1024, before (`use_cache=False`: the whole prefix re-run for
every token, O(L) per token for Mamba/Hyena, O(L^2) attention for DiT) and after (incremental
decoding through the backbones' `allocate_cache` / `step`: Mamba O(1), Hyena and DiT O(L)). Both
runs use the same seed and must give the same tokens (checked). Writes JSON and a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from tqdm.auto import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dnadiff.backbones import build_backbone  # noqa: E402
from dnadiff.diffusion import build_schedule  # noqa: E402
from dnadiff.samplers import build_sampler  # noqa: E402
from dnadiff.utils import format_table, portable_paths, write_json  # noqa: E402

MASK_ID, VOCAB = 3, 12  # the DNA tokenizer's ids


def sampler_options(name: str, steps: int, length: int) -> dict:
    if name == "semi_ar":
        return {"inner": "ancestral", "window": length // 2, "stride": length // 4,
                "inner_options": {"steps": steps // 2}}
    if name == "first_hitting":
        return {}
    if name == "remdm":
        return {"steps": steps, "schedule": "cap", "eta": 0.008}
    return {"steps": steps}


class TableDenoiser(torch.nn.Module):
    """A cheap time-independent denoiser: logits at i from fixed random tables of the tokens at
    i - 1 and i + 1 (row-wise, deterministic)."""

    time_conditioned = False

    def __init__(self, vocab: int = VOCAB, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.left = torch.nn.Parameter(torch.randn(vocab, vocab, generator=g))
        self.right = torch.nn.Parameter(torch.randn(vocab, vocab, generator=g))

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        pad = torch.full_like(x[:, :1], MASK_ID)
        return self.left[torch.cat([pad, x[:, :-1]], 1)] + self.right[torch.cat([x[:, 1:], pad], 1)]  # (B, L, V)


def build_denoiser(spec: str, device: str):
    if spec == "table":
        return TableDenoiser().to(device).eval()
    name, _, preset = spec.partition(":")
    torch.manual_seed(0)
    return build_backbone(name, preset=preset or "tiny", vocab_size=VOCAB).to(device).eval()


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
        write_json(args.out, portable_paths({**meta, "rows": rows}))
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
            markdown_table([{"backbone": r["backbone"], "L": r["L"],
                             "re-run ms/token": f"{r['ms_per_token_rerun']:.3f}",
                             "cached ms/token": f"{r['ms_per_token_cached']:.3f}", "speedup": f"{r['speedup']:.1f}",
                             "step only ms": f"{r['ms_per_token_step_only']:.3f}",
                             "full forward at L ms": f"{r['ms_forward_full_L']:.2f}", "same tokens": r["same_tokens"]}
                            for r in rows]),
        ]
        from dnadiff.utils import atomic_write

        atomic_write(md, portable_paths("\n".join(lines) + "\n"))
    return 0 if all(r["same_tokens"] for r in rows) else 1


def _run(name: str, cache: bool, denoiser, schedule, B: int, L: int, T: int, seed: int, device: str) -> dict:
    smp = build_sampler(name, cache=cache, **sampler_options(name, T, L))
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    x = smp.generate(denoiser, schedule, MASK_ID, (B, L), generator=seed)
    _sync(device)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "calls": smp.last_nfe,
            "rows": smp.last_rows, "nfe_per_row": smp.last_nfe_per_row, "x": x}


def bench_cell(name: str, denoiser, schedule, B: int, L: int, T: int, args) -> dict:
    """Plain and cached runs of one sampler, interleaved (alternating which goes first), per seed."""
    runs = {False: [], True: []}
    same = True
    for r in range(args.repeats):
        seed = args.seed + r
        order = (False, True) if r % 2 == 0 else (True, False)
        out = {c: _run(name, c, denoiser, schedule, B, L, T, seed, args.device) for c in order}
        same = same and bool(torch.equal(out[False]["x"], out[True]["x"]))
        for c in (False, True):
            runs[c].append(out[c])
    frac = [c["rows"] / p["rows"] for p, c in zip(runs[False], runs[True])]
    per_row = torch.cat([run["nfe_per_row"] for run in runs[True]]).double()

    def stat(c, key, how):
        values = [run[key] for run in runs[c]]
        return statistics.median(values) if how == "median" else min(values)

    row = {
        "sampler": name, "B": B, "L": L, "T": T, "repeats": args.repeats,
        "rows_plain": statistics.mean(run["rows"] for run in runs[False]),
        "rows_cached": statistics.mean(run["rows"] for run in runs[True]),
        "rows_frac": statistics.mean(frac), "rows_frac_min": min(frac), "rows_frac_max": max(frac),
        "calls_plain": statistics.mean(run["calls"] for run in runs[False]),
        "calls_cached": statistics.mean(run["calls"] for run in runs[True]),
        "nfe_row_mean": float(per_row.mean()), "nfe_row_min": int(per_row.min()), "nfe_row_max": int(per_row.max()),
        "wall_plain_min": stat(False, "wall_s", "min"), "wall_plain_med": stat(False, "wall_s", "median"),
        "wall_cached_min": stat(True, "wall_s", "min"), "wall_cached_med": stat(True, "wall_s", "median"),
        "cpu_plain_med": stat(False, "cpu_s", "median"), "cpu_cached_med": stat(True, "cpu_s", "median"),
        "same_tokens": same,
    }
    row["wall_frac_med"] = row["wall_cached_med"] / row["wall_plain_med"]
    row["cpu_frac_med"] = row["cpu_cached_med"] / row["cpu_plain_med"]
    return row


COLUMNS = {"sampler": "sampler", "B": "B", "L": "L", "T": "T", "repeats": "repeats", "rows_plain": "rows (plain)",
           "rows_cached": "rows (cache)", "rows_frac": "rows frac", "rows_frac_min": "frac min",
           "rows_frac_max": "frac max", "calls_plain": "calls (plain)", "calls_cached": "calls (cache)",
           "nfe_row_mean": "NFE/row", "wall_plain_med": "wall plain s (med)", "wall_cached_med": "wall cache s (med)",
           "wall_frac_med": "wall frac", "cpu_plain_med": "cpu plain s", "cpu_cached_med": "cpu cache s",
           "cpu_frac_med": "cpu frac", "same_tokens": "same tokens"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--denoiser", default="caduceus:tiny", help="BACKBONE:PRESET (untrained) or `table`")
    p.add_argument("--cells", default="16:1024:1024,1:1024:1024", help="comma-separated B:L:T")
    p.add_argument("--samplers", default="ancestral", help="each runs plain and with cache=True")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the results as JSON here (and a markdown table beside it)")
    p.add_argument("--ar-decoding", action="store_true", help="AR time per token vs L, re-run vs cached")
    p.add_argument("--num", type=int, default=1, help="--ar-decoding: batch size")
    p.add_argument("--lengths", default="64,128,256,512,1024", help="--ar-decoding lengths")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.ar_decoding:
        return ar_decoding(args)
    from dnadiff.machine import describe_machine, load_average, machine_info
    from dnadiff.utils import atomic_write, markdown_table

    denoiser = build_denoiser(args.denoiser, args.device)
    schedule = build_schedule("loglinear", eps=1e-3)
    cells = [tuple(int(v) for v in c.split(":")) for c in args.cells.split(",")]
    rows = []
    with tqdm(total=len(cells) * len(args.samplers.split(",")), desc="cells", unit="cell") as bar:
        for B, L, T in cells:
            for name in args.samplers.split(","):
                rows.append(bench_cell(name, denoiser, schedule, B, L, T, args))
                bar.write(format_table([{COLUMNS[k]: v for k, v in rows[-1].items() if k in COLUMNS}], floatfmt=".5g"))
                bar.update(1)
    load = load_average()
    table = [{COLUMNS[k]: v for k, v in r.items() if k in COLUMNS} for r in rows]
    print()
    print(format_table(table, floatfmt=".5g"))
    print(f"{describe_machine()}; {load}")
    if args.out:
        meta = {"settings": vars(args), "machine": machine_info(), "load_average": load}
        write_json(args.out, portable_paths({**meta, "rows": rows}))
        md = os.path.splitext(args.out)[0] + ".md"
        atomic_write(md, portable_paths("\n".join([
            f"# Sampling with the per-row output cache ({args.denoiser})", "",
            f"`python benchmarks/sampling.py --denoiser {args.denoiser} --cells {args.cells} "
            f"--samplers {args.samplers} "
            f"--repeats {args.repeats} --threads {args.threads} --out {args.out}`", "",
            f"Machine: {describe_machine(meta['machine'])}; at the end, {load}.", "",
            "rows: denoiser rows evaluated per run (mean over repeats); frac: cached / plain; "
            "times: median over repeats, seconds.", "", markdown_table(table, floatfmt=".5g"), ""])))
    return 0 if all(r["same_tokens"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
