"""Small shared helpers: atomic file writes (temp name + rename) and JSON output."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator

from dnadiff.errors import DnadiffError


def current_umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def public_mode(directory: bool = False) -> int:
    """The mode open()/mkdir() would give a new file (0o666) or folder (0o777) under the umask."""
    return (0o777 if directory else 0o666) & ~current_umask()


def os_error(exc: OSError, path: str | os.PathLike | None = None):
    """An OSError (read-only folder, full disk, no permission) as a one-line DnadiffError naming the path."""
    where = path or exc.filename or "output"
    reason = exc.strerror or type(exc).__name__
    return DnadiffError(f"{where}: cannot write ({reason})")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed onto `path`.

    An interrupted writer leaves either the old file or the new one, never half of one. The new
    file gets the mode an ordinary open() would give it (0644 under umask 022): mkstemp's 0600
    would otherwise leak through the rename. OS faults (read-only folder, full disk) become one
    DnadiffError naming `path`, and the temporary file is removed.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise DnadiffError(f"{path}: is a directory, expected a file name")
    try:
        tmp = _temp_beside(path)
    except OSError as exc:
        raise os_error(exc, path) from None
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove_quietly(tmp)
        raise os_error(exc, path) from None
    except BaseException:
        _remove_quietly(tmp)
        raise



@contextmanager
def staged_dir(out_dir: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary folder beside `out_dir` to write a command's outputs into; on success they are
    renamed into `out_dir` (the whole folder when `out_dir` did not exist, else file by file), on any
    failure the temporary folder is removed and `out_dir` is left as it was (not even created).
    OS faults (full disk, read-only folder) become one DnadiffError naming `out_dir`."""
    import shutil

    out = os.path.abspath(os.fspath(out_dir))
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".", suffix=".tmp", dir=os.path.dirname(out))
        os.chmod(tmp, public_mode(directory=True))  # mkdtemp's 0700 would survive the rename
    except OSError as exc:
        raise os_error(exc, out_dir) from None
    try:
        yield tmp
        if not os.path.exists(out):
            os.replace(tmp, out)
        else:
            for name in sorted(os.listdir(tmp)):
                os.replace(os.path.join(tmp, name), os.path.join(out, name))
            os.rmdir(tmp)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise os_error(exc, out_dir) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

def _temp_beside(path: str) -> str:
    """An empty `.NAME.*.tmp` file beside `path` (its folder made if needed) with the mode an
    ordinary open() would give it: mkstemp's 0600 would otherwise leak through the rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    os.chmod(tmp, public_mode())
    return tmp


def _remove_quietly(path: str | None) -> None:
    if path and os.path.exists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb" if isinstance(data, bytes) else "w",
                  encoding=None if isinstance(data, bytes) else "utf-8") as fh:
            fh.write(data)


def format_duration(seconds: float) -> str:
    """'45 s', '12 min', '2.5 h': an estimated duration for a message."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def json_text(obj: Any) -> str:
    """The JSON text dnadiff writes (indented; numpy/torch scalars and arrays as numbers and lists)."""
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write(path, json_text(obj))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def _table_cells(rows: list[dict[str, Any]], columns: list[str] | None,
                floatfmt: str) -> tuple[list[str], list[list[str]]]:
    """(columns, one list of cell strings per row) of a non-empty table: `columns` or the first row's keys;
    floats in `floatfmt`, a missing value empty (format_table and markdown_table draw these)."""
    columns = columns or list(rows[0])
    cells = [[format(v, floatfmt) if isinstance(v, float) else str(v) for v in (r.get(c, "") for c in columns)]
             for r in rows]
    return columns, cells


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None, floatfmt: str = ".4g") -> str:
    """A plain aligned text table (for terminals and markdown-ish logs)."""
    if not rows:
        return "(no rows)"
    columns, cells = _table_cells(rows, columns, floatfmt)
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join([line, sep, *body])


TERMINAL_COLUMNS = 100  # a summary printed on a terminal fits this many columns


def summary_values(row: dict[str, Any]) -> dict[str, Any]:
    """The values of a result row a terminal summary shows: all but the nested ones (per-class dicts,
    lists longer than 48 characters), which the JSON written beside keeps."""
    def short(value: Any) -> bool:
        if isinstance(value, dict):
            return False
        return not isinstance(value, (list, tuple)) or len(str(value)) <= 48

    return {k: v for k, v in row.items() if short(v)}


