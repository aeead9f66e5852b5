"""The commands of pipelines/dhs_design.py (also run by dhs_edit.py and dhs_drakes_grid.py): the `dnadiff`
command that makes one row's designs or fine-tunes a model, run in-process and kept across reruns (never with
the evaluation oracle), and what their outputs record (denoiser calls per design, the reward curve)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from dhs_design_report import FINETUNED

CELL = "HepG2"


class Commands:
    """Runs `dnadiff` commands in-process (dhs_benchmark.dnadiff), refusing any that names the evaluation oracle,
    keeps a command's outputs across reruns while the command and its inputs' content are unchanged
    (OUTPUT.done.json), and records every command it was asked for."""

    def __init__(self, eval_dir: str | None, log):
        self.eval_dir, self.log, self.records = eval_dir, log, []

    def run(self, argv: list, purpose: str, done: Path, inputs: list[str]) -> dict:
        import dhs_benchmark as bench

        from dnadiff.eval import fingerprint

        argv = [str(a) for a in argv]
        if self.eval_dir and any(Path(self.eval_dir).resolve() == Path(a.split(":", 1)[-1]).resolve()
                                 for a in argv if a.split(":", 1)[-1]):
            raise SystemExit(f"error: refusing to pass the evaluation oracle to `dnadiff {' '.join(argv)}`")
        stamp = {"command": "dnadiff " + " ".join(argv), "inputs": [fingerprint(i) for i in inputs]}
        if done.is_file() and json.loads(done.read_text()).get("stamp") == stamp:
            info = json.loads(done.read_text())["info"]
            self.log(f"  kept ({info['wall_s']} s wall when made): {stamp['command']}")
        else:
            done.unlink(missing_ok=True)
            info = bench.dnadiff(argv, self.log)
            from dnadiff.utils import write_json

            write_json(done, {"stamp": stamp, "info": info})
        self.records.append({"purpose": purpose, **info})
        return info


def design_argv(row: str, value, sc: dict, models: dict, reward_dir: str, num: int, seed: int, out: Path,
                threads: int, finetuned: str | None = None) -> tuple[list, list[str]]:
    """(the command that makes `num` designs of `row` into `out`, the model/classifier folders it reads)."""
    tail = ["--num", num, "--length", sc["length"], "--steps", sc["steps"], "--seed", seed, "--out", out,
            "--threads", threads, "--force", "-q"]
    if row == "cfg":
        return ["sample", models["cfg"], "--class", CELL, "--guidance", value, *tail], [models["cfg"]]
    if row in FINETUNED:
        return ["sample", finetuned, *tail], [finetuned]
    method = {"unguided": ["none"], "best_of_n": ["best_of_n", "--option", f"n={sc['best_n']}"],
              "svdd": ["svdd", "--option", f"candidates={sc['svdd_candidates']}"],
              "smc": ["smc", "--option", f"particles={sc['smc_particles']}", "--option", f"alpha={value}"],
              "cg": ["cg_grad", "--option", f"scale={value}"]}[row]
    return (["design", models["cg"], "--reward", f"classifier:{reward_dir}", "--target", CELL, "--method", *method,
             *tail], [models["cg"], reward_dir])


def finetune_argv(method: str, beta: float, lr: float, sc: dict, models: dict, reward_dir: str, out: Path,
                  threads: int) -> list:
    ft = sc["finetune"]
    return ["design-finetune", models["cg"], "--reward", f"classifier:{reward_dir}", "--target", CELL, "--method",
            method, "--kl-weight", beta, "--lr", lr, "--length", sc["length"], "--train-steps", ft["train_steps"],
            "--sample-steps", ft["sample_steps"], "--truncate-steps", ft["truncate_steps"], "--batch-size",
            ft["batch_size"], "--group-size", ft["group_size"], "--target-samples", ft["target_samples"],
            "--eval-samples", ft["eval_samples"], "--seed", 0, "--out", out, "--threads", threads, "--overwrite",
            "-q"]


def nfe_of(fasta: Path) -> float:
    """Denoiser rows per design from the JSON `dnadiff sample` / `dnadiff design` wrote beside the FASTA (a
    classifier-free-guided step counts its two network passes there: conditional and unconditional)."""
    stats = json.loads(fasta.with_suffix(".json").read_text())
    if "summary" in stats:
        return float(stats["summary"]["nfe_per_sequence"])
    return float(stats["nfe_per_sequence"])  # CFG's two passes counted by dnadiff.sample


def reward_curve(run_dir: Path) -> list[dict]:
    """[{update, reward, kl}] of a design-finetune run (its logs/metrics.csv: the trajectories of each update)."""
    path = run_dir / "logs" / "metrics.csv"
    if not path.is_file():
        return []
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("train/reward") not in (None, ""):
                out.append({"update": int(float(r["step"])) + 1, "reward": float(r["train/reward"]),
                            "kl": float(r["train/kl"]) if r.get("train/kl") not in (None, "") else None})
    return out


def quarter_means(curve: list[dict]) -> tuple[float | None, float | None]:
    """Mean reward over the first and the last quarter of the updates (at least one update each)."""
    if not curve:
        return None, None
    q = max(1, len(curve) // 4)
    r = [c["reward"] for c in curve]
    return float(np.mean(r[:q])), float(np.mean(r[-q:]))
