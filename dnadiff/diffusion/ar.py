"""Autoregressive next-token NLL, for the AR baselines (the backbone is causal).

The denoiser is called once with t = 0 on the context sequence; logits[:, i] predict the token
after input position i. Which positions are scored (`nll` is the exact NLL in nats over them):

  * `bos_id` set (the default for DNA models, [BOS] = 2): the input is [BOS, x0[:, :-1]], so
    logits[:, i] predict x0[:, i] and EVERY real token (attention_mask = 1) is scored. That is
    exactly the set the diffusion objectives score, so AR and MDLM bits/base compare token for token.
  * `bos_id=None` (the MDLM reference's AR: input x0[:, :-1], targets x0[:, 1:]): each row's first
    real token is context and is never scored; every later real token is.

A token is scored whatever its context: a base right after an N (attention_mask 0: an input, never
a target) or after left padding is predicted from that context, as in the reference, whose loss
is masked by the targets' attention mask only. (Scoring a target only when its context was real
too, as before, dropped every base after an N from AR's bits/base while MDLM counted it.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, LossOutput, Objective, gather_token, real_mask, reduce_loss
from dnadiff.errors import DnadiffError


def ar_inputs(x: Tensor, bos_id: int) -> Tensor:
    """Long[B, L]: the AR model's input [BOS, x[:, :-1]] for tokens x Long[B, L], so input
    position i predicts x[:, i] (training and decoding feed the same layout)."""
    return torch.cat([torch.full_like(x[:, :1], bos_id), x[:, :-1]], dim=1)


@OBJECTIVES.register("ar")
class ARObjective(Objective):
    """`build_objective("ar", bos_id=2)`; schedule / mask_id / vocab_size are accepted and unused."""

    name = "ar"
    needs_time = False
    deterministic = True
    autoregressive = True
    default_sampler = "autoregressive"

    @classmethod
    def config_kwargs(cls, cfg, tokenizer) -> dict:
        return {"bos_id": tokenizer.ar_context_id}  # the tokenizer's: [BOS] for DNA, none for text

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None, bos_id: int | None = None):
        if T is not None:
            raise DnadiffError("objective 'ar' has no diffusion time: leave T unset")
        if bos_id is not None and (int(bos_id) != bos_id or bos_id < 0):
            raise DnadiffError(f"objective 'ar': bos_id must be a token id or null, got {bos_id!r}")
        self.schedule, self.mask_id, self.vocab_size, self.T = schedule, mask_id, vocab_size, None
        self.bos_id = None if bos_id is None else int(bos_id)

    def loss(self, denoiser, x0, attention_mask=None, t=None, generator=None) -> LossOutput:
        real = real_mask(x0, attention_mask)
        t0 = torch.zeros(x0.shape[0], device=x0.device)
        if self.bos_id is not None:
            logits = denoiser(ar_inputs(x0, self.bos_id), t0)  # (B, L, V): position i predicts x0[:, i]
            targets, scored = x0, real
        else:
            logits = denoiser(x0, t0)[:, :-1]  # (B, L-1, V): predictions for positions 1..L-1
            targets = x0[:, 1:]
            seen_real = real.long().cumsum(dim=1)[:, :-1] > 0  # (B, L-1): a real token before the target
            scored = real[:, 1:] & seen_real
        logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        nll_tok = -gather_token(logits.log_softmax(dim=-1), targets)  # (B, L or L-1)
        return reduce_loss(nll_tok, scored, scored)

    def __repr__(self) -> str:
        return f"ARObjective(bos_id={self.bos_id})"
