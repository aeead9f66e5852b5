"""Data: genome windows (FASTA + BED), plain FASTA records, genomic benchmarks, text corpora, the
split data set of a run config, index splits and training streams.

    from dnadiff.data import build_split_dataset
    test = build_split_dataset(cfg, tokenizer, "test")      # windows of the config's genome (or text blocks)
"""

from dnadiff.data.benchmarks import (
    LabelledSequences,
    SequenceClassificationDataset,
    load_benchmark_split,
    pad_batch,
    resolve_benchmark,
)
from dnadiff.data.datasets import LabelledWindows, build_split_dataset, genome_paths
from dnadiff.data.dhs import CELL_TYPES, HALVES, DHSDataset, load_dhs, parse_dhs_table, store_dhs, train_half
from dnadiff.data.documents import iter_documents
from dnadiff.data.fasta import Genome, GenomeWindows, Interval, bundled_genome, genome_reference, read_bed
from dnadiff.data.records import format_fasta, read_fasta, tile_records, write_fasta
from dnadiff.data.slices import write_masked_slice
from dnadiff.data.splits import holdout_split, kfold_splits, paper_splits, stratified_subsample
from dnadiff.data.streamed_records import RecordIndex, RecordWindows, record_windows
from dnadiff.data.text import build_text_datasets
from dnadiff.data.tokenizer_training import train_tokenizer

__all__ = [
    "Genome", "GenomeWindows", "Interval", "bundled_genome", "genome_reference", "read_bed",
    "format_fasta", "read_fasta", "tile_records", "write_fasta", "write_masked_slice",
    "RecordIndex", "RecordWindows", "record_windows",
    "LabelledSequences", "SequenceClassificationDataset", "load_benchmark_split", "pad_batch", "resolve_benchmark",
    "LabelledWindows", "build_split_dataset", "genome_paths",
    "holdout_split", "kfold_splits", "paper_splits", "stratified_subsample",
    "iter_documents", "build_text_datasets", "train_tokenizer",
    "CELL_TYPES", "HALVES", "DHSDataset", "load_dhs", "parse_dhs_table", "store_dhs", "train_half",
]
