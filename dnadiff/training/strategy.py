"""The Lightning strategy of a run: DDP as Lightning ships it, FSDP with an explicit wrap policy.

FSDP shards parameters per *wrapped unit*. Each backbone family wraps its repeated block (the unit
that holds most of the parameters and runs as one piece), declared as `fsdp_blocks` on its class:
caduceus CaduceusBlock (BiMamba's reverse direction shares in_proj/out_proj with the forward one:
both live in the same block, so the tie is inside one unit), mamba MambaBlock, hyena HyenaBlock,
dit DiTBlock.

Everything else (embeddings, the LM head tied to the embedding table, final norm, time and label
embeddings) stays in the root unit, so a tied pair is never split across units (FSDP requires
that; `use_orig_params=True` keeps parameter names and the ties visible to the optimiser groups).

Mixed precision: the selective scan (Mamba/Caduceus mixers) and Hyena's long-filter FFT convolution
run in float32 (their parameters A_log, D, dt bias, filter taps lose too much in bf16): the
backbone's `float32_modules`, which FSDP's `_module_classes_to_ignore` keeps in full precision
(parameters and computation) while the rest of the block computes in bf16. Gradients are reduced
in float32.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dnadiff.backbones.base import BACKBONES
from dnadiff.config import RunConfig
from dnadiff.errors import DnadiffError


def resolve_precision(precision: str) -> str:
    """Lightning precision: "auto" = bf16 autocast on a GPU, fp32 on the CPU; short names expanded."""
    if precision == "auto":
        return "bf16-mixed" if torch.cuda.is_available() else "32-true"
    return {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed"}.get(str(precision), str(precision))


def block_classes(family: str) -> set[type[nn.Module]]:
    """The classes FSDP wraps for a backbone family (registry name): its `fsdp_blocks`."""
    blocks = BACKBONES.get(family).fsdp_blocks if family in BACKBONES else ()
    if not blocks:
        raise DnadiffError(f"train.strategy=fsdp: no wrap policy for backbone {family!r} (use ddp)")
    return set(blocks)


def float32_classes(family: str) -> tuple[type[nn.Module], ...]:
    """Modules kept float32 (parameters and compute) under FSDP mixed precision: the backbone's `float32_modules`."""
    return tuple(BACKBONES.get(family).float32_modules) if family in BACKBONES else ()


def fsdp_mixed_precision(precision: str, family: str):
    """torch MixedPrecision for a Lightning precision string (None: full float32)."""
    from torch.distributed.fsdp import MixedPrecision

    low = {"bf16-mixed": torch.bfloat16, "bf16-true": torch.bfloat16, "16-mixed": torch.float16,
           "16-true": torch.float16}.get(precision)
    if low is None:
        return None
    return MixedPrecision(param_dtype=low, reduce_dtype=torch.float32, buffer_dtype=torch.float32,
                          _module_classes_to_ignore=(nn.modules.batchnorm._BatchNorm, *float32_classes(family)))


def _on_cpu(cfg: RunConfig) -> bool:
    acc = cfg.train.accelerator
    return acc == "cpu" or (acc == "auto" and not torch.cuda.is_available())


def build_strategy(cfg: RunConfig) -> Any:
    """A Lightning strategy (a string Lightning resolves, or a configured Strategy object)."""
    name = cfg.train.strategy
    if name != "fsdp":
        return name
    if _on_cpu(cfg):  # Lightning 2.6: "The strategy `fsdp` requires a GPU accelerator"
        raise DnadiffError("train.strategy: fsdp runs on GPUs only (Lightning has no CPU FSDP); "
                           "use train.strategy=ddp on the CPU")
    if cfg.train.ema > 0:  # the EMA copy is a full, unsharded copy kept outside FSDP's units
        raise DnadiffError("train.ema: the EMA weights are not sharded by FSDP; "
                           "set train.ema=0 with train.strategy=fsdp (or use ddp)")
    from lightning.pytorch.strategies import FSDPStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy


    family = cfg.model.backbone
    return FSDPStrategy(
        auto_wrap_policy=ModuleWrapPolicy(block_classes(family)),
        mixed_precision=fsdp_mixed_precision(resolve_precision(cfg.train.precision), family),
        use_orig_params=True,
        state_dict_type="sharded",  # each rank writes its shard: a checkpoint directory, resumable
    )
