"""Genome-scale data loading, by simulation: dnadiff's genome loaders on an hg38-sized synthetic genome.

    python benchmarks/data_scale.py --workdir /tmp/dnadiff_scale --out data_scale.json     # 3.1 Gb
    python benchmarks/data_scale.py --scale-factor 0.01 --seconds 3 --rss-windows 5000     # quick check

The genome (24 records, 3.1 Gb, bgzip + .fai/.gzi) and its `sequences_human.bed`-layout BED of ~34,000
131,072-bp regions are written once by benchmarks/synthetic_genome.py into --workdir (about a minute
at full size on one core) and reused. Then, with the loaders training uses (`build_split_dataset` of
a run config: random crops of the train split with the config's N filter and reverse-complement
augmentation, through `IndexedStream` + `StreamSampler` in a torch DataLoader, as
dnadiff/training/datamodule.py builds them; the valid split tiled):

- open: seconds to build the train and valid data sets (pyfaidx reads .fai/.gzi, the BED is parsed
  and checked against the genome, the valid tiles listed) and the RSS after;
- first batch: seconds from creating the DataLoader to its first batch (worker start included);
- windows/s with 0, 1 and 2 loader workers at L = 1,024 and 131,072 (after the first batch, for
  --seconds each), and per worker;
- RSS over --rss-windows (default 100,000) windows at L = 1,024: sampled every --rss-every windows,
  start (after the first batch) / peak / end; flat = end - start below 5% of start.

Prints the machine and its load (dnadiff.machine): on a shared machine the rates move with the load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sibling(name: str):
    """A script of this folder as a module, loaded by path (the folder stays off sys.path)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


synthetic_genome = _sibling("synthetic_genome")

from dnadiff.machine import describe_machine, load_average, machine_info  # noqa: E402
from dnadiff.utils import format_table, markdown_table, portable_paths, write_json  # noqa: E402


def rss_mib(pid: int | str = "self") -> float:
    """Resident set size now (VmRSS) of a process, in MiB."""
    from dnadiff.machine import memory_kib

    return (memory_kib("VmRSS", pid) or 0) / 1024


def tree_rss_mib() -> float:
    """This process's RSS plus its children's (DataLoader workers), from /proc (Linux)."""
    total = rss_mib()
    try:
        kids = []
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as fh:
                kids += fh.read().split()
        total += sum(rss_mib(pid) for pid in kids)
    except OSError:
        pass
    return total


def run_config(meta: dict, seq_len: int):
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config

    return load_config(RunConfig, None, [f"data.fasta={meta['fasta']}", f"data.bed={meta['bed']}", "data.kind=genome",
                                         f"data.seq_len={seq_len}"])


def open_sets(meta: dict, seq_len: int, num_windows: int) -> tuple[dict, object]:
    """Build the train (random crops) and valid (tiles) data sets as training does; time and RSS."""
    from dnadiff.data.datasets import build_split_dataset
    from dnadiff.tokenizers import DNATokenizer

    cfg = run_config(meta, seq_len)
    tok = DNATokenizer()
    t0 = time.perf_counter()
    train = build_split_dataset(cfg, tok, "train", "random", num_windows=num_windows)
    t1 = time.perf_counter()
    valid = build_split_dataset(cfg, tok, "valid")
    t2 = time.perf_counter()
    row = {"L": seq_len, "open_train_s": round(t1 - t0, 3), "open_valid_s": round(t2 - t1, 3),
           "train_intervals": len(train.intervals), "valid_windows": len(valid),
           "rss_after_open_mib": round(rss_mib(), 1),
           "max_n_frac": cfg.data.max_n_frac, "rc_prob": cfg.data.rc_prob}
    return row, train


def loader(train, batch_size: int, workers: int):
    import torch

    from dnadiff.data.streams import IndexedStream, StreamSampler

    return torch.utils.data.DataLoader(IndexedStream(train), batch_size=batch_size,
                                       sampler=StreamSampler(len(train), block=batch_size), num_workers=workers,
                                       drop_last=True, persistent_workers=False)


def throughput(train, seq_len: int, batch_size: int, workers: int, seconds: float) -> dict:
    """Seconds to the first batch, then windows/s for `seconds`."""
    t0 = time.perf_counter()
    it = iter(loader(train, batch_size, workers))
    next(it)
    first = time.perf_counter() - t0
    n, t1 = 0, time.perf_counter()
    while time.perf_counter() - t1 < seconds:
        n += len(next(it)["input_ids"])
    dt = time.perf_counter() - t1
    del it  # stops the workers
    rate = n / dt
    return {"L": seq_len, "workers": workers, "batch": batch_size, "first_batch_s": round(first, 3), "windows": n,
            "windows_per_s": round(rate, 1), "per_worker": round(rate / max(1, workers), 1),
            "mbases_per_s": round(rate * seq_len / 1e6, 2)}


