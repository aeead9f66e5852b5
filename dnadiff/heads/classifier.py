"""Sequence classification on top of any dnadiff backbone (Genomic Benchmarks, tab. 7).

    model = SequenceClassifier(build_backbone("caduceus", preset="tiny-ph"), num_classes=2, conjoin="ph")
    logits = model(input_ids, attention_mask)        # (B, C)

Strand handling (Caduceus §3.2–3.3, Schiff et al. 2024, arXiv 2403.03234):
- `ph`: post-hoc conjoining: the classifier runs on both strands and averages the logits,
  logits(x) = ½ (f(x) + f(RC(x))). Applied at evaluation (and in training with `conjoin_train`).
- `ps`: for an RCPS backbone (hidden width 2d), the two channel halves are the forward strand and
  the channel-flipped RC strand; each is pooled and scored by the same head and the logits are
  averaged, which makes the classifier exactly RC-invariant.
- `none`: one strand.
RC augmentation (`rc_aug`) reverse-complements each training sequence with probability ½.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from dnadiff.denoiser import capabilities_of
from dnadiff.errors import DnadiffError
from dnadiff.heads.pooling import POOLINGS, complement_tensor, pool, reverse_complement_padded

CONJOIN = ("auto", "none", "ph", "ps")


def is_rcps(backbone: nn.Module) -> bool:
    return bool(getattr(getattr(backbone, "config", None), "rcps", False))


def default_conjoin(backbone: nn.Module) -> str:
    """PS for RCPS backbones, PH for Caduceus-PH (the Caduceus recipe), none for the rest."""
    if is_rcps(backbone):
        return "ps"
    if type(backbone).__name__ == "Caduceus":
        return "ph"
    return "none"


class ClassificationHead(nn.Module):
    """dropout -> Linear(d, C) on a pooled vector (keys `dense.weight`, `dense.bias`)."""

    def __init__(self, d: int, num_classes: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(d, num_classes)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.dense(self.dropout(pooled))  # (B, C)


class SequenceClassifier(nn.Module):
    """backbone.features -> pooling over real positions -> ClassificationHead, with strand options."""

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        pooling: str = "mean",
        conjoin: str = "auto",
        rc_aug: bool = False,
        dropout: float = 0.0,
        freeze_backbone: bool = False,
        conjoin_train: bool = False,
    ):
        super().__init__()
        if pooling not in POOLINGS:
            raise DnadiffError(f"model.pooling: must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        if conjoin not in CONJOIN:
            raise DnadiffError(f"model.conjoin: must be one of {', '.join(CONJOIN)}, got {conjoin!r}")
        if num_classes < 2:
            raise DnadiffError(f"a classifier needs at least 2 classes, got {num_classes}")
        conjoin = default_conjoin(backbone) if conjoin == "auto" else conjoin
        if conjoin == "ps" and not is_rcps(backbone):
            raise DnadiffError("model.conjoin: 'ps' needs an RCPS backbone (Caduceus-PS, rcps: true); "
                               "use 'ph' or 'none'")
        self.backbone = backbone
        self.num_classes = num_classes
        self.pooling, self.conjoin, self.rc_aug = pooling, conjoin, rc_aug
        self.conjoin_train = conjoin_train
        self.freeze_backbone = freeze_backbone
        width = backbone.hidden_size // 2 if conjoin == "ps" else backbone.hidden_size
        self.head = ClassificationHead(width, num_classes, dropout)
        size = max(16, int(getattr(backbone, "padded_vocab_size", 0) or 0),
                   int(getattr(backbone, "vocab_size", 0) or 0))
        self.register_buffer("complement", complement_tensor(size), persistent=False)
        if freeze_backbone:
            for p in self.backbone.parameters():
                p.requires_grad_(False)

    def train(self, mode: bool = True) -> "SequenceClassifier":
        super().train(mode)
        if self.freeze_backbone:  # a frozen backbone stays deterministic (no dropout)
            self.backbone.eval()
        return self

    # ------------------------------------------------------------------ pieces
    def features(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Backbone features; with the (right-padded) attention_mask the backbone ignores the pads, so a
        sequence's features do not depend on how much padding its batch carries."""
        t = None
        if capabilities_of(self.backbone).time_conditioned:  # clean input: diffusion time 0
            t = torch.zeros(input_ids.shape[0], device=input_ids.device)
        kw = {} if attention_mask is None else {"attention_mask": attention_mask}
        if self.freeze_backbone:
            with torch.no_grad():
                return self.backbone.features(input_ids, t, **kw)
        return self.backbone.features(input_ids, t, **kw)  # (B, L, hidden_size)

    def strand_logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Logits of one pass of the backbone (PS: averaged over its two channel halves)."""
        hidden = self.features(input_ids, attention_mask)  # (B, L, H)
        if self.conjoin != "ps":
            return self.head(pool(hidden, attention_mask, self.pooling))
        d = hidden.shape[-1] // 2
        fwd = hidden[..., :d]  # (B, L, d) forward strand
        rev = hidden[..., d:].flip(-1)  # (B, L, d) RC strand, in forward position order
        # the RC strand reads the sequence backwards: its first token is the last real position
        rev_mode = {"first": "last", "last": "first"}.get(self.pooling, self.pooling)
        return 0.5 * (self.head(pool(fwd, attention_mask, self.pooling))
                      + self.head(pool(rev, attention_mask, rev_mode)))

    def reverse_complement(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return reverse_complement_padded(input_ids, attention_mask, self.complement)

    def rc_augment(self, input_ids: Tensor, attention_mask: Tensor | None = None, generator=None) -> Tensor:
        """Reverse-complement each row with probability ½ (training augmentation)."""
        flip = torch.rand(input_ids.shape[0], generator=generator, device=input_ids.device) < 0.5  # (B,)
        if not flip.any():
            return input_ids
        return torch.where(flip[:, None], self.reverse_complement(input_ids, attention_mask), input_ids)

    # ------------------------------------------------------------------ forward
    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """(B, L) ids (right-padded), (B, L) mask -> (B, C) logits."""
        if self.training and self.rc_aug:
            input_ids = self.rc_augment(input_ids, attention_mask)
        if self.conjoin == "ph" and (not self.training or self.conjoin_train):
            rc = self.reverse_complement(input_ids, attention_mask)
            return 0.5 * (self.strand_logits(input_ids, attention_mask) + self.strand_logits(rc, attention_mask))
        return self.strand_logits(input_ids, attention_mask)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)
