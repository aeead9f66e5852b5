"""The pipeline harness: what every pipeline script shares, so that each keeps only its science. The command
line it records, the common options (--scale, --threads, --results, --dry-run, --resume, --from-json), the
--dry-run wrapper and the `error:` exit, work kept across reruns (`stamped`), the machine and load stamp, and
writing JSON + Markdown + PNG with repository-relative paths.

`python pipelines/X.py` puts pipelines/ first on sys.path, so a pipeline imports this module and its
sibling pipelines by name (`import common`). No file here may take the name of a module importable
without that folder (genomic_benchmarks.py would hide the `genomic_benchmarks` package):
tests/test_baseline_pipelines.py checks.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def command_line(script: str | os.PathLike, argv: list[str] | None) -> str:
    """`python pipelines/X.py ARGS`, shell-quoted, as run: `argv` given to main(), or the process's own
    arguments when main() was called without any (the command line)."""
    args = sys.argv[1:] if argv is None else argv
    return "python " + " ".join(shlex.quote(str(a)) for a in [os.path.relpath(script, REPO), *args])


def main_with_dry_run(run, args, script: str, argv: list[str] | None, name: str) -> int:
    """`run(args, command, dry)` with `dry` a temporary folder under --dry-run (else None), removed after;
    a DnadiffError is one `error:` line and exit code 2."""
    import tempfile

    from dnadiff.errors import DnadiffError

    tmp = tempfile.TemporaryDirectory(prefix=f"{name}_dry_run_") if args.dry_run else None
    try:
        return run(args, command_line(script, argv), Path(tmp.name) if tmp else None)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp:
            tmp.cleanup()


def stamped(done: Path, stamp: dict, make, log, what: str, ready: bool = True) -> dict:
    """`make()`'s info, unless `done` (a JSON written only after make() succeeded) holds the same stamp (what made
    the work: command, content fingerprints) and `ready`: then the info recorded when it was made (a model,
    student or sample file kept across reruns)."""
    from dnadiff.utils import write_json

    if ready and done.is_file() and json.loads(done.read_text()).get("stamp") == stamp:
        log(f"  kept {what}")
        return json.loads(done.read_text())["info"]
    done.unlink(missing_ok=True)
    info = make()
    write_json(done, {"stamp": stamp, "info": info})
    return info


# ---- the harness: options every pipeline takes, the stamp its results carry, how they are written ----------------

def add_common_options(p, *, scales=None, default_scale: str | None = "cpu", threads: int | None = 1,
                       threads_help: str = "CPU threads of every step", results_help: str | None = None,
                       dry_run_help: str = "every row at toy sizes in a temporary folder; no table",
                       resume_help: str | None = None, from_json: str | None = None) -> None:
    """--scale (when `scales`), --threads, --results, --dry-run; --resume and --from-json when their help is
    given (a pipeline that can keep work, or re-render its table from a finished run's JSON)."""
    if scales is not None:
        p.add_argument("--scale", choices=sorted(scales), default=default_scale)
    p.add_argument("--threads", type=int, default=threads,
                   help=f"{threads_help} (default {threads})" if threads is not None else threads_help)
    p.add_argument("--results", default=None, help=results_help or "results path without extension")
    p.add_argument("--dry-run", action="store_true", help=dry_run_help)
    if resume_help:
        p.add_argument("--resume", action="store_true", help=resume_help)
    if from_json:
        p.add_argument("--from-json", default=None, metavar="JSON", help=from_json)


def start(threads: int | None) -> tuple[str, float, float]:
    """--threads applied (dnadiff.threads.apply_threads), then what a result's stamp starts from: the load
    average, the wall clock and this process's CPU clock now."""
    import time

    from dnadiff.machine import load_average
    from dnadiff.threads import apply_threads

    apply_threads(threads)
    return load_average(), time.time(), time.process_time()


def results_stem(args, default: str, dry: Path | None = None) -> Path:
    """Where a run's STEM.{json,md,png} go: --results (a path without extension), else a temporary folder
    under --dry-run, else results/DEFAULT in the repository."""
    if args.results:
        return Path(args.results)
    return (dry / "results" if dry else REPO / "results") / default


def stamp(load_key: str = "load_average") -> dict:
    """The machine a result was measured on and its load now (`load_key`: the name the pipeline's JSON
    has always used, load_after / load_average_at_end / load_average)."""
    from dnadiff.machine import describe_machine, load_average

    return {"machine": describe_machine(), load_key: load_average()}


def write_results(stem: str | os.PathLike, payload: dict, markdown: str | None) -> None:
    """STEM.json (`payload`) and STEM.md (`markdown`, when given), each written whole under a temporary name,
    with this machine's paths made repository-relative (dnadiff.utils.portable_paths)."""
    from dnadiff.utils import atomic_write, portable_paths, write_json

    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    write_json(f"{os.fspath(stem)}.json", portable_paths(payload))
    if markdown is not None:
        atomic_write(f"{os.fspath(stem)}.md", portable_paths(markdown))


def write_report(stem: Path, payload: dict, markdown, plot=None) -> dict:
    """STEM.json, STEM.png (`plot(payload, path)`, which returns the path or None when there is nothing to draw)
    and STEM.md (`markdown(payload, png)`), the payload made repository-relative first; returns it. STEM's own
    suffix, if any, is replaced (Path.with_suffix), as the DHS pipelines' --results always did."""
    from dnadiff.utils import atomic_write, portable_paths, write_json

    payload = portable_paths(payload)
    stem.parent.mkdir(parents=True, exist_ok=True)
    write_json(stem.with_suffix(".json"), payload)
    png = plot(payload, stem.with_suffix(".png")) if plot else None
    atomic_write(stem.with_suffix(".md"), portable_paths(markdown(payload, png)))
    return payload


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display): the figures are files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | os.PathLike, dpi: int = 110) -> str:
    """`fig` as PNG at `path` (written whole under a temporary name), then closed; returns the path."""
    import matplotlib.pyplot as plt

    from dnadiff.utils import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def rerender(args, payload: dict, markdown, plot=None) -> int:
    """--from-json's last step: --note (when given) replaces the payload's note, then JSON, PNG and table are
    written at --results (default: beside the JSON read)."""
    if getattr(args, "note", None) is not None:  # a pipeline without --note keeps its payload as it is
        payload["note"] = args.note
    stem = Path(args.results) if args.results else Path(args.from_json).with_suffix("")
    write_report(stem, payload, markdown, plot)
    print(f"wrote {stem.with_suffix('.md')} (re-rendered from {args.from_json})")
    return 0


def read_results_json(path: str | os.PathLike, what: str) -> dict:
    """A finished run's results JSON for --from-json; a file that is not one is one DnadiffError."""
    from dnadiff.errors import DnadiffError

    try:
        payload = json.loads(Path(path).read_text())
        if not isinstance(payload, dict):
            raise ValueError("not a JSON object")
        return payload
    except (OSError, ValueError) as exc:
        raise DnadiffError(f"--from-json {path}: not a {what} results JSON ({exc})") from None


def main_plain(run, args, script: str, argv: list[str] | None) -> int:
    """`run(args, command)` for a pipeline without --dry-run; a DnadiffError is one `error:` line and exit code 2."""
    from dnadiff.errors import DnadiffError

    try:
        run(args, command_line(script, argv))
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
