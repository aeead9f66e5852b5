"""DDP on the CPU (gloo, 2 processes).

Three 2-process launches, shared by the tests of this module:
  - `dnadiff train ... train.strategy=ddp train.devices=2` through the CLI (uninterrupted; what a user runs),
  - tests/helpers/ddp_driver.py (train() from a script, recording what each rank drew) whose launcher (rank 0)
    is killed with SIGKILL at the start of step 4 (last checkpoint: step 2); the orphaned rank 1
    stops by itself,
  - the same script with --resume.
and one in-process 1-process run with accumulate=2: the same global batch of 2·4 windows per step.

Why accumulate=2 and not batch_size=8: the noise (diffusion times, masks) of a micro-batch is one
draw seeded by its global micro-batch index G (data.py, module.py), so each rank draws its own noise,
and a batch of 8 drawn at once would use other random numbers (the antithetic time draw
spreads over the whole micro-batch); with padding/N, a mean over ranks of per-rank token means is
also not the token mean of 8 windows. 2 ranks x 4 equals 1 process x (2 micro-batches of 4)
exactly: the same windows per G, the same noise per G, the same loss mean (1/2 of the sum of the
two micro-batch means, by DDP's gradient averaging or by Lightning's accumulation), so only float
summation order differs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dnadiff.config import RunConfig, load_config
from dnadiff.training import train
from dnadiff.weights import read_weights
from helpers import progress_wait
from helpers.scripts import load_script
from helpers.subprocess_env import child_env

# slow: a minute of 2-process training (the default run stays under 10 minutes on a 2-core CPU);
# tests/test_ddp_finetune.py keeps two processes = one in the default run, and tests/test_ddp_fast.py the
# per-rank reseed and two simulated ranks = one process with accumulate 2 (the same arithmetic, no gloo)
pytestmark = [pytest.mark.subprocess, pytest.mark.training, pytest.mark.ddp, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "tests" / "helpers" / "ddp_driver.py"
driver = load_script(DRIVER, "ddp_driver")

DDP = ["train.devices=2", "train.strategy=ddp"]


def _env() -> dict:
    return child_env()


def _launch(cmd: list[str], watch: list[Path] = ()) -> subprocess.CompletedProcess:
    """Run to the end, waited for by progress (output, files under `watch`), in a new session: the
    driver's kill -9 of its process group takes both ranks and nothing else."""
    return progress_wait.run(cmd, cwd=REPO, env=_env(), watch=watch)


