"""What the pipeline scripts share: loading a sibling script by its path, and the command line they record.

Each pipeline loads this file by path (see `_common` at its top), never through sys.path: a folder
of scripts on sys.path lets pipelines/genomic_benchmarks.py shadow the `genomic_benchmarks` package.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def load_sibling(name: str):
    """The pipeline script pipelines/NAME.py as a module (cached: one module per script per process)."""
    key = f"dnadiff_pipelines_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


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
