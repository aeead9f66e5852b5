"""What the pipeline scripts share: the command line they record, the --dry-run wrapper and work kept across
reruns (`stamped`).

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
