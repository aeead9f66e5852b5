"""Random DNA strings for tests that need sequences without structure (uniform A/C/G/T)."""

from __future__ import annotations

import random


def random_dna(n: int, rng: random.Random) -> str:
    """`n` bases drawn uniformly from ACGT with `rng` (a random.Random, so a seed fixes the string)."""
    return "".join(rng.choice("ACGT") for _ in range(n))
