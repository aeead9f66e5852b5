"""A synthetic genome the size of hg38, written once into a cache folder: bgzip FASTA + .fai + .gzi + a BED.

    python benchmarks/synthetic_genome.py --workdir /tmp/dnadiff_scale               # 3.1 Gb, 24 records
    python benchmarks/synthetic_genome.py --scale-factor 0.01                         # 31 Mb, for a quick check

Used by benchmarks/data_scale.py; run alone it only writes (or finds) the files and prints their paths.

- Records chr1..chr22, chrX, chrY with the lengths of the GRCh38 primary assembly (3,088,269,832 bp),
  each multiplied by --scale-factor. Bases are i.i.d. uniform A/C/G/T drawn with numpy in large blocks
  (deterministic in --seed, chromosome and block, whatever the thread count), soft-masked (lower case)
  in random 256-bp tiles (about half, like RepeatMasker on hg38), with N runs: 10 kb telomeres at each
  end, one centromere-like gap (3% of the chromosome at 40% of its length) and short gaps (100 bp to
  50 kb, one per 5 Mb on average). 60 bases per line.
- BGZF as the SAM specification (section 4.1, "The BGZF compression format") describes it: deflate
  blocks of at most 65,280 input bytes (htslib's BGZF_BLOCK_SIZE), each a gzip member with a `BC`
  extra field holding its size, then the 28-byte end-of-file block. Written by this script with zlib
  (level 1 by default: random DNA compresses to ~2.8 bits/base at level 1 vs ~2.5 at 6, 10x faster to
  write; decompression speed is about the same). `.fai` is samtools faidx's layout (name, length,
  offset, bases per line, bytes per line); `.gzi` is htslib's (uint64 count, then (compressed,
  uncompressed) uint64 offset pairs of every block but the first).
- BED in the layout of Basenji/Enformer's public `sequences_human.bed`: chrom, start, end, split;
  131,072-bp regions, about 34,000 of them (times --scale-factor), overlapping at a fixed stride,
  none touching a telomere or centromere gap, split in contiguous runs of 16 regions (fewer when
  scaled down) drawn 90/5/5 % train/valid/test (Basenji too keeps neighbouring regions in one fold).

Everything is written under temporary names and renamed; `meta.json`, written last, marks a finished set.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HG38 = {  # GRCh38 primary assembly chromosome lengths (UCSC hg38.chrom.sizes)
    "chr1": 248956422, "chr2": 242193529, "chr3": 198295559, "chr4": 190214555, "chr5": 181538259,
    "chr6": 170805979, "chr7": 159345973, "chr8": 145138636, "chr9": 138394717, "chr10": 133797422,
    "chr11": 135086622, "chr12": 133275309, "chr13": 114364328, "chr14": 107043718, "chr15": 101991189,
    "chr16": 90338345, "chr17": 83257441, "chr18": 80373285, "chr19": 58617616, "chr20": 64444167,
    "chr21": 46709983, "chr22": 50818468, "chrX": 156040895, "chrY": 57227415,
}
LINE = 60
BLOCK = 65280  # uncompressed bytes per BGZF block (htslib's BGZF_BLOCK_SIZE)
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")  # SAM spec 4.1.2
REGION = 131_072
REGIONS = 34_000
TELOMERE = 10_000
BATCH_LINES = 1 << 16  # lines generated per numpy block (3.9 Mb)
VERSION = 1


def default_workdir() -> str:
    root = os.environ.get("DNADIFF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "dnadiff")
    return os.path.join(root, "synthetic_genome")


def chrom_lengths(scale: float) -> dict[str, int]:
    return {name: max(LINE, int(round(n * scale))) for name, n in HG38.items()}


def gaps(length: int, rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(large, small) N runs [start, end) of a chromosome: telomeres + centromere, and short gaps."""
    cen = int(length * 0.40)
    large = [(0, min(TELOMERE, length)), (cen, min(length, cen + int(length * 0.03))),
             (max(0, length - TELOMERE), length)]
    small = []
    for _ in range(rng.poisson(length / 5e6)):
        s = int(rng.integers(0, length))
        small.append((s, min(length, s + int(rng.integers(100, 50_001)))))
    return large, small


