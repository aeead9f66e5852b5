"""AdamW with the usual no-decay groups, and warmup -> constant / cosine learning-rate schedules.

No weight decay on biases, norm weights, embeddings' positional tables and Mamba's `A_log`/`D`
(mamba_ssm marks them `_no_weight_decay`), as in the reference recipes.

Per-parameter settings: a parameter with an `_optim` dict attribute (keys `lr`, `weight_decay`,
the convention of the HyenaDNA / S4 code, whose HyenaFilter registers its implicit-filter MLP this way)
goes to its own group with those settings on top of the base ones; parameters with equal `_optim`
dicts share a group. The lr schedulers scale every group's own initial lr by the same factor.
"""

from __future__ import annotations

import math

import torch
from torch import nn

NO_DECAY_NAMES = ("A_log", "D", "bias")


def _no_decay(name: str, p: nn.Parameter, norm_params: set[int]) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return p.ndim < 2 or leaf in NO_DECAY_NAMES or id(p) in norm_params or getattr(p, "_no_weight_decay", False)


def param_groups(model: nn.Module, weight_decay: float, lr: float | None = None) -> list[dict]:
    """Groups: decayed matrices (always first); everything 1-D / norms / A_log / D without decay; then
    one group per distinct `_optim` setting (sorted by its items, so the order is the same on every
    run and a resumed optimizer state matches). `lr`, when given, is written into the base groups."""
    decay, no_decay = [], []
    special: dict[tuple, list[nn.Parameter]] = {}
    norm_params = set()
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d)) or "Norm" in type(module).__name__:
            norm_params.update(id(p) for p in module.parameters(recurse=False))
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        hp = {k: v for k, v in (getattr(p, "_optim", None) or {}).items() if v is not None}
        if hp:
            special.setdefault(tuple(sorted(hp.items())), []).append(p)
        elif _no_decay(name, p, norm_params):
            no_decay.append(p)
        else:
            decay.append(p)
    base = {} if lr is None else {"lr": lr}
    groups = [{"params": decay, "weight_decay": weight_decay, **base}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0, **base})
    for key in sorted(special):  # e.g. (("lr", 1e-3), ("weight_decay", 0.0))
        groups.append({"params": special[key], "weight_decay": weight_decay, **base, **dict(key)})
    return groups


def build_optimizer(model: nn.Module, lr: float, betas=(0.9, 0.999), weight_decay: float = 0.0, eps: float = 1e-8):
    return torch.optim.AdamW(param_groups(model, weight_decay, lr), lr=lr, betas=tuple(betas), eps=eps)


def lr_lambda(schedule: str, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0):
    """Multiplier of the base lr at optimiser step n: linear warmup, then constant or cosine decay.

    Not `transformers.get_scheduler`: its warmup is n/W (a first step at lr 0, wasted) where this is
    (n+1)/W, and its cosine has no `min_lr_ratio` floor; the shapes differ, and tests pin these."""
    def fn(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return fn


def build_scheduler(optimizer, schedule: str, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(schedule, warmup_steps, total_steps, min_lr_ratio))
