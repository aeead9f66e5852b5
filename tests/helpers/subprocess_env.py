"""The environment of a test's child `dnadiff` process: this repository's code, one thread, and no
launcher variables of an outer job (a rank, a world size, a SLURM task id) for Lightning to pick up."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "SLURM_PROCID", "MASTER_PORT")


def child_env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    for var in LAUNCHER_VARS:
        env.pop(var, None)
    return env
