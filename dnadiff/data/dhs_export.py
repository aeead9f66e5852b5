"""The DHS table as a genomic-benchmarks folder (NAME/{train,test}/CLASS/N.txt, one sequence a file),
the layout `dnadiff finetune` and class-conditional `data.kind: benchmark` runs read.

train/ holds the training split; test/ the test split, or the validation split (`test_split="valid"`)
so that settings can be chosen on validation before the test split is read once. Files are numbered
0.txt, 1.txt, ... per class in the table's row order. The folder is written whole (utils.staged_dir).
"""

from __future__ import annotations

import os
from pathlib import Path

from dnadiff.data.dhs import CELL_TYPES, DHSTable
from dnadiff.tokenizers.dna import DNATokenizer
from dnadiff.utils import refuse_existing, staged_dir


def export_benchmark(table: DHSTable, out_dir: str | os.PathLike, test_split: str = "test",
                     force: bool = False) -> int:
    """Write the folder; the number of sequences written. An existing folder is kept unless `force`."""
    import shutil

    refuse_existing([out_dir], force)
    tok = DNATokenizer()
    written = 0
    with staged_dir(out_dir) as tmp:
        for part, split in (("train", "train"), ("test", test_split)):
            rows = table.indices(split)
            for label, cell in enumerate(CELL_TYPES):
                folder = Path(tmp) / part / cell
                folder.mkdir(parents=True)
                for k, i in enumerate(rows[table.labels[rows] == label]):
                    (folder / f"{k}.txt").write_text(tok.decode(table.tokens[i]), encoding="utf-8")
                    written += 1
        if force and os.path.isdir(out_dir):  # staged_dir renames file by file into an existing folder
            for part in ("train", "test"):
                shutil.rmtree(Path(out_dir) / part, ignore_errors=True)
    return written


__all__ = ["export_benchmark"]
