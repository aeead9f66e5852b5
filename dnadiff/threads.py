"""How many CPU threads a computing command uses, and applying that count once at start.

    choose_threads(requested)   --threads N, else OMP_NUM_THREADS, else the free physical cores
    default_threads()           OMP_NUM_THREADS if set, else free_cores() (divided among a node's processes)
    free_cores()                physical cores of the process minus the 1-minute load average, at least 1
    apply_threads(n, environ)   torch intra-/inter-op threads, numba's threads, the children's environment

Why not torch's own default (one thread per CPU): every small op of a selective scan is its own
parallel region, and its threads wait for each other at the end of it. When another process holds
one of the cores, each region waits for a descheduled thread: measured on a 2-core machine at load
13, `dnadiff sample MODEL -n 4 --length 64 --steps 64` took 2 min 13 s wall with torch's default 2
threads and 15 s with one thread; benchmarks/threads.py repeats this race (load 8.5: 127 s with 2
threads, 14.5 s with 1, 14.1 s with the default below, medians of 3). On an idle machine
more threads do help a larger model (Caduceus dna-467k fwd+bwd at B=2, L=1024: 0.99 s with 1
thread, 0.71 s with 2). So the default counts only the cores that are free when the command
starts: cores minus the 1-minute load average, rounded, at least 1. A busy machine gets 1 thread
(never slower than `--threads 1`); an idle one gets its cores. The load is read once, at start:
a machine that becomes busy later keeps the count (pass --threads 1 on a machine shared with
jobs that come and go).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import MutableMapping

from dnadiff import machine
from dnadiff.errors import DnadiffError

# variables a child process (a DDP worker, a subprocess) reads for its thread pools
# NUMBA_NUM_THREADS is left alone: numba re-reads it and refuses a new value once its pool runs; the
# compiled scan sets numba's count per call from torch's (dnadiff/backbones/scan_compiled.py)
CHILD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def env_threads(environ: MutableMapping[str, str] | None = None) -> int | None:
    """OMP_NUM_THREADS as a positive count, or None when unset or empty. A nested list ("4,2")
    counts its first level, as OpenMP does; anything else is a one-line error naming the variable."""
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if not value:
        return None
    first = value.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise DnadiffError(f"OMP_NUM_THREADS: must be a positive number of threads, got {value!r}")
    return int(first)


def free_cores(cores: int | None = None, load: float | None = None) -> int:
    """Physical cores this process may use minus the machine's 1-minute load average, rounded to the
    nearest count and kept within [1, cores]. `cores`/`load` default to the machine's, read now;
    where the load average is not available, every core counts as free."""
    if cores is None:
        cores = machine.available_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # not on every platform
            load = 0.0
    return max(1, min(int(cores), math.floor(cores - load + 0.5)))


def default_threads(per_process: int = 1) -> int:
    """The thread count when none is asked for: OMP_NUM_THREADS (a per-process count, as OpenMP
    reads it) when set, else the free cores shared among the `per_process` processes of this node."""
    explicit = env_threads()
    if explicit is not None:
        return explicit
    return max(1, free_cores() // max(1, int(per_process)))


def choose_threads(requested: int | None = None) -> int:
    """`--threads N` when given, else `default_threads()`."""
    if requested is not None:
        if int(requested) < 1:
            raise DnadiffError(f"--threads: must be a positive number of threads, got {requested}")
        return int(requested)
    return default_threads()


def apply_threads(n: int, environ: MutableMapping[str, str] | None = None) -> int:
    """Use `n` CPU threads from now on; returns torch's previous intra-op count.

    torch: intra-op threads, and inter-op threads where still legal (only before the first
    inter-op work of the process; later calls leave that pool as it is). numba: its thread count,
    when numba is already imported (capped at the pool it started with); it is not imported here,
    because starting its thread pool in a command that never uses it costs time and may not be
    fork-safe for the data loader's workers. `environ` (the CLI passes os.environ for an explicit
    --threads): OMP/MKL_NUM_THREADS for child processes.
    """
    import torch

    n = int(n)
    if n < 1:
        raise DnadiffError(f"threads: must be a positive number of threads, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # inter-op work has started, or the count was set before: it stays
        pass
    if environ is not None:
        for var in CHILD_ENV_VARS:
            environ[var] = str(n)
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "set_num_threads"):
        numba.set_num_threads(max(1, min(n, int(numba.config.NUMBA_NUM_THREADS))))
    return before


__all__ = ["CHILD_ENV_VARS", "apply_threads", "choose_threads", "default_threads", "env_threads", "free_cores"]
