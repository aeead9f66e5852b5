"""The DNA-Diffusion DHS table: 47,872 cell-type-specific ENCODE DHS sequences of 200 bp.

The table ships in the `dnadiffusion` wheel (0.0.0.dev0, MIT) as `DHS_MEMBER`; `dnadiff data dhs`
(dnadiff/data/dhs_fetch.py) checks its sha256, parses it here and stores it in dnadiff's cache folder
as `dhs/dhs.npz` (uint8 token ids [N, 200], label ids, split ids, chromosome, start, end) and
`dhs/dhs.json` (counts, sha256, class names), written together (utils.write_together).

What the real file holds (checked by tests/test_dhs_data.py's slow test): 19 tab-separated columns;
`TAG` is one of four ENCODE sample names (GM12878_ENCLB441ZZZ, HepG2_ENCLB029COU, K562_ENCLB843GMH,
hESCT0_ENCLB449ZZZ), `data_label` is training / validation / test (39,254 / 4,053 / 4,565);
validation is chr2 and test chr1 (the README inside the wheel says the opposite: the column counts);
every sequence is 200 upper-case ACGT bases.

Labels are the indices of `CELL_TYPES`, the sorted cell-type names (the class order a
genomic-benchmarks folder of them gets too). Splits: train / valid / test (dnadiff's names).
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.utils import cache_dir, recover_together, write_together

DHS_MEMBER = "dnadiffusion/data/K562_hESCT0_HepG2_GM12878_12k_sequences_per_group.txt"
# sha256 of DHS_MEMBER in dnadiffusion-0.0.0.dev0-py3-none-any.whl (16,714,132 bytes)
DHS_SHA256 = "ba1063a9a3d0054020ae2e9f8add974550ae91fe2d21989e790e5d6cb2cb4d58"
# the TAG column's values -> cell type; hESC is tagged hESCT0 there (data/class_names.py accepts both)
TAGS = {"GM12878_ENCLB441ZZZ": "GM12878", "HepG2_ENCLB029COU": "HepG2", "K562_ENCLB843GMH": "K562",
        "hESCT0_ENCLB449ZZZ": "hESC"}
CELL_TYPES = tuple(sorted(TAGS.values()))  # label ids 0..3: GM12878, HepG2, K562, hESC (the order hESCT0 had)
SPLITS = ("train", "valid", "test")  # split ids 0..2
FILE_SPLITS = {"training": "train", "validation": "valid", "test": "test"}  # the data_label column's values
SEQ_LEN = 200
COLUMNS = ("dhs_id", "chr", "start", "end", "sequence", "TAG", "data_label")  # the columns read
STORE_FORMAT = 1
STORE_FILES = ("dhs.npz", "dhs.json")


def store_dir() -> Path:
    """Where `dnadiff data dhs` keeps the table: dnadiff's cache folder (utils.cache_dir) / dhs."""
    return Path(cache_dir("dhs"))


@dataclass
class DHSTable:
    """The parsed table: one row per DHS, in file order."""

    tokens: np.ndarray  # uint8 [N, SEQ_LEN]: DNATokenizer ids (A7 C8 G9 T10 N11)
    labels: np.ndarray  # uint8 [N]: index into CELL_TYPES
    splits: np.ndarray  # uint8 [N]: index into SPLITS
    chrom: np.ndarray  # bytes [N] ('chr14')
    start: np.ndarray  # int64 [N]: the DHS's start (0-based, as in the file); the sequence is 200 bp at its summit
    end: np.ndarray  # int64 [N]
    sha256: str

    def __len__(self) -> int:
        return len(self.labels)

    def indices(self, split: str | None = None) -> np.ndarray:
        """Row indices of one split (None: all rows), in file order."""
        if split is None:
            return np.arange(len(self))
        return np.flatnonzero(self.splits == split_id(split))

    def sequences(self, split: str | None = None) -> list[str]:
        tok = DNATokenizer()
        return [tok.decode(self.tokens[i]) for i in self.indices(split)]

    def counts(self) -> dict[str, dict[str, int]]:
        """{split: {cell type: rows}}."""
        table = np.zeros((len(SPLITS), len(CELL_TYPES)), dtype=np.int64)
        np.add.at(table, (self.splits.astype(np.int64), self.labels.astype(np.int64)), 1)
        return {s: {c: int(table[i, j]) for j, c in enumerate(CELL_TYPES)} for i, s in enumerate(SPLITS)}

    def chromosomes(self) -> dict[str, list[str]]:
        """{split: its chromosomes, sorted}."""
        return {s: sorted({c.decode() for c in self.chrom[self.indices(s)]}) for s in SPLITS}


