"""The offline route: direct preference optimisation of the sampler on trajectories of the pretrained model,
ranked by the reward; no rollouts of the model being trained.

DPO (Rafailov et al. 2023, arXiv 2305.18290, eq. 7) with the likelihood of a whole sampling trajectory
in place of the sequence likelihood, as Diffusion-DPO does for diffusion models (Wallace et al. 2024,
arXiv 2311.12908, §4, eq. 8-9: the DPO objective over reverse-process paths). Here the paths are the
sampler's own: a pool of trajectories τ of the pretrained ancestral sampler (trajectory.py), drawn once,
each with its reward r(x0(τ)) and its log-probability under the pretrained policy. For the model θ,

    Δ_θ(τ) = log π_θ(τ) − log π_pre(τ) = Σ_j [log π_θ(a_j | x_{t_j}) − log π_pre(a_j | x_{t_j})]

(the step log-probabilities of policy_gradient.py: the unmasking decisions of each step). For every pair
(a, b) inside a group of G pool trajectories, the loss is the DPO loss with Bradley–Terry preference
probabilities P(a ≻ b) = σ(r_a − r_b) as soft labels (its expectation over labels drawn from that
Bradley–Terry model; Rafailov et al. eq. 2 and 7):

    ℓ(a, b) = BCE(logit = β (Δ_θ(τ_a) − Δ_θ(τ_b)),  target = σ(r_a − r_b))  −  H(σ(r_a − r_b))

(minus the labels' entropy: ℓ ≥ 0, and ℓ = 0 exactly when β (Δ_a − Δ_b) = r_a − r_b). The loss is the
mean of ℓ over the G (G − 1) / 2 pairs of each group. Its minimum over all trajectory distributions is
reached when β Δ(τ) = r(x0(τ)) + c on the pool, i.e. P_θ(τ) ∝ P_pre(τ) · exp(r(x0(τ))/β): the same
optimum as DRAKES's and the policy gradient's KL-regularised objective (Rafailov et al. §4-5: the DPO
optimum is the KL-regularised reward maximiser), whose final-sequence marginal is p* ∝ p_pre · exp(r/β).
β is the same kl_weight; the KL to the pretrained model is the regulariser implicit in the ratio.

Offline: the pool (pool_size trajectories) is sampled from the pretrained model at the start and reused;
an update draws `batch_size` trajectories from it (groups of `group_size`), costs one forward and one
backward of the trained model per sampling step (with recomputation: trajectory.log_probs) and no
pretrained call (its log-probabilities were recorded with the pool). A trajectory of the masked chain is
stored as its final tokens and the step at which each position was unmasked.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from dnadiff.reward_tuning.drakes import LossOutput
from dnadiff.reward_tuning.trajectory import Grid, log_probs, rollout


@dataclasses.dataclass
class TrajectoryPool:
    """Pretrained trajectories: x0 Long[N, L] (final tokens), step Long[N, L] (the step that unmasked each
    position; −1 for positions given in x_init), ref_logp Float64[N] (log π_pre(τ)), reward Float64[N]."""

    x0: Tensor
    step: Tensor
    ref_logp: Tensor
    reward: Tensor

    def __len__(self) -> int:
        return int(self.x0.shape[0])

    def to(self, device) -> "TrajectoryPool":
        return TrajectoryPool(*(v.to(device) for v in (self.x0, self.step, self.ref_logp, self.reward)))

    def states(self, idx: Tensor, steps: int, mask_id: int) -> list:
        """The T + 1 states of trajectories idx: x before each step, then the final x."""
        x0, step = self.x0[idx], self.step[idx]
        return [torch.where(step < j, x0, torch.full_like(x0, mask_id)) for j in range(steps + 1)]


@torch.no_grad()
def sample_pool(pretrained: Callable, grid: Grid, mask_id: int, length: int, vocab_size: int,
                reward: Callable[[Tensor], Tensor], num: int, batch_size: int,
                generator: torch.Generator | None = None, device="cpu") -> TrajectoryPool:
    """`num` trajectories of the pretrained sampler with their log-probabilities and rewards."""
    x0s, steps, logps, rewards = [], [], [], []
    done = 0
    while done < num:
        b = min(int(batch_size), num - done)
        x_init = torch.full((b, int(length)), mask_id, dtype=torch.long, device=device)
        ro = rollout(pretrained, None, grid, mask_id, x_init, vocab_size, grad_steps=0, generator=generator,
                     record=True, recompute=False)
        masked_before = torch.stack([s == mask_id for s in ro.states[:-1]], 0)  # (T, b, L)
        step = masked_before.sum(0) - 1  # the last step at which a position was still masked (−1: never)
        x0s.append(ro.x.cpu())
        steps.append(step.cpu())
        logps.append(ro.logp.sum(1).cpu())
        rewards.append(torch.as_tensor(reward(ro.x), dtype=torch.float64).reshape(-1).cpu())
        done += b
    return TrajectoryPool(x0=torch.cat(x0s), step=torch.cat(steps), ref_logp=torch.cat(logps),
                          reward=torch.cat(rewards))


def trajectory_logp(denoiser: Callable, grid: Grid, mask_id: int, states: list, *,
                    recompute: bool = True) -> Tensor:
    """log π_θ(τ) of the trajectories given by their states: Float64[B], with gradients w.r.t. θ."""
    total = torch.zeros(states[0].shape[0], dtype=torch.float64, device=states[0].device)
    for i in range(grid.steps):
        x_t, x_s = states[i], states[i + 1]
        newly = (x_t == mask_id) & (x_s != mask_id)
        if not bool(newly.any()):  # no decision to score at this step: no call
            continue
        t = grid.times[i].expand(x_t.shape[0]).to(x_t.device).float()
        log_p = log_probs(denoiser, x_t, None, t, mask_id, recompute=recompute)  # (B, L, V)
        picked = log_p.gather(-1, x_s.unsqueeze(-1)).squeeze(-1) + math.log(grid.unmask_prob(i))
        total = total + (picked * newly.double()).sum(-1)
    return total


def pair_indices(group_size: int, device=None) -> tuple[Tensor, Tensor]:
    """All pairs (a < b) of one group."""
    a, b = torch.triu_indices(group_size, group_size, offset=1, device=device)
    return a, b


def preference_loss(denoiser: Callable, grid: Grid, mask_id: int, pool: TrajectoryPool, idx: Tensor,
                    kl_weight: float, group_size: int, *, recompute: bool = True) -> LossOutput:
    """The soft-label DPO loss (module docstring) on pool trajectories idx (rows b·G … b·G + G − 1: group b)."""
    if not kl_weight > 0 or math.isinf(kl_weight):
        raise ValueError(f"kl_weight must be a positive number, got {kl_weight}")
    G = int(group_size)
    if G < 2 or idx.numel() % G:
        raise ValueError(f"a batch of {idx.numel()} is not a whole number of groups of {G} (>= 2)")
    states = pool.states(idx, grid.steps, mask_id)
    logp = trajectory_logp(denoiser, grid, mask_id, states, recompute=recompute)
    delta = logp - pool.ref_logp[idx].to(logp)  # log π_θ(τ) − log π_pre(τ)
    reward = pool.reward[idx].to(logp)
    a, b = pair_indices(G, device=logp.device)
    d = delta.reshape(-1, G)
    r = reward.reshape(-1, G)
    logits = float(kl_weight) * (d[:, a] - d[:, b])  # (groups, pairs)
    target = torch.sigmoid(r[:, a] - r[:, b])  # Bradley–Terry P(a ≻ b)
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    entropy = F.binary_cross_entropy(target, target, reduction="none")
    loss = (bce - entropy).mean()
    # on pretrained trajectories, −mean Δ estimates KL(P_pre ‖ P_θ) (the reverse direction of the others)
    return LossOutput(loss=loss, reward=reward.detach(), kl=-delta.detach(), rollout=None,
                      extra={"pair_agreement": float(((logits > 0) == (r[:, a] > r[:, b])).double().mean())})


__all__ = ["TrajectoryPool", "pair_indices", "preference_loss", "sample_pool", "trajectory_logp"]