def chromosome_lines(index: int, length: int, seed: int, runs: list[tuple[int, int]]):
    """The record's sequence lines (60 bases + newline) in blocks of BATCH_LINES lines: (bytes, bases)."""
    upper = np.frombuffer(b"ACGT", dtype=np.uint8)
    n_lines = -(-length // LINE)
    for b, first in enumerate(range(0, n_lines, BATCH_LINES)):
        rng = np.random.default_rng([seed, index, b])
        start = first * LINE
        n = min(BATCH_LINES * LINE, length - start)
        seq = upper[rng.integers(0, 4, size=n, dtype=np.uint8)]
        lower = np.repeat(rng.random(-(-n // 256)) < 0.5, 256)[:n]  # soft-masked 256-bp tiles
        seq[lower] |= 0x20
        for s, e in runs:
            s, e = max(s, start), min(e, start + n)
            if s < e:
                seq[s - start:e - start] = ord("N")
        full = n // LINE
        rows = np.empty((full, LINE + 1), dtype=np.uint8)
        rows[:, :LINE] = seq[:full * LINE].reshape(full, LINE)
        rows[:, LINE] = ord("\n")
        tail = seq[full * LINE:]
        yield rows.tobytes() + (tail.tobytes() + b"\n" if len(tail) else b""), n


def _bgzf_block(data: bytes, level: int) -> bytes:
    """One BGZF block: gzip header with the BC extra field (block size - 1), raw deflate, CRC32, ISIZE."""
    comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = comp.compress(data) + comp.flush()
    if len(body) + 26 > 65536:  # incompressible: store (65,280 bytes always fit)
        comp = zlib.compressobj(0, zlib.DEFLATED, -15)
        body = comp.compress(data) + comp.flush()
    header = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00BC\x02\x00" + struct.pack("<H", len(body) + 25)
    return header + body + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data))


class BgzfWriter:
    """Buffers bytes into BGZF blocks, compressed `threads` at a time (zlib releases the GIL), and
    records each block's (compressed, uncompressed) start offset for the .gzi."""

    def __init__(self, fh, level: int, threads: int):
        self.fh, self.level = fh, level
        self.pool = ThreadPoolExecutor(max(1, threads))
        self.buf = bytearray()
        self.coffset = self.uoffset = 0
        self.starts: list[tuple[int, int]] = []

    def write(self, data: bytes) -> None:
        self.buf += data
        n = len(self.buf) // BLOCK
        if n >= 64:
            self._flush(n * BLOCK)

    def _flush(self, upto: int) -> None:
        pieces = [bytes(self.buf[i:i + BLOCK]) for i in range(0, upto, BLOCK)]
        del self.buf[:upto]
        for piece, block in zip(pieces, self.pool.map(lambda p: _bgzf_block(p, self.level), pieces)):
            self.starts.append((self.coffset, self.uoffset))
            self.fh.write(block)
            self.coffset += len(block)
            self.uoffset += len(piece)

    def close(self) -> None:
        self._flush(len(self.buf))
        self.fh.write(EOF_BLOCK)
        self.pool.shutdown()


def write_gzi(path: str, starts: list[tuple[int, int]]) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(starts) - 1))
        for c, u in starts[1:]:
            fh.write(struct.pack("<QQ", c, u))


def regions(lengths: dict[str, int], excluded: dict[str, list[tuple[int, int]]], scale: float,
            seed: int) -> list[tuple[str, int, int, str]]:
    """~REGIONS * scale regions of REGION bp at one stride, skipping those that touch an excluded gap."""
    usable = sum(max(0, n - sum(e - s for s, e in excluded[c])) for c, n in lengths.items())
    stride = max(1, int(usable / max(1, REGIONS * scale)))
    group = max(1, min(16, int(round(16 * scale))))  # a small genome: shorter runs, so every split gets some
    rng = np.random.default_rng([seed, 99])
    out = []
    for chrom, n in lengths.items():
        starts = [s for s in range(0, n - REGION + 1, stride)
                  if not any(s < e and gs < s + REGION for gs, e in excluded[chrom])]
        for k in range(0, len(starts), group):
            split = rng.choice(["train", "valid", "test"], p=[0.9, 0.05, 0.05])
            out.extend((chrom, s, s + REGION, str(split)) for s in starts[k:k + group])
    for k, split in ((-1, "test"), (-2, "valid")):  # a tiny genome: still one region of each split
        if len(out) >= 3 and not any(r[3] == split for r in out):
            out[k] = (*out[k][:3], split)
    return out