def split_id(split: str) -> int:
    if split not in SPLITS:
        raise DnadiffError(f"DHS split must be one of {', '.join(SPLITS)}, got {split!r}")
    return SPLITS.index(split)


# ----------------------------------------------------------------------------- the text table


def parse_dhs_table(data: bytes, where: str, sha256: str) -> DHSTable:
    """The tab-separated table (header line + one row per DHS) -> DHSTable; a malformed row or value
    is one DnadiffError naming `where` and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DnadiffError(f"{where}: not a UTF-8 text table") from None
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].strip():
        raise DnadiffError(f"{where}: empty file")
    header = lines[0].split("\t")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DnadiffError(f"{where}: not the DHS table (no column {', '.join(missing)} in the header line)")
    col = {c: header.index(c) for c in COLUMNS}
    if len(lines) < 2:
        raise DnadiffError(f"{where}: no rows below the header line")
    n = len(lines) - 1
    seqs = bytearray(n * SEQ_LEN)
    labels, splits = np.empty(n, np.uint8), np.empty(n, np.uint8)
    chrom, start, end = [], np.empty(n, np.int64), np.empty(n, np.int64)
    cell_id = {tag: CELL_TYPES.index(cell) for tag, cell in TAGS.items()}
    for i, line in enumerate(lines[1:]):
        at = f"{where}: line {i + 2}"
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DnadiffError(f"{at}: {len(fields)} tab-separated fields, the header has {len(header)}")
        tag, label = fields[col["TAG"]], fields[col["data_label"]]
        if tag not in cell_id:
            raise DnadiffError(f"{at}: TAG {tag!r} is not one of {', '.join(TAGS)}")
        if label not in FILE_SPLITS:
            raise DnadiffError(f"{at}: data_label {label!r} is not one of {', '.join(FILE_SPLITS)}")
        seq = fields[col["sequence"]]
        if len(seq) != SEQ_LEN:
            raise DnadiffError(f"{at}: sequence of {len(seq)} bases, expected {SEQ_LEN}")
        try:
            start[i], end[i] = int(fields[col["start"]]), int(fields[col["end"]])
        except ValueError:
            raise DnadiffError(f"{at}: start/end must be integers") from None
        labels[i], splits[i] = cell_id[tag], SPLITS.index(FILE_SPLITS[label])
        chrom.append(fields[col["chr"]])
        seqs[i * SEQ_LEN:(i + 1) * SEQ_LEN] = seq.encode("ascii", errors="replace")
    tokens = _encode_rows(bytes(seqs), n, where)
    return DHSTable(tokens, labels, splits, np.array(chrom, dtype="S"), start, end, sha256)


def _encode_rows(raw: bytes, n: int, where: str) -> np.ndarray:
    """n sequences of SEQ_LEN bases, concatenated -> uint8 ids [n, SEQ_LEN] (strict: ACGTN only)."""
    tok = DNATokenizer(strict=True)
    try:
        ids = tok.encode_array(raw, where=where)
    except DnadiffError:  # name the row: encode row by row until the bad one
        for row in range(n):
            tok.encode_array(raw[row * SEQ_LEN:(row + 1) * SEQ_LEN], where=f"{where}: line {row + 2}: sequence")
        raise
    return ids.astype(np.uint8).reshape(n, SEQ_LEN)


# ----------------------------------------------------------------------------- the stored form


def store_dhs(table: DHSTable, folder: str | os.PathLike | None = None) -> Path:
    """Write the table as dhs.npz + dhs.json into `folder` (default: store_dir()), both or neither."""
    folder = Path(folder) if folder is not None else store_dir()
    buf = io.BytesIO()
    np.savez(buf, tokens=table.tokens, labels=table.labels, splits=table.splits, chrom=table.chrom,
             start=table.start, end=table.end)
    meta = {"format": STORE_FORMAT, "source": DHS_MEMBER, "sha256": table.sha256, "rows": len(table),
            "seq_len": SEQ_LEN, "tokenizer": "dna", "cell_types": list(CELL_TYPES), "tags": TAGS,
            "splits": list(SPLITS), "data_label": {v: k for k, v in FILE_SPLITS.items()},
            "counts": table.counts(), "chromosomes": table.chromosomes()}
    paths = [folder / name for name in STORE_FILES]
    folder.mkdir(parents=True, exist_ok=True)
    recover_together(paths)
    write_together([(paths[0], buf.getvalue()), (paths[1], json.dumps(meta, indent=2) + "\n")])
    return folder


def stored_meta(folder: str | os.PathLike | None = None) -> dict | None:
    """The stored table's dhs.json, or None when there is no complete store in `folder`."""
    folder = Path(folder) if folder is not None else store_dir()
    paths = [folder / name for name in STORE_FILES]
    if not folder.is_dir():
        return None
    recover_together(paths)
    if not all(p.is_file() for p in paths):
        return None
    try:
        meta = json.loads(paths[1].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == STORE_FORMAT else None


_LOADED: dict[tuple[str, int, int], DHSTable] = {}


def load_dhs(folder: str | os.PathLike | None = None) -> DHSTable:
    """The stored table (read once per process and file version); a missing store says how to make it."""
    folder = Path(folder) if folder is not None else store_dir()
    meta = stored_meta(folder)
    if meta is None:
        raise DnadiffError(f"{folder}: no DHS data here; run `dnadiff data dhs` first "
                           "(offline: `dnadiff data dhs --from dnadiffusion-0.0.0.dev0-py3-none-any.whl`)")
    npz = folder / STORE_FILES[0]
    stat = npz.stat()
    key = (str(npz.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        try:
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("tokens", "labels", "splits", "chrom", "start", "end")}
        except (OSError, ValueError, KeyError) as exc:
            raise DnadiffError(f"{npz}: unreadable DHS store ({exc}); run `dnadiff data dhs --force`") from None
        table = DHSTable(**arrays, sha256=str(meta["sha256"]))
        if len(table) != meta["rows"] or table.tokens.shape[1:] != (SEQ_LEN,):
            raise DnadiffError(f"{npz}: does not match {folder / STORE_FILES[1]}; run `dnadiff data dhs --force`")
        _LOADED.clear()
        _LOADED[key] = table
    return _LOADED[key]


def summary_rows(counts: dict[str, dict[str, int]]) -> list[dict]:
    """Rows per split (and all) x cell type, with totals: the table `dnadiff data dhs` prints."""
    rows = [{"split": s, **counts[s], "total": sum(counts[s].values())} for s in SPLITS]
    rows.append({"split": "all", **{c: sum(counts[s][c] for s in SPLITS) for c in CELL_TYPES},
                 "total": sum(r["total"] for r in rows)})
    return rows


# ----------------------------------------------------------------------------- fine-tuning splits

FINETUNE_NAMES = {"dhs": "test", "dhs:test": "test", "dhs:valid": "valid"}  # data.dataset -> its test split
# Two disjoint halves of the training split (issue 34 §3, the DRAKES protocol: the reward classifier and
# the evaluation oracle are trained on different data): a row is in half_a when the first byte of the
# sha256 of its 200-letter upper-case sequence is even, else in half_b. By content, not by row, so a
# sequence that occurs twice lands in one half and the halves share no sequence.
HALVES = ("half_a", "half_b")


def parse_finetune_name(name: str) -> tuple[str | None, str] | None:
    """data.dataset `dhs[:half_a|:half_b][:test|:valid]` -> (training half or None for the whole training
    split, the split it is scored on); None for a name that is not the DHS table's; a `dhs:...` name that
    does not parse is one DnadiffError."""
    if name != "dhs" and not name.startswith("dhs:"):
        return None
    parts = name.split(":")[1:]
    half = parts.pop(0) if parts and parts[0] in HALVES else None
    split = parts.pop(0) if parts and parts[0] in ("test", "valid") else "test"
    if parts:
        raise DnadiffError(f"data.dataset: {name!r} is not a DHS selection; use dhs[:half_a|:half_b][:test|:valid] "
                           "(e.g. dhs, dhs:valid, dhs:half_a, dhs:half_b:valid)")
    return half, split


def half_of(sequences: list[str]) -> np.ndarray:
    """uint8 [N]: 0 (half_a) or 1 (half_b) for each sequence (the first byte of sha256(sequence) mod 2)."""
    import hashlib

    return np.fromiter((hashlib.sha256(s.encode("ascii")).digest()[0] & 1 for s in sequences), np.uint8,
                       count=len(sequences))


def train_half(table: DHSTable, half: str) -> np.ndarray:
    """Row indices (file order) of the training split's `half` (HALVES)."""
    if half not in HALVES:
        raise DnadiffError(f"DHS training half must be one of {', '.join(HALVES)}, got {half!r}")
    rows = table.indices("train")
    tok = DNATokenizer()
    return rows[half_of([tok.decode(table.tokens[i]) for i in rows]) == HALVES.index(half)]


def finetune_splits(name: str, folder: str | os.PathLike | None = None):
    """`dnadiff finetune`'s data.dataset `dhs[:half_a|:half_b][:test|:valid]`: (train, test) as
    LabelledSequences: train = the training split (or one half of it, HALVES), test = the test split, or
    the validation split for `:valid` (choose settings there before the test split is read once). None for
    any other name."""
    from dnadiff.data.benchmarks import LabelledSequences

    parsed = parse_finetune_name(name)
    if parsed is None:
        return None
    half, split = parsed
    table = load_dhs(folder)
    tok = DNATokenizer()

    def part(rows: np.ndarray) -> LabelledSequences:
        return LabelledSequences([tok.decode(table.tokens[i]) for i in rows], table.labels[rows].tolist(),
                                 list(CELL_TYPES), [f"{CELL_TYPES[table.labels[i]]}/{i}" for i in rows])

    train_rows = train_half(table, half) if half else table.indices("train")
    return part(train_rows), part(table.indices(split))


# ----------------------------------------------------------------------------- training items


class DHSDataset(Dataset):
    """One split of the DHS table as fixed-length items {input_ids, attention_mask, labels}: ids cut
    or right-padded with [PAD] to `seq_len` (attention_mask 0 on pads and N), labels = cell-type ids."""

    def __init__(self, table: DHSTable, split: str | None, seq_len: int = SEQ_LEN,
                 tokenizer: DNATokenizer | None = None):
        self.tokenizer = tokenizer or DNATokenizer()
        if getattr(self.tokenizer, "kind", None) != DNATokenizer.kind:  # the stored ids are DNATokenizer's
            raise DnadiffError(f"data.kind=dhs needs tokenizer.kind dna, got {getattr(self.tokenizer, 'kind', None)!r}")
        rows = table.indices(split)
        ids = np.full((len(rows), seq_len), self.tokenizer.pad_id, dtype=np.uint8)  # int64 per item, not here
        keep = min(seq_len, SEQ_LEN)
        ids[:, :keep] = table.tokens[rows, :keep]
        self.tokens = torch.from_numpy(ids)
        self.labels = torch.from_numpy(table.labels[rows].astype(np.int64))
        self.classes = list(CELL_TYPES)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.tokens[i].long()
        mask = ((ids != self.tokenizer.pad_id) & (ids != self.tokenizer.n_id)).long()
        return {"input_ids": ids, "attention_mask": mask, "labels": self.labels[i]}


__all__ = ["CELL_TYPES", "DHSDataset", "DHSTable", "DHS_MEMBER", "DHS_SHA256", "FINETUNE_NAMES", "HALVES", "SEQ_LEN",
           "SPLITS", "TAGS", "finetune_splits", "half_of", "load_dhs", "parse_dhs_table", "parse_finetune_name",
           "store_dhs", "store_dir", "stored_meta", "summary_rows", "train_half"]
