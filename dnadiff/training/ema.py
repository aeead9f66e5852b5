"""Exponential moving average of weights, decay min(decay, (1 + n) / (10 + n)) as in MDLM's code.

The average lives in a `torch.optim.swa_utils.AveragedModel` (a copy of the backbone, no gradients)
held outside the LightningModule's module tree, so DDP/FSDP never wrap, broadcast or all-reduce it.
The copy starts at the initial weights (n = 0 before the first optimiser step), and each update is
    shadow <- d · shadow + (1 − d) · θ,   d = min(decay, (1 + n) / (10 + n)).
The EMA copy is what validation uses and what the model directory exports by default.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel


class EMA:
    def __init__(self, model: nn.Module, decay: float = 0.9999):
        self.decay = float(decay)
        self.averaged = AveragedModel(model, multi_avg_fn=self._average, use_buffers=False).requires_grad_(False)
        self.averaged.update_parameters(model)  # n_averaged 0 -> 1: a copy of the initial weights
        # the parameters averaged: the trainable ones, each once (tied weights under their first name)
        self._names = [n for n, p in model.named_parameters() if p.requires_grad]

    @property
    def num_updates(self) -> int:
        return int(self.averaged.n_averaged) - 1

    def current_decay(self) -> float:
        n = self.num_updates
        return min(self.decay, (1.0 + n) / (10.0 + n))

    @property
    def shadow(self) -> dict[str, Tensor]:
        """name -> averaged tensor (live views of the averaged copy)."""
        params = dict(self.averaged.module.named_parameters())
        return {n: params[n] for n in self._names}

    @torch.no_grad()
    def _average(self, averaged: list[Tensor], current: list[Tensor], num_averaged) -> None:
        # every parameter of the copy moves (a frozen one is never read back: `shadow` skips it)
        d = self.current_decay()
        for s, p in zip(averaged, current):
            s.mul_(d).add_(p.to(s.dtype), alpha=1.0 - d)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        device = next(model.parameters()).device
        if next(self.averaged.parameters()).device != device:  # follow the model to its device once
            self.averaged.to(device)
        self.averaged.update_parameters(model)

    def unshare(self) -> None:
        """A private copy of the average (ddp_spawn hands the module to its children in shared memory)."""
        self.averaged = copy.deepcopy(self.averaged)

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        shadow = self.shadow
        for name, p in model.named_parameters():
            if name in shadow:
                p.copy_(shadow[name].to(p.device, p.dtype))

    @contextmanager
    def swapped(self, model: nn.Module):
        """Temporarily load the EMA weights into `model` (validation, export)."""
        shadow = self.shadow
        backup = {n: p.detach().clone() for n, p in model.named_parameters() if n in shadow}
        self.copy_to(model)
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if name in backup:
                        p.copy_(backup[name])

    def state_dict(self) -> dict:
        return {"decay": self.decay, "num_updates": self.num_updates,
                "shadow": {k: v.detach().clone() for k, v in self.shadow.items()}}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        self.decay = float(state["decay"])
        self.averaged.n_averaged.fill_(int(state["num_updates"]) + 1)
        shadow = self.shadow
        for k, v in state["shadow"].items():
            shadow[k].copy_(v.to(shadow[k].device, shadow[k].dtype))
