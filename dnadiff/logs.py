"""Messages of the `dnadiff` command: `logging` on stderr, one level knob (`-q` / `-v`), progress bars.

stdout carries results only (tables, or FASTA when `dnadiff sample` writes to a pipe); what the
run is doing goes to stderr through the "dnadiff" logger, so `dnadiff sample M > x.fa` stays clean.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

log = logging.getLogger("dnadiff")

_PROGRESS = True


def setup_logging(verbosity: int = 0) -> None:
    """verbosity 0: info; < 0 (--quiet): warnings only and no progress bars; > 0 (-v): debug."""
    global _PROGRESS
    level = logging.INFO if verbosity == 0 else (logging.WARNING if verbosity < 0 else logging.DEBUG)
    _PROGRESS = verbosity >= 0
    for handler in list(log.handlers):
        if getattr(handler, "_dnadiff", False):
            log.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(
        "%(message)s" if level > logging.DEBUG else "%(levelname)s %(name)s: %(message)s"))
    handler._dnadiff = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = True  # a host application (or pytest) may also listen on the root logger
    quiet_libraries(level)


def progress_enabled() -> bool:
    """False under --quiet: no progress bars at all."""
    return _PROGRESS


def quiet_libraries(level: int = logging.INFO) -> None:
    """Silence what a user cannot act on: Lightning's tips and banners, torch's pytree deprecation."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero",
                 "lightning.pytorch.accelerators.cuda", "pytorch_lightning", "lightning_fabric"):
        logging.getLogger(name).setLevel(max(level, logging.WARNING) if level > logging.DEBUG else logging.INFO)
    os.environ.setdefault("POSSIBLE_USER_WARNING", "off")  # Lightning's "consider num_workers" style tips
    # torch.utils._pytree: "LeafSpec is deprecated" (raised from inside Lightning, nothing to do for a user)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=r".*`isinstance\(treespec, LeafSpec\)`.*")
    warnings.filterwarnings("ignore", message=r".*litlogger.*")
    warnings.filterwarnings("ignore", message=r".*tensorboardX.*")


# ----------------------------------------------------------------------------- progress bars

NON_TERMINAL_INTERVAL = 10.0  # seconds between progress lines when stderr is a file or a pipe


def stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


DEFAULT_COLUMNS, DEFAULT_ROWS = 80, 24  # a terminal that reports no size (0 x 0: under `script`, some CI, docker -t)


def terminal_has_size(stream) -> bool:
    """False for a terminal that reports 0 columns or rows (or none): tqdm sizes its bar from that."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return size.columns > 0 and size.lines > 0


class LineStream:
    """Where a bar writes when stderr is not a terminal: each refresh becomes one plain line.

    tqdm redraws in place with a carriage return and moves the cursor up (ESC [A) for a second bar;
    in a log file that gives one endless line and stray `[A` codes. Here the escapes are dropped,
    every refresh is its own line, and a line equal to the previous one (the redraw at close) is
    written once."""

    _ESCAPE = None

    def __init__(self, stream):
        import re

        self.stream = stream
        self.last = ""
        if LineStream._ESCAPE is None:
            LineStream._ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

    def write(self, text: str) -> int:
        for line in self._ESCAPE.sub("", text).replace("\r", "\n").split("\n"):
            line = line.rstrip()
            if line and line != self.last:
                self.stream.write(line + "\n")
                self.last = line
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(iterable=None, *, nested: bool = False, **kwargs):
    """A tqdm bar on stderr that degrades cleanly: off under --quiet; on a terminal a normal bar
    (`nested`: a transient inner bar below the main one); on a file or pipe one plain line every
    NON_TERMINAL_INTERVAL seconds and no nested bars (their cursor moves are what leaves `[A`)."""
    from tqdm.auto import tqdm

    kwargs.setdefault("dynamic_ncols", True)
    disabled = kwargs.pop("disable", False)  # popped first: tqdm must not get `disable` twice
    if disabled or not progress_enabled():
        return tqdm(iterable, disable=True, **kwargs)
    if any("notebook" in cls.__module__ for cls in tqdm.__mro__):  # Jupyter: its own widget
        return tqdm(iterable, **({"leave": False} if nested else {}), **kwargs)
    if stderr_is_terminal():
        kwargs.setdefault("file", sys.stderr)
        if nested:
            kwargs.setdefault("leave", False)
        if not terminal_has_size(kwargs["file"]):  # tqdm would draw a bar of width -1 in row -1: nothing
            kwargs.update(dynamic_ncols=False, ncols=DEFAULT_COLUMNS, nrows=DEFAULT_ROWS)
        return tqdm(iterable, **kwargs)
    if nested:
        return tqdm(iterable, disable=True, **kwargs)
    kwargs.pop("position", None)
    kwargs.update(file=LineStream(kwargs.get("file") or sys.stderr), dynamic_ncols=False, ncols=80, leave=True,
                  mininterval=max(float(kwargs.get("mininterval", 0.1)), NON_TERMINAL_INTERVAL))
    return tqdm(iterable, **kwargs)
