"""The work of pipelines/cpu_hour.py outside its recipe: a model directory scored per window on windows evenly
spread over a split, a run's validation curve, the best-k Markov model fitted, and rows trained in processes of
their own (--jobs)."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from cpu_hour_rows import MARKOV


def _linspace_subset(data, n: int):
    """The first-level choice of windows everywhere here: n indices evenly spread over the split."""
    import numpy as np
    import torch

    if not n or len(data) <= n:
        return data
    idx = np.linspace(0, len(data) - 1, n).round().astype(int)
    return torch.utils.data.Subset(data, sorted(set(int(i) for i in idx)))


def score(model_dir: str | Path, split: str, windows: int, t_samples: int, seed: int = 0) -> dict:
    """Per-window scores of a model directory on `windows` windows of a split (its own data settings)."""
    from dnadiff.checkpoint import load
    from dnadiff.data import build_split_dataset
    from dnadiff.eval import evaluate_model

    model = load(model_dir)
    data = _linspace_subset(build_split_dataset(model.config, model.tokenizer, split), windows)
    diffusion = bool(getattr(model.objective, "needs_time", False))
    k = t_samples if diffusion else 1
    res = evaluate_model(model, data, batch_size=16, seed=1000 + seed, progress=False, num_samples=k,
                         stratify_repeats=diffusion and k > 1, per_sequence=True)
    res["sequence_nats"] = [round(v, 6) for v in res["sequence_nats"]]
    return res


def read_curve(run_dir: Path) -> list[dict]:
    """(step, wall seconds, validation bits/base) of every validation point in logs/metrics.csv."""
    f = Path(run_dir) / "logs" / "metrics.csv"
    if not f.is_file():
        return []
    out = []
    with open(f, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("val/bits_per_token") and row.get("val/wall_seconds"):
                out.append({"step": int(float(row.get("step") or 0)), "wall_seconds": float(row["val/wall_seconds"]),
                            "bits": float(row["val/bits_per_token"])})
    return out


def fit_markov(out_dir: Path, data: list[str], max_order: int, markov_dir: str | None, echo) -> str:
    """The best-k Markov model directory: --markov-dir, or fitted now (order chosen on valid)."""
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.training import train

    if markov_dir:
        return markov_dir
    over = ["name=markov_best", f"out_dir={out_dir}", "model.overrides.order=-1",
            f"model.overrides.max_order={max_order}", *data]
    t0 = time.time()
    res = train(load_config(RunConfig, MARKOV["config"], over), overwrite=True)
    echo(f"markov: order {res.metrics['order']} chosen on valid, fitted in {time.time() - t0:.0f} s")
    return str(res.model_dir)


def train_in_processes(keys: list[str], args, out_dir: Path, minutes: float, threads: int, echo) -> dict[str, dict]:
    """--jobs N: every row trained by its own `--train-only` process (N at a time), each with `threads` threads;
    the parent then scores them as if it had trained them (one wall clock per row, measured in its process)."""
    import subprocess

    from dnadiff.errors import DnadiffError

    out_dir.mkdir(parents=True, exist_ok=True)
    pending, running, done = list(keys), {}, {}
    while pending or running:
        while pending and len(running) < args.jobs:
            key = pending.pop(0)
            cmd = [sys.executable, str(Path(__file__).with_name("cpu_hour.py")), "--rows", key, "--train-only",
                   "--minutes", f"{minutes:g}",
                   "--out-dir", str(out_dir), "--shared", args.shared, "--threads", str(threads)]
            if args.t_samples:
                cmd += ["--t-samples", str(args.t_samples)]
            if args.cpu_clock:
                cmd.append("--cpu-clock")
            if args.dry_run:
                cmd.append("--dry-run")
            log = open(out_dir / f"{key}.train.log", "w")
            running[key] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
            echo(f"{key}: training in process {running[key][0].pid} ({threads} thread(s)), log {log.name}")
        time.sleep(2)
        for key, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[key]
            if proc.returncode != 0:
                for other, _ in running.values():
                    other.terminate()
                raise DnadiffError(f"row {key}: its training process exited with {proc.returncode}; see {log.name}")
            done[key] = json.loads((out_dir / f"{key}.train_row.json").read_text())
            echo(f"{key}: {done[key]['steps']} steps in {done[key]['train_wall_seconds'] / 60:.1f} min, "
                 f"valid {done[key]['valid_bits']:.4f} bits/base")
    return done


def _score_loaded(model, split: str, windows: int) -> dict:
    from dnadiff.data import build_split_dataset
    from dnadiff.eval import evaluate_model

    data = _linspace_subset(build_split_dataset(model.config, model.tokenizer, split), windows)
    return evaluate_model(model, data, batch_size=16, progress=False, per_sequence=True)
