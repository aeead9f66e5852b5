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


def write_two_class_benchmark(root: Path, n: int = 64, length: int = 16) -> Path:
    """Two classes told apart by composition (A-rich vs C-rich), n sequences each in train and test: a
    class-conditional model learns it in a few dozen steps."""
    import random

    rng = random.Random(0)
    return write_benchmark(root, {split: {cls: ["".join(rng.choice(alphabet) for _ in range(length))
                                               for _ in range(n)]
                                          for cls, alphabet in (("a_rich", "AAAAAAAC"), ("c_rich", "CCCCCCCA"))}
                                  for split in ("train", "test")})
