"""The MDLM ancestral sampler as a differentiable rollout (fine-tuning toward a reward).

One trajectory of the sampler of dnadiff/samplers/ancestral.py (MDLM, Sahoo et al. 2024,
arXiv 2406.07524, §4.1, eq. 7-8 with SUBS): on the grid t_0 = 1 > t_1 > ... > t_T, each masked
position of x_t moves to x_s from

    q_θ(x_s = v | x_t)    = p_θ(x0 = v | x_t) · (α_s − α_t) / (1 − α_t)      v ≠ mask
    q_θ(x_s = mask | x_t) = (1 − α_s) / (1 − α_t)

and unmasked positions are carried over. The last step goes to α = 1 (everything is revealed: the
sampler's noise removal by a draw, folded into the last step), so a rollout always ends clean.

Each draw is a Gumbel-max draw, z = log q + g with g ~ Gumbel(0, 1), x_s = argmax z: an exact
sample of q. Its relaxation (Jang et al. 2017; Maddison et al. 2017) is y = softmax(z / τ). The
`estimator` says what the live steps carry (ESTIMATORS):

* "straight_through": at every live step the state is one_hot(argmax z) + y − stop_grad(y): the forward
  values are the exact discrete sample, the backward pass is the relaxation's (DRAKES, Wang et al. 2025,
  arXiv 2410.13643, §4.1, Algorithm 1, as written: the Gumbel-softmax straight-through draw per step);
* "soft": the soft y itself is the state through the live steps (the model reads the relaxed state),
  and straight-through is applied once, at the reward's input: one_hot(x0) + y0 − stop_grad(y0) (the
  official DRAKES code, ChenyuWang-Monica/DRAKES, `_sample_finetune_gradient`: soft states, the
  argmax one-hot with the soft state's gradient at the end). Which positions are still masked, and
  which tokens are drawn, follow the discrete chain x (the Gumbel-max draws of z, whose logits read
  the soft state); the carry-over of an unmasked position is that hard decision (the official code
  carries a soft copy flag 1 − y[mask]; at τ → 0 the two agree);
* "relaxed": soft states and the soft y0 at the reward's input (the relaxed objective, a smooth function
  of θ for fixed noise: what the finite-difference test checks).

As τ → 0, y → one_hot(argmax z): "soft" and "relaxed" become the pathwise gradient of the relaxed
objective, whose expectation tends to the true gradient (at growing variance); per-step straight-through
stays biased (tests/test_drakes_estimators.py measures both on an enumerable chain).

Gradient truncation (DRAKES "truncate steps" K): only the last K steps' draws (and the states fed to
the model in them) carry gradients; earlier steps run as plain samples. `kl_scope`: "all" (the KL of
every step: the paper's objective, §3 eq. 4) or "live" (only the last K steps' KL: the official code's
`truncate_kl` option; a different, smaller objective whose optimum is not p*).

The KL term. The KL between the fine-tuned and pretrained distributions over whole trajectories
splits by the chain rule into a sum over steps of the KL of the two transitions at the visited state
(DRAKES §3, its KL over trajectories, and Algorithm 1's KL loss), and at one masked position the two
transitions differ only in their unmasking part:

    KL(q_θ(·|x_t) ‖ q_pre(·|x_t)) = (α_s − α_t)/(1 − α_t) · Σ_v p_θ(v|x_t) log(p_θ(v|x_t) / p_pre(v|x_t))

(the stay-masked mass (1 − α_s)/(1 − α_t) is the same in both). The estimator: this exact per-step
KL, summed over the masked positions and the T steps, at the states of a trajectory sampled from the
fine-tuned model; its expectation is the trajectory KL (an upper bound of KL(p_θ(x0) ‖ p_pre(x0))).
It is computed with gradient (w.r.t. θ) at every step, the states of the truncated steps held fixed.

Memory (`recompute`, default on): each step's denoiser call runs under activation checkpointing
(torch.utils.checkpoint, non-reentrant): the forward keeps only the step's inputs and its output
log-probabilities, the backward recomputes the network's activations one step at a time. Memory then
grows with steps × batch × length × vocabulary (the B·L·V float64 tensors of each step), not with the
network's activations; the gradient is the same (tests/test_reward_finetune_recompute.py). The
pretrained model needs a graph only at the live steps of a relaxed state (the KL's dependence on the
state, through p_pre); everywhere else it runs under no_grad.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from dnadiff.diffusion.soft_input import call_soft
from dnadiff.diffusion.subs import NEG_INF

ESTIMATORS = ("straight_through", "soft", "relaxed")  # what the live steps carry (module docstring)
KL_SCOPES = ("all", "live")  # the KL of every step (the paper's objective) or of the live steps (`truncate_kl`)


@dataclasses.dataclass
class Grid:
    """Model times t (Float64[T]) and α on the grid (Float64[T + 1], α[T] = 1)."""

    times: Tensor
    alphas: Tensor

    @property
    def steps(self) -> int:
        return int(self.times.numel())

    def unmask_prob(self, i: int) -> float:
        """(α_s − α_t) / (1 − α_t) of step i."""
        a_t, a_s = float(self.alphas[i]), float(self.alphas[i + 1])
        return (a_s - a_t) / (1.0 - a_t)

    def stay_prob(self, i: int) -> float:
        a_t, a_s = float(self.alphas[i]), float(self.alphas[i + 1])
        return (1.0 - a_s) / (1.0 - a_t)


def make_grid(schedule, steps: int, eps: float = 1e-5) -> Grid:
    """The ancestral sampler's grid linspace(1, eps, T + 1) (samplers/base.py), last α set to 1."""
    ts = torch.linspace(1.0, eps, int(steps) + 1, dtype=torch.float64)
    alphas = schedule.alpha(ts).double().clone()
    alphas[-1] = 1.0
    return Grid(times=ts[:-1], alphas=alphas)


