"""Lightning CheckpointIO that writes `.ckpt` files atomically (temp name + fsync + rename).

Lightning's own writer streams into the final path, so a kill during a save leaves a truncated
file that `--resume` would then choke on. Loading uses torch.load(weights_only=True) where the
checkpoint only holds tensors and plain containers (ours do).
"""

from __future__ import annotations

import io
import os

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from dnadiff.utils import atomic_path


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(buf.getvalue())

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        if not os.path.exists(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)
