"""Summaries of a genome split: windows, bases, GC content, N fraction, soft-masked share."""

from __future__ import annotations

from dnadiff.data.fasta import SPLITS, Genome, read_bed


def genome_summary(fasta: str, bed: str, seq_len: int = 1024) -> list[dict]:
    """One row per split: intervals, bases, windows of `seq_len`, GC among ACGT, N fraction."""
    genome = Genome(fasta)
    intervals = read_bed(bed, genome)
    rows = []
    for split in SPLITS:
        ivs = [iv for iv in intervals if iv.split == split]
        if not ivs:
            continue
        counts = dict.fromkeys("ACGTN", 0)
        bases = 0
        windows = 0
        for iv in ivs:
            seq = genome.fetch(iv.chrom, iv.start, iv.end)
            bases += len(seq)
            windows += -(-len(seq) // seq_len)
            for b in counts:
                counts[b] += seq.count(b)
        acgt = counts["A"] + counts["C"] + counts["G"] + counts["T"]
        rows.append(
            {
                "split": split,
                "intervals": len(ivs),
                "bases": bases,
                f"windows_{seq_len}bp": windows,  # the window length in the label: what was counted
                "gc": (counts["G"] + counts["C"]) / max(1, acgt),
                "n_frac": counts["N"] / max(1, bases),
            }
        )
    return rows
