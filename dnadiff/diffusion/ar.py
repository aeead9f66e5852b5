"""Autoregressive next-token NLL, for the AR baselines (the backbone is causal).

The denoiser is called once on the clean sequence with t = 0: logits[:, i] predicts x0[:, i+1].
First token: it is the context and is never scored; so a sequence of n real tokens contributes
n - 1 scored tokens (num_tokens = n - 1). To score every content token, put a BOS in front
(e.g. DNA [BOS] = 2); its own probability is then (correctly) never counted.
Target i+1 is scored only when both positions i and i+1 are real (right or left padding both work).
`nll` is the exact NLL in nats of the scored tokens (no bound).
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, LossOutput, Objective, gather_token, real_mask, reduce_loss
from dnadiff.errors import DnadiffError


@OBJECTIVES.register("ar")
class ARObjective(Objective):
    """`build_objective("ar")`; schedule / mask_id / vocab_size are accepted and unused."""

    name = "ar"
    needs_time = False
    deterministic = True

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None):
        if T is not None:
            raise DnadiffError("objective 'ar' has no diffusion time: leave T unset")
        self.schedule, self.mask_id, self.vocab_size, self.T = schedule, mask_id, vocab_size, None

    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput:
        real = real_mask(x0, attention_mask)
        t0 = torch.zeros(x0.shape[0], device=x0.device)
        logits = denoiser(x0, t0)  # (B, L, V)
        logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        log_probs = logits[:, :-1].log_softmax(dim=-1)  # (B, L-1, V): predictions for positions 1..L-1
        nll_tok = -gather_token(log_probs, x0[:, 1:])  # (B, L-1)
        scored = real[:, 1:] & real[:, :-1]  # (B, L-1)
        return reduce_loss(nll_tok, scored, scored)

    def __repr__(self) -> str:
        return "ARObjective()"
