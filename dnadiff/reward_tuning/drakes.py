"""DRAKES: direct reward backpropagation through the sampling trajectory (Wang et al. 2025,
arXiv 2410.13643, §4.1, Algorithm 1).

The fine-tuned model θ maximises  E_{x0 ∼ p_θ}[r(x0)] − β · KL(P_θ ‖ P_pre),  the KL over whole
sampling trajectories (trajectory.py says the estimator). Its optimum over all samplers has the
marginal p*(x0) ∝ p_pre(x0) · exp(r(x0) / β) (the KL-regularised reward maximiser).

One loss evaluation: sample B trajectories with the fine-tuned model's ancestral sampler, each draw a
Gumbel-softmax draw (temperature τ), gradients only through the last K steps; score the final relaxed
one-hot with the reward's differentiable `soft(onehot) -> Float[B]` (the same value as the reward at
one-hot inputs); add the per-step KLs (of every step, or of the last K: `kl_scope`). The estimator
(trajectory.py): straight-through at every live step (the paper's Algorithm 1) or soft states through
the live steps and straight-through once at the reward's input (the official code). The loss minimised is

    loss = mean_b [ KL_b − r_b / β ]

i.e. −(objective)/β: the same optimum and gradient direction as DRAKES's −r + β·KL, finite as
β → ∞, where only the KL remains, its gradient is exactly 0 at θ = θ_pre, and the model stays put.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import Tensor

from dnadiff.reward_tuning.trajectory import Grid, Rollout, rollout


@dataclasses.dataclass
class LossOutput:
    """loss (scalar to minimise), reward (Float64[B], no grad), kl (Float64[B], no grad), the rollout."""

    loss: Tensor
    reward: Tensor
    kl: Tensor
    rollout: Rollout
    extra: dict = dataclasses.field(default_factory=dict)


def combine(reward: Tensor, kl: Tensor, kl_weight: float) -> Tensor:
    """mean(KL − r/β) (β = inf: the KL alone)."""
    if math.isinf(kl_weight):
        return kl.mean()
    return (kl - reward / float(kl_weight)).mean()


def drakes_loss(denoiser: Callable, pretrained: Callable, soft_reward: Callable[[Tensor], Tensor], grid: Grid,
                mask_id: int, x_init: Tensor, vocab_size: int, kl_weight: float, *, truncate_steps: int | None = None,
                temperature: float = 1.0, estimator: str = "straight_through", kl_scope: str = "all",
                noise: list | None = None, generator: torch.Generator | None = None,
                recompute: bool = True) -> LossOutput:
    """The DRAKES loss on one batch of trajectories started from x_init (Long[B, L]); `estimator`,
    `kl_scope`: trajectory.ESTIMATORS, KL_SCOPES; `recompute`: activation checkpointing of each step's
    denoiser calls (trajectory.py; same gradient, less memory)."""
    if not kl_weight > 0:
        raise ValueError(f"kl_weight must be > 0, got {kl_weight}")
    ro = rollout(denoiser, pretrained, grid, mask_id, x_init, vocab_size, temperature=temperature,
                 estimator=estimator, grad_steps=truncate_steps, kl_scope=kl_scope, noise=noise, generator=generator,
                 recompute=recompute)
    reward = soft_reward(ro.onehot).double().reshape(-1)  # (B,): r at the sample, gradient of the relaxation
    loss = combine(reward, ro.kl, kl_weight)
    return LossOutput(loss=loss, reward=reward.detach(), kl=ro.kl.detach(), rollout=ro)


__all__ = ["LossOutput", "combine", "drakes_loss"]
