import pytest

from dnadiff.data import read_fasta, write_fasta
from dnadiff.errors import DnadiffError


def test_round_trip_and_windows_line_endings(tmp_path):
    path = tmp_path / "x.fa"
    write_fasta(path, [("s1 sampled", "ACGT" * 40), ("s2", "NNAC")])
    assert read_fasta(path) == [("s1", "ACGT" * 40), ("s2", "NNAC")]
    crlf = tmp_path / "crlf.fa"
    crlf.write_bytes(b">a\r\nacgt\r\nTTrn\r\n")
    assert read_fasta(crlf) == [("a", "ACGTTTRN")]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty FASTA"),
        ("ACGT\n", "no '>' header"),
        (">a\n\n>b\nACGT\n", "record 'a' is empty"),
        (">a\nAC-GT\n", "'-' at position 2"),
    ],
)
def test_bad_fasta(tmp_path, text, message):
    path = tmp_path / "bad.fa"
    path.write_text(text)
    with pytest.raises(DnadiffError, match=message):
        read_fasta(path)


def test_missing(tmp_path):
    with pytest.raises(DnadiffError, match="not found"):
        read_fasta(tmp_path / "none.fa")
