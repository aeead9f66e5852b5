"""Genome windows: a FASTA genome (plain or bgzip, via pyfaidx) plus a BED with a split column.

The BED layout is that of the public HG38 `sequences_human.bed`: chrom, start, end, split
(0-based, half-open; split in train|valid|test). Windows of `seq_len` tokens are cut from the
intervals of one split, either by tiling (stride, the tail of a region padded with [PAD]) or by
random crops (training). Soft-masked (lower-case) bases are upper-cased. `N` stays token 11 but
gets attention_mask 0 by default (Caduceus maps N to PAD and ignores it in the loss), so
likelihoods count real bases only.

Every window is a pure function of (seed, epoch, index): the same under any number of workers.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from dnadiff.data_root import data_root_hint
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.utils import cache_dir, not_found

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Interval:
    chrom: str
    start: int
    end: int
    split: str

    def __len__(self) -> int:
        return self.end - self.start


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


class Genome:
    """A pyfaidx-backed genome that reopens itself in each worker process."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        if self.path != "-" and not os.path.isfile(self.path):
            raise DnadiffError(not_found(self.path, "genome FASTA") + data_root_hint(self.path))
        if self.path != "-":
            self._check_header()
        self.path = seekable_genome(self.path)  # stdin or plain gzip: a bgzip-free copy in the cache
        self._fasta = None
        self._pid = None
        fa = self._open()
        self.lengths = {name: len(rec) for name, rec in fa.records.items()}
        if not self.lengths:
            raise DnadiffError(f"{self.path}: no FASTA records")

    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                magic = fh.read(2)
            opener = gzip.open if magic == b"\x1f\x8b" else open
            with opener(self.path, "rb") as fh:
                first = fh.read(1)
        except (OSError, EOFError) as exc:
            raise DnadiffError(f"{self.path}: cannot read genome ({exc})") from None
        if first != b">":
            raise DnadiffError(f"{self.path}: not a FASTA file (first character is not '>')")

    def _open(self):
        if self._fasta is None or self._pid != os.getpid():
            import pyfaidx

            # Use a shipped index as is (read-only data folders; git drops mtimes), else one in the cache:
            # never a new file beside the user's genome (read-only folders work, failures leave nothing).
            has_index = os.path.exists(self.path + ".fai") and (
                not self.path.endswith(".gz") or os.path.exists(self.path + ".gzi")
            )
            try:
                names = {} if has_index else _cached_index(self.path)
                self._fasta = pyfaidx.Fasta(
                    self.path, rebuild=False, sequence_always_upper=True, as_raw=True, **names
                )
            except DnadiffError:
                raise
            except pyfaidx.UnsupportedCompressionFormat:
                raise DnadiffError(
                    f"{self.path}: gzip genomes must be bgzip-compressed (use `bgzip`), or decompress it"
                ) from None
            except Exception as exc:  # pyfaidx/Bio.bgzf raise many types on corrupt or truncated files
                raise DnadiffError(f"{self.path}: cannot index genome ({_first_line(exc)})") from None
            self._pid = os.getpid()
        return self._fasta

    def fetch(self, chrom: str, start: int, end: int) -> str:
        """Upper-case bases of [start, end) (0-based, half-open)."""
        try:
            try:
                return self._open()[chrom][start:end]
            except ValueError as exc:
                # pyfaidx/Biopython: a start exactly on a BGZF block boundary gives within-block offset
                # 65536; reading from one base earlier lands inside the previous block
                if "within_block_offset" not in str(exc) or start <= 0:
                    raise
                return self._open()[chrom][start - 1:end][1:]
        except KeyError:
            raise DnadiffError(f"{self.path}: no chromosome {chrom!r}") from None
        except Exception as exc:  # truncated/corrupt bgzip: struct.error, zlib.error, OSError...
            raise DnadiffError(f"{self.path}: cannot read {chrom}:{start}-{end} ({_first_line(exc)})") from None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fasta"] = None  # file handles do not cross process boundaries
        state["_pid"] = None
        return state


def _file_key(path: str) -> str:
    import hashlib

    st = os.stat(path)
    return hashlib.sha1(f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]


