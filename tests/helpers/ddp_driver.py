"""Test driver: `train()` from Python with a recording callback, run as a script so that Lightning's
ddp launcher re-runs it for rank 1 (what a user's own training script goes through).

    python tests/helpers/ddp_driver.py RUN_DIR RECORD_DIR [--resume] [--kill-at-step N] [key=value ...]

Per rank r it appends JSON lines to RECORD_DIR/rank{r}.jsonl: every training micro-batch (global
micro-batch index G, the sample indices, the loss) and every validation result; at the end it saves
the rank's EMA shadow and live weights (rank{r}_end.pt) and notes each model-directory write.
--kill-at-step N: rank 0, the launcher of the other ranks, SIGKILLs itself at the start of step N (a
kill -9 of the launcher after the checkpoint of an earlier step): rank 1 is orphaned and has to stop
by itself (dnadiff/training/watchdog.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

import lightning as L
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import dnadiff.modelio.model_dir as model_dir  # noqa: E402
from dnadiff.config import RunConfig  # noqa: E402
from dnadiff.config_options import load_config  # noqa: E402
from dnadiff.training import train  # noqa: E402

BASE = [
    "train.max_steps=6", "train.batch_size=4", "data.seq_len=64", "train.val_every=2", "train.val_batches=2",
    "train.ckpt_every=2", "train.log_every=1", "train.ema=0.9", "train.warmup_steps=2", "train.threads=1",
    "train.progress=false", "train.accelerator=cpu",
]


class Recorder(L.Callback):
    def __init__(self, out: Path, kill_at: int | None):
        self.out, self.kill_at = out, kill_at

    def _write(self, trainer, row: dict) -> None:
        with open(self.out / f"rank{trainer.global_rank}.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.kill_at is not None and trainer.global_step == self.kill_at and trainer.is_global_zero:
            os.kill(os.getpid(), signal.SIGKILL)
        self._g = pl_module.global_micro_step()
        self._idx = batch["sample_index"].tolist()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._write(trainer, {"kind": "train", "G": self._g, "step": int(trainer.global_step),
                              "samples": self._idx, "loss": pl_module.last_train_loss})

    def on_validation_end(self, trainer, pl_module):
        value = trainer.callback_metrics.get("val/nats_per_token")
        self._write(trainer, {"kind": "val", "step": int(trainer.global_step),
                              "value": None if value is None else float(value)})

    def on_train_end(self, trainer, pl_module):
        torch.save({"ema": {k: v.clone() for k, v in pl_module.ema.shadow.items()},
                    "live": {k: v.detach().clone() for k, v in pl_module.backbone.state_dict().items()}},
                   self.out / f"rank{trainer.global_rank}_end.pt")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("record_dir")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--kill-at-step", type=int, default=None)
    p.add_argument("overrides", nargs="*")
    args = p.parse_intermixed_args()
    out = Path(args.record_dir)
    out.mkdir(parents=True, exist_ok=True)
    real_save = model_dir.save_model_dir

    def counting_save(*a, **k):  # every model-directory write, with the writing process's rank
        with open(out / "model_writes.txt", "a") as fh:
            fh.write(os.environ.get("LOCAL_RANK", "0") + "\n")
        return real_save(*a, **k)

    model_dir.save_model_dir = counting_save
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [*BASE, *args.overrides])
    result = train(cfg, resume=args.resume, run_dir=args.run_dir, callbacks=[Recorder(out, args.kill_at_step)])
    with open(out / f"result{os.environ.get('LOCAL_RANK', '0')}.json", "w") as fh:
        json.dump(result.metrics, fh)


if __name__ == "__main__":
    main()
