"""Know the target: what the KL-regularised optimum p*(x) ∝ p_pre(x) · exp(r(x)/β) scores, and how far
it is from the pretrained model, estimated from pretrained samples; and what a fine-tuned model reaches.

Self-normalised importance sampling (SNIS; Owen, "Monte Carlo theory, methods and examples", 2013,
§9.2, eq. 9.3 and §9.3 for the effective sample size; Kong 1992) over x_1 … x_n ∼ p_pre with rewards
r_i and h_i = r_i / β: the weights w_i = exp(h_i) are p*/p_pre up to the constant Z = E_pre[exp(r/β)],
w̃_i = w_i / Σ_j w_j, and

    E*[r]          ≈ Σ_i w̃_i r_i
    KL(p* ‖ p_pre) = E*[r/β] − log Z ≈ Σ_i w̃_i h_i − log( (1/n) Σ_i w_i )
    ESS            = (Σ_i w_i)² / Σ_i w_i²                       (1 … n; near 1: one sample carries it)

Standard errors by the delta method (Owen §9.2, eq. 9.8): for E*[r], sqrt(Σ_i w̃_i² (r_i − Ê*[r])²) (about
sd*(r)/√ESS); for the KL, sqrt(Σ_i φ_i²)/n with the influence φ_i = n w̃_i (h_i − Ê*[h] − 1) + 1 (the
linearisation of Â/B̂ − log B̂ in Â = mean(w h), B̂ = mean(w)). Both are unreliable when the ESS is small:
the weights then miss the region p* lives in. The KL estimate is exactly the KL of the normalised weights
from the uniform ones, Σ_i w̃_i log(n w̃_i), so it lies in [0, log n]: it cannot show a target farther from
p_pre than log n nats, and a degenerate case (ESS ≈ 1) reads KL ≈ log n.

The fine-tuned model's side: its mean reward over its own samples, and its KL to the pretrained model
over its sampling trajectories (the per-step KL of trajectory.py summed along its own trajectories; an
upper bound on the KL between the two models' final-sequence distributions). The optimum of the
fine-tuning objective over trajectory distributions is P*(τ) ∝ P_pre(τ) · exp(r(x0)/β), whose trajectory
KL equals KL(p* ‖ p_pre) above: at the optimum both columns agree.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from dnadiff.reward_tuning.trajectory import Grid, rollout


def snis_target(rewards: Tensor, kl_weight: float) -> dict:
    """The SNIS estimates of p*'s expected reward and KL(p* ‖ p_pre) from rewards of pretrained samples
    (module docstring): reward, reward_se, kl, kl_se, ess, n, and pretrained_reward (the plain mean)."""
    r = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
    n = int(r.numel())
    if n == 0:
        raise ValueError("snis_target needs at least one sample")
    if not kl_weight > 0:
        raise ValueError(f"kl_weight must be > 0, got {kl_weight}")
    h = r / float(kl_weight)
    lse = h.logsumexp(0)
    wn = (h - lse).exp()  # w̃_i, computed stably for large 1/β
    e_r = float((wn * r).sum())
    e_h = float((wn * h).sum())
    kl = float((wn * (h - lse)).sum()) + math.log(n)  # = e_h − log mean(w), without the cancellation
    ess = float(1.0 / (wn * wn).sum())
    reward_se = float((wn * wn * (r - e_r) ** 2).sum().sqrt())
    phi = n * wn * (h - e_h - 1.0) + 1.0
    kl_se = float(phi.pow(2).sum().sqrt()) / n
    kl = max(kl, 0.0)  # ≥ 0 but for rounding (the KL of w̃ from uniform: docstring)
    return {"reward": e_r, "reward_se": reward_se, "kl": kl, "kl_se": kl_se, "ess": ess, "n": n,
            "pretrained_reward": float(r.mean())}


@torch.no_grad()
def sample_scores(denoiser: Callable, pretrained: Callable | None, grid: Grid, mask_id: int, length: int,
                  vocab_size: int, reward: Callable[[Tensor], Tensor], num: int, batch_size: int,
                  generator: torch.Generator | None = None, device="cpu") -> tuple[Tensor, Tensor | None]:
    """Rewards (Float64[num]) of `num` samples of `denoiser`'s ancestral sampler and, with `pretrained`,
    each trajectory's KL to it (Float64[num]; else None)."""
    rewards, kls = [], []
    done = 0
    while done < num:
        b = min(int(batch_size), num - done)
        x_init = torch.full((b, int(length)), mask_id, dtype=torch.long, device=device)
        ro = rollout(denoiser, pretrained, grid, mask_id, x_init, vocab_size, grad_steps=0, generator=generator)
        rewards.append(torch.as_tensor(reward(ro.x), dtype=torch.float64).reshape(-1).cpu())
        kls.append(ro.kl.cpu())
        done += b
    return torch.cat(rewards), (torch.cat(kls) if pretrained is not None else None)


def reached(rewards: Tensor, kls: Tensor) -> dict:
    """The fine-tuned model's mean reward and mean trajectory KL to the pretrained model, with their
    standard errors (over its own samples)."""
    n = int(rewards.numel())
    se = (lambda v: float(v.std() / math.sqrt(n)) if n > 1 else float("nan"))
    return {"reward": float(rewards.mean()), "reward_se": se(rewards), "kl": float(kls.mean()), "kl_se": se(kls),
            "n": n}


__all__ = ["reached", "sample_scores", "snis_target"]
