import gzip

import numpy as np
import pytest
import torch

from dnadiff.data import Genome, GenomeWindows, bundled_genome, read_bed
from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import DNATokenizer

TOK = DNATokenizer()


def test_windows_match_pyfaidx_slices(chr22):
    import pyfaidx

    fa, bed = chr22
    ds = GenomeWindows(fa, bed, "valid", 1024)
    ref = pyfaidx.Fasta(fa, rebuild=False)
    rng = np.random.default_rng(1)
    for i in rng.choice(len(ds), 20, replace=False):
        chrom, s, e = ds.locate(int(i))
        expected = str(ref[chrom][s:e]).upper()  # the file is soft-masked; windows are upper case
        item = ds[int(i)]
        n = e - s
        assert TOK.decode(item["input_ids"][:n]) == expected
        assert (item["input_ids"][n:] == TOK.pad_id).all()
        assert item["attention_mask"][:n].tolist() == [0 if b == "N" else 1 for b in expected]


def test_soft_masked_bases_present_and_upper_cased(chr22):
    import pyfaidx

    fa, bed = chr22
    raw = str(pyfaidx.Fasta(fa, rebuild=False)["chr22"][17443628:17453628])
    assert any(c.islower() for c in raw)  # the genome really is soft-masked
    ds = GenomeWindows(fa, bed, "train", 10_000)
    assert TOK.decode(ds[0]["input_ids"]) == raw.upper()


def test_split_membership_matches_bed(chr22):
    fa, bed = chr22
    intervals = read_bed(bed)
    test_ivs = [iv for iv in intervals if iv.split == "test"]
    ds = GenomeWindows(fa, bed, "test", 4096)
    total = 0
    for i in range(len(ds)):
        chrom, s, e = ds.locate(i)
        assert any(iv.chrom == chrom and iv.start <= s and e <= iv.end for iv in test_ivs)
        total += e - s
    assert total == sum(len(iv) for iv in test_ivs)  # tiling covers every base exactly once


def test_tail_windows_never_read_past_region_end(chr22):
    fa, bed = chr22
    ds = GenomeWindows(fa, bed, "valid", 1000, stride=700)
    ivs = ds.intervals
    for k, s, e in ds.windows:
        assert ivs[k].start <= s < e <= ivs[k].end


def test_rc_augmentation_is_exact_reverse_complement(chr22):
    fa, bed = chr22
    plain = GenomeWindows(fa, bed, "train", 512, mode="random", seed=3, num_windows=50)
    aug = GenomeWindows(fa, bed, "train", 512, mode="random", seed=3, num_windows=50, rc_prob=1.0)
    for i in range(10):
        a, b = plain[i], aug[i]
        n = int((a["input_ids"] != TOK.pad_id).sum())  # a window of a short interval is padded at the end
        assert torch.equal(b["input_ids"][:n], TOK.reverse_complement(a["input_ids"][:n]))
        assert torch.equal(b["attention_mask"][:n], a["attention_mask"][:n].flip(0))
        assert (b["input_ids"][n:] == TOK.pad_id).all() and not b["attention_mask"][n:].any()


def test_random_crops_deterministic_and_epoch_dependent(chr22):
    fa, bed = chr22
    a = GenomeWindows(fa, bed, "train", 256, mode="random", seed=7, num_windows=20, rc_prob=0.5)
    b = GenomeWindows(fa, bed, "train", 256, mode="random", seed=7, num_windows=20, rc_prob=0.5)
    assert all(torch.equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(20))
    b.set_epoch(1)
    assert any(not torch.equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(20))
    flips = sum(a[i]["input_ids"][0].item() != -1 for i in range(20))
    assert flips == 20


def test_max_n_frac_filter(chr22):
    fa, bed = chr22
    ds = GenomeWindows(fa, bed, "valid", 512, max_n_frac=0.0)
    for i in range(len(ds)):
        item = ds[i]
        n = ds.locate(i)[2] - ds.locate(i)[1]
        assert (item["input_ids"][:n] != TOK.n_id).all()


def test_dataloader_with_workers_is_deterministic(chr22):
    fa, bed = chr22
    ds = GenomeWindows(fa, bed, "valid", 256, mode="random", seed=1, num_windows=16, rc_prob=0.5)
    dl0 = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=0)
    dl2 = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2)
    for x, y in zip(dl0, dl2):
        assert torch.equal(x["input_ids"], y["input_ids"])


def test_bundled_sample_is_real_chr22(chr22):
    """The package's sample and the tests' slice (both cut from the real chr22) agree where they overlap."""
    fa, bed = bundled_genome()
    g, ref = Genome(fa), Genome(chr22[0])
    ivs = read_bed(bed, g)
    assert {iv.split for iv in ivs} == {"train", "valid", "test"}
    assert 1_000_000 <= sum(len(iv) for iv in ivs) <= 2_000_000
    overlap = 0
    for r in read_bed(chr22[1], ref):
        for iv in ivs:
            s, e = max(iv.start, r.start), min(iv.end, r.end)
            if iv.chrom == r.chrom and s < e:
                assert iv.split == r.split
                assert g.fetch(iv.chrom, s, e) == ref.fetch(r.chrom, s, e)
                overlap += e - s
    assert overlap >= 100_000