def summary_table(row: dict[str, Any], width: int = TERMINAL_COLUMNS) -> str:
    """One result row as a table that fits `width` columns: its `summary_values`, on one line when they
    fit, else as `metric  value` lines, each value cut to fit."""
    kept = summary_values(row)
    table = format_table([kept]) if kept else "(no scalar values)"
    if max(len(line.rstrip()) for line in table.splitlines()) <= width:
        return table
    key_width = max(len("metric"), *(len(str(k)) for k in kept))
    room = max(8, width - key_width - 2)
    cells = [{"metric": k, "value": format(v, ".4g") if isinstance(v, float) else str(v)} for k, v in kept.items()]
    for cell in cells:
        if len(cell["value"]) > room:
            cell["value"] = cell["value"][:room - 1] + "…"
    return format_table(cells)


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None, floatfmt: str = ".4g") -> str:
    if not rows:
        return ""
    columns, cells = _table_cells(rows, columns, floatfmt)
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(out)


# ----------------------------------------------------------------------------- outputs, caches, threads


def refuse_existing(paths: list[str | os.PathLike], force: bool) -> None:
    """The one overwrite rule of every writing command: an existing output is kept unless --force."""
    for path in paths:
        if path is not None and os.path.lexists(path) and not force:
            raise DnadiffError(f"{os.fspath(path)}: exists (use --force to overwrite it)")


def clean_stale_temps(path: str | os.PathLike) -> list[str]:
    """Remove `.NAME.*.tmp` files left beside `path` by a killed atomic writer; their names."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = "." + os.path.basename(path) + "."
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp"):
            try:
                os.remove(os.path.join(directory, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def cache_dir(*parts: str) -> str:
    """dnadiff's cache folder ($DNADIFF_CACHE, else $XDG_CACHE_HOME/dnadiff, else ~/.cache/dnadiff)."""
    root = os.environ.get("DNADIFF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "dnadiff")
    return os.path.join(root, *parts)


# ----------------------------------------------------------------------------- files written as one


def _journal(first: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(first)), "." + os.path.basename(first) + ".commit")


def write_together(files: list[tuple[str | os.PathLike, str | bytes]]) -> None:
    """Write several files (samples + their statistics) so that a kill leaves all old or all new.

    Each is written to a fsynced temp file beside its target; then a journal listing the renames is
    committed (temp + rename); then the renames run and the journal goes. The commit and the renames
    run with the catchable kill signals (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) held back, so such a kill
    lands before the commit (the old files stay; their temp files are removed now or by the next
    run) or after the last rename (all new). Only an uncatchable kill (SIGKILL, power loss) can land
    between two renames: the journal then says what to finish, and `recover_together`, which every
    writer of these files calls first, rolls it forward.
    """
    paths = [os.fspath(p) for p, _ in files]
    temps: list[str] = []
    committed = False  # after the journal, the temp files are the journal's: kept for the roll-forward
    try:
        for path, data in files:
            temps.append(_temp_beside(os.fspath(path)))
            with open(temps[-1], "wb") as fh:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
        pairs = list(zip(temps, [os.path.abspath(p) for p in paths]))
        with kill_signals_held():
            atomic_write(_journal(paths[0]), json.dumps(pairs))
            committed = True
            _roll_forward(paths[0])
    except BaseException as exc:
        if not committed:
            for tmp in temps:
                _remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise os_error(exc, exc.filename or paths[0]) from None
        raise


_KILL_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")


@contextmanager
def kill_signals_held() -> Iterator[None]:
    """Hold back the catchable kill signals for a short critical section; one that arrives meanwhile
    is delivered when it ends. A no-op off the main thread and where signal masks do not exist."""
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {getattr(signal, name) for name in _KILL_SIGNALS if hasattr(signal, name)}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _roll_forward(first: str) -> None:
    journal = _journal(first)
    with open(journal, encoding="utf-8") as fh:
        pairs = json.load(fh)
    for tmp, target in pairs:
        if os.path.exists(tmp):
            os.replace(tmp, target)
    os.remove(journal)


