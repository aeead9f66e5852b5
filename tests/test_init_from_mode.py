"""A backbone loaded with `model.init_from` trains in train mode: loaders hand
back eval-mode models, and Lightning only switches the LightningModule itself, so dropout
(HyenaDNA's embedding dropout) used to stay off in 41 of 42 modules."""

import lightning as L
import pytest
from test_convert_hyena import HF_CONFIG, official_state, write_dir

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig, load_config
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from dnadiff.training import train

pytestmark = [pytest.mark.training]

FAST = ["data.seq_len=16", "train.batch_size=2", "train.val_every=1", "train.val_batches=1", "train.ckpt_every=2",
        "train.log_every=1", "train.progress=false", "train.max_steps=2", "train.ema=0"]


class Modes(L.pytorch.Callback):
    def __init__(self):
        self.seen = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.seen.append([name for name, m in module.named_modules() if not m.training])


def _fit(tmp_path, init_from, *extra):
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"out_dir={tmp_path}", *FAST,
                                                                 f"model.init_from={init_from}", *extra])
    cb = Modes()
    train(cfg, callbacks=[cb])
    assert len(cb.seen) == 2  # before and after a validation pass
    return cb.seen


def test_init_from_dnadiff_dir_trains_in_train_mode(tmp_path):
    src = build_backbone("hyena", preset="tiny", vocab_size=12, l_max=64)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["model.backbone=hyena"])
    save_model_dir(tmp_path / "m", cfg, src, DNATokenizer())
    for eval_modules in _fit(tmp_path / "run", tmp_path / "m"):
        assert eval_modules == []


def test_init_from_official_dir_trains_in_train_mode(tmp_path):
    d = write_dir(tmp_path / "hf", HF_CONFIG, official_state("hyena.backbone."))
    for eval_modules in _fit(tmp_path / "run", d, "objective.name=ar"):
        assert eval_modules == []

