"""SDTT, self-distillation through time, for masked-diffusion models (Deschenaux & Gulcehre, "Beyond
Autoregression: Fast LLMs via Self-Distillation Through Time", arXiv 2410.21035, §3; code jdeschena/sdtt,
`core/distill/multi_round_sdtt.py`). Pure PyTorch on denoiser callables (no Lightning); the run loop that
uses it is training/distill_loop.py (`dnadiff distill`).

A round distils a teacher sampled with n ancestral steps into a student sampled with n/g (g = 2): one
student step from t_k to t_{k+g} on the teacher's grid should land where g teacher steps land. The student
starts from the teacher's weights; the next round's teacher is this round's student (§3, "multiple rounds").

Pairs (what the loss is computed on). The teacher's own ancestral sampler (samplers/ancestral.py, driven
through the sampler step API: init_state / model_time / evaluate / step) runs from all-masked sequences
down its n-step grid; every g-th state x_{gk} (the partly masked sequences the student meets at its step
k), its time t_{gk} and the teacher's SUBS predictions p_j = p_T(x0 | x_j, t_j) at the g steps that follow
give one pair (x_{gk}, t_{gk}, τ_k). (The paper and its code noise data sequences, x_t ~ q(x_t | x0) at a
random t; here the inputs come from the teacher's sampler, so no data is needed and the student is trained
on the states it visits when sampled with the teacher's grid.)

Targets τ at the positions masked in x_{gk} (only those are scored; SUBS carries the others over):
  "sdtt"      the paper's (§3, Alg. 1 "teacher targets"; `_teacher_logprobs_on_mask`): a position the
              teacher revealed at step j gets p_j, one still masked after the g steps gets p_{g-1} (the
              last step's prediction).
  "marginal"  the teacher's g-step distribution of the token a position is revealed with, given that it is
              revealed in [t_{k+g}, t_k]: the best a one-step student can match, since its step reveals
              positions independently. Unbiased in one rollout: τ_0 = p_0, τ_j = (1 - c_j) τ_{j-1} + c_j p_j
              with c_j = u_j / R_j, u_j = (α_{j+1} - α_j)/(1 - α_j) the step's reveal probability and
              R_j = (α_{j+1} - α_0)/(1 - α_0) the group's so far (p_j is SUBS: one-hot at a position revealed
              earlier, whose draw averages to the earlier prediction). Why: with μ_j the wanted distribution
              given a reveal by step j and e_j = E[p_j | still masked], μ_j = (R_{j-1} μ_{j-1} + (1 - R_{j-1})
              u_j e_j)/R_j, and E[p_j] = R_{j-1} μ_{j-1} + (1 - R_{j-1}) e_j, so E[τ_j] = μ_j exactly when
              c_j = u_j/R_j (c_0 = 1). For log-linear and g = 2, c_1 = t/(2(t - dt)) ≈ ½; the paper's target
              weighs p_1 with the probability 1 - u_0 that the position is still masked, ≈ 1.
Losses between the student's SUBS distribution s = p_S(x0 | x_{gk}, t_{gk}) and τ, averaged over the scored
positions (§3 "distillation losses", the code's distill_mode): "kl-fwd" KL(τ ‖ s), "kl-bwd" KL(s ‖ τ) (the
code's default), "tvd" ½ Σ|s - τ|, "mse" mean over the tokens τ gives mass of (log s - log τ)².

On an enumerable toy (tests/test_distill.py) the student of an inexact teacher at K steps lands closer to the
teacher's 2K-step distribution than the teacher at K steps; with an exact teacher the per-position
two-step marginal equals the one-step one up to the factorisation error, so a one-step student has nothing to
gain there (the test records it).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from dnadiff.denoiser import Denoiser
from dnadiff.diffusion.subs import subs_log_probs
from dnadiff.errors import DnadiffError
from dnadiff.samplers.base import Sampler, log_of, make_stream

TARGETS = ("sdtt", "marginal")
LOSSES = ("kl-fwd", "kl-bwd", "tvd", "mse")



@dataclasses.dataclass
class Pairs:
    """x Long[P, L] student inputs, t Float[P] their times, target Float64[P, L, V] τ, scored Bool[P, L]
    (masked in x), step Long[P] the student step k of each pair."""

    x: Tensor
    t: Tensor
    target: Tensor
    scored: Tensor
    step: Tensor

    def select(self, rows: Tensor) -> "Pairs":
        return Pairs(self.x[rows], self.t[rows], self.target[rows], self.scored[rows], self.step[rows])

    def __len__(self) -> int:
        return int(self.x.shape[0])


def check_steps(teacher_steps: int, student_steps: int) -> int:
    """The number of halving rounds from `teacher_steps` to `student_steps` (>= 1); one-line errors otherwise."""
    n, k = int(teacher_steps), int(student_steps)
    if k < 1 or n < 2:
        raise DnadiffError(f"--steps {k}: the student needs >= 1 step and the teacher >= 2 (teacher steps {n})")
    if k >= n or n % k or (n // k) & (n // k - 1):
        ok = [str(n >> r) for r in range(1, 5) if (n >> r) >= 1 and (n >> r) << r == n]
        raise DnadiffError(f"--steps {k}: must be the teacher's {n} sampling steps divided by a power of 2 "
                           f"(e.g. {', '.join(ok)})")
    return (n // k).bit_length() - 1


@torch.no_grad()
def teacher_pairs(teacher: Denoiser, sampler: Sampler, schedule, mask_id: int, x_init: Tensor,
                  generator: torch.Generator | int | None = None, target: str = "sdtt", group: int = 2) -> Pairs:
    """Roll the teacher's grid sampler (`sampler.steps` = n, a multiple of `group`) out from x_init
    (Long[B, L], mask_id where free) and cut it into the student's pairs: for each student step k, the
    state x_{gk}, its time and the target τ_k (module docstring). Rows whose x_{gk} holds no mask are left
    out (nothing to score)."""
    if target not in TARGETS:
        raise DnadiffError(f"distillation target {target!r}: choose {' or '.join(TARGETS)}")
    n, g = int(sampler.steps), int(group)
    if g < 2 or n % g:
        raise DnadiffError(f"teacher steps {n} must be a multiple of the group size {g} (>= 2)")
    B = x_init.shape[0]
    stream = make_stream(generator, B, x_init.device, sampler.float32_draws)
    state = sampler.init_state(teacher, schedule, mask_id, x_init)
    xs, ts, probs, after = [], [], [], []
    while not state.done:
        t = sampler.model_time(state)
        logits, state = sampler.evaluate(teacher, state, t)
        xs.append(state.x)
        ts.append(t.float())
        probs.append(sampler.x0_probs(logits, state.x, mask_id))  # (B, L, V) float64, SUBS + temperature/top-p
        state = sampler.step(state, logits, stream.at(state.step))
        after.append(state.x)
    alphas = state.alphas  # (n + 1,) α on the teacher's grid
    out = []
    for k in range(0, len(xs), g):
        x0 = xs[k]
        scored = x0 == mask_id
        if not bool(scored.any()):
            break  # the rollout stops once nothing is masked; later states hold no mask either
        last = min(k + g, len(xs)) - 1
        if target == "sdtt":
            tau = probs[last].clone()  # still masked after the group: the last step's prediction
            for j in range(last, k - 1, -1):  # revealed at step j: p_j (earliest step wins, so go backwards)
                revealed = (xs[j] == mask_id) & (after[j] != mask_id)
                tau = torch.where(revealed.unsqueeze(-1), probs[j], tau)
        else:
            tau = probs[k].clone()
            a0 = alphas[k]
            for j in range(k + 1, last + 1):
                u = (alphas[j + 1] - alphas[j]) / (1.0 - alphas[j])  # this step's reveal probability
                R = (alphas[j + 1] - a0) / (1.0 - a0)  # the group's reveal probability so far
                c = float(u / R)
                tau = (1.0 - c) * tau + c * probs[j]
        out.append((x0, ts[k], tau, scored, torch.full((B,), k // g, dtype=torch.long, device=x0.device)))
    if not out:
        V = probs[0].shape[-1] if probs else 1
        e = x_init[:0]
        return Pairs(e, torch.zeros(0, device=e.device), torch.zeros(0, x_init.shape[1], V, dtype=torch.float64),
                     e.bool(), e[:, 0])
    pairs = Pairs(*(torch.cat(parts) for parts in zip(*out)))
    return pairs.select(pairs.scored.any(dim=1).nonzero().squeeze(1))


def distill_loss(student_logits: Tensor, pairs: Pairs, mask_id: int, loss: str = "kl-bwd") -> Tensor:
    """The mean over scored positions of the divergence between the student's SUBS distribution and τ
    (module docstring); a scalar with gradients to the student's logits Float[P, L, V]."""
    if loss not in LOSSES:
        raise DnadiffError(f"distillation loss {loss!r}: choose {', '.join(LOSSES)}")
    log_s = subs_log_probs(student_logits, pairs.x, mask_id)  # (P, L, V)
    tau = pairs.target.to(log_s.dtype)
    log_tau = log_of(tau)
    if loss == "kl-fwd":
        per = (tau * (log_tau - log_s)).sum(-1)
    elif loss == "kl-bwd":
        s = log_s.exp()
        per = (s * (log_s - log_tau)).sum(-1)
    elif loss == "tvd":
        per = 0.5 * (log_s.exp() - tau).abs().sum(-1)
    else:  # mse on log-probabilities, over the tokens the target gives mass
        support = tau > 0
        diff = torch.where(support, log_s - log_tau, torch.zeros_like(log_s))
        per = diff.pow(2).sum(-1) / support.sum(-1).clamp_min(1)
    per = torch.where(pairs.scored, per, torch.zeros_like(per))
    return per.sum() / pairs.scored.sum().clamp_min(1)


