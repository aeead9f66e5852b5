"""Classifier guidance for masked diffusion, exact over the vocabulary and its first-order variant.

Guided reverse process (Nisonoff et al. 2024, arXiv 2406.01572, eq. 8; Schiff et al. 2024,
arXiv 2412.10193, §3.2 "D-CBG"): p^γ(x_s | x_t, y) ∝ p_θ(x_s | x_t) p_φ(y | x_s)^γ. With the
per-position factorisation of the reverse step, a masked position l that unmasks to v moves to
the state x_t^{l←v}, so the guided denoiser is

    p^γ(x0^l = v | x_t) ∝ p_θ(x0^l = v | x_t) · exp(γ [log p_φ(y | x_t^{l←v}) - log p_φ(y | x_t)])

(the bracket is constant in v, so it drops out after normalisation). For an exact noise-aware
classifier p(y | x_t) = E_{p(x0 | x_t)} p(y | x0) and γ = 1, Σ_v p_θ(v | x_t) p(y | x_t^{l←v}) =
p(y | x_t): the probability of unmasking l is unchanged, and a sampler that unmasks one position
per step (first_hitting, or a fine grid) samples p(x0 | y) exactly. For DNA the exact version
costs |masked positions| × 4 classifier rows per denoiser call (V = 4 makes it affordable).

The gradient variant (Nisonoff et al. 2024, §4.1, Taylor-approximated guidance) replaces the
bracket by its first-order expansion around the one-hot x_t:
    log p_φ(y | x_t^{l←v}) - log p_φ(y | x_t) ≈ ∂f/∂onehot[l, v] - ∂f/∂onehot[l, mask],
f = reward.soft(onehot(x_t)): one differentiable evaluation per denoiser call.

Both are guidance hooks `(state, logits) -> logits` of the sampler loop (samplers/base.py), so
they work with any masked-diffusion sampler. `reward` is the classifier's log p(y | x) (any
reward: then the tilt is exp(γ r)); γ = `scale`.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from dnadiff.diffusion.subs import NEG_INF, subs_log_probs
from dnadiff.errors import DnadiffError
from dnadiff.guidance.common import METHODS, GuidedMethod
from dnadiff.guidance.rewards import reward_capabilities
from dnadiff.guidance.uniform_guidance import exact_uniform_tilt, gradient_uniform_tilt


def tilt_masked(lp: Tensor, shift: Tensor, masked: Tensor) -> Tensor:
    """Guided log-probs Float64[B, L, V]: at masked positions (Bool[B, L]) log p_θ + shift,
    renormalised (shift NEG_INF: a token the position may not take); elsewhere lp unchanged."""
    m = masked.unsqueeze(-1)
    guided = torch.where(m, (lp + shift).clamp_min(NEG_INF), lp)
    return torch.where(m, guided.log_softmax(-1), guided)


def exact_guidance_logits(logits: Tensor, x: Tensor, mask_id: int, reward, scale: float, token_ids: list[int],
                          chunk: int = 4096) -> tuple[Tensor, int]:
    """(guided log-probs Float64[B, L, V], reward rows used). Masked positions: log p_θ(v) +
    γ r(x^{l←v}) over `token_ids` (others -inf); unmasked positions: SUBS carry-over."""
    lp = subs_log_probs(logits, x, mask_id).double()  # (B, L, V)
    masked = x == mask_id
    b, l = masked.nonzero(as_tuple=True)  # (P,) each
    if b.numel() == 0:
        return lp, 0
    ids = torch.as_tensor(token_ids, device=x.device)  # (U,)
    U = ids.numel()
    cand = x[b].repeat_interleave(U, dim=0)  # (P·U, L)
    rows = torch.arange(cand.shape[0], device=x.device)
    cand[rows, l.repeat_interleave(U)] = ids.repeat(b.numel())
    scores = torch.cat([torch.as_tensor(reward(cand[i : i + chunk]), dtype=torch.float64, device=x.device).reshape(-1)
                        for i in range(0, cand.shape[0], chunk)]).view(-1, U)  # (P, U)
    shift = torch.full_like(lp, NEG_INF)
    shift[b[:, None], l[:, None], ids[None, :]] = scale * scores
    return tilt_masked(lp, shift, masked), int(cand.shape[0])


def gradient_guidance_logits(logits: Tensor, x: Tensor, mask_id: int, reward, scale: float,
                             token_ids: list[int]) -> Tensor:
    """Guided log-probs Float64[B, L, V] with the first-order shift ∂f/∂onehot[l, v] - ∂f/∂onehot[l, mask]."""
    if not reward_capabilities(reward).soft:
        raise DnadiffError("cg_grad needs a differentiable reward (one with a `soft(onehot)` method)")
    lp = subs_log_probs(logits, x, mask_id).double()  # (B, L, V)
    V = lp.shape[-1]
    with torch.enable_grad():
        onehot = torch.nn.functional.one_hot(x, V).double().requires_grad_(True)  # (B, L, V)
        (grad,) = torch.autograd.grad(reward.soft(onehot).sum(), onehot)  # rows independent: one pass for the batch
    shift_all = grad - grad[..., mask_id : mask_id + 1]  # (B, L, V)
    ids = torch.as_tensor(token_ids, device=x.device)
    shift = torch.full_like(lp, NEG_INF)
    shift[..., ids] = scale * shift_all[..., ids]
    return tilt_masked(lp, shift, x == mask_id)


@METHODS.register("cg")
class ClassifierGuidance(GuidedMethod):
    """`cg`: `ClassifierGuidance(sampler, reward, scale=1.0, token_ids=None)`, exact over the vocabulary.

    token_ids: the tokens a masked position may take (DNA: A, C, G, T); None: every id but the mask."""

    name = "cg"
    gradient = False  # the first-order variant: FirstOrderClassifierGuidance (cg_grad)
    strength = ("scale", True)  # tilt exp(scale·r): scale = 1/unit
    needs_token_ids = True
    states_cost = True  # |masked positions| x tokens reward rows per step

    def __init__(self, sampler, reward, scale: float = 1.0, token_ids: Optional[list[int]] = None):
        super().__init__(sampler, reward)
        if not scale >= 0:
            raise DnadiffError(f"classifier guidance: scale must be >= 0, got {scale}")
        self.scale = float(scale)
        self.token_ids = None if token_ids is None else [int(i) for i in token_ids]

    def hook(self, state, logits: Tensor) -> Tensor:
        ids = (self.token_ids if self.token_ids is not None
               else [v for v in range(logits.shape[-1]) if v != state.mask_id])
        if self.gradient:
            self._reward_rows += int(state.x.shape[0])  # one differentiable evaluation per sequence
            return gradient_guidance_logits(logits, state.x, state.mask_id, self.reward, self.scale, ids)
        guided, used = exact_guidance_logits(logits, state.x, state.mask_id, self.reward, self.scale, ids)
        self._reward_rows += used
        return guided

    def posterior_hook(self, state, log_post: Tensor) -> Tensor:
        """D-CBG for a uniform-noise sampler (`udlm`): the posterior over the data tokens reweighted by the
        reward of the single-token changes (guidance/uniform_guidance.py); `token_ids` do not apply there."""
        ids, free = self.sampler.data_ids, ~state.fixed
        if self.gradient:
            self._reward_rows += int(state.x.shape[0])
            return gradient_uniform_tilt(log_post, state.x, free, ids, self.reward, self.scale,
                                         max(int(state.x.max()) + 1, int(ids.max()) + 1))
        guided, used = exact_uniform_tilt(log_post, state.x, free, ids, self.reward, self.scale, state.t)
        self._reward_rows += used
        return guided

    def _generate(self, denoiser, schedule, mask_id: int, x: Tensor, stream):
        smp = self.sampler
        uniform = smp.noise == "uniform"  # guided at the posterior (D-CBG, §3.2); Sampler.noise, declared
        add, remove, hook = ((smp.add_posterior_guidance, smp.remove_posterior_guidance, self.posterior_hook)
                             if uniform else (smp.add_guidance, smp.remove_guidance, self.hook))
        add(hook)
        try:
            state = smp.run(denoiser, schedule, mask_id, x, stream)
        finally:
            remove(hook)
        return state.x, state.step


@METHODS.register("cg_grad")
class FirstOrderClassifierGuidance(ClassifierGuidance):
    """`cg_grad`: classifier guidance with the first-order (gradient) approximation of the reward."""

    name = "cg_grad"
    gradient = True
    needs_soft_reward = True
    states_cost = False  # one reward gradient per step


__all__ = ["ClassifierGuidance", "FirstOrderClassifierGuidance", "exact_guidance_logits", "gradient_guidance_logits",
           "tilt_masked"]
