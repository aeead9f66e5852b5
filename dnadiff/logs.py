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
    handler.setFormatter(logging.Formatter("%(message)s" if level > logging.DEBUG else "%(levelname)s %(name)s: %(message)s"))
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
