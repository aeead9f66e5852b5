"""CSV metrics log that survives `--resume`: earlier sessions' rows stay in logs/metrics.csv.

Lightning's CSVLogger deletes an existing metrics.csv when it starts, so after a resume the file
(and the loss-curve PNG drawn from it) covered the last session only. Here a resumed run keeps the
rows logged before the checkpoint's step (rows at or past it were logged after the checkpoint by
the killed session and are logged again now) and appends the new session's rows.
"""

from __future__ import annotations

import csv
import os

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from dnadiff.utils import atomic_path


def _step_of(row: dict) -> float:
    try:
        return float(row.get("step") or "nan")
    except ValueError:
        return float("nan")


class _KeepingWriter(ExperimentWriter):
    def __init__(self, log_dir: str, resume_step: int | None) -> None:
        self._resume_step = resume_step
        super().__init__(log_dir=log_dir)

    def _check_log_dir_exists(self) -> None:
        path = self.metrics_file_path
        if self._resume_step is None or not os.path.isfile(path):
            if os.path.isfile(path):
                os.remove(path)  # a fresh run: no rows of an earlier run under this name
            return
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if _step_of(r) < self._resume_step]  # NaN (no step) rows are dropped
        with atomic_path(path) as tmp:
            with open(tmp, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=header)
                writer.writeheader()
                writer.writerows(rows)
        self.metrics_keys = sorted(header)  # new keys of this session extend the old header


class SessionCSVLogger(CSVLogger):
    """CSVLogger(run_dir, name="logs", version="") that keeps earlier sessions' rows on resume."""

    def __init__(self, save_dir: str, resume_step: int | None = None, **kwargs) -> None:
        super().__init__(save_dir, **kwargs)
        self._resume_step = resume_step

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is not None:
            return self._experiment
        self._fs.makedirs(self.root_dir, exist_ok=True)
        self._experiment = _KeepingWriter(self.log_dir, self._resume_step)
        return self._experiment
