"""The one-line error contract of the command line, checked in-process: a bad input exits with code 2 and
prints exactly one line, `error: ...`, on stderr (no traceback, no usage dump)."""

from __future__ import annotations


def error_of(capsys, argv: list[str]) -> str:
    """Runs `dnadiff ARGV` (dnadiff.cli.main), asserts exit code 2 and a single `error: ` line on stderr with no
    traceback, and returns that line (for the test to look for its message)."""
    from dnadiff.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err
