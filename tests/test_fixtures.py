"""The tests' real-data fixtures: small, complete, and exactly what tests/data/make_fixtures.py makes
from the full data (the regeneration check needs ../shared/data, so it is slow)."""

import json
from pathlib import Path

import pytest

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
BENCH = REPO / "dnadiff" / "assets" / "benchmarks"


def _files(*roots):
    return sorted(p for root in roots for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_fixtures_are_small_and_complete():
    total = sum(p.stat().st_size for p in _files(DATA, BENCH))
    assert total < 3_000_000  # a few MB at most in the repository
    for name in ("chr22_slice.fa.gz", "chr22_slice.fa.gz.fai", "chr22_slice.fa.gz.gzi", "sequences.bed"):
        assert (DATA / "chr22_slice" / name).is_file()
    for split, n in (("train", 500), ("valid", 50), ("test", 50)):
        lines = (DATA / "text" / "fortunes" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == n and all(json.loads(line)["text"] for line in lines)


def _make_fixtures_module():
    return load_script(DATA / "make_fixtures.py", "make_fixtures")


def test_make_fixtures_says_where_they_come_from():
    doc = _make_fixtures_module().__doc__
    assert "../shared/data" in doc and "deterministic" in doc


@pytest.mark.slow
def test_make_fixtures_regenerates_the_committed_files(shared_data, tmp_path):
    mf = _make_fixtures_module()
    mf.make_chr22_slice(shared_data, tmp_path / "chr22_slice")
    mf.make_text(shared_data, tmp_path / "text" / "fortunes")
    mf.make_benchmarks(shared_data, tmp_path / "benchmarks")
    for made, kept in ((tmp_path / "chr22_slice", DATA / "chr22_slice"), (tmp_path / "text", DATA / "text"),
                       (tmp_path / "benchmarks", BENCH)):
        a, b = _files(made), _files(kept)
        assert [p.relative_to(made) for p in a] == [p.relative_to(kept) for p in b]
        assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))
