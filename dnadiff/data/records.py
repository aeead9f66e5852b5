"""Plain multi-record FASTA files (Biopython): small inputs, references and sample outputs."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import Iterable

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.utils import atomic_write, not_found


def read_fasta(path: str | os.PathLike, tokenizer: DNATokenizer | None = None,
               full_headers: bool = False) -> list[tuple[str, str]]:
    """[(id, SEQUENCE)] upper-cased and validated; Windows line endings, lower case and gzip are fine.

    `-` reads standard input; `full_headers`: the whole header line (id and description) instead of the id."""
    from Bio import SeqIO

    path = str(path)
    if path != "-" and not os.path.isfile(path):
        raise DnadiffError(not_found(path, "FASTA file"))
    tokenizer = tokenizer or DNATokenizer()
    try:
        if path == "-":  # standard input (plain or gzip)
            import sys

            raw = sys.stdin.buffer.read()
            path = "stdin"
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
        if raw[:2] == b"\x1f\x8b":  # gzip or bgzip
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise DnadiffError(f"{path}: cannot read ({exc})") from None
    stripped = text.lstrip()
    if not stripped:
        raise DnadiffError(f"{path}: empty FASTA file")
    if not stripped.startswith(">"):
        raise DnadiffError(f"{path}: not a FASTA file (no '>' header line before the sequence)")
    records = []
    for rec in SeqIO.parse(io.StringIO(stripped), "fasta"):
        seq = str(rec.seq).upper()
        if not seq:
            raise DnadiffError(f"{path}: record {rec.id!r} is empty")
        tokenizer.encode_array(seq, where=f"{path}: record {rec.id!r}")  # validates the characters
        records.append((rec.description if full_headers else rec.id, seq))
    if not records:
        raise DnadiffError(f"{path}: no FASTA records")
    return records


def format_fasta(records: Iterable[tuple[str, str]], line_width: int = 60) -> str:
    """FASTA text of [(header, sequence)]: the header's first word is the id, the rest its description;
    sequences wrapped at `line_width` (Biopython's FastaWriter). dnadiff's one FASTA writer."""
    from Bio import SeqIO
    from Bio.Seq import Seq
    from Bio.SeqRecord import SeqRecord

    recs = []
    for name, seq in records:
        rid, _, desc = str(name).partition(" ")
        recs.append(SeqRecord(Seq(seq), id=rid, description=desc))
    buf = io.StringIO()
    SeqIO.FastaIO.FastaWriter(buf, wrap=line_width).write_file(recs)
    return buf.getvalue()


def write_fasta(path: str | os.PathLike, records: Iterable[tuple[str, str]], line_width: int = 60) -> None:
    """Write [(header, sequence)] atomically (temp name + rename)."""
    atomic_write(path, format_fasta(records, line_width))


def tile_array(ids, seq_len: int, pad_id: int):
    """Cut a 1-D id array into Int64[T, seq_len] tiles (stride seq_len, the tail right-padded with
    pad_id) and each tile's real length Int64[T]: the windows of GenomeWindows(mode="tile",
    stride=seq_len), shared by `tile_records` and the Markov count fit."""
    import numpy as np

    ids = np.asarray(ids)
    n_tiles = -(-len(ids) // seq_len)
    padded = np.full(n_tiles * seq_len, pad_id, dtype=np.int64)
    padded[: len(ids)] = ids
    lengths = np.minimum(seq_len, len(ids) - np.arange(n_tiles) * seq_len)
    return padded.reshape(n_tiles, seq_len), lengths


def tile_records(
    records: list[tuple[str, str]], seq_len: int, tokenizer: DNATokenizer | None = None, mask_n: bool = True
) -> list[dict]:
    """Cut each record into windows of seq_len (the tail right-padded): items like GenomeWindows'."""
    import numpy as np
    import torch

    if seq_len <= 0:
        raise DnadiffError(f"seq_len must be positive, got {seq_len}")
    tokenizer = tokenizer or DNATokenizer()
    items = []
    for name, seq in records:
        tiles, lengths = tile_array(tokenizer.encode_array(seq, where=f"record {name!r}"), seq_len, tokenizer.pad_id)
        real = (np.arange(seq_len) < lengths[:, None]).astype(np.int64)  # (T, seq_len): 0 on the padding
        if mask_n:
            real[tiles == tokenizer.n_id] = 0
        items.extend({"input_ids": torch.from_numpy(t), "attention_mask": torch.from_numpy(r)}
                     for t, r in zip(tiles, real))
    return items
