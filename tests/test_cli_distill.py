"""`dnadiff distill`: a tiny trained model distilled for a few updates writes a student model directory that
loads, samples with --steps K and names its teacher; resuming gives what an uninterrupted run gives; bad input
is one line, exit 2."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from dnadiff.cli import main
from dnadiff.utils import portable_paths
from helpers.cli_errors import error_of

FAST = ["--batch-size", "2", "--length", "16", "--lr", "1e-3", "--threads", "1", "-q"]
TRAIN = ["data.seq_len=16", "sample.length=16", "sample.steps=8", "train.batch_size=4", "train.val_batches=1",
         "train.warmup_steps=0", "train.threads=1", "train.progress=false", "train.max_steps=5", "train.val_every=5",
         "train.ckpt_every=5"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> str:
    """experiments/tiny_dna_mdlm trained for 5 steps (sample.steps 8: the teacher's default steps)."""
    root = tmp_path_factory.mktemp("teacher")
    assert main(["train", "experiments/tiny_dna_mdlm", "name=t", f"out_dir={root}", *TRAIN]) == 0
    return str(root / "t" / "model")


@pytest.mark.training
def test_distill_writes_a_student_that_loads_samples_and_names_its_teacher(trained, tmp_path, capsys):
    import dnadiff
    from dnadiff.weights import read_weights

    out = tmp_path / "student"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["distill", trained, "--steps", "2", "--round-updates", "2", "--out", str(out), *FAST]) == 0
    assert not [w for w in caught if "eval mode" in str(w.message)]  # the student's eval mode is on purpose
    student = dnadiff.load(out)
    d = student.config.distill
    assert d["teacher"] == str(Path(trained).resolve()) and d["method"] == "sdtt"
    assert (d["teacher_steps"], d["steps"], d["rounds"], d["round_updates"]) == (8, 2, 2, 2)
    assert student.config.sample.steps == 2
    raw = json.loads((out / "config.json").read_text())
    # config.json names no path of this machine (issue 49): `$TMPDIR/...`, made absolute again by loading
    assert raw["distill"]["teacher"] == portable_paths(d["teacher"]) != d["teacher"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["updates"] == 4 and metrics["rounds"] == 2
    before, after = read_weights(Path(trained) / "model.safetensors"), read_weights(out / "model.safetensors")
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    assert "updates" in capsys.readouterr().out
    fa = tmp_path / "s.fa"
    assert main(["sample", str(out), "--num", "3", "--length", "16", "--threads", "1", "--out", str(fa), "-q"]) == 0
    seqs = [line for line in fa.read_text().splitlines() if not line.startswith(">")]
    assert len(seqs) == 3 and all(len(s) == 16 and set(s) <= set("ACGT") for s in seqs)
    _, smp = student.generate(num=2, length=16, generator=torch.Generator().manual_seed(0), return_sampler=True)
    assert smp.steps == 2 and smp.last_nfe <= 3  # K steps (+ the noise-removal pass)


@pytest.mark.training
def test_resume_matches_an_uninterrupted_run(trained, tmp_path, capsys):
    args = ["--steps", "2", "--round-updates", "2", *FAST]
    assert main(["distill", trained, "--out", str(tmp_path / "whole"), *args]) == 0
    # other settings than the run's are refused
    part = tmp_path / "part"
    assert main(["distill", trained, "--out", str(part), "--steps", "4", "--round-updates", "2", *FAST]) == 0
    err = error_of(capsys, ["distill", trained, "--out", str(part), *args, "--resume"])
    assert "other settings" in err and "steps" in err
    # a real interruption, after update 3 of 4
    from dnadiff.commands.distill import teacher_config
    from dnadiff.training.distill_loop import complete_settings

    settings = complete_settings(trained, {"steps": 2, "round_updates": 2, "batch_size": 2, "length": 16,
                                           "lr": 1e-3}, teacher_config(trained))
    stopped = tmp_path / "stopped"
    _interrupted(trained, settings, stopped, after=3)  # in round 2: its teacher comes from the checkpoint
    assert main(["distill", trained, "--out", str(stopped), *args, "--resume"]) == 0
    whole = (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert whole == (stopped / "model.safetensors").read_bytes()


class Stop(Exception):
    pass


def _interrupted(model_dir, settings, out, after: int) -> None:
    """Run the distillation and stop it (an exception) once `after` updates are checkpointed."""
    from dnadiff.training import distill_loop

    real = distill_loop.DistillModule.training_step

    def stop(self, batch, batch_idx):
        if int(self.global_step) >= after:
            raise Stop
        return real(self, batch, batch_idx)

    distill_loop.DistillModule.training_step = stop
    try:
        with pytest.raises(Stop):
            distill_loop.distill(model_dir, settings, str(out), progress=False, threads=1)
    finally:
        distill_loop.DistillModule.training_step = real
    assert (Path(out) / "checkpoints" / "last.ckpt").is_file()


def test_bad_input_is_one_line(model, tmp_path, capsys):
    base = ["distill", model, "--out", str(tmp_path / "o"), "--threads", "1"]
    assert "power of 2" in error_of(capsys, base + ["--steps", "3"])  # tiny config: sample.steps 128
    assert "power of 2" in error_of(capsys, base + ["--steps", "128"])
    assert "power of 2" in error_of(capsys, base + ["--steps", "8", "--teacher-steps", "12"])
    assert "--loss" in error_of(capsys, base + ["--steps", "8", "--loss", "kl"])
    assert "--target" in error_of(capsys, base + ["--steps", "8", "--target", "x"])
    assert "--round-updates" in error_of(capsys, base + ["--steps", "8", "--round-updates", "0"])
    assert "teacher itself" in error_of(capsys, ["distill", model, "--out", model, "--steps", "8"])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert "exists" in error_of(capsys, ["distill", model, "--out", str(tmp_path / "full"), "--steps", "8"])
    assert "not a dnadiff model directory" in error_of(capsys, ["distill", str(tmp_path), "--out",
                                                                str(tmp_path / "o2"), "--steps", "8"])
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("objective,words", [("ar", "autoregressive"), ("mlm", "not a generator")])
def test_refuses_models_it_cannot_distill(tmp_path, capsys, objective, words):
    from helpers.cli_model import tiny_model_dir

    extra = ["model.preset=tiny"] if objective == "ar" else []
    model = tiny_model_dir(tmp_path, overrides=[f"objective={objective}", *extra])
    err = error_of(capsys, ["distill", model, "--out", str(tmp_path / "o"), "--steps", "8", "--threads", "1"])
    assert words in err


@pytest.fixture(scope="module")
def trained_udlm(tmp_path_factory) -> str:
    """experiments/tiny_dna_mdlm with objective=udlm, trained for 5 steps (sample.steps 8)."""
    root = tmp_path_factory.mktemp("teacher_udlm")
    assert main(["train", "experiments/tiny_dna_mdlm", "objective=udlm", "name=u", f"out_dir={root}", *TRAIN]) == 0
    return str(root / "u" / "model")


@pytest.mark.training
def test_udlm_is_distilled_by_dcd_resumably(trained_udlm, tmp_path, capsys):
    import dnadiff
    from dnadiff.commands.distill import teacher_config
    from dnadiff.training.distill_loop import complete_settings

    args = ["--steps", "2", "--round-updates", "2", "--pool-size", "6", *FAST]
    whole = tmp_path / "whole"
    assert main(["distill", trained_udlm, "--out", str(whole), *args]) == 0
    student = dnadiff.load(whole)
    d = student.config.distill
    assert (d["method"], d["teacher"], d["rounds"], d["pool_size"]) == ("dcd", str(Path(trained_udlm).resolve()), 2, 6)
    assert (student.config.sample.sampler, student.config.sample.steps) == ("udlm", 2)
    x, smp = student.generate(num=3, length=16, generator=torch.Generator().manual_seed(0), return_sampler=True)
    assert smp.name == "udlm" and smp.last_nfe == 2 and bool(((x >= 7) & (x <= 10)).all())
    settings = complete_settings(trained_udlm, {"steps": 2, "round_updates": 2, "batch_size": 2, "length": 16,
                                                "lr": 1e-3, "pool_size": 6}, teacher_config(trained_udlm))
    stopped = tmp_path / "stopped"
    _interrupted(trained_udlm, settings, stopped, after=3)  # round 2: teacher from the checkpoint, pool redrawn
    assert main(["distill", trained_udlm, "--out", str(stopped), *args, "--resume"]) == 0
    assert (whole / "model.safetensors").read_bytes() == (stopped / "model.safetensors").read_bytes()
    base = ["distill", trained_udlm, "--out", str(tmp_path / "o"), "--steps", "2", "--threads", "1"]
    assert "DCD" in error_of(capsys, base + ["--target", "marginal"])
    assert "DCD" in error_of(capsys, base + ["--loss", "tvd"])
