"""Write a genome slice in the project's layout: a bgzip FASTA that is N everywhere except chosen
intervals (kept at their true coordinates, soft-masking kept), its BED with the split column, and the
pyfaidx indexes. Used by pipelines/make_bundled_sample.py (the packaged sample) and
tests/data/make_fixtures.py (the test fixtures), so both are cut the same way."""

from __future__ import annotations

import os


def write_masked_slice(fa_path: str | os.PathLike, bed_path: str | os.PathLike, src, chrom: str, length: int,
                       chosen: list[tuple[str, int, int, str]]) -> None:
    """`src[chrom][s:e]` gives bases (a pyfaidx.Fasta); `chosen` = sorted (chrom, start, end, split)."""
    import pyfaidx
    from Bio import bgzf

    pieces, pos = [], 0
    for c, s, e, _ in chosen:
        pieces.append("N" * (s - pos))
        pieces.append(str(src[c][s:e]))
        pos = e
    pieces.append("N" * (length - pos))
    seq = "".join(pieces)
    if len(seq) != length:
        raise ValueError(f"intervals overlap or run past {length}: assembled {len(seq)} bases")
    from dnadiff.data.records import format_fasta

    with bgzf.BgzfWriter(str(fa_path), "wb") as fh:
        fh.write(format_fasta([(chrom, seq)]).encode())  # 60 bases per line
    with open(bed_path, "w") as fh:
        for c, s, e, split in chosen:
            fh.write(f"{c}\t{s}\t{e}\t{split}\n")
    pyfaidx.Fasta(str(fa_path)).close()  # writes the .fai and .gzi indexes
