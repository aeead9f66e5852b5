"""-v and -q reach the training commands: Lightning's loggers and progress bars (review findings)."""

from __future__ import annotations

import logging

import pytest
import torch

from dnadiff import logs
from dnadiff.config import RunConfig, load_config
from helpers.fake_trainer import Stopped, record_trainer_kwargs

LIGHTNING = ("lightning", "lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero",
             "lightning.pytorch.accelerators.cuda", "pytorch_lightning", "lightning_fabric")


@pytest.fixture
def restore_logging(monkeypatch):
    levels = {n: logging.getLogger(n).level for n in (*LIGHTNING, "dnadiff")}
    handlers = list(logs.log.handlers)
    monkeypatch.setattr(logs, "_PROGRESS", logs._PROGRESS)
    yield
    for n, level in levels.items():
        logging.getLogger(n).setLevel(level)
    logs.log.handlers[:] = handlers


def test_train_keeps_lightning_info_under_verbose(tmp_path, monkeypatch, restore_logging):
    """`dnadiff -v train`: setup_logging(1) lets Lightning's INFO through, and train() must not undo it."""
    from dnadiff.training import run

    def stop(*a, **k):  # train() quiets the libraries, then prepares the run directory: stop there
        raise Stopped

    monkeypatch.setattr(run, "_prepare_run_dir", stop)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["train.threads=1"])
    logs.setup_logging(1)
    with pytest.raises(Stopped):
        run.train(cfg, run_dir=tmp_path / "run")
    assert logging.getLogger("lightning.pytorch").level == logging.INFO
    logs.setup_logging(0)  # the default: Lightning's banners stay quiet
    with pytest.raises(Stopped):
        run.train(cfg, run_dir=tmp_path / "run")
    assert logging.getLogger("lightning.pytorch").level == logging.WARNING


def test_finetune_has_no_progress_bar_under_quiet(monkeypatch, restore_logging):
    """`dnadiff -q finetune`: no progress bar even though train.progress is true."""
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.training.classifier_loop import fit_classifier

    seen = record_trainer_kwargs(monkeypatch)
    cfg = load_finetune_config("experiments/tiny_finetune", ["train.progress=true"])
    data = [{"input_ids": torch.tensor([7, 8]), "attention_mask": torch.tensor([1, 1]), "labels": 0}] * 4
    for verbosity, bar in ((0, True), (-1, False)):
        logs.setup_logging(verbosity)
        with pytest.raises(Stopped):
            fit_classifier(cfg, lambda: torch.nn.Linear(2, 2), data, data, data, list, 1e-3, 0, "r")
        assert seen["enable_progress_bar"] is bar
