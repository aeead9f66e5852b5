"""Shared fixtures: paths of the real DNA under ../shared/data (read-only) and the bundled sample."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DNADIFF_SHARED_DATA", REPO.parent / "shared" / "data"))

# Tiny models: one thread avoids OpenMP spin-waiting when other work shares the cores.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED.is_dir():  # the data is part of the project's checkout layout; fail loudly, never skip
        raise FileNotFoundError(f"shared data folder not found: {SHARED} (set DNADIFF_SHARED_DATA)")
    return SHARED


@pytest.fixture(scope="session")
def chr22(shared_data):
    d = shared_data / "hg19_chr22_subset"
    return str(d / "chr22.fa.gz"), str(d / "sequences.bed")


@pytest.fixture(scope="session")
def benchmarks_dir(shared_data) -> Path:
    return shared_data / "benchmarks"
