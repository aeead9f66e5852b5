"""Policy-gradient fine-tuning toward any reward (no reward gradient): GRPO-style, as SEPO's GRPO
variant for MDLM on DNA (Zekri & Boullé 2025, arXiv 2502.01384; GRPO: Shao et al. 2024,
arXiv 2402.03300, §4.1).

Objective, as DRAKES's (drakes.py): maximise E[r(x0)] − β · KL(P_θ ‖ P_pre) over sampling
trajectories, whose optimum has the marginal p*(x0) ∝ p_pre(x0) · exp(r(x0) / β); minimised as
mean(KL − r/β).

The likelihood surrogate: the trajectory's own step log-probabilities. The sampler is a policy
whose action at step j is the set of positions it unmasks and the tokens they get; its log-probability
log π_θ(a_j | x_{t_j}) = Σ_{l unmasked at j} log q_θ(x_s^l | x_t) (the stay-masked factors do not
depend on θ). We use it rather than the MDLM bound because it is the exact probability of the
actions that were sampled: the importance ratio π_θ / π_old is exact, the policy gradient unbiased,
and the KL's chain rule (trajectory.py) is over the same steps; the MDLM bound is only a bound on
log p_θ(x0), so a ratio of bounds is not the ratio of the sampling policies (and costs extra
denoiser calls at fresh noise levels).

One update, on a batch of n groups of G trajectories sampled with θ_old (the model at the time of
sampling, reused for `ppo_epochs` updates):

    ratio_j = exp(log π_θ(a_j) − log π_old(a_j))                    per trajectory and step
    A_j     = Â(r) / β − Â(C_j),   C_j = Σ_{i > j} KL_i (the KL still to come, held fixed)
    loss    = mean_b [ Σ_j −min(ratio_j A_j, clip(ratio_j, 1 − ε, 1 + ε) A_j) + Σ_i KL_i(θ) ]

Â(v) is the group-normalised advantage: v minus the mean of the other G − 1 members of its group
(GRPO's group mean, scaled by G/(G−1) so that the baseline leaves out the member itself and the
gradient stays unbiased); `advantage="std"` also divides Â(r) by the group's standard deviation
(GRPO's normalisation: it rescales the reward group by group, so the optimum is no longer exactly
p*). The KL_i are the exact per-step KLs at the sampled states; differentiating Σ_i KL_i(θ) at fixed
states misses the states' own dependence on θ, which the score-function term with C_j supplies: at
ratio = 1 the gradient of this loss is exactly that of mean(KL − r/β).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import Tensor

from dnadiff.reward_tuning.drakes import LossOutput
from dnadiff.reward_tuning.trajectory import Grid, log_probs, masked_log_probs, rollout, step_kl

ADVANTAGES = ("center", "std")


@dataclasses.dataclass
class GroupBatch:
    """Trajectories sampled with θ_old: states (T + 1 of Long[B, L]), old_logp Float64[B, T], reward Float64[B]."""

    states: list
    old_logp: Tensor
    reward: Tensor

    @property
    def x(self) -> Tensor:
        return self.states[-1]

    def state_dict(self) -> dict:
        return {"states": torch.stack(self.states), "old_logp": self.old_logp, "reward": self.reward}

    @classmethod
    def from_state_dict(cls, d: dict) -> "GroupBatch":
        return cls(states=list(d["states"].unbind(0)), old_logp=d["old_logp"], reward=d["reward"])


@torch.no_grad()
def sample_groups(denoiser: Callable, grid: Grid, mask_id: int, x_init: Tensor, vocab_size: int,
                  reward: Callable[[Tensor], Tensor], generator: torch.Generator | None = None) -> GroupBatch:
    """B trajectories of the current model (rows b·G … b·G + G − 1 form group b) and their rewards."""
    ro = rollout(denoiser, None, grid, mask_id, x_init, vocab_size, grad_steps=0, generator=generator, record=True)
    r = torch.as_tensor(reward(ro.x), dtype=torch.float64, device=ro.x.device).reshape(-1)
    return GroupBatch(states=ro.states, old_logp=ro.logp, reward=r)


def group_advantage(values: Tensor, group_size: int, mode: str = "center") -> Tensor:
    """Leave-one-out group-centred values (…, rows grouped by G along dim 0); `std`: / group std."""
    G = int(group_size)
    if G < 2:
        raise ValueError(f"group_size must be >= 2, got {group_size}")
    if values.shape[0] % G:
        raise ValueError(f"batch of {values.shape[0]} is not a whole number of groups of {G}")
    v = values.reshape(values.shape[0] // G, G, *values.shape[1:])
    adv = (v - v.mean(1, keepdim=True)) * (G / (G - 1))  # = v − mean of the others
    if mode == "std":
        adv = adv / (v.std(1, keepdim=True) + 1e-6)
    elif mode != "center":
        raise ValueError(f"advantage must be one of {ADVANTAGES}, got {mode!r}")
    return adv.reshape(values.shape)


def step_terms(denoiser: Callable, pretrained: Callable, grid: Grid, mask_id: int, batch: GroupBatch, *,
               recompute: bool = True) -> tuple[Tensor, Tensor]:
    """(log π_θ of each step's decisions, per-step KL), both Float64[B, T] with gradients w.r.t. θ.
    `recompute`: each step's denoiser activations are recomputed in the backward pass, not kept
    (trajectory.log_probs); the pretrained model runs without a graph."""
    logps, kls = [], []
    for i in range(grid.steps):
        x_t, x_s = batch.states[i], batch.states[i + 1]
        masked = x_t == mask_id
        if not bool(masked.any()):  # nothing left to decide: no call
            zero = torch.zeros(x_t.shape[0], dtype=torch.float64, device=x_t.device)
            logps.append(zero)
            kls.append(zero)
            continue
        t = grid.times[i].expand(x_t.shape[0]).to(x_t.device).float()
        unmask = grid.unmask_prob(i)
        log_p = log_probs(denoiser, x_t, None, t, mask_id, recompute=recompute)  # (B, L, V)
        with torch.no_grad():
            log_pre = masked_log_probs(pretrained(x_t, t), mask_id)
        newly = masked & (x_s != mask_id)
        picked = log_p.gather(-1, x_s.unsqueeze(-1)).squeeze(-1) + math.log(unmask)  # (B, L)
        logps.append((picked * newly.double()).sum(-1))
        kls.append(step_kl(log_p, log_pre, masked, unmask))
    return torch.stack(logps, 1), torch.stack(kls, 1)


def policy_gradient_loss(denoiser: Callable, pretrained: Callable, grid: Grid, mask_id: int, batch: GroupBatch,
                         kl_weight: float, group_size: int, *, clip: float = 0.2,
                         advantage: str = "center", recompute: bool = True) -> LossOutput:
    """The clipped-ratio loss of one update on `batch` (module docstring)."""
    if not kl_weight > 0:
        raise ValueError(f"kl_weight must be > 0, got {kl_weight}")
    logp, kl_steps = step_terms(denoiser, pretrained, grid, mask_id, batch, recompute=recompute)
    ratio = (logp - batch.old_logp.to(logp)).exp()  # (B, T)
    kl_fixed = kl_steps.detach()
    to_go = kl_fixed.flip(1).cumsum(1).flip(1) - kl_fixed  # C_j = Σ_{i > j} KL_i
    adv = -group_advantage(to_go, group_size)
    if not math.isinf(kl_weight):
        adv = adv + group_advantage(batch.reward, group_size, advantage).unsqueeze(1) / float(kl_weight)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv)  # (B, T)
    kl = kl_steps.sum(1)
    loss = (kl - surrogate.sum(1)).mean()
    clipped = ((ratio - 1.0).abs() > clip).double().mean()
    return LossOutput(loss=loss, reward=batch.reward, kl=kl.detach(), rollout=None,
                      extra={"clip_fraction": float(clipped)})


__all__ = ["ADVANTAGES", "GroupBatch", "sample_groups", "group_advantage", "step_terms", "policy_gradient_loss"]
