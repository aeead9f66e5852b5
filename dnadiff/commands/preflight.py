"""Checks a command makes before anything heavy: before the thread set-up (which imports torch) and
before a model, a data set or Lightning is loaded. A destination that would lose results, a data
folder one level too high, a BED naming a chromosome the genome lacks are refused in about the time
`dnadiff --help` takes.

Only the standard library and torch-free dnadiff modules are imported here, and files are read
only as far as their headers: a FASTA's `.fai` index or its `>` lines, a BED's first column,
folder listings. A command module may define `preflight(args)` (dnadiff/cli.py calls it before
anything else; never for --print-config); the command's own later checks stay, as they also
guard the library functions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dnadiff.data_root import data_root_hint
from dnadiff.errors import DnadiffError

# a FASTA without a .fai index is scanned for its header lines only up to this size (larger: the
# chromosome check waits for the genome's index, built when the data are loaded)
SCAN_LIMIT_BYTES = 64 << 20
RESULT_FILES = ("results.json",)  # what a finished `dnadiff finetune` leaves in its output folder
# a Hub id "org/name" as modelio/hub.py spells it (that package imports torch; this module must not)
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def listing(names: list[str], most: int = 12) -> str:
    """`a, b, c` or `a, b, ... (N in all)`."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


# ------------------------------------------------------------------------------------ destinations


def check_exclusive(resume: bool, overwrite: bool) -> None:
    if resume and overwrite:
        raise DnadiffError("--resume and --overwrite exclude each other")


def check_run_dir(run_dir: str | os.PathLike, resume: bool, overwrite: bool) -> None:
    """A new run (not --resume) goes into a missing or empty directory unless --overwrite: the
    rule `train` and `design-finetune` apply again when they create the directory. Ranks > 0 of a
    multi-process launch skip it (rank 0 has made the directory by the time they start)."""
    from dnadiff.training.rundir import launch_rank, refuse_existing_run_dir

    check_exclusive(resume, overwrite)
    if not resume and launch_rank() == 0:
        refuse_existing_run_dir(Path(run_dir), overwrite)


def check_results_dir(out: str | os.PathLike, resume: bool, overwrite: bool) -> None:
    """`dnadiff finetune --out DIR`: a DIR holding an earlier job's results (results.json, or the
    finished runs of an interrupted job in DIR/runs/) is kept unless --resume (reuse the finished
    runs of the same config) or --overwrite (replace them)."""
    from dnadiff.training.rundir import launch_rank

    check_exclusive(resume, overwrite)
    if resume or overwrite or launch_rank() > 0:
        return
    out = Path(out)
    earlier = [name for name in RESULT_FILES if (out / name).is_file()]
    if not earlier and (out / "runs").is_dir() and any((out / "runs").rglob("*.json")):
        earlier = ["runs/"]
    if earlier:
        raise DnadiffError(f"{out}: holds the results of an earlier fine-tuning ({', '.join(earlier)}) "
                           "(use --resume to reuse its finished runs or --overwrite to replace them)")


# ------------------------------------------------------------------------------------ inputs (before outputs)


def check_input_files(*inputs: tuple[str | None, str]) -> None:
    """Inputs first, then outputs: each (path, what) given (not None, not `-` for stdin) exists, else the
    line its reader would give (`P: WHAT not found`), before an existing output is reported."""
    from dnadiff.utils import not_found

    for path, what in inputs:
        if path and path != "-" and not os.path.exists(path):
            raise DnadiffError(not_found(path, what))


def check_model_input(value: str | None, flag: str = "") -> None:
    """A model argument names a local folder or a Hub id in the local Hugging Face cache, before an
    existing output is reported. Only a missing path costs the Hub look-up (modelio.hub, which the
    loader also calls; that import brings torch, so present folders skip it)."""
    if not value or os.path.exists(os.path.expanduser(value)):
        return
    if HUB_ID.match(str(value)) and ".." not in str(value):
        from dnadiff.modelio.hub import resolve_model_path

        resolve_model_path(value)  # in the cache, or its one-line error
        return
    raise DnadiffError(f"{flag}{value}: model directory not found")


# ------------------------------------------------------------------------------------ benchmark folders


def _is_benchmark(folder: Path) -> bool:
    return (folder / "train").is_dir() and (folder / "test").is_dir()