def ensure_genome(workdir: str, scale: float = 1.0, seed: int = 0, level: int = 1, threads: int = 1,
                  progress: bool = True) -> dict:
    """Write the genome + indexes + BED under WORKDIR/hg38sim_x{scale}_s{seed} unless already there.

    Returns the meta dict: paths, lengths, sizes, the seconds the writing took (0 when found)."""
    from tqdm import tqdm

    folder = os.path.join(os.path.abspath(workdir), f"hg38sim_x{scale:g}_s{seed}_l{level}")
    meta_path = os.path.join(folder, "meta.json")
    if os.path.isfile(meta_path):
        with open(meta_path) as fh:
            meta = json.load(fh)
        if meta.get("version") == VERSION:
            meta["write_seconds_now"] = 0.0
            return meta
    os.makedirs(folder, exist_ok=True)
    fa = os.path.join(folder, "genome.fa.gz")
    lengths = chrom_lengths(scale)
    t0 = time.perf_counter()
    fai, excluded, n_gap = [], {}, 0
    with open(fa + ".tmp", "wb") as fh, tqdm(total=sum(lengths.values()), unit="b", unit_scale=True,
                                             desc="writing genome", disable=not progress) as bar:
        out = BgzfWriter(fh, level, threads)
        for index, (chrom, n) in enumerate(lengths.items()):
            large, small = gaps(n, np.random.default_rng([seed, index, 1 << 30]))
            excluded[chrom] = large
            n_gap += sum(e - s for s, e in large + small)
            header = f">{chrom}\n".encode()
            out.write(header)
            fai.append(f"{chrom}\t{n}\t{out.uoffset + len(out.buf)}\t{LINE}\t{LINE + 1}\n")
            for lines, bases in chromosome_lines(index, n, seed, large + small):
                out.write(lines)
                bar.update(bases)
        out.close()
    with open(fa + ".fai.tmp", "w") as fh:
        fh.writelines(fai)
    write_gzi(fa + ".gzi.tmp", out.starts)
    bed = os.path.join(folder, "sequences_human.bed")
    rows = regions(lengths, excluded, scale, seed)
    with open(bed + ".tmp", "w") as fh:
        fh.writelines(f"{c}\t{s}\t{e}\t{sp}\n" for c, s, e, sp in rows)
    for path in (fa, fa + ".fai", fa + ".gzi", bed):  # the index after the FASTA: never older than it
        os.replace(path + ".tmp", path)
    seconds = time.perf_counter() - t0
    splits = {sp: sum(1 for r in rows if r[3] == sp) for sp in ("train", "valid", "test")}
    meta = {"version": VERSION, "fasta": fa, "bed": bed, "scale_factor": scale, "seed": seed, "level": level,
            "records": len(lengths), "bases": sum(lengths.values()), "n_bases_approx": n_gap,
            "fasta_bytes": os.path.getsize(fa), "blocks": len(out.starts), "regions": len(rows), "splits": splits,
            "write_seconds": round(seconds, 1), "write_threads": threads}
    with open(meta_path + ".tmp", "w") as fh:
        json.dump(meta, fh, indent=1)
    os.replace(meta_path + ".tmp", meta_path)
    meta["write_seconds_now"] = meta["write_seconds"]
    return meta


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--workdir", default=default_workdir(), help="cache folder (default: %(default)s)")
    ap.add_argument("--scale-factor", type=float, default=1.0, help="chromosome lengths times this (default 1: hg38)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--level", type=int, default=1, choices=range(0, 10), help="deflate level (default 1)")
    ap.add_argument("--write-threads", type=int, default=1, help="compression threads (default 1)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    if not 0 < args.scale_factor <= 1:
        print("error: --scale-factor must be in (0, 1]", file=sys.stderr)
        return 2
    meta = ensure_genome(args.workdir, args.scale_factor, args.seed, args.level, args.write_threads)
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
