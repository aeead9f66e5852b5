"""Write a tiny data set in the genomic-benchmarks layout: ROOT/SPLIT/CLASS/I.txt, one sequence a file."""

from __future__ import annotations

from pathlib import Path


def write_benchmark(root: Path, sets: dict[str, dict[str, list[str]]]) -> Path:
    """`sets` = {split: {class: [sequence, ...]}}; sequence i of a class goes to i.txt. Returns `root`."""
    for split, classes in sets.items():
        for cls, seqs in classes.items():
            folder = Path(root) / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i, seq in enumerate(seqs):
                (folder / f"{i}.txt").write_text(seq)
    return Path(root)
