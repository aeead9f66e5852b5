"""Genome loader throughput: windows/s at seq_len 1024 from the bgzip chr22 genome.

    python benchmarks/loader.py [--genome ../shared/data/hg19_chr22_subset] [--n 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from dnadiff.data import GenomeWindows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--genome", default=os.path.join(os.path.dirname(__file__), "../../shared/data/hg19_chr22_subset"))
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    fa, bed = os.path.join(args.genome, "chr22.fa.gz"), os.path.join(args.genome, "sequences.bed")
    rows = []
    for mode, rc in (("tile", 0.0), ("random", 0.5)):
        ds = GenomeWindows(fa, bed, "train", args.seq_len, mode=mode, rc_prob=rc, num_windows=args.n)
        n = min(args.n, len(ds))
        ds[0]
        t0 = time.perf_counter()
        for i in range(n):
            ds[i]
        dt = time.perf_counter() - t0
        rows.append({"mode": mode, "rc_prob": rc, "windows": n, "seconds": round(dt, 3),
                     "windows_per_s": round(n / dt, 1)})
        for workers in (2,):
            dl = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers)
            t0 = time.perf_counter()
            seen = 0
            for batch in dl:
                seen += len(batch["input_ids"])
                if seen >= n:
                    break
            dt = time.perf_counter() - t0
            rows.append({"mode": f"{mode}+DataLoader(workers={workers})", "rc_prob": rc, "windows": seen,
                         "seconds": round(dt, 3), "windows_per_s": round(seen / dt, 1)})
    for r in rows:
        print(f"{r['mode']:<32} rc={r['rc_prob']:<4} {r['windows']:>6} windows {r['seconds']:>7.2f} s  "
              f"{r['windows_per_s']:>8.1f} windows/s")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
