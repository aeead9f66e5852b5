"""`ordered`: a masked diffusion model decoded one token per call in a fixed order (an any-order model used as
an autoregressive one: Uria et al. 2014; Hoogeboom et al. 2022, ARDM; Ou et al. 2024, arXiv 2406.03736).

With no time input, the MDLM's NELBO (MDLM eq. 11) is the average over uniformly random orders of the exact
negative log-likelihood of decoding in that order, −Σ_k log p_θ(x_{σ(k)} | x_{σ(<k)}); the first-hitting sampler
draws from that random-order mixture. For any ONE order σ the same conditionals define a normalised
distribution p_σ, and this sampler draws from it exactly: at each call it unmasks the first still-masked
position of the order and draws its token from p_θ(x0 | x_t). `order`:
  left_to_right   σ = 0, 1, ..., L − 1   (the order of an AR model; an MDLM adapted from an AR keeps it)
  right_to_left   σ = L − 1, ..., 0
p_σ's exact NLL is what `dnadiff.eval.ordered_nll` computes, so a table can state the likelihood of what this
sampler draws (results/mdlm_orders.md: an AR-adapted Caduceus MDLM is much better left to right than in a
random order). Inside `semi_ar` (inner="ordered"), each window's new tokens follow the order.

Time: as first_hitting (the law of the unmasking times does not depend on which position unmasks), so a
time-conditioned denoiser sees the time of the state it is shown. NFE = the free tokens; no step count.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import SAMPLERS, StepRandom
from dnadiff.samplers.first_hitting import FirstHittingSampler

ORDERS = ("left_to_right", "right_to_left")


@SAMPLERS.register("ordered")
class OrderedSampler(FirstHittingSampler):
    """`build_sampler("ordered", order="left_to_right")`: exact for the model's order-σ distribution."""

    name = "ordered"

    def __init__(self, steps: int = 1, *, order: str = "left_to_right", **options):
        super().__init__(steps, **options)
        if order not in ORDERS:
            raise DnadiffError(f"sampler 'ordered': order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.order = order

    def next_position(self, masked: Tensor, rng: StepRandom) -> Tensor:
        """Long[B]: the leftmost (or rightmost) masked position; a row with none gets 0 (left unchanged)."""
        L = masked.shape[1]
        idx = torch.arange(L, device=masked.device).expand_as(masked)
        if self.order == "left_to_right":
            return torch.where(masked, idx, torch.full_like(idx, L)).min(dim=1).values.clamp_max(L - 1)
        return torch.where(masked, idx, torch.full_like(idx, -1)).max(dim=1).values.clamp_min(0)