def rss_run(train, seq_len: int, batch_size: int, workers: int, windows: int, every: int) -> dict:
    """RSS (process + workers) every `every` windows over `windows` windows."""
    from tqdm import tqdm

    it = iter(loader(train, batch_size, workers))
    next(it)
    start = tree_rss_mib()
    samples, seen, next_sample = [(0, start)], 0, every
    t0 = time.perf_counter()
    with tqdm(total=windows, unit="win", desc=f"RSS over {windows:,} windows", file=sys.stderr) as bar:
        while seen < windows:
            k = len(next(it)["input_ids"])
            seen += k
            bar.update(k)
            if seen >= next_sample:
                samples.append((seen, tree_rss_mib()))
                next_sample += every
    dt = time.perf_counter() - t0
    del it
    values = [v for _, v in samples]
    end, peak = values[-1], max(values)
    return {"L": seq_len, "workers": workers, "windows": seen, "seconds": round(dt, 1),
            "windows_per_s": round(seen / dt, 1), "rss_start_mib": round(start, 1), "rss_peak_mib": round(peak, 1),
            "rss_end_mib": round(end, 1), "growth_mib": round(end - start, 1),
            "flat": bool(end - start < 0.05 * start), "samples": [(n, round(v, 1)) for n, v in samples]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic_genome.add_arguments(ap)
    ap.add_argument("--seq-lens", default="1024,131072", help="window lengths (default %(default)s)")
    ap.add_argument("--workers", default="0,1,2", help="DataLoader worker counts (default %(default)s)")
    ap.add_argument("--batch-bases", type=int, default=65536, help="bases per batch: batch = this // L, at least 1")
    ap.add_argument("--seconds", type=float, default=15.0, help="timed seconds per throughput cell")
    ap.add_argument("--rss-windows", type=int, default=100_000)
    ap.add_argument("--rss-every", type=int, default=5_000)
    ap.add_argument("--rss-workers", type=int, default=0, help="loader workers of the RSS run (default 0)")
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args(argv)
    if not 0 < args.scale_factor <= 1:
        print("error: --scale-factor must be in (0, 1]", file=sys.stderr)
        return 2
    try:
        seq_lens = [int(x) for x in args.seq_lens.split(",")]
        workers = [int(x) for x in args.workers.split(",")]
    except ValueError:
        print("error: --seq-lens and --workers take comma-separated integers", file=sys.stderr)
        return 2

    import Bio.bgzf  # noqa: F401  (imports out of the timed open)
    import pyfaidx  # noqa: F401

    print(f"machine: {describe_machine()}; {load_average()}", flush=True)
    meta = synthetic_genome.ensure_genome(args.workdir, args.scale_factor, args.seed, args.level, args.write_threads)
    print(f"genome: {meta['fasta']} ({meta['bases'] / 1e9:.3f} Gb in {meta['records']} records, "
          f"{meta['fasta_bytes'] / 2**20:,.0f} MiB bgzip level {meta['level']}, written in {meta['write_seconds']} s"
          f"{' now' if meta['write_seconds_now'] else ' before'}); BED {meta['regions']:,} regions {meta['splits']}",
          flush=True)
    opens, rates, sets = [], [], {}
    for L in seq_lens:
        batch = max(1, args.batch_bases // L)
        row, train = open_sets(meta, L, num_windows=10**7)
        opens.append(row)
        sets[L] = train
        print(format_table([row]), flush=True)
        for w in workers:
            rates.append(throughput(train, L, batch, w, args.seconds))
            print(format_table([rates[-1]]), f"   [{load_average()}]", flush=True)
    rss = None
    if args.rss_windows > 0:
        L = 1024 if 1024 in sets else seq_lens[0]
        train = sets.get(L) or open_sets(meta, L, num_windows=10**7)[1]
        rss = rss_run(train, L, max(1, args.batch_bases // L), args.rss_workers, args.rss_windows, args.rss_every)
    result = {"benchmark": "data_scale", "machine": machine_info(), "genome": meta, "open": opens,
              "throughput": rates, "rss": rss, "load_average_end": load_average()}
    print("\n## Open (train random crops + valid tiles)\n" + markdown_table(opens))
    print("\n## Loader throughput (train split, random crops)\n" + markdown_table(rates))
    if rss:
        print("\n## RSS over the run\n" + markdown_table([{k: v for k, v in rss.items() if k != "samples"}]))
        print("samples (windows, MiB): " + ", ".join(f"{n}: {v}" for n, v in rss["samples"]))
    print(f"\n{describe_machine()}; {load_average()}")
    if args.out:
        write_json(args.out, portable_paths(result))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
