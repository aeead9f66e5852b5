"""MDLM objective (arXiv 2406.07524): SUBS-parameterised masked diffusion.

Continuous time (eq. 10-11), per sequence:
    NELBO = E_{t ~ U[0,1]} E_{x_t ~ q(.|x0)} [ w(t) Σ_{l : x_t^l = mask} -log p_θ(x0^l | x_t) ],
    w(t) = -α'_t / (1 - α_t)                        (1/t for log-linear)
a weighted cross-entropy on the masked tokens only: SUBS carry-over makes unmasked terms 0.

Discrete time T (eq. 8-9; tab. 11 evaluates a continuous model at T = 10…1000): with
t(i) = i/T, s(i) = (i-1)/T the D3PM KL of step i under SUBS (zero-masking + carry-over) is
    KL_i = (α_s - α_t)/(1 - α_t) · -log p_θ(x0^l | x_t)   for masked l, 0 otherwise,
(eq. 9: the posterior q(z_s | z_t = m, x) puts (α_s - α_t)/(1 - α_t) on x, the rest on m; with
x_θ(m) = 0 only the x term of the KL survives), the reconstruction term is 0 (α_0 = 1 and
carry-over) and Σ_i KL_i is estimated by T · KL_i with i ~ U{1..T}. For log-linear with ε = 0,
T (α_s - α_t)/(1 - α_t) = 1/t exactly (docs/references.md). The discrete bound upper-bounds the
continuous one and decreases toward it as T grows (§3.2.4).
"""

from __future__ import annotations

from torch import Tensor

from dnadiff.diffusion.base import OBJECTIVES, DiffusionObjective
from dnadiff.diffusion.subs import subs_masked_nll


@OBJECTIVES.register("mdlm")
class MDLMObjective(DiffusionObjective):
    """`build_objective("mdlm", schedule=s, mask_id=3, vocab_size=12, T=None)`."""

    name = "mdlm"
    discrete_bound = True

    def token_loss(self, denoiser, x0: Tensor, x_t: Tensor, t: Tensor, real: Tensor) -> Tensor:
        # SUBS: zero-masking softmax at masked positions; carry-over zeros the rest (not read)
        nll_tok = subs_masked_nll(denoiser(x_t, t), x0, self.mask_id)  # (B, L)
        return self.weight(t).to(nll_tok.dtype)[:, None] * nll_tok
