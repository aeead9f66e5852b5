"""Exponential moving average of weights, decay min(decay, (1 + n) / (10 + n)) as in MDLM's code.

The EMA copy is what validation uses and what the model directory exports by default.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


class EMA:
    def __init__(self, model: nn.Module, decay: float = 0.9999):
        self.decay = float(decay)
        self.num_updates = 0
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    def current_decay(self) -> float:
        n = self.num_updates
        return min(self.decay, (1.0 + n) / (10.0 + n))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = self.current_decay()
        for name, p in model.named_parameters():
            if name in self.shadow:
                s = self.shadow[name]
                if s.device != p.device:
                    s = self.shadow[name] = s.to(p.device)
                s.mul_(d).add_(p.detach().to(s.dtype), alpha=1.0 - d)
        self.num_updates += 1

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        for name, p in model.named_parameters():
            if name in self.shadow:
                p.copy_(self.shadow[name].to(p.device, p.dtype))

    @contextmanager
    def swapped(self, model: nn.Module):
        """Temporarily load the EMA weights into `model` (validation, export)."""
        backup = {n: p.detach().clone() for n, p in model.named_parameters() if n in self.shadow}
        self.copy_to(model)
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if name in backup:
                        p.copy_(backup[name])

    def state_dict(self) -> dict:
        return {"decay": self.decay, "num_updates": self.num_updates, "shadow": self.shadow}

    def load_state_dict(self, state: dict) -> None:
        self.decay = float(state["decay"])
        self.num_updates = int(state["num_updates"])
        self.shadow = {k: v.clone() for k, v in state["shadow"].items()}