def masked_log_probs(logits: Tensor, mask_id: int) -> Tensor:
    """log p(x0 | x_t) at masked positions under SUBS' zero masking prior: Float64[B, L, V]."""
    logits = logits.double().clone()
    logits[..., mask_id] = NEG_INF
    return logits.log_softmax(-1)


def log_probs(model: Callable, x: Tensor, onehot: Tensor | None, t: Tensor, mask_id: int, *,
              recompute: bool = True) -> Tensor:
    """masked_log_probs of `model` at x (relaxed one-hot `onehot`, or None: the ids), Float64[B, L, V].

    With gradients enabled and `recompute`, under activation checkpointing: the network's activations
    are not kept but recomputed in the backward pass (same values and gradients). Without gradients
    enabled, a plain call (no graph)."""

    def run(*soft: Tensor) -> Tensor:
        return masked_log_probs(call_soft(model, x, soft[0] if soft else None, t), mask_id)

    args = () if onehot is None else (onehot,)
    if recompute and torch.is_grad_enabled():
        return checkpoint(run, *args, use_reentrant=False)
    return run(*args)


def step_kl(log_p: Tensor, log_pre: Tensor, masked: Tensor, unmask: float) -> Tensor:
    """Σ over masked positions of KL(q_θ ‖ q_pre) of one step (module docstring): Float64[B]."""
    # Σ_v p (log p − log p_pre) − p + p_pre: the KL for normalised rows (DRAKES's code writes it so);
    # its gradient is exactly 0 at p = p_pre in floating point, where the plain form leaves a 1e-17
    # residual (Σ p ≠ 1 by rounding) that Adam's normalisation would turn into full-size steps
    p, pre = log_p.exp(), log_pre.exp()
    kl_pos = (p * (log_p - log_pre) - p + pre).sum(-1)  # (B, L)
    return unmask * (kl_pos * masked.double()).sum(-1)