def _cached_index(path: str) -> dict[str, str]:
    """pyfaidx index names in dnadiff's cache for `path`, built there first if missing.

    Built in a temporary folder that is renamed into place, so a killed or failed build never
    leaves a partial index that a later run would trust.
    """
    import shutil
    import tempfile

    import pyfaidx


    root = cache_dir("genome_index")
    final = os.path.join(root, _file_key(path))
    base = os.path.basename(path)
    names = {"indexname": os.path.join(final, base + ".fai"), "gzi_indexname": os.path.join(final, base + ".gzi")}
    if os.path.isfile(names["indexname"]):
        return names
    try:
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".build-", dir=root)
    except OSError as exc:
        raise DnadiffError(f"{root}: cannot write the genome index cache ({exc.strerror}); set DNADIFF_CACHE") from None
    try:
        fa = pyfaidx.Fasta(path, indexname=os.path.join(tmp, base + ".fai"),
                           gzi_indexname=os.path.join(tmp, base + ".gzi"), sequence_always_upper=True, as_raw=True)
        fa.close()
        try:
            os.replace(tmp, final)
        except OSError:  # another process built it first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return names


def seekable_genome(path: str) -> str:
    """`path` itself when pyfaidx can index it (plain or bgzip); a cached plain copy for stdin (`-`)
    or a plain-gzip file, keyed by content (stdin) or by path, size and mtime (gzip)."""
    import hashlib
    import tempfile

    if path != "-":
        with open(path, "rb") as fh:
            head = fh.read(18)
        if head[:2] != b"\x1f\x8b" or _is_bgzf(head):
            return path
    root = cache_dir("genomes")
    if path != "-" and os.path.isfile(os.path.join(root, _file_key(path) + ".fa")):
        return os.path.join(root, _file_key(path) + ".fa")  # decompressed before
    try:
        os.makedirs(root, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".copy-", suffix=".tmp", dir=root)
    except OSError as exc:
        raise DnadiffError(f"{root}: cannot write the genome cache ({exc.strerror}); set DNADIFF_CACHE") from None
    digest = hashlib.sha1()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                copy_plain(path, out, digest)
            except (OSError, EOFError) as exc:
                raise DnadiffError(f"{path if path != '-' else 'stdin'}: cannot read genome ({exc})") from None
        key = digest.hexdigest()[:16] if path == "-" else _file_key(path)
        final = os.path.join(root, key + ".fa")
        if os.path.isfile(final):  # the same content as before: keep the copy (and its cached index)
            os.remove(tmp)
        else:
            os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    with open(final, "rb") as fh:
        if fh.read(1) != b">":
            raise DnadiffError(f"{'stdin' if path == '-' else path}: not a FASTA file (first character is not '>')")
    return final


def _is_bgzf(head: bytes) -> bool:
    """BGZF: gzip with the FEXTRA flag and a 'BC' extra subfield (SAM spec, section 4.1)."""
    return len(head) >= 14 and head[3] & 4 != 0 and head[12:14] == b"BC"


def copy_plain(path: str, out, digest=None) -> None:
    """Copy stdin (`-`) or a file to the binary stream `out`, decompressing gzip (and bgzip) on the way,
    in 1 MiB blocks; `digest` (a hashlib object), if given, sees the bytes written."""
    import sys

    src = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        head = src.read(2)
        stream = src
        if head == b"\x1f\x8b":
            stream, head = gzip.GzipFile(fileobj=_Prepend(head, src), mode="rb"), b""
        block = head or stream.read(1 << 20)
        while block:
            if digest is not None:
                digest.update(block)
            out.write(block)
            block = stream.read(1 << 20)
    finally:
        if src is not sys.stdin.buffer:
            src.close()


class _Prepend:
    """A byte stream with some bytes already read put back in front (for gzip.GzipFile)."""

    def __init__(self, first: bytes, rest):
        self._first, self._rest = first, rest

    def read(self, size: int = -1) -> bytes:
        head, self._first = self._first, b""
        if size is not None and 0 <= size <= len(head):
            head, self._first = head[:size], head[size:]
            return head
        more = self._rest.read(-1 if size is None or size < 0 else size - len(head))
        return head + more