def sdtt_loss(student: Denoiser, teacher: Denoiser, sampler: Sampler, schedule, mask_id: int, x_init: Tensor,
              generator=None, target: str = "sdtt", loss: str = "kl-bwd", max_pairs: int | None = None,
              pair_generator: torch.Generator | None = None) -> tuple[Tensor, Pairs]:
    """One distillation loss: teacher pairs from a rollout of x_init, the student's prediction on (up to
    `max_pairs`, drawn without replacement) of them, the divergence. Returns (loss, the pairs used)."""
    pairs = teacher_pairs(teacher, sampler, schedule, mask_id, x_init, generator, target)
    if max_pairs is not None and len(pairs) > max_pairs:
        gen_device = pair_generator.device if pair_generator is not None else "cpu"
        pick = torch.randperm(len(pairs), generator=pair_generator, device=gen_device)[:max_pairs]
        pairs = pairs.select(pick.to(pairs.x.device))
    if len(pairs) == 0:
        return torch.zeros((), requires_grad=True), pairs
    logits = student(pairs.x, pairs.t)
    return distill_loss(logits, pairs, mask_id, loss), pairs


__all__ = ["LOSSES", "Pairs", "TARGETS", "check_steps", "distill_loss", "sdtt_loss", "teacher_pairs"]
