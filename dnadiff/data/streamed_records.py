"""Windows of a FASTA file's records, read on demand: memory bounded by a window, not by the file.

`dnadiff eval --records FILE` cuts every record into `seq_len` windows, the tail right-padded
(`tile_records`' items). Reading the file whole first (Biopython records, then int64 tensors of every
window) took 32x the file in RSS: 1.6 GB for a 50 MB single-line FASTA at seq_len 128, even with
`--max-windows 8`. Here:

- `RecordIndex` reads the file once, `CHUNK` bytes at a time, checking it exactly as `read_fasta`
  does (a '>' header first, no empty record, only DNA/IUPAC letters; headers start at a '>' after a
  line end, whitespace ' \\t\\r\\n' inside sequences is dropped, a lone '\\r' ends a line) and keeping per
  record its id (the header's first word), length and a checkpoint (bases before, file offset) at
  every chunk it reads. A window [start, end) is read by seeking to the last checkpoint at or before
  `start`: at most one chunk plus the window's bytes, whatever the file size.
- gzip (and bgzip) input and standard input cannot be seeked cheaply: they are first decompressed
  into a temporary file (removed when the index is closed or collected), streamed, never held.
- `RecordWindows` is the data set of `tile_records(read_fasta(path), seq_len)`, item for item
  (test), with each window read only when asked for: `--max-windows 8` reads 8 windows.
"""

from __future__ import annotations

import os
import re
import tempfile
import weakref
import zlib
from array import array
from bisect import bisect_right

import numpy as np
import torch
from torch.utils.data import Dataset

from dnadiff.data.base_census import BaseCensus
from dnadiff.data.fasta import copy_plain
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.utils import not_found

CHUNK = 1 << 14  # bytes read per step of the scan: the spacing of checkpoints
SEQ_SPACE = b" \t\r\n"  # what Biopython's FASTA parser drops from sequence lines
LEAD_SPACE = b" \t\r\n\x0b\x0c"  # what may precede the first header
MAX_TITLE = 1 << 16  # bytes of a header kept (its first word is the record id)
_EOL = re.compile(rb"[\r\n]")
_HEADER = re.compile(rb"[\r\n]>")


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