def recover_together(paths: list[str | os.PathLike]) -> None:
    """Finish the renames of a `write_together` that was killed after its commit; remove stale temps."""
    paths = [os.fspath(p) for p in paths]
    journal = _journal(paths[0])
    if os.path.exists(journal):
        try:
            _roll_forward(paths[0])
        except (OSError, ValueError):
            _remove_quietly(journal)  # an unreadable journal: its temp files are stale ones (removed below)
    for path in [*paths, journal]:  # the journal's own temp file too
        clean_stale_temps(path)


def not_found(path: str | os.PathLike, what: str) -> str:
    """The message for an input file that cannot be opened as one: `P: WHAT not found`, or, when P is an
    existing folder, `P: a folder, not a WHAT` (a folder exists, so "not found" would mislead)."""
    if os.path.isdir(path):
        return f"{path}: a folder, not a {what} (give a file inside it)"
    return f"{path}: {what} not found"


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # a checkout: the folder above dnadiff/


def _path_roots(repo: str | None, data: str | None) -> list[tuple[str, str]]:
    """(absolute folder, how results write it), longest folder first: the data root as $DNADIFF_DATA,
    the repository as nothing (relative paths), the temporary folder as $TMPDIR, the home folder as ~.
    Each folder both as given and with its links resolved."""
    import tempfile

    from dnadiff.data_root import DATA_ENV

    named = [(tempfile.gettempdir(), "$TMPDIR/"), (os.path.expanduser("~"), "~/"), (repo or REPO_ROOT, "")]
    data = data or os.environ.get(DATA_ENV)
    if data:  # without one, the data is the bundled data inside the repository: relative already
        named.append((os.path.expanduser(data), f"${DATA_ENV}/"))
    roots: dict[str, str] = {}
    for folder, way in named:  # later entries win a tie (the data root over the repository)
        for form in (os.path.abspath(folder), os.path.realpath(folder)):
            if form != os.sep:
                roots[form.rstrip(os.sep)] = way
    return sorted(roots.items(), key=lambda fw: -len(fw[0]))


def portable_paths(obj: Any, repo: str | os.PathLike | None = None, data: str | os.PathLike | None = None) -> Any:
    """`obj` (text, or dicts/lists of them) with the absolute paths of this machine rewritten as results
    record them, so a reader elsewhere can rerun the commands: under the data root (`data`, else
    $DNADIFF_DATA) -> `$DNADIFF_DATA/...`; under the repository (`repo`, else the checkout holding this
    package) -> relative to it (the folder itself -> `.`); under the temporary folder -> `$TMPDIR/...`;
    under the home folder -> `~/...`. Only whole path components match (`/work/main` is not a prefix of
    `/work/main2`); everything else stays as given. Keys of mappings are rewritten too."""
    import re

    roots = dict(_path_roots(str(repo) if repo else None, str(data) if data else None))
    # a folder followed by `/` (a path inside it) or by the end of the path (the folder itself)
    pattern = re.compile("|".join(f"(?<![\\w./-]){re.escape(f)}(?:/|(?=$|[^\\w./-]))" for f in roots))

    def one(m: re.Match) -> str:
        found = m.group(0)
        if found.endswith("/"):
            return roots[found[:-1]]
        return roots[found].rstrip("/") or "."

    def text(value: str) -> str:
        return pattern.sub(one, value)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, os.PathLike):
            return text(os.fspath(value))
        if isinstance(value, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(obj)


def local_paths(obj: Any) -> Any:
    """The inverse of `portable_paths` for what this machine can expand: `$DNADIFF_DATA/...` (when set),
    `$TMPDIR/...` and `~/...` become absolute paths again; paths relative to the checkout stay relative."""
    import re
    import tempfile

    from dnadiff.data_root import DATA_ENV

    folders = {"$TMPDIR": tempfile.gettempdir(), "~": os.path.expanduser("~")}
    if os.environ.get(DATA_ENV):
        folders[f"${DATA_ENV}"] = os.path.abspath(os.path.expanduser(os.environ[DATA_ENV]))
    pattern = re.compile("(?<![\\w./-])(" + "|".join(re.escape(k) for k in folders) + ")/")

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: folders[m.group(1)].rstrip("/") + "/", value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(obj)


__all__ = ["TERMINAL_COLUMNS", "summary_table", "summary_values", "atomic_path", "atomic_write", "format_duration",
           "json_text", "write_json", "format_table",
           "markdown_table", "refuse_existing", "not_found", "portable_paths", "local_paths", "REPO_ROOT",
           "clean_stale_temps", "cache_dir", "write_together", "recover_together", "public_mode", "os_error"]
