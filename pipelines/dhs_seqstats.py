"""Sequence-set statistics of the DHS tables (pipelines/dhs_benchmark.py, dhs_design.py): memorisation against
the training sequences (same-offset identity on either strand; exact >= 50-bp matches through 50-mer hashes) and
diversity (mean pairwise identity, distinct k-mers). Sequences are equal-length A/C/G/T strings
(any other letter never counts as a match)."""

from __future__ import annotations

import numpy as np


def codes_matrix(seqs: list[str]) -> np.ndarray:
    """uint8 [N, L] of equal-length sequences: A0 C1 G2 T3, any other letter 4 (max_identity never counts 4)."""
    table = np.full(256, 4, dtype=np.uint8)
    for i, b in enumerate(b"ACGT"):
        table[b] = i
    return table[np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)].reshape(len(seqs), -1)


def onehot_rows(codes: np.ndarray) -> np.ndarray:
    """float32 [N, 4L]: one-hot of codes_matrix rows (a 4, any other letter, is all zeros)."""
    return np.stack([codes == b for b in range(4)], axis=2).reshape(len(codes), -1).astype(np.float32)


def max_identity(samples: list[str], train: np.ndarray, train_rc: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Float[N]: each sample's highest same-offset identity (share of equal A/C/G/T positions) to any training
    sequence, either strand (train, train_rc: onehot_rows of the training sequences and of their reverse
    complements): equal positions of every pair as one matrix product of the one-hot rows."""
    s = onehot_rows(codes_matrix(samples))
    length = s.shape[1] // 4
    if s.shape[1] != train.shape[1]:
        raise ValueError(f"samples of {length} bp against training sequences of {train.shape[1] // 4} bp")
    best = np.zeros(len(samples))
    for ref in (train, train_rc):
        for i in range(0, len(s), chunk):
            same = s[i : i + chunk] @ ref.T  # (chunk, T): equal bases of each pair (exact in float32: <= L)
            best[i : i + chunk] = np.maximum(best[i : i + chunk], same.max(axis=1).astype(np.float64) / length)
    return best


MATCH = 50  # memorisation: an exact match of this many bases to a training sequence (either strand)
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier mixing the two 25-mer halves of a 50-mer


def kmer_hashes(codes: np.ndarray, k: int = MATCH) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 [N, L-k+1] hashes of every k-mer of codes_matrix rows, bool [N, L-k+1]: the k-mer is all A/C/G/T).
    A k-mer (k even, k/2 <= 31) is its two halves as 2-bit integers h1, h2, hashed as h1 * M + h2 mod 2^64:
    equal k-mers have equal hashes; unequal ones collide with probability ~2^-64."""
    half = k // 2
    n, length = codes.shape
    width = length - half + 1
    halves = np.zeros((n, width), dtype=np.uint64)
    bad = np.zeros((n, width), dtype=np.int64)
    c = codes.astype(np.uint64) & np.uint64(3)
    for j in range(half):
        halves = (halves << np.uint64(2)) | c[:, j : j + width]
        bad += codes[:, j : j + width] > 3
    m = length - k + 1
    with np.errstate(over="ignore"):
        h = halves[:, :m] * _HASH_MUL + halves[:, half : half + m]
    return h, (bad[:, :m] == 0) & (bad[:, half : half + m] == 0)


def training_kmer_index(train_seqs: list[str], k: int = MATCH) -> np.ndarray:
    """Sorted hashes of every k-mer of the training sequences and of their reverse complements."""
    from dnadiff.eval import reverse_complement

    out = []
    for seqs in (train_seqs, [reverse_complement(x) for x in train_seqs]):
        h, ok = kmer_hashes(codes_matrix(seqs), k)
        out.append(h[ok])
    return np.sort(np.concatenate(out))  # duplicates kept: np.unique is ~30x slower here and searchsorted needs none


def shares_kmer(samples: list[str], index: np.ndarray, k: int = MATCH) -> np.ndarray:
    """Bool[N]: the sample holds a k-mer of the index (an exact match of >= k bases to a training sequence)."""
    h, ok = kmer_hashes(codes_matrix(samples), k)
    pos = np.clip(np.searchsorted(index, h), 0, len(index) - 1)
    return ((index[pos] == h) & ok).any(axis=1)


def mean_pairwise_identity(seqs: list[str]) -> float:
    """Mean same-offset identity over all pairs of the set (1 = all identical)."""
    c = codes_matrix(seqs)
    if len(c) < 2:
        return float("nan")
    onehot = onehot_rows(c)
    same = onehot @ onehot.T  # equal bases of each pair
    iu = np.triu_indices(len(c), k=1)
    return float(same[iu].mean() / c.shape[1])


def distinct_kmers(seqs: list[str], k: int = 6) -> float:
    from dnadiff.eval import kmer_counts

    return float((kmer_counts(seqs, k) > 0).sum() / 4**k)