class RecordIndex:
    """Names, lengths and read checkpoints of the records of a FASTA file (plain, gzip or `-` for stdin).

    `fetch(k, start, end)` returns the upper-case bases [start, end) of record k as bytes."""

    def __init__(self, path: str | os.PathLike, tokenizer: DNATokenizer | None = None):
        self.path = str(path)
        self.label = "stdin" if self.path == "-" else self.path  # the name errors give
        if self.path != "-" and not os.path.isfile(self.path):
            raise DnadiffError(not_found(self.path, "FASTA file"))
        self.tokenizer = tokenizer or DNATokenizer()
        self.names: list[str] = []
        self.lengths: list[int] = []
        self._bases: list[array] = []  # per record: bases before each checkpoint
        self._offsets: list[array] = []  # per record: the file offset of each checkpoint
        self._fh = None
        self._pid = None
        self.census = BaseCensus()  # letters of every record (how many are not A/C/G/T: read as N)
        self._spool = self._plain_copy()
        self.file = self._spool or self.path
        self._finalizer = weakref.finalize(self, _remove, self._spool) if self._spool else None
        try:
            with open(self.file, "rb") as fh:
                self._scan(fh)
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- input
    def _plain_copy(self) -> str | None:
        """None when the file can be read in place; else a temporary plain copy of stdin or a gzip file."""
        if self.path != "-":
            try:
                with open(self.path, "rb") as fh:
                    if fh.read(2) != b"\x1f\x8b":
                        return None
            except OSError as exc:
                raise DnadiffError(f"{self.label}: cannot read ({exc})") from None

        try:
            fd, tmp = tempfile.mkstemp(prefix="dnadiff-records-", suffix=".fa")
        except OSError as exc:
            raise DnadiffError(f"{tempfile.gettempdir()}: cannot write a temporary copy of {self.label} "
                               f"({exc.strerror}); set TMPDIR") from None
        try:
            with os.fdopen(fd, "wb") as out:
                copy_plain(self.path, out)
        except (OSError, EOFError, zlib.error) as exc:
            _remove(tmp)
            raise DnadiffError(f"{self.label}: cannot read ({exc})") from None
        except BaseException:
            _remove(tmp)
            raise
        return tmp

    def _scan(self, fh) -> None:
        """One pass over the file: records, lengths, checkpoints; the checks of `read_fasta`."""
        state = "start"  # before the first header | in a header line | in a sequence
        title = bytearray()
        bases = 0
        pos = 0  # file offset of the chunk
        after_eol = True  # the byte before the chunk ends a line
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            n, i = len(chunk), 0
            while i < n:
                if state == "start":
                    rest = chunk[i:].lstrip(LEAD_SPACE)
                    if not rest:
                        break
                    if rest[:1] != b">":
                        raise DnadiffError(f"{self.label}: not a FASTA file (no '>' header line before the sequence)")
                    i, state = n - len(rest) + 1, "header"
                elif state == "header":
                    m = _EOL.search(chunk, i)
                    end = m.start() if m else n
                    if len(title) < MAX_TITLE:
                        title += chunk[i:min(end, i + MAX_TITLE - len(title))]
                    if m is None:
                        break
                    self._start_record(title, pos + end)
                    title.clear()
                    bases, i, state = 0, end, "seq"  # the line end stays: a '>' after it starts a header
                else:
                    if i == 0 and after_eol and chunk[:1] == b">":
                        stop = 0
                    else:
                        m = _HEADER.search(chunk, i)
                        stop = m.start() + 1 if m else n
                    if i == 0 and stop > 0:  # a chunk that starts inside this record's sequence
                        self._bases[-1].append(bases)
                        self._offsets[-1].append(pos)
                    if stop > i:
                        clean = chunk[i:stop].translate(None, SEQ_SPACE).upper()
                        if clean:
                            self.tokenizer.encode_array(clean, where=f"{self.label}: record {self.names[-1]!r}",
                                                        offset=bases)
                            self.census.add(clean)
                            bases += len(clean)
                    if stop < n:
                        self._end_record(bases)
                        i, state = stop + 1, "header"
                    else:
                        i = n
            after_eol = chunk[-1:] in (b"\r", b"\n")
            pos += n
        if state == "start":
            raise DnadiffError(f"{self.label}: empty FASTA file")
        if state == "header":
            self._start_record(title, pos)
        self._end_record(bases if state == "seq" else 0)

    def _start_record(self, title: bytes, offset: int) -> None:
        words = title.decode("utf-8", errors="replace").split(None, 1)  # Biopython: id = first word
        self.names.append(words[0] if words else "")
        self._bases.append(array("q", [0]))
        self._offsets.append(array("q", [offset]))

    def _end_record(self, bases: int) -> None:
        if bases == 0:
            raise DnadiffError(f"{self.label}: record {self.names[-1]!r} is empty")
        self.lengths.append(bases)

    # ----------------------------------------------------------------- reading
    def _open(self):
        if self._fh is None or self._pid != os.getpid():
            self._fh = open(self.file, "rb")
            self._pid = os.getpid()
        return self._fh

    def fetch(self, k: int, start: int, end: int) -> bytes:
        """Upper-case bases [start, end) of record k (0-based, half-open), read from its nearest checkpoint."""
        if not 0 <= start <= end <= self.lengths[k]:
            raise IndexError(f"record {self.names[k]!r}: [{start}, {end}) is outside [0, {self.lengths[k]})")
        c = bisect_right(self._bases[k], start) - 1
        skip, need = start - self._bases[k][c], end - start
        fh = self._open()
        fh.seek(self._offsets[k][c])
        out = bytearray()
        while len(out) < need:
            want = skip + need - len(out)
            block = fh.read(min(1 << 20, want + want // 16 + 64))  # line ends take a little more
            if not block:
                raise DnadiffError(f"{self.label}: record {self.names[k]!r} ends early (did the file change?)")
            clean = block.translate(None, SEQ_SPACE)
            if skip:
                drop = min(skip, len(clean))
                clean, skip = clean[drop:], skip - drop
            out += clean[:need - len(out)]
        return bytes(out).upper()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._finalizer is not None:
            self._finalizer()  # removes the temporary copy

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fh"] = state["_pid"] = None  # file handles do not cross process boundaries
        state["_finalizer"] = None  # the creating process removes the temporary copy
        return state


class RecordWindows(Dataset):
    """The windows of every record of a FASTA file: record by record, tiles of seq_len (stride seq_len),
    the last one right-padded with [PAD]. Items as `tile_records`': input_ids and attention_mask
    (0 on padding, and on N when mask_n)."""

    def __init__(self, index: RecordIndex, seq_len: int, tokenizer: DNATokenizer | None = None,
                 mask_n: bool = True):
        if seq_len <= 0:
            raise DnadiffError(f"seq_len must be positive, got {seq_len}")
        self.index, self.seq_len, self.mask_n = index, seq_len, mask_n
        self.tokenizer = tokenizer or index.tokenizer
        tiles = [-(-n // seq_len) for n in index.lengths]
        self._first = np.concatenate([[0], np.cumsum(tiles)]).astype(np.int64)  # first window of each record

    def __len__(self) -> int:
        return int(self._first[-1])

    def locate(self, i: int) -> tuple[str, int, int]:
        """(record id, start, end) of window i."""
        k, start, end = self._window(i)
        return self.index.names[k], start, end

    def _window(self, i: int) -> tuple[int, int, int]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self._first, i, side="right")) - 1
        start = (i - int(self._first[k])) * self.seq_len
        return k, start, min(start + self.seq_len, self.index.lengths[k])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        k, start, end = self._window(i)
        ids = self.tokenizer.encode_array(self.index.fetch(k, start, end),
                                          where=f"{self.index.label}: record {self.index.names[k]!r}", offset=start)
        real = np.ones(self.seq_len, dtype=np.int64)
        real[len(ids):] = 0
        if len(ids) < self.seq_len:
            ids = np.concatenate([ids, np.full(self.seq_len - len(ids), self.tokenizer.pad_id, dtype=np.int64)])
        if self.mask_n:
            real[ids == self.tokenizer.n_id] = 0
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(real)}


def record_windows(path: str | os.PathLike, seq_len: int, tokenizer: DNATokenizer | None = None,
                   mask_n: bool = True) -> RecordWindows:
    """`RecordWindows` of a FASTA file (plain, gzip or `-`), checked in one streaming pass."""
    if seq_len <= 0:
        raise DnadiffError(f"seq_len must be positive, got {seq_len}")
    tokenizer = tokenizer or DNATokenizer()
    return RecordWindows(RecordIndex(path, tokenizer), seq_len, tokenizer, mask_n)
