"""Rebuild the genome sample bundled in the package (dnadiff/assets/chr22_sample/).

A small real slice of ../shared/data/hg19_chr22_subset: the first BED intervals of each split
(about 1.2 Mb train, 150 kb valid, 150 kb test) at their true hg19 coordinates, on a chr22 record
of the true length with N elsewhere, bgzip-compressed and indexed, plus their BED lines.

    python pipelines/make_bundled_sample.py --source ../shared/data/hg19_chr22_subset
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dnadiff.data import write_masked_slice

TARGET = {"train": 1_200_000, "valid": 150_000, "test": 150_000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--source", default="../shared/data/hg19_chr22_subset")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "dnadiff/assets/chr22_sample"))
    args = ap.parse_args()

    import pyfaidx

    src = pyfaidx.Fasta(os.path.join(args.source, "chr22.fa.gz"), rebuild=False)
    chrom = "chr22"
    length = len(src[chrom])
    chosen, taken = [], {k: 0 for k in TARGET}
    with open(os.path.join(args.source, "sequences.bed")) as fh:
        for line in fh:
            c, s, e, split = line.split()[:4]
            if taken[split] < TARGET[split]:
                chosen.append((c, int(s), int(e), split))
                taken[split] += int(e) - int(s)
    chosen.sort(key=lambda r: r[1])
    os.makedirs(args.out, exist_ok=True)
    fa_path = os.path.join(args.out, "chr22_sample.fa.gz")
    for ext in ("", ".fai", ".gzi"):
        if os.path.exists(fa_path + ext):
            os.remove(fa_path + ext)
    write_masked_slice(fa_path, os.path.join(args.out, "sequences.bed"), src, chrom, length, chosen)
    print({k: v for k, v in taken.items()}, "intervals:", len(chosen), "->", args.out)


if __name__ == "__main__":
    main()