def gumbel_noise(shape, generator: torch.Generator | None, device) -> Tensor:
    """Float64 standard Gumbel noise g = −log(−log U), U ∈ (0, 1)."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    tiny = torch.finfo(torch.float64).tiny
    return -torch.log(-torch.log(u.clamp(tiny, 1.0 - 1e-16)))


@dataclasses.dataclass
class Rollout:
    """A sampled trajectory.

    x        Long[B, L]          the final tokens
    onehot   Float64[B, L, V]    their (straight-through or relaxed) one-hot, carrying gradients
    kl       Float64[B]          Σ over steps of the per-step KL (with gradient w.r.t. θ)
    kl_steps Float64[B, T]
    states   list of Long[B, L]  x before each step, then the final x (T + 1 entries; `record`)
    logp     Float64[B, T]       log q_θ of each step's unmasking decisions (`record`; no gradient)
    noise    list of Float64[B, L, V]  the Gumbel noise drawn (replayable)
    """

    x: Tensor
    onehot: Tensor
    kl: Tensor
    kl_steps: Tensor
    states: list
    logp: Tensor | None
    noise: list


def rollout(denoiser: Callable, pretrained: Callable | None, grid: Grid, mask_id: int, x_init: Tensor, vocab_size: int,
            *, temperature: float = 1.0, estimator: str = "straight_through", grad_steps: int | None = None,
            kl_scope: str = "all", noise: list | None = None, generator: torch.Generator | None = None,
            record: bool = False, recompute: bool = True) -> Rollout:
    """Run the sampler from x_init (Long[B, L], mask_id where free) with Gumbel draws.

    grad_steps K: the last K steps carry gradients (None: all). `estimator`: what the live steps carry
    (ESTIMATORS, module docstring). `pretrained`: the frozen model the KL is taken to (None: no KL);
    `kl_scope`: the KL of all steps or of the live ones only. `noise`: Gumbel noise per step to replay
    (else drawn from `generator`). `recompute`: activation checkpointing of each step's denoiser calls.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if kl_scope not in KL_SCOPES:
        raise ValueError(f"kl_scope must be one of {KL_SCOPES}, got {kl_scope!r}")
    T = grid.steps
    K = T if grad_steps is None else max(0, min(int(grad_steps), T))
    x = x_init.clone()
    onehot = F.one_hot(x, vocab_size).double()  # (B, L, V)
    kls, logps, states, used = [], [], [x], []
    for i in range(T):
        live = i >= T - K  # this step's draws carry gradients
        masked = x == mask_id  # (B, L)
        t = grid.times[i].expand(x.shape[0]).to(x.device)
        state_in = onehot if live else None  # truncated steps: the plain call on the ids
        with_kl = pretrained is not None and (live or kl_scope == "all")
        with torch.set_grad_enabled(torch.is_grad_enabled() and (live or with_kl)):  # else: a plain sample
            log_p = log_probs(denoiser, x, state_in, t.float(), mask_id, recompute=recompute)  # (B, L, V)
        unmask, stay = grid.unmask_prob(i), grid.stay_prob(i)
        if pretrained is not None and not with_kl:
            kls.append(torch.zeros(x.shape[0], dtype=torch.float64, device=x.device))
        elif pretrained is not None:
            # a graph only through a state that carries gradients (the pretrained weights are frozen)
            state_graph = state_in is not None and state_in.requires_grad
            with torch.set_grad_enabled(torch.is_grad_enabled() and state_graph):
                log_pre = log_probs(pretrained, x, state_in, t.float(), mask_id, recompute=recompute)
            # the weight of a position: masked (0/1), or a soft state's mask mass (its relaxation)
            weight = onehot[..., mask_id] if live and estimator != "straight_through" else masked
            kls.append(step_kl(log_p, log_pre, weight, unmask))
        log_q = log_p + math.log(unmask)  # (B, L, V)
        stay_col = torch.full_like(log_q[..., :1], math.log(stay) if stay > 0 else NEG_INF)
        log_q = torch.cat([log_q[..., :mask_id], stay_col, log_q[..., mask_id + 1:]], dim=-1)
        g = noise[i].to(log_q) if noise is not None else gumbel_noise(log_q.shape, generator, x.device)
        used.append(g)
        z = log_q + g
        hard = z.argmax(-1)  # (B, L): an exact draw of q_θ (Gumbel-max)
        if live and estimator != "straight_through":
            # soft states: the soft copy flag m = y[mask] (official code): s' = (1 − m)·s + m·softmax(z/τ);
            # a one-hot state carries (m = 0) or draws (m = 1) as the discrete chain does
            m = onehot[..., mask_id:mask_id + 1]  # (B, L, 1)
            onehot = (1.0 - m) * onehot + m * (z / temperature).softmax(-1)
            x_new = onehot.detach().argmax(-1)  # the discrete chain read off the soft state
        else:
            if live:
                y_soft = (z / temperature).softmax(-1)
                y = F.one_hot(hard, vocab_size).double() + y_soft - y_soft.detach()
            else:
                y = F.one_hot(hard, vocab_size).double()
            x_new = torch.where(masked, hard, x)
            onehot = torch.where(masked.unsqueeze(-1), y, onehot if live else onehot.detach())
        if record:
            newly = masked & (x_new != mask_id)
            picked = log_q.detach().gather(-1, x_new.unsqueeze(-1)).squeeze(-1)  # (B, L)
            logps.append((picked * newly.double()).sum(-1))
        x = x_new
        states.append(x)
    if estimator == "soft" and K > 0:  # straight-through once, at the reward's input (official DRAKES code)
        onehot = F.one_hot(x, vocab_size).double() + onehot - onehot.detach()
    B = x.shape[0]
    kl_steps = torch.stack(kls, 1) if kls else torch.zeros(B, T, dtype=torch.float64, device=x.device)
    return Rollout(x=x, onehot=onehot, kl=kl_steps.sum(1), kl_steps=kl_steps, states=states if record else [],
                   logp=torch.stack(logps, 1) if record else None, noise=used)


__all__ = ["ESTIMATORS", "KL_SCOPES", "Grid", "Rollout", "make_grid", "log_probs", "masked_log_probs", "step_kl",
           "gumbel_noise", "rollout"]
