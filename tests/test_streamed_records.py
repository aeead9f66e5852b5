"""FASTA records read window by window (dnadiff/data/streamed_records.py): the same items and errors as
`tile_records(read_fasta(...))` on every layout (checked with chunks as small as one byte, so every
record, line and header boundary falls on a chunk edge), reads bounded by a chunk plus the window,
and `dnadiff eval --records` on a large single-line FASTA with memory that does not grow with the file."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from dnadiff.data import streamed_records as rw
from dnadiff.data.records import read_fasta, tile_records
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import DNATokenizer
from helpers.subprocess_env import REPO, child_env


def _random_fasta(rng: np.random.Generator) -> bytes:
    """Several records in mixed layouts: line widths, CRLF / lone CR, lower case, N and IUPAC codes,
    blank lines, spaces and tabs inside sequence lines, headers with descriptions."""
    out = [b"  \n\n" if rng.random() < 0.5 else b""]
    for r in range(int(rng.integers(1, 5))):
        eol = [b"\n", b"\r\n", b"\r"][int(rng.integers(0, 3))]
        n = int(rng.integers(1, 200))
        seq = rng.choice(np.frombuffer(b"ACGTacgtNnRYkm", np.uint8), size=n).tobytes()
        out.append(b">rec%d some description\t here" % r + eol)
        width = int(rng.integers(1, 80))
        for s in range(0, n, width):
            line = seq[s:s + width]
            if rng.random() < 0.2:
                cut = int(rng.integers(0, len(line) + 1))
                line = line[:cut] + [b" ", b"\t", b"  "][int(rng.integers(0, 3))] + line[cut:]
            out.append(line + (b" " if rng.random() < 0.1 else b"") + eol)
            if rng.random() < 0.1:
                out.append(eol)
    return b"".join(out)


def _same_items(a, b) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x["input_ids"], y["input_ids"]) and torch.equal(x["attention_mask"], y["attention_mask"])
        and x["input_ids"].dtype == y["input_ids"].dtype == torch.int64
        and x["attention_mask"].dtype == y["attention_mask"].dtype == torch.int64 for x, y in zip(a, b))


@pytest.mark.parametrize("chunk", [1, 3, 16, 1 << 14])
def test_windows_equal_tile_records_of_read_fasta(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(rw, "CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for case in range(12):
        path = tmp_path / f"f{case}.fa"
        data = _random_fasta(rng)
        path.write_bytes(gzip.compress(data) if case % 4 == 3 else data)
        records = read_fasta(path)
        index = rw.RecordIndex(path)
        assert index.names == [n for n, _ in records] and index.lengths == [len(s) for _, s in records]
        for k, (_, seq) in enumerate(records):  # any slice, from any checkpoint
            for start in range(0, len(seq), 7):
                assert index.fetch(k, start, min(len(seq), start + 13)).decode() == seq[start:start + 13]
        for seq_len, mask_n in ((1, True), (5, False), (64, True)):
            windows = rw.record_windows(path, seq_len, mask_n=mask_n)
            assert _same_items([windows[i] for i in range(len(windows))],
                               tile_records(records, seq_len, mask_n=mask_n)), (case, seq_len)
        index.close()


def test_locate_and_padding(tmp_path):
    path = tmp_path / "x.fa"
    path.write_text(">a\nACGTACGTAC\n>b desc\nNNACG\n")
    w = rw.record_windows(path, 4)
    assert len(w) == 5 and [w.locate(i) for i in range(5)] == [
        ("a", 0, 4), ("a", 4, 8), ("a", 8, 10), ("b", 0, 4), ("b", 4, 5)]
    tok = DNATokenizer()
    assert w[2]["input_ids"].tolist() == [tok.a_id, tok.c_id, tok.pad_id, tok.pad_id]
    assert w[2]["attention_mask"].tolist() == [1, 1, 0, 0]
    assert w[3]["attention_mask"].tolist() == [0, 0, 1, 1]  # N is input, never scored
    with pytest.raises(IndexError):
        w[5]


@pytest.mark.parametrize("text, message", [
    (b"", "empty FASTA file"),
    (b"\n  \n\t\n", "empty FASTA file"),
    (b"ACGT\n", "no '>' header line before the sequence"),
    (b">a\n\n>b\nACGT\n", "record 'a' is empty"),
    (b">a\nACGT\n>b", "record 'b' is empty"),
    (b">a x\nAC-GT\n", "record 'a': character '-' at position 2 is not DNA"),
    (b">a\nACGTACGTAC\nACGTACGTAC\nACGTAXGT\n", "record 'a': character 'X' at position 25 is not DNA"),
    (b">a\nAC>GT\n", "character '>' at position 2"),
])
@pytest.mark.parametrize("chunk", [2, 1 << 14])
def test_errors_match_read_fasta(tmp_path, monkeypatch, text, message, chunk):
    monkeypatch.setattr(rw, "CHUNK", chunk)
    path = tmp_path / "bad.fa"
    path.write_bytes(text)
    with pytest.raises(DnadiffError, match=message.replace("(", r"\(")) as ours:
        rw.RecordIndex(path)
    with pytest.raises(DnadiffError) as theirs:
        read_fasta(path)
    assert str(ours.value) == str(theirs.value)


def test_missing_truncated_gzip_and_strict(tmp_path):
    with pytest.raises(DnadiffError, match="FASTA file not found"):
        rw.RecordIndex(tmp_path / "nope.fa")
    gz = gzip.compress(b">r1\n" + b"ACGT" * 5000 + b"\n")
    (tmp_path / "t.fa.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(DnadiffError, match=r"t\.fa\.gz: cannot read"):
        rw.RecordIndex(tmp_path / "t.fa.gz")
    (tmp_path / "iupac.fa").write_text(">r1\nACGTRYACGT\n")
    with pytest.raises(DnadiffError, match="record 'r1': character 'R' at position 4"):
        rw.RecordIndex(tmp_path / "iupac.fa", DNATokenizer(strict=True))


def test_gzip_and_stdin_copies_are_removed(tmp_path, monkeypatch):
    text = b">s\n" + b"ACGTTGCA" * 100 + b"\n"
    (tmp_path / "s.fa.gz").write_bytes(gzip.compress(text))
    index = rw.RecordIndex(tmp_path / "s.fa.gz")
    copy = index.file
    assert copy != str(tmp_path / "s.fa.gz") and os.path.isfile(copy)
    assert index.fetch(0, 795, 800) == b"TTGCA"
    index.close()
    assert not os.path.exists(copy)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    index = rw.RecordIndex("-")
    copy = index.file
    assert index.label == "stdin" and index.lengths == [800]
    del index  # collected: the copy goes with it
    assert not os.path.exists(copy)


class _CountingFile(io.FileIO):
    read_bytes = 0

    def read(self, size=-1):
        data = super().read(size)
        _CountingFile.read_bytes += len(data)
        return data


def test_a_window_reads_at_most_a_chunk_more_than_itself(tmp_path):
    rng = np.random.default_rng(0)
    seq = bytes(np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 1 << 20)])
    path = tmp_path / "one_line.fa"
    path.write_bytes(b">big\n" + seq + b"\n")
    index = rw.RecordIndex(path)
    index._fh, index._pid = _CountingFile(str(path), "r"), os.getpid()
    for start in (0, 12_345, 700_001, (1 << 20) - 100):
        _CountingFile.read_bytes = 0
        assert index.fetch(0, start, start + 100) == seq[start:start + 100]
        assert _CountingFile.read_bytes <= (rw.CHUNK + 100) * 17 // 16 + 64  # 1/16 more for line ends


@pytest.mark.subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak RSS read from Linux's /proc (VmHWM)")
def test_eval_records_memory_does_not_grow_with_the_file(tmp_path):
    """`dnadiff eval MODEL --records BIG --max-windows 8` on a 24 MB single-line FASTA: peak RSS at
    most 6 MiB (a quarter of the file) above the same command on a short file. Reading the file whole
    took ~30x the file (measured 1.6 GB for 50 MB at seq_len 128)."""
    from helpers.cli_model import tiny_model_dir

    model = tiny_model_dir(tmp_path, seq_len=32)
    rng = np.random.default_rng(1)
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 24_000_000, dtype=np.uint8)].tobytes()
    (tmp_path / "big.fa").write_bytes(b">big\n" + seq + b"\n")
    (tmp_path / "small.fa").write_bytes(b">small\n" + seq[:1024] + b"\n")  # 32 windows: 8 evaluated, as above
    # the child's own high-water mark (VmHWM): its ru_maxrss would start at this process's RSS at the fork
    code = ("import sys\nfrom dnadiff.cli import main\nfrom dnadiff.machine import memory_kib\n"
            "rc = main(['eval', sys.argv[1], '--records', sys.argv[2], '--max-windows', '8', '-q'])\n"
            "print('RSS', rc, memory_kib('VmHWM'))\n")

    def peak_kib(fasta: str) -> int:
        out = subprocess.run([sys.executable, "-c", code, model, str(tmp_path / fasta)], env=child_env(), cwd=REPO,
                             capture_output=True, text=True, timeout=300)
        line = [l for l in out.stdout.splitlines() if l.startswith("RSS")]
        assert out.returncode == 0 and line, out.stderr[-2000:]
        _, rc, kib = line[-1].split()
        assert rc == "0"
        return int(kib)

    growth = peak_kib("big.fa") - peak_kib("small.fa")
    print(f"peak RSS growth {growth} KiB")
    assert growth < 6 * 1024, f"peak RSS grew by {growth / 1024:.0f} MiB for a 24 MB file"