def check_benchmark_folder(value: str | None, key: str, root: str | None = None, set_with: str | None = None) -> None:
    """A benchmark path names a folder NAME/{train,test}/CLASS/*.txt. A folder one level too high
    (it holds data sets) names the sets it holds; one level too deep (NAME/train) names NAME. A bare
    name (a Genomic Benchmarks set in its cache) is left to the loader. `set_with`: how the user
    sets the value (`--dataset `, default `KEY=`), for the suggestion."""
    if not value:
        return
    path = Path(value).expanduser()
    if not path.is_dir():
        if os.sep in str(value) or "/" in str(value) or str(value).startswith("."):
            raise DnadiffError(f"{key}: {value}: benchmark folder not found{data_root_hint(value, root)}")
        return
    if _is_benchmark(path):
        return
    set_with = set_with or f"{key}="
    try:
        sets = sorted(child.name for child in path.iterdir() if child.is_dir() and _is_benchmark(child))
    except OSError:
        sets = []
    if sets:
        raise DnadiffError(f"{key}: {value}: a folder of data sets, not one (it holds {listing(sets)}); "
                           f"name one, e.g. {set_with}{os.path.join(str(value), sets[0])}")
    if path.name in ("train", "test") and _is_benchmark(path.parent):
        raise DnadiffError(f"{key}: {value}: the {path.name} split of a data set; give the data set, "
                           f"{set_with}{path.parent}")
    missing = next(split for split in ("train", "test") if not (path / split).is_dir())
    raise DnadiffError(f"{key}: {path / missing}: split folder not found (expected NAME/train and NAME/test, "
                       "each with one folder of *.txt sequences per class)")


# ------------------------------------------------------------------------------------ genome headers


def fasta_names(path: str | os.PathLike) -> list[str] | None:
    """The sequence names of a FASTA (plain or gzip), as the genome reader keys them (the header up
    to its first whitespace): from its `.fai` index, else from its `>` lines when the file is at most
    SCAN_LIMIT_BYTES. None when unknown (stdin, missing, unreadable, or too large to scan now)."""
    import gzip
    import zlib

    path = os.fspath(path)
    if path == "-" or not os.path.isfile(path):
        return None
    try:
        if os.path.isfile(path + ".fai"):
            with open(path + ".fai", encoding="utf-8", errors="replace") as fh:
                return [line.split("\t", 1)[0] for line in fh if line.strip()]
        if os.path.getsize(path) > SCAN_LIMIT_BYTES:
            return None
        with open(path, "rb") as fh:
            magic = fh.read(2)
        opener = gzip.open if magic == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            return _header_names(fh)
    except (OSError, EOFError, zlib.error):
        return None  # the genome reader reports it, with its own message


def _header_names(fh, block: int = 1 << 20) -> list[str]:
    """The names of the `>` lines of a binary stream, read in blocks (a header may span two)."""
    names: list[str] = []

    def add(header: bytes) -> None:
        words = header.split(None, 1)
        names.append(words[0].decode("utf-8", errors="replace") if words else "")

    carry = b"\n"  # the start of the file counts as the start of a line
    while True:
        chunk = fh.read(block)
        buf = carry + chunk
        pos, open_at = 0, -1
        while True:
            start = buf.find(b"\n>", pos)
            if start < 0:
                break
            end = buf.find(b"\n", start + 2)
            if end < 0:
                open_at = start  # its line goes on in the next block
                break
            add(buf[start + 2:end])
            pos = end
        if not chunk:  # end of the file: a last header without a newline
            if open_at >= 0:
                add(buf[open_at + 2:])
            return names
        carry = buf[open_at:] if open_at >= 0 else buf[-1:]


def check_bed_chromosomes(fasta: str | os.PathLike, bed: str | os.PathLike) -> None:
    """Every chromosome a BED names is in the FASTA (names from its .fai or header lines only).
    Other faults of the BED (columns, splits, coordinates) are left to its reader."""
    names = fasta_names(fasta)
    bed = os.fspath(bed)
    if not names or not os.path.isfile(bed):
        return
    known = set(names)
    try:
        with open(bed, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip() or line.startswith(("#", "track", "browser")):
                    continue
                cols = line.rstrip("\r\n").split("\t") if "\t" in line else line.split()
                if len(cols) < 4:  # as the BED reader says it (data/fasta.py read_bed)
                    raise DnadiffError(f"{bed}:{lineno}: expected 4 columns (chrom, start, end, split), "
                                       f"got {len(cols)}")
                chrom = cols[0]
                if chrom not in known:
                    raise DnadiffError(f"{bed}:{lineno}: chromosome {chrom!r} is not in {os.fspath(fasta)} "
                                       f"(its sequences: {listing(names)})")
    except OSError:
        return


# ------------------------------------------------------------------------------------ a run's data


def check_data_files(cfg) -> None:
    """The data files of a RunConfig, before anything is loaded: the genome FASTA and BED exist
    (a missing one under the data root says how the root was chosen and how to set it) and agree
    on the chromosomes; a benchmark folder has the train/test layout."""
    data = cfg.data
    root = getattr(data, "root", None)
    if data.kind == "genome":
        for key, path, what in (("data.fasta", data.fasta, "genome FASTA"), ("data.bed", data.bed, "BED file")):
            if path and not os.path.exists(path):
                raise DnadiffError(f"{key}: {path}: {what} not found{data_root_hint(path, root)}")
        if data.fasta and data.bed:
            check_bed_chromosomes(data.fasta, data.bed)
    elif data.kind == "benchmark":
        check_benchmark_folder(data.benchmark, "data.benchmark", root)


__all__ = ["SCAN_LIMIT_BYTES", "check_bed_chromosomes", "check_benchmark_folder", "check_data_files",
           "check_exclusive", "check_input_files", "check_model_input", "check_results_dir", "check_run_dir",
           "fasta_names", "listing"]