@pytest.mark.slow
def test_bundled_sample_and_fixture_match_the_full_chr22(shared_data, chr22):
    full = Genome(shared_data / "hg19_chr22_subset" / "chr22.fa.gz")
    for fa, bed in (bundled_genome(), chr22):
        g = Genome(fa)
        ivs = read_bed(bed, g)
        for iv in ivs[::5]:
            assert g.fetch(iv.chrom, iv.start, iv.end) == full.fetch(iv.chrom, iv.start, iv.end)
        assert g.lengths == full.lengths


def test_fixture_slice_is_a_cut_of_the_real_layout(chr22):
    """The tests' chr22 slice: true chr22 length and coordinates, N outside its BED, all three splits."""
    g = Genome(chr22[0])
    ivs = read_bed(chr22[1], g)
    assert g.lengths == {"chr22": 51_304_566}
    sizes = {s: sum(len(iv) for iv in ivs if iv.split == s) for s in ("train", "valid", "test")}
    assert sizes["train"] >= 50_000 and sizes["valid"] >= 20_000 and sizes["test"] >= 20_000
    first = ivs[0]
    assert set(g.fetch("chr22", first.start - 50, first.start)) == {"N"}  # N outside the intervals
    assert set(g.fetch("chr22", first.start, first.start + 50)) - {"N"}  # real bases inside


# ----------------------------------------------------------------------------- bad input
def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    return str(path)


@pytest.fixture
def small_genome(tmp_path):
    fa = _write(tmp_path / "g.fa", ">chr1\nACGTACGTAC\nGTACGTACGT\n>chr2\nNNNNACGT\n")
    return fa


@pytest.mark.parametrize(
    "bed_text, message",
    [
        ("chr1\t0\t5\n", "expected 4 columns"),
        ("chr1\t5\t5\ttrain\n", "must be greater than start"),
        ("chr1\t8\t3\ttrain\n", "must be greater than start"),
        ("chr9\t0\t5\ttrain\n", "chromosome 'chr9' is not in"),
        ("chr1\t0\t25\ttrain\n", "past the end of chr1"),
        ("chr1\t0\t5\tvalidation\n", "unknown split 'validation'"),
        ("chr1\tx\t5\ttrain\n", "must be integers"),
        ("", "no intervals"),
    ],
)
def test_bad_bed(tmp_path, small_genome, bed_text, message):
    bed = _write(tmp_path / "b.bed", bed_text)
    with pytest.raises(DnadiffError, match=message):
        read_bed(bed, Genome(small_genome))


def test_missing_files(tmp_path, small_genome):
    with pytest.raises(DnadiffError, match="genome FASTA not found"):
        Genome(tmp_path / "nope.fa")
    with pytest.raises(DnadiffError, match="BED file not found"):
        read_bed(tmp_path / "nope.bed")


def test_fasta_without_header(tmp_path):
    fa = _write(tmp_path / "x.fa", "ACGT\n")
    with pytest.raises(DnadiffError, match="not a FASTA"):
        Genome(fa)


def test_bad_characters_in_genome(tmp_path):
    fa = _write(tmp_path / "x.fa", ">c\nACGT!!GT\n")
    bed = _write(tmp_path / "x.bed", "c\t0\t8\ttrain\n")
    ds = GenomeWindows(fa, bed, "train", 8)
    with pytest.raises(DnadiffError, match="'!' at position 4 is not DNA"):
        ds[0]


@pytest.mark.parametrize("seq_len", [0, -5])
def test_bad_seq_len(small_genome, tmp_path, seq_len):
    bed = _write(tmp_path / "b.bed", "chr1\t0\t10\ttrain\n")
    with pytest.raises(DnadiffError, match="seq_len must be a positive integer"):
        GenomeWindows(small_genome, bed, "train", seq_len)


def test_truncated_gzip(tmp_path):
    src = bundled_genome()[0]
    data = open(src, "rb").read()
    bad = tmp_path / "trunc.fa.gz"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(DnadiffError, match="trunc.fa.gz"):
        g = Genome(bad)
        g.fetch("chr22", 0, g.lengths["chr22"])


def test_plain_gzip_is_read_through_a_cached_copy(tmp_path, monkeypatch):
    # FASTA inputs accept gzip (a plain-gzip genome is decompressed once into the cache)
    monkeypatch.setenv("DNADIFF_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "plain.fa.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(">c\nACGTNNAC\n")
    g = Genome(path)
    assert g.lengths == {"c": 8} and g.fetch("c", 2, 7) == "GTNNA"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "plain.fa.gz"]  # nothing beside the input
