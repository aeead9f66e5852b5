"""`dnadiff demo`: the bundled human DNA sample, end to end."""

from __future__ import annotations

import argparse
import os

HELP = "run the demo on the bundled human chr22 sample (minutes on a CPU)"
DESCRIPTION = """Run the demo on the real human DNA bundled with the package (chr22, hg19).

Summarises the sample (windows, GC content, N fraction per split) and writes the summary
as JSON under --out (default ./dnadiff_demo)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="dnadiff_demo", help="output folder (default: ./dnadiff_demo)")
    p.add_argument("--seq-len", type=int, default=1024, help="window length in bases (default 1024)")
    p.add_argument("--summary-only", action="store_true", help="only summarise the bundled genome (no training)")


def run(args: argparse.Namespace) -> int:
    from dnadiff.data.fasta import bundled_genome
    from dnadiff.data.summary import genome_summary
    from dnadiff.errors import DnadiffError
    from dnadiff.utils import format_table, write_json

    if args.seq_len <= 0:
        raise DnadiffError(f"--seq-len must be positive, got {args.seq_len}")
    fasta, bed = bundled_genome()
    rows = genome_summary(fasta, bed, args.seq_len)
    print(f"bundled genome: {fasta}")
    print(format_table(rows))
    path = os.path.join(args.out, "genome_summary.json")
    write_json(path, {"fasta": fasta, "bed": bed, "splits": rows})
    print(f"\nwrote {path}")
    return 0