def read_bed(path: str | os.PathLike, genome: Genome | None = None) -> list[Interval]:
    """Parse a BED with a split column; every line is validated against the genome."""
    path = str(path)
    if not os.path.isfile(path):
        raise DnadiffError(not_found(path, "BED file") + data_root_hint(path))
    intervals = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            cols = line.split("\t") if "\t" in line else line.split()
            where = f"{path}:{lineno}"
            if len(cols) < 4:
                raise DnadiffError(f"{where}: expected 4 columns (chrom, start, end, split), got {len(cols)}")
            chrom, start_s, end_s, split = cols[0], cols[1], cols[2], cols[3]
            try:
                start, end = int(start_s), int(end_s)
            except ValueError:
                raise DnadiffError(f"{where}: start/end must be integers, got {start_s!r}, {end_s!r}") from None
            if start < 0 or end <= start:
                raise DnadiffError(f"{where}: end ({end}) must be greater than start ({start}) >= 0")
            if split not in SPLITS:
                raise DnadiffError(f"{where}: unknown split {split!r} (expected train, valid or test)")
            if genome is not None:
                if chrom not in genome.lengths:
                    raise DnadiffError(f"{where}: chromosome {chrom!r} is not in {genome.path}")
                if end > genome.lengths[chrom]:
                    raise DnadiffError(
                        f"{where}: interval end {end} is past the end of {chrom} (length {genome.lengths[chrom]})"
                    )
            intervals.append(Interval(chrom, start, end, split))
    if not intervals:
        raise DnadiffError(f"{path}: BED file has no intervals")
    return intervals