def _records(folder: Path, rank: int) -> list[dict]:
    path = folder / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    # 1 process, the same global batch as accumulate=2 micro-batches of 4
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [*driver.BASE, "train.accumulate=2"])
    single_rec = root / "single_rec"
    single_rec.mkdir()
    single = train(cfg, run_dir=root / "single", callbacks=[driver.Recorder(single_rec, None)])

    cli = _launch([sys.executable, "-m", "dnadiff", "train", "experiments/tiny_dna_mdlm", *driver.BASE, *DDP,
                   "--run-dir", str(root / "cli")], watch=[root / "cli"])
    assert cli.returncode == 0, cli.stderr[-3000:]

    killed = _launch([sys.executable, str(DRIVER), str(root / "run"), str(root / "rec_killed"), "--kill-at-step", "3",
                      *DDP],
                     watch=[root / "run", root / "rec_killed"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = _launch([sys.executable, str(DRIVER), str(root / "run"), str(root / "rec_resumed"), "--resume", *DDP],
                      watch=[root / "run", root / "rec_resumed"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return SimpleNamespace(root=root, single=single, single_rec=single_rec, cli=cli,
                           killed=root / "rec_killed", resumed=root / "rec_resumed", killed_proc=killed,
                           resumed_proc=resumed)


def _drawn(folders: list[Path], ranks: list[int]) -> dict[int, dict]:
    """G -> its training record (a micro-batch recorded twice, before the kill and after the
    resume, must have drawn the same windows and loss)."""
    seen: dict[int, dict] = {}
    for folder in folders:
        for rank in ranks:
            for row in _records(folder, rank):
                if row["kind"] != "train":
                    continue
                row = dict(row, rank=rank)
                if row["G"] in seen:
                    assert seen[row["G"]]["samples"] == row["samples"]
                    assert seen[row["G"]]["loss"] == pytest.approx(row["loss"], abs=1e-6)
                seen[row["G"]] = row
    return seen


def test_ranks_draw_disjoint_windows_covering_the_single_process_batches(runs):
    ddp = _drawn([runs.killed, runs.resumed], [0, 1])
    single = _drawn([runs.single_rec], [0])
    assert sorted(ddp) == sorted(single) == list(range(12))  # 6 steps x 2 micro-batches
    for g, row in ddp.items():
        assert row["rank"] == g % 2  # rank r draws micro-batches r, r + 2, ...
        assert row["samples"] == single[g]["samples"] == list(range(4 * g, 4 * g + 4))
    for step in range(6):  # per optimizer step (G // 2): two disjoint halves of the same global batch
        halves = [set(r["samples"]) for g, r in ddp.items() if g // 2 == step]
        assert len(halves) == 2 and not halves[0] & halves[1]
        assert halves[0] | halves[1] == {s for g, r in single.items() if g // 2 == step for s in r["samples"]}


def test_losses_and_model_equal_single_process_with_accumulation(runs):
    ddp = _drawn([runs.killed, runs.resumed], [0, 1])
    single = _drawn([runs.single_rec], [0])
    dloss = max(abs(ddp[g]["loss"] - single[g]["loss"]) for g in ddp)
    assert ddp[0]["loss"] == single[0]["loss"] and ddp[1]["loss"] == single[1]["loss"]  # same init, data, noise
    assert dloss < 1e-5, dloss
    a = read_weights(runs.root / "cli" / "model" / "model.safetensors")
    b = read_weights(runs.single.model_dir / "model.safetensors")
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    dw = max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel())
    assert dw < 1e-5, dw
    print(f"\nDDP (2x4) vs 1 process (accumulate 2x4): max |dloss| {dloss:.3g}, max |dweight| {dw:.3g}")


def test_validation_is_gathered_and_the_same_on_every_rank(runs):
    for folder in (runs.killed, runs.resumed):
        v0 = [r for r in _records(folder, 0) if r["kind"] == "val"]
        v1 = [r for r in _records(folder, 1) if r["kind"] == "val"]
        assert v0 and [r["step"] for r in v0] == [r["step"] for r in v1]
        assert [r["value"] for r in v0] == [r["value"] for r in v1]
    single = {r["step"]: r["value"] for r in _records(runs.single_rec, 0) if r["kind"] == "val"}
    resumed = {r["step"]: r["value"] for r in _records(runs.resumed, 0) if r["kind"] == "val"}
    assert sorted(single) == [2, 4, 6] and sorted(resumed) == [4, 6]
    for step, value in resumed.items():  # both ranks' halves of the validation set, summed
        assert value == pytest.approx(single[step], abs=1e-5)
    metrics = json.loads((runs.root / "run" / "model" / "metrics.json").read_text())
    assert metrics["val_nats_per_token"] == pytest.approx(single[6], abs=1e-5)
    assert metrics["steps"] == 6 and metrics["world_size"] == 2


def test_ema_weights_are_exported_once(runs):
    r0 = torch.load(runs.resumed / "rank0_end.pt", weights_only=True)
    r1 = torch.load(runs.resumed / "rank1_end.pt", weights_only=True)
    for k in r0["ema"]:
        assert torch.equal(r0["ema"][k], r1["ema"][k])  # DDP keeps the ranks' EMA copies identical
    exported = read_weights(runs.root / "run" / "model" / "model.safetensors")
    for k, v in r0["ema"].items():
        assert torch.equal(exported[k], v)
    moved = [k for k in r0["ema"] if not torch.equal(r0["live"][k], r0["ema"][k])]
    assert moved  # the export is the average, not the live weights
    assert (runs.resumed / "model_writes.txt").read_text().split() == ["0"]  # rank 0 only, once
    r0_metrics = json.loads((runs.resumed / "result0.json").read_text())
    r1_metrics = json.loads((runs.resumed / "result1.json").read_text())
    assert r0_metrics == r1_metrics  # every rank's train() returns rank 0's metrics


def test_kill9_then_resume_equals_uninterrupted_run(runs):
    assert not (runs.killed / "rank0_end.pt").exists()  # it really died before the end
    ckpt = torch.load(runs.root / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 6
    resumed = read_weights(runs.root / "run" / "model" / "model.safetensors")
    reference = read_weights(runs.root / "cli" / "model" / "model.safetensors")
    for k in reference:
        assert torch.equal(resumed[k], reference[k]), k


def test_orphaned_worker_stops_promptly_in_one_line(runs):
    """kill -9 of the launcher (rank 0): rank 1 used to stay alive until its next collective failed
    and then print a raw gloo traceback ("Connection closed by peer")."""
    err = runs.killed_proc.stderr
    said = [line for line in err.splitlines() if "the launcher" in line]
    assert said == [f"dnadiff: rank 1: the launcher (pid {runs.killed_proc.pid}) has exited; stopping this worker"], \
        err[-3000:]
    for noise in ("Traceback", "Connection closed", "Connection reset", "gloo", "Error"):
        assert noise not in err, err[-3000:]
    assert runs.killed_proc.output_lag_s < 20  # rank 1 gone soon after its launcher (0.2 s polls; a loaded machine)


def test_resume_under_ddp_prints_no_untrue_warnings(runs):
    """Lightning's "dataloader is not resumable", "Checkpoint directory ... exists and is not empty" and
    torch's `all_gather_into_tensor` deprecation (the validation sums are all-reduced now)."""
    err = runs.resumed_proc.stderr
    for untrue in ("not resumable", "exists and is not empty", "all_gather", "deprecated"):
        assert untrue not in err, err[-3000:]


def test_cli_ddp_prints_one_table(runs):
    # the table goes to stdout, the "model directory:" message to stderr (logging): once each
    assert runs.cli.stdout.count("train_loss_last") == 1, runs.cli.stdout
    assert runs.cli.stderr.count("model directory:") == 1, runs.cli.stderr
    assert "run directory exists" not in runs.cli.stderr


@pytest.mark.slow
def test_ddp_spawn_exports_the_trained_model(runs, tmp_path):
    """ddp_spawn trains in child processes; the model directory used to come from the untouched
    parent (metrics.json: steps 0, loss NaN). Slow: one more 2-process launch (~30 s here)."""
    proc = _launch([sys.executable, str(DRIVER), str(tmp_path / "run"), str(tmp_path / "rec"),
                    "train.devices=2", "train.strategy=ddp_spawn"], watch=[tmp_path])
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "model" / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["train_loss_last"] == metrics["train_loss_last"]
    assert json.loads((tmp_path / "rec" / "result0.json").read_text())["steps"] == 6  # the parent's train() result
    spawned = read_weights(tmp_path / "run" / "model" / "model.safetensors")
    reference = read_weights(runs.root / "cli" / "model" / "model.safetensors")
    for k in reference:
        assert torch.equal(spawned[k], reference[k]), k
