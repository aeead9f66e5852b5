"""Small shared helpers: atomic file writes (temp name + rename) and JSON output."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed onto `path`.

    An interrupted writer leaves either the old file or the new one, never half of one.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        from dnadiff.errors import DnadiffError

        raise DnadiffError(f"{path}: is a directory, expected a file name")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb" if isinstance(data, bytes) else "w", encoding=None if isinstance(data, bytes) else "utf-8") as fh:
            fh.write(data)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None, floatfmt: str = ".4g") -> str:
    """A plain aligned text table (for terminals and markdown-ish logs)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join([line, sep, *body])


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None, floatfmt: str = ".4g") -> str:
    if not rows:
        return ""
    columns = columns or list(rows[0])

    def fmt(v: Any) -> str:
        return format(v, floatfmt) if isinstance(v, float) else str(v)

    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(out)
