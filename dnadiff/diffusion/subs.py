"""SUBS parameterisation (MDLM §3.2.3, eq. 7) as a pure function.

1. zero masking prior: the model never predicts the mask token (its logit gets NEG_INF);
2. carry-over unmasking: at unmasked positions p_θ is a point mass on the observed token.

NEG_INF is a large finite negative (-1e6, as the reference code) rather than -inf so that
log-probs stay finite and 0 * NEG_INF = 0 in masked sums.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

NEG_INF = -1e6


def subs_log_probs(logits: Tensor, x_t: Tensor, mask_id: int) -> Tensor:
    """log p_θ(x0 | x_t) under SUBS.

    logits: Float[B, L, V] raw backbone output; x_t: Long[B, L] noisy tokens.
    Returns Float[B, L, V] log-probabilities (float32 or wider): normalised rows, no mass
    on `mask_id`, and one-hot rows (0 at x_t, NEG_INF elsewhere) where x_t != mask_id.
    """
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits.clone()
    logits[..., mask_id] += NEG_INF
    log_probs = logits.log_softmax(dim=-1)  # (B, L, V)
    unmasked = x_t != mask_id  # (B, L)
    carry = torch.full_like(log_probs, NEG_INF)
    carry.scatter_(-1, x_t.unsqueeze(-1), 0.0)
    return torch.where(unmasked.unsqueeze(-1), carry, log_probs)


def subs_masked_nll(logits: Tensor, x0: Tensor, mask_id: int) -> Tensor:
    """-log p_θ(x0 | x_t) under SUBS at positions where x_t is masked: Float[B, L] (float32+).

    The same numbers as `-subs_log_probs(...)` gathered at x0 on masked positions (zero
    masking prior, softmax over the other tokens), without materialising the carry-over tensor:
    one copy of the logits plus a fused cross-entropy, which matters for 50k-token vocabularies.
    Values at unmasked positions are meaningless here (carry-over makes them 0); callers keep
    only masked positions.
    """
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits.clone()
    logits[..., mask_id] = NEG_INF
    nll = F.cross_entropy(logits.flatten(0, -2), x0.flatten(), reduction="none")  # (B*L,)
    return nll.view(x0.shape)
