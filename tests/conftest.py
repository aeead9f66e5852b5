"""Shared fixtures: small real data inside the repository, so a bare clone runs the tests.

- `chr22`: a slice of the hg19 chr22 subset (tests/data/chr22_slice: bgzip FASTA + BED with splits);
- `benchmarks_dir`: the two benchmark sets in genomic-benchmarks layout that ship with the package
  (dnadiff/assets/benchmarks, a few hundred sequences per class);
- `fortunes_dir`: a small slice of the fortunes text corpus (tests/data/text/fortunes).
All are cut from ../shared/data by tests/data/make_fixtures.py.

`shared_data` is the full data folder (../shared/data beside the repository, or $DNADIFF_DATA):
only tests marked `slow` may use it, and when it is missing they fail, never skip.

The package's data root ($DNADIFF_DATA) is removed from the environment of every test, so that
the default run sees exactly what a bare clone sees.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
FULL_DATA = Path(os.environ.get("DNADIFF_DATA") or REPO.parent / "shared" / "data")

# Tiny models: one thread avoids OpenMP spin-waiting when other work shares the cores. The commands
# run in-process (cli.main) and their child processes take their default thread count from
# OMP_NUM_THREADS (dnadiff/threads.py): one thread there too, whatever the machine's load.
torch.set_num_threads(1)
os.environ["OMP_NUM_THREADS"] = "1"
# The tests never reach the network. dnadiff sets HF_DATASETS_OFFLINE only before `datasets` is first
# imported; a test module that imports it earlier would otherwise make a missing data set wait ~20 s on
# retries (tests/test_text_data.py's lm1b error after tests/test_text_local_copy.py).
os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
# dnadiff's cache folder (genome copies and indexes, run locks, stored embeddings): a fresh one per test
# session, so no test reads what an earlier session (or the user) left there, and none writes to ~/.cache.
os.environ["DNADIFF_CACHE"] = tempfile.mkdtemp(prefix="dnadiff-test-cache-")
atexit.register(shutil.rmtree, os.environ["DNADIFF_CACHE"], ignore_errors=True)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Every test starts with one torch thread, whatever an earlier test's run set (train.threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _bare_data_root(monkeypatch):
    monkeypatch.delenv("DNADIFF_DATA", raising=False)


@pytest.fixture(scope="session")
def chr22() -> tuple[str, str]:
    d = DATA / "chr22_slice"
    return str(d / "chr22_slice.fa.gz"), str(d / "sequences.bed")


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    from dnadiff.data_root import bundled_data_root

    return Path(bundled_data_root()) / "benchmarks"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """A tiny untrained DNA model directory (tests/helpers/cli_model.py), one per test module: its tests only read it
    (a module-local `model` fixture takes precedence)."""
    from helpers.cli_model import tiny_model_dir

    return tiny_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def fortunes_dir() -> Path:
    return DATA / "text" / "fortunes"


def pytest_collection_modifyitems(config, items):
    """The default run must pass in a bare clone: a test that needs the full data has to be `slow`."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slow") is None:
            raise pytest.UsageError(f"{item.nodeid} uses the full data (shared_data) but is not marked slow")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The full real data (tests marked slow only)."""
    if not (FULL_DATA / "hg19_chr22_subset").is_dir():  # fail loudly, never skip
        raise FileNotFoundError(f"full data folder not found: {FULL_DATA} (put ../shared/data beside the "
                                "repository or set DNADIFF_DATA)")
    return FULL_DATA


@pytest.fixture
def fake_kernels(monkeypatch):
    """Stand-in mamba_ssm / causal_conv1d kernels (tests/helpers/fake_kernels.py) importable for one test, so CPU
    tests drive the CUDA dispatch; yields the log of their calls and of the copies they had to make."""
    from helpers.fake_kernels import stand_in_kernels

    yield from stand_in_kernels(monkeypatch)
