"""The genome-scale benchmark's pieces, small: the synthetic genome writer (benchmarks/synthetic_genome.py)
writes a BGZF FASTA whose .fai/.gzi equal pyfaidx's own and a BED dnadiff reads; the genome loader's
memory stays flat over thousands of windows; benchmarks/data_scale.py runs end to end."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from dnadiff.data.fasta import Genome, GenomeWindows, read_bed
from helpers.scripts import REPO, load_script

synthetic_genome = load_script(REPO / "benchmarks" / "synthetic_genome.py", "synthetic_genome")


@pytest.fixture(scope="module")
def small_genome(tmp_path_factory):
    """hg38 scaled by 0.002: 24 records, 6.2 Mb, 9 regions."""
    return synthetic_genome.ensure_genome(str(tmp_path_factory.mktemp("genome")), scale=0.002, progress=False)


def _vm_rss_kib() -> int:
    from dnadiff.machine import memory_kib

    return memory_kib("VmRSS")


def test_synthetic_genome_is_valid_bgzf_with_pyfaidx_indexes(small_genome, tmp_path):
    import pyfaidx

    fa = small_genome["fasta"]
    lengths = synthetic_genome.chrom_lengths(0.002)
    assert small_genome["bases"] == sum(lengths.values()) and small_genome["records"] == 24
    # the indexes pyfaidx builds itself (samtools' layouts) are byte for byte the written ones
    built = pyfaidx.Fasta(fa, indexname=str(tmp_path / "x.fai"), gzi_indexname=str(tmp_path / "x.gzi"))
    built.close()
    assert (tmp_path / "x.fai").read_bytes() == open(fa + ".fai", "rb").read()
    assert (tmp_path / "x.gzi").read_bytes() == open(fa + ".gzi", "rb").read()
    # gzip (any reader) sees the FASTA; dnadiff's Genome reads the same bases through the indexes
    text = gzip.open(fa, "rb").read().decode()
    records = {b.split("\n", 1)[0]: b.split("\n", 1)[1].replace("\n", "") for b in text.split(">")[1:]}
    assert {k: len(v) for k, v in records.items()} == lengths
    assert all(len(line) == 60 for line in text.splitlines()[1:200])
    genome = Genome(fa)
    rng = np.random.default_rng(0)
    for chrom in ("chr1", "chr21", "chrY"):
        seq = records[chrom]
        assert seq[:100] == "N" * 100 and seq[-100:] == "N" * 100  # telomeres
        for _ in range(20):
            s = int(rng.integers(0, len(seq) - 70_000))
            assert genome.fetch(chrom, s, s + 70_000) == seq[s:s + 70_000].upper()
    assert {c.lower() for c in records["chr1"]} == set("acgtn")  # soft-masked and not


def test_bed_has_the_public_layout(small_genome):
    genome = Genome(small_genome["fasta"])
    intervals = read_bed(small_genome["bed"], genome)  # every line checked against the genome
    assert len(intervals) == small_genome["regions"] == 9
    assert {iv.split for iv in intervals} == {"train", "valid", "test"}
    assert all(len(iv) == 131_072 for iv in intervals)
    for line in open(small_genome["bed"]):
        assert len(line.rstrip("\n").split("\t")) == 4


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="RSS read from Linux's /proc")
def test_genome_windows_memory_is_flat(small_genome):
    """Random training crops (N filter and reverse complement on), 4,000 windows after a warm-up:
    RSS grows by less than 4 MiB (a leak of 1 KiB a window would show)."""
    ds = GenomeWindows(small_genome["fasta"], small_genome["bed"], "train", 1024, mode="random", rc_prob=0.5,
                       max_n_frac=0.5, num_windows=10**6)
    for i in range(300):
        ds[i]
    start = _vm_rss_kib()
    for i in range(300, 4300):
        ds[i]
    assert _vm_rss_kib() - start < 4 * 1024


def test_data_scale_benchmark_runs(small_genome, tmp_path, capsys):
    data_scale = load_script(REPO / "benchmarks" / "data_scale.py", "data_scale")
    out = tmp_path / "r.json"
    workdir = os.path.dirname(os.path.dirname(small_genome["fasta"]))
    assert data_scale.main(["--workdir", workdir, "--scale-factor", "0.002", "--seq-lens", "1024", "--workers", "0",
                            "--seconds", "0.2", "--rss-windows", "640", "--rss-every", "320", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["genome"]["write_seconds_now"] == 0.0  # found, not written again
    assert [r["workers"] for r in res["throughput"]] == [0] and res["throughput"][0]["windows_per_s"] > 0
    assert res["rss"]["windows"] >= 640 and [n for n, _ in res["rss"]["samples"]][:2] == [0, 320]
    text = capsys.readouterr().out
    assert "load average" in text and "## Loader throughput" in text
