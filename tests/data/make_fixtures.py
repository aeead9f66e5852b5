"""Regenerate the small real-data fixtures of the tests from ../shared/data (deterministic).

The tests run on these fixtures alone, so a user's clone needs nothing beside the repository.
Everything here is cut from the real data sets in ../shared/data (see its README.md), with a
fixed choice of records, so running this script again gives byte-identical files:

  tests/data/chr22_slice/         a slice of the hg19 chr22 subset: the first BED intervals of each
                                  split (each cut to at most 12 kb; ~60 kb train, ~30 kb valid,
                                  ~30 kb test) at their true coordinates on a chr22 record of the true
                                  length, N elsewhere, soft-masking kept; bgzip + .fai/.gzi, and
                                  sequences.bed with the (cut) intervals and their split column.
  tests/data/text/fortunes/       the first 500 / 50 / 50 documents of the fortunes corpus's
                                  train / valid / test JSONL files.
  dnadiff/assets/benchmarks/      the two benchmark sets (genomic-benchmarks layout), 250 train and
                                  60 test sequences per class drawn with a fixed seed, renumbered
                                  0.txt, 1.txt, ... in their original order. These ship inside the
                                  package (the tiny fine-tuning and class-conditional configs use
                                  them) and are the tests' benchmark fixtures too (one copy).

    python tests/data/make_fixtures.py                     # from ../shared/data beside the repository
    python tests/data/make_fixtures.py --source /path/to/shared/data
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

from dnadiff.data.slices import write_masked_slice

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

GENOME_TARGET = {"train": 60_000, "valid": 30_000, "test": 30_000}  # bases per split
MAX_INTERVAL = 12_000  # longer intervals are cut to their first 12 kb
TEXT_DOCS = {"train": 500, "valid": 50, "test": 50}
BENCH_PER_CLASS = {"train": 250, "test": 60}
BENCHMARKS = ("human_chr22_repeats", "leptospira_coding_vs_intergenic")
SEED = 0


def make_chr22_slice(source: Path, out: Path) -> dict:
    import pyfaidx

    src = pyfaidx.Fasta(str(source / "hg19_chr22_subset" / "chr22.fa.gz"), rebuild=False)
    chrom = "chr22"
    length = len(src[chrom])
    chosen, taken = [], {k: 0 for k in GENOME_TARGET}
    with open(source / "hg19_chr22_subset" / "sequences.bed") as fh:
        for line in fh:
            c, s, e, split = line.split()[:4]
            s, e = int(s), int(e)
            if taken[split] < GENOME_TARGET[split]:
                e = min(e, s + MAX_INTERVAL)
                chosen.append((c, s, e, split))
                taken[split] += e - s
    chosen.sort(key=lambda r: r[1])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    fa_path = out / "chr22_slice.fa.gz"
    write_masked_slice(fa_path, out / "sequences.bed", src, chrom, length, chosen)
    return {"intervals": len(chosen), **taken}


def make_text(source: Path, out: Path) -> dict:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    counts = {}
    for split, n in TEXT_DOCS.items():
        lines = []
        with open(source / "text" / "fortunes" / f"{split}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    json.loads(line)  # each kept line is a whole JSON record
                    lines.append(line if line.endswith("\n") else line + "\n")
                if len(lines) == n:
                    break
        (out / f"{split}.jsonl").write_text("".join(lines), encoding="utf-8")
        counts[split] = len(lines)
    return counts


def _numbered(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.txt"), key=lambda p: (len(p.stem), p.stem))


def make_benchmarks(source: Path, out: Path) -> dict:
    if out.exists():
        shutil.rmtree(out)
    counts = {}
    for name in BENCHMARKS:
        for split, k in BENCH_PER_CLASS.items():
            for cls_dir in sorted(p for p in (source / "benchmarks" / name / split).iterdir() if p.is_dir()):
                files = _numbered(cls_dir)
                rng = random.Random(f"{SEED}/{name}/{split}/{cls_dir.name}")
                keep = sorted(rng.sample(range(len(files)), k))
                dest = out / name / split / cls_dir.name
                dest.mkdir(parents=True)
                for i, j in enumerate(keep):
                    (dest / f"{i}.txt").write_bytes(files[j].read_bytes())
                counts[f"{name}/{split}/{cls_dir.name}"] = k
    return counts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Regenerate the tests' real-data fixtures from ../shared/data.")
    ap.add_argument("--source", default=str(REPO.parent / "shared" / "data"), help="the shared data folder")
    args = ap.parse_args(argv)
    source = Path(args.source)
    if not (source / "hg19_chr22_subset").is_dir():
        raise SystemExit(f"error: {source}: not the shared data folder (no hg19_chr22_subset/)")
    print("chr22 slice:", make_chr22_slice(source, HERE / "chr22_slice"))
    print("text corpus:", make_text(source, HERE / "text" / "fortunes"))
    print("benchmarks: ", make_benchmarks(source, REPO / "dnadiff" / "assets" / "benchmarks"))


if __name__ == "__main__":
    main()
