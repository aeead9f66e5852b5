"""SEDD absorbing score entropy (Lou et al. 2024, arXiv 2310.16834), as in the MDLM reference code.

Noise level σ(t) = -log α(t), dσ/dt = -α'/α. The backbone's raw logits ℓ give the concrete
score of a masked position, s_v ≈ p_t(x_t with v at l) / p_t(x_t), through the reference's
parameterisation (`_sedd_parameterization`):
    log s_v = ℓ_v - log(e^σ - 1) - log(V - 1),   v ≠ mask        (V = logits.shape[-1])
The true score of the absorbing process is s_v = p(x0^l = v | x_t) · α/(1 - α), with
α/(1 - α) = 1/(e^σ - 1); so logits ℓ_v = log p(v | x_t) + log(V - 1) make s exact.

Score entropy of a masked position with true token x0 (SEDD eq. 5 / the reference `_score_entropy`),
q = 1/(e^σ - 1):
    E = Σ_{v≠mask} s_v - q log s_{x0} + q (log q - 1),     loss = dσ/dt · E.
Substituting s, the log q terms cancel and E = q · [Σ_v r_v - log r_{x0} - 1] with
r_v = e^{ℓ_v}/(V - 1); and dσ/dt · q = -α'/(1 - α) = w(t) of MDLM eq. 10. So
    loss = w(t) · [Σ_{v≠mask} r_v - log r_{x0} - 1],
which is what we compute (no e^σ - 1 that overflows near t = 1). Since Σr - 1 - log Σr >= 0,
this is >= the MDLM term with the normalised softmax of ℓ, with equality when Σ r = 1: for the exact
score the SEDD bound equals the exact NELBO. Continuous time only; SEDD runs condition on time.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective, gather_token
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError


def sedd_log_score(logits: Tensor, x_t: Tensor, alpha: Tensor, mask_id: int, mask_prob: Tensor | None = None) -> Tensor:
    """log s of the reference: ℓ - log((1-α)/α) - log(V-1), with the x_t entry set to 0 (log 1).

    logits: Float[B, L, V]; x_t: Long[B, L]; alpha: Float[B] (α(t) = e^{-σ}); mask_prob:
    optional 1 - α from `schedule.mask_prob(t)` (exact at small t, where 1 - α rounds).
    The mask column of a masked position holds 0 (the x_t entry) and is never used as a score.
    """
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    one_minus = 1.0 - alpha if mask_prob is None else mask_prob
    log_esigm1 = torch.log(one_minus) - torch.log(alpha)  # log(e^σ - 1)
    log_score = logits - log_esigm1.to(logits.dtype)[:, None, None] - math.log(logits.shape[-1] - 1)
    return log_score.scatter(-1, x_t.unsqueeze(-1), 0.0)  # (B, L, V)


@OBJECTIVES.register("sedd")
class SEDDObjective(DiffusionObjective):
    """`build_objective("sedd", schedule=s, mask_id=3, vocab_size=12)` (continuous time only)."""

    name = "sedd"

    def __init__(self, schedule=None, mask_id=None, vocab_size=None, T=None, t_min=1e-3, stratified=True,
                 pad_policy: str = "reference"):
        if T is not None:
            raise DnadiffError("objective 'sedd' is continuous-time only: leave T unset")
        super().__init__(schedule, mask_id, vocab_size, None, t_min, stratified, pad_policy)

    def token_loss(self, denoiser, x0: Tensor, x_t: Tensor, t: Tensor, real: Tensor) -> Tensor:
        logits = denoiser(x_t, t)
        logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        log_r = logits - math.log(logits.shape[-1] - 1)  # (B, L, V): log r_v
        no_mask = log_r.clone()
        no_mask[..., self.mask_id] = NEG_INF
        sum_r = no_mask.logsumexp(dim=-1).exp()  # (B, L): Σ_{v≠mask} r_v
        entropy_over_q = sum_r - gather_token(log_r, x0) - 1.0  # (B, L)
        return self.weight(t).to(entropy_over_q.dtype)[:, None] * entropy_over_q
