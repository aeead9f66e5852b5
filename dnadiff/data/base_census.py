"""How many bases of a DNA input are not A/C/G/T, and which letters they are.

The tokenizer reads every IUPAC code (R, Y, K, M, S, W, B, D, H, V) as N and the sample metrics use
A/C/G/T only, so a file written with ambiguity codes can lose most of its bases to N without a word
(issue 32: 59 % of a test file). `dnadiff eval --records` and `dnadiff metrics` count them here, say
on stderr how many there were and what was done with them, and keep the count in their JSON.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

ACGT = b"ACGT"


class BaseCensus:
    """Letter counts of DNA text (case folded): `add` a sequence (str or bytes) at a time."""

    def __init__(self) -> None:
        self.counts = np.zeros(256, dtype=np.int64)

    @classmethod
    def of(cls, seqs: Iterable[str | bytes]) -> "BaseCensus":
        census = cls()
        for seq in seqs:
            census.add(seq)
        return census

    def add(self, seq: str | bytes) -> None:
        raw = seq.encode("ascii", errors="replace") if isinstance(seq, str) else bytes(seq)
        self.counts += np.bincount(np.frombuffer(raw, dtype=np.uint8), minlength=256)

    def _folded(self) -> np.ndarray:
        counts = self.counts.copy()
        lower = np.arange(ord("a"), ord("z") + 1)
        counts[lower - 32] += counts[lower]
        counts[lower] = 0
        return counts

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def non_acgt(self) -> int:
        counts = self._folded()
        return self.total - int(sum(counts[c] for c in ACGT))

    def letters(self) -> dict[str, int]:
        """The letters other than A/C/G/T and their counts, most frequent first (ties: alphabetical)."""
        counts = self._folded()
        found = [(chr(c), int(counts[c])) for c in np.flatnonzero(counts) if c not in ACGT]
        return dict(sorted(found, key=lambda kv: (-kv[1], kv[0])))

    def as_dict(self, treatment: str) -> dict:
        """For a result JSON: {"bases", "non_acgt", "letters", "treatment"}."""
        return {"bases": self.total, "non_acgt": self.non_acgt, "letters": self.letters(), "treatment": treatment}

    def line(self, label: str, treatment: str) -> str | None:
        """`LABEL: 1,234 of 5,000 bases (24.7%) are not A/C/G/T (R 600, Y 534, N 100): TREATMENT`, or None
        when every base is A/C/G/T."""
        n, total = self.non_acgt, self.total
        if n == 0 or total == 0:
            return None
        letters = ", ".join(f"{k} {v:,}" for k, v in self.letters().items())
        return f"{label}: {n:,} of {total:,} bases ({100 * n / total:.3g}%) are not A/C/G/T ({letters}): {treatment}"

    def only_n(self) -> bool:
        """True when every base that is not A/C/G/T is an N (nothing was changed, only skipped)."""
        return set(self.letters()) <= {"N"}
