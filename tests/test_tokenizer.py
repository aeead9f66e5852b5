import numpy as np
import pytest
import torch

from dnadiff.errors import DnadiffError
from dnadiff.tokenizers import DNATokenizer


def test_ids_match_caduceus():
    tok = DNATokenizer()
    assert tok.vocab == ["[CLS]", "[SEP]", "[BOS]", "[MASK]", "[PAD]", "[RESERVED]", "[UNK]", "A", "C", "G", "T", "N"]
    assert (tok.mask_id, tok.pad_id, tok.vocab_size) == (3, 4, 12)
    assert tok.encode("ACGTN") == [7, 8, 9, 10, 11]


def test_upper_case_and_round_trip():
    tok = DNATokenizer()
    assert tok.encode("acgtn") == tok.encode("ACGTN")
    seq = "ACGTTGCAANNACG"
    assert tok.decode(tok.encode(seq.lower())) == seq


def test_iupac_to_n_or_strict_error():
    assert DNATokenizer().encode("RYKMSWBDHV") == [11] * 10
    with pytest.raises(DnadiffError, match="'R' at position 1"):
        DNATokenizer(strict=True).encode("AR")
    with pytest.raises(DnadiffError, match="not DNA"):
        DNATokenizer().encode("ACGU")


def test_complement_map_and_involution():
    tok = DNATokenizer()
    assert tok.complement([7, 8, 9, 10, 11, 3, 4, 15]) == [10, 9, 8, 7, 11, 3, 4, 15]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 16, size=(3, 50))
    assert np.array_equal(tok.reverse_complement(tok.reverse_complement(ids)), ids)
    t = torch.from_numpy(ids)
    assert torch.equal(tok.reverse_complement(tok.reverse_complement(t)), t)
    assert torch.equal(tok.reverse_complement(t), torch.from_numpy(tok.reverse_complement(ids)))


def test_reverse_complement_matches_string_rc():
    tok = DNATokenizer()
    seq = "AACGTTTGCAGN"
    assert tok.decode(tok.reverse_complement(tok.encode(seq))) == "NCTGCAAACGTT"
    assert DNATokenizer.reverse_complement_str(seq) == "NCTGCAAACGTT"


def test_decode_specials():
    tok = DNATokenizer()
    assert tok.decode([7, 3, 8]) == "A[MASK]C"
    assert tok.decode([7, 3, 8], skip_special=True) == "AC"
    with pytest.raises(DnadiffError):
        tok.decode([99])