class GenomeWindows(Dataset):
    """Fixed-length token windows from one split of a genome + BED.

    mode="tile":   windows at start, start+stride, ... of every interval; the last window of an
                   interval is cut at the interval end and right-padded with [PAD] (never reads past it).
    mode="random": `num_windows` random crops (default: split bases / seq_len), an interval drawn with
                   probability proportional to its length, redrawn each epoch (call `set_epoch`).
    Items: dict(input_ids Long[L], attention_mask Long[L]) with mask 0 on pads (and on N if mask_n).
    """

    def __init__(
        self,
        genome: Genome | str,
        intervals: list[Interval] | str,
        split: str,
        seq_len: int,
        *,
        mode: str = "tile",
        stride: int | None = None,
        rc_prob: float = 0.0,
        max_n_frac: float = 1.0,
        mask_n: bool = True,
        num_windows: int | None = None,
        seed: int = 0,
        tokenizer: DNATokenizer | None = None,
    ):
        if not isinstance(seq_len, int) or seq_len <= 0:
            raise DnadiffError(f"seq_len must be a positive integer, got {seq_len!r}")
        if split not in SPLITS:
            raise DnadiffError(f"split: unknown split {split!r} (expected train, valid or test)")
        if mode not in ("tile", "random"):
            raise DnadiffError(f"mode: expected 'tile' or 'random', got {mode!r}")
        if not 0.0 <= rc_prob <= 1.0:
            raise DnadiffError(f"rc_prob must be in [0, 1], got {rc_prob}")
        self.genome = Genome(genome) if not isinstance(genome, Genome) else genome
        if not isinstance(intervals, list):
            intervals = read_bed(intervals, self.genome)
        self.intervals = [iv for iv in intervals if iv.split == split]
        if not self.intervals:
            raise DnadiffError(f"the BED has no intervals in split {split!r}")
        self.split, self.seq_len, self.mode = split, seq_len, mode
        self.stride = stride or seq_len
        if self.stride <= 0:
            raise DnadiffError(f"stride must be positive, got {self.stride}")
        self.rc_prob, self.max_n_frac, self.mask_n = rc_prob, max_n_frac, mask_n
        self.seed, self.epoch = seed, 0
        self.tokenizer = tokenizer or DNATokenizer()
        lengths = np.array([len(iv) for iv in self.intervals], dtype=np.int64)
        self._cum_len = np.cumsum(lengths)
        if mode == "tile":
            self.windows = self._tile()
        else:
            self.windows = None
            self.num_windows = num_windows or max(1, int(self._cum_len[-1]) // seq_len)

    # ----------------------------------------------------------------- window tables
    def _tile(self) -> list[tuple[int, int, int]]:
        """(interval index, start, end) of every tile, filtered by N fraction if asked."""
        out = []
        for k, iv in enumerate(self.intervals):
            pos = iv.start
            while pos < iv.end:
                out.append((k, pos, min(pos + self.seq_len, iv.end)))
                if pos + self.seq_len >= iv.end:
                    break
                pos += self.stride
        if self.max_n_frac < 1.0:
            kept = []
            for k, s, e in out:
                seq = self.genome.fetch(self.intervals[k].chrom, s, e)
                if seq.count("N") / max(1, e - s) <= self.max_n_frac:
                    kept.append((k, s, e))
            out = kept
        if not out:
            raise DnadiffError(f"no {self.split} window has an N fraction <= {self.max_n_frac}")
        return out

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.windows) if self.windows is not None else self.num_windows

    def _rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, index])

    def _random_window(self, rng: np.random.Generator) -> tuple[int, int, int]:
        for _ in range(100):
            pick = int(rng.integers(0, int(self._cum_len[-1])))
            k = int(np.searchsorted(self._cum_len, pick, side="right"))
            iv = self.intervals[k]
            if len(iv) <= self.seq_len:
                start = iv.start
            else:
                start = iv.start + int(rng.integers(0, len(iv) - self.seq_len + 1))
            end = min(start + self.seq_len, iv.end)
            if self.max_n_frac >= 1.0:
                return k, start, end
            seq = self.genome.fetch(iv.chrom, start, end)
            if seq.count("N") / (end - start) <= self.max_n_frac:
                return k, start, end
        raise DnadiffError(f"could not find a {self.split} window with N fraction <= {self.max_n_frac}")

    def locate(self, index: int) -> tuple[str, int, int]:
        """(chrom, start, end) of window `index` (for the current epoch)."""
        k, s, e = self.windows[index] if self.windows is not None else self._random_window(self._rng(index))
        return self.intervals[k].chrom, s, e

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        rng = self._rng(index)
        if self.windows is not None:
            k, start, end = self.windows[index]
        else:
            k, start, end = self._random_window(rng)
        iv = self.intervals[k]
        seq = self.genome.fetch(iv.chrom, start, end)
        ids = self.tokenizer.encode_array(seq, where=f"{self.genome.path}:{iv.chrom}:{start}-{end}")
        real = np.ones(len(ids), dtype=np.int64)
        if self.mask_n:
            real[ids == self.tokenizer.n_id] = 0
        if rng.random() < self.rc_prob:  # reverse-complement augmentation (same rng stream per item)
            ids = self.tokenizer.reverse_complement(ids)
            real = real[::-1].copy()
        pad = self.seq_len - len(ids)
        if pad > 0:
            ids = np.concatenate([ids, np.full(pad, self.tokenizer.pad_id, dtype=np.int64)])
            real = np.concatenate([real, np.zeros(pad, dtype=np.int64)])
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(real)}


def bundled_genome() -> tuple[str, str]:
    """Paths (fasta, bed) of the small real human chr22 sample shipped inside the package."""
    root = Path(__file__).resolve().parent.parent / "assets" / "chr22_sample"
    return str(root / "chr22_sample.fa.gz"), str(root / "sequences.bed")


def genome_reference(fasta: str, bed: str, split: str, length: int, max_windows: int) -> list[str]:
    """Windows of `length` bases (no N) from one split of a genome + BED, evenly spaced."""
    read_bed(bed)  # a malformed BED fails before the genome is opened (and indexed)
    genome = Genome(fasta)
    ds = GenomeWindows(genome, read_bed(bed, genome), split, length, max_n_frac=0.0)
    idx = np.linspace(0, len(ds) - 1, min(len(ds), max_windows)).round().astype(int)
    seqs = []
    for i in sorted(set(int(i) for i in idx)):
        chrom, start, end = ds.locate(i)
        if end - start == length:
            seqs.append(genome.fetch(chrom, start, end))
    if not seqs:
        raise DnadiffError(f"{bed}: no full {length}-bp window without N in split {split!r}")
    return seqs
