"""Data: genome windows (FASTA + BED), plain FASTA records, genomic benchmarks, text corpora."""

from dnadiff.data.benchmarks import (
    LabelledSequences,
    SequenceClassificationDataset,
    load_benchmark_split,
    pad_batch,
    resolve_benchmark,
)
from dnadiff.data.fasta import Genome, GenomeWindows, Interval, bundled_genome, read_bed
from dnadiff.data.records import read_fasta, write_fasta

__all__ = [
    "Genome", "GenomeWindows", "Interval", "bundled_genome", "read_bed",
    "read_fasta", "write_fasta",
    "LabelledSequences", "SequenceClassificationDataset", "load_benchmark_split", "pad_batch", "resolve_benchmark",
]
