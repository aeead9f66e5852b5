"""Class-label conditioning for classifier-free guidance: a label embedding in front of any backbone.

The embedding has num_classes + 1 rows; the last one is the "no label" (null) class used for
label dropout in training and for the unconditional half of guidance at sampling time. The
embedded label is passed to the backbone as its `cond` vector (added to the token embeddings),
so the backbone itself knows nothing of labels.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError


class ClassConditional(nn.Module):
    def __init__(self, backbone: nn.Module, num_classes: int):
        super().__init__()
        cond_dim = capabilities_of(backbone).cond_dim
        if cond_dim <= 0:
            raise DnadiffError("a class-conditional model needs a backbone built with cond_dim > 0 "
                               "(model.overrides.cond_dim)")
        self.backbone = backbone
        self.num_classes = int(num_classes)
        self.label_embed = nn.Embedding(self.num_classes + 1, cond_dim)
        nn.init.normal_(self.label_embed.weight, std=0.02)

    @property
    def null_label(self) -> int:
        return self.num_classes

    # pass-through attributes of the backbone contract
    config = property(lambda self: self.backbone.config)
    vocab_size = property(lambda self: self.backbone.vocab_size)
    hidden_size = property(lambda self: self.backbone.hidden_size)
    is_causal = property(lambda self: self.backbone.is_causal)
    time_conditioned = property(lambda self: self.backbone.time_conditioned)

    def _labels(self, labels: Tensor | int | None, batch: int, device) -> Tensor:
        if labels is None:
            labels = self.null_label
        if isinstance(labels, int):
            return torch.full((batch,), labels, dtype=torch.long, device=device)
        labels = labels.to(device)
        return labels.expand(batch) if labels.dim() == 0 else labels

    def forward(self, input_ids: Tensor, t: Tensor | None = None, labels: Tensor | int | None = None,
                attention_mask: Tensor | None = None, **arch) -> Tensor:
        """arch: the backbone's architecture options (DiT: attn_mask, position_ids, kv_cache), passed through."""
        cond = self.label_embed(self._labels(labels, input_ids.shape[0], input_ids.device))  # (B, C)
        return self.backbone(input_ids, t, cond=cond, attention_mask=attention_mask, **arch)

    def features(self, input_ids: Tensor, t: Tensor | None = None, labels: Tensor | int | None = None,
                 attention_mask: Tensor | None = None, **arch) -> Tensor:
        cond = self.label_embed(self._labels(labels, input_ids.shape[0], input_ids.device))
        return self.backbone.features(input_ids, t, cond=cond, attention_mask=attention_mask, **arch)

    # incremental decoding (backbones/base.py), for a backbone whose step takes the cond vector (mamba)
    def allocate_cache(self, batch_size: int, max_length: int):
        """The backbone's decoding cache, or None when its `step` cannot take a label (then samplers re-run
        the prefix)."""
        if not capabilities_of(self.backbone).step_takes_cond:
            return None
        return self.backbone.allocate_cache(batch_size, max_length)

    def step(self, input_ids: Tensor, cache, labels: Tensor | int | None = None) -> Tensor:
        cond = self.label_embed(self._labels(labels, input_ids.shape[0], input_ids.device))
        return self.backbone.step(input_ids, cache, cond=cond)
