"""Ledidi editing (`dnadiff edit --method ledidi`): gradient descent on a relaxed edit of each input sequence.

    out = ledidi_edit(x0, reward, max_edits=8, editable=mask, edit_cost=0.1, steps=200, seed=0)
    out.x, out.reward_before, out.reward_after, out.reward_calls, out.network_calls (= 0)

Schreiber, Lu & Noble, "Ledidi: designing genomic edits that induce functional activity" (bioRxiv 2020;
jmschrei/ledidi). The objective, minimised over per-position base logits W (B, L, 4):

    loss = -r(x') + λ · edits(x', x0),   x' = hard Gumbel-softmax draw of logits log(onehot(x0) + eps) + W

W starts at 0, so the input base starts eps-to-1 more likely than any other (a gap of log(1/eps) ≈ 9.2 at
eps = 1e-4: an edit must be learned before it is drawn). Each step draws `draws` hard one-hot sequences per
input (straight-through: the forward value is the hard draw, the gradient that of softmax((logits + g) / τ)),
scores them with the reward's differentiable `soft(onehot)` (equal to the reward at one-hot inputs), counts
edits as ½ |x' - x0|₁ (the number of changed positions), and takes an AdamW step on W (lr 1 as the reference:
these are logits, not network weights). Ledidi's defaults: λ (its `l`) = 0.1, τ = 1, eps = 1e-4, 1,000
iterations with early stopping after 100 without improvement, 10 draws a step.

The reference returns the best draw seen; dnadiff also has a hard budget M, so at the end three candidates per
sequence are scored with the reward and the one of highest r - λ·edits kept: the input itself (λ large: no
edits), the argmax of the final logits, and the best draw within M edits seen while optimising. A candidate with
more than M edits is rolled back to M first, keeping the edits of largest gain (the reward lost when that edit
alone is undone; repeated, undoing half of the surplus a pass, so that interacting edits are re-measured).
Counts: reward_calls = rows the reward scored (each draw of each step, the roll-back and final scores);
network_calls = 0 (no generator network).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from dnadiff.errors import DnadiffError
from dnadiff.guidance.editing import BASES, TOK, EditOutcome, score
from dnadiff.guidance.rewards import soft_support

EPS = 1e-4  # Ledidi's eps: the input base's head start is log(1 / eps)
PATIENCE = 100  # Ledidi's early_stopping_iter: steps without a better in-budget draw before stopping


def relaxed_onehot(base_probs: Tensor, x0: Tensor, editable: Tensor) -> Tensor:
    """Float64[N, L, V]: `base_probs` (N, L, 4) in the A/C/G/T columns at editable positions, x0's one-hot
    elsewhere (N or a protected base stays as it is). x0 and editable are [N, L]."""
    fixed = torch.nn.functional.one_hot(x0, TOK.vocab_size).to(base_probs.dtype)  # (N, L, V)
    placed = torch.zeros_like(fixed)
    placed[..., BASES.to(x0.device)] = base_probs
    return torch.where(editable[..., None], placed, fixed)


def roll_back(x0: Tensor, x: Tensor, reward: Callable, max_edits: int, counter: list[int]) -> Tensor:
    """x (B, L) with at most `max_edits` edits from x0 per row: while a row has K > M edits, score it with each
    edit undone alone and undo the ⌈(K - M) / 2⌉ whose undoing costs the least reward (the largest gains stay)."""
    x = x.clone()
    while True:
        counts = (x != x0).sum(dim=1)
        over = torch.nonzero(counts > max_edits).flatten().tolist()
        if not over:
            return x
        variants, owners, where = [], [], []
        for b in over:
            pos = torch.nonzero(x[b] != x0[b]).flatten()
            v = x[b].expand(len(pos), -1).clone()
            v[torch.arange(len(pos)), pos] = x0[b, pos]  # row k: edit k undone
            variants.append(v)
            owners += [b] * len(pos)
            where.append(pos)
        r = score(reward, torch.cat(variants), counter)
        owner = torch.tensor(owners)
        for b, pos in zip(over, where):
            lost = -r[owner == b]  # the reward without each edit, negated: higher = that edit gains more
            n_undo = math.ceil((len(pos) - max_edits) / 2)
            undo = pos[lost.argsort()[:n_undo].to(pos.device)]
            x[b, undo] = x0[b, undo]


def ledidi_edit(x0: Tensor, reward: Callable, max_edits: int, editable: Tensor | None = None, edit_cost: float = 0.1,
                steps: int = 200, lr: float = 1.0, tau: float = 1.0, draws: int = 8, seed: int = 0,
                on_step: Callable[[int], None] | None = None) -> EditOutcome:
    """Ledidi (module docstring) on every row of x0 at once (independent per row: the loss is a sum over rows)."""
    problem = soft_support(reward)
    if problem is not None:
        raise DnadiffError(f"--method ledidi needs a differentiable reward (gc, gc:T, motif, classifier): {problem}")
    if max_edits < 1 or steps < 1 or draws < 1 or not lr > 0 or not tau > 0 or not edit_cost >= 0:
        raise DnadiffError(f"ledidi: max_edits, steps and draws must be >= 1, lr and tau > 0, the edit cost >= 0 "
                           f"(got {max_edits}, {steps}, {draws}, {lr}, {tau}, {edit_cost})")
    x0 = x0.long()
    B, L = x0.shape
    dev = x0.device
    editable = torch.ones_like(x0, dtype=torch.bool) if editable is None else editable.bool().to(dev)
    bases = BASES.to(dev)
    gen = torch.Generator().manual_seed(int(seed))
    calls = [0]
    before = score(reward, x0, calls)
    calls[0] = 0  # the starting scores are reported, not part of the method's cost

    # x0 as a one-hot over A/C/G/T (an N at a protected position: all zero; never drawn there)
    start = (x0[..., None] == bases).double()  # (B, L, 4)
    base_logits = torch.log(start + EPS)
    weights = torch.zeros(B, L, 4, dtype=torch.float64, device=dev, requires_grad=True)
    opt = torch.optim.AdamW([weights], lr=lr)
    rep_x0, rep_edit = x0.repeat(draws, 1), editable.repeat(draws, 1)  # (D*B, L), draw-major
    best_x, best_obj = x0.clone(), torch.full((B,), -math.inf, dtype=torch.float64, device=dev)
    start_full = relaxed_onehot(start.repeat(draws, 1, 1), rep_x0, rep_edit)  # (D*B, L, V)
    stale = 0
    soft = reward.soft
    for step in range(steps):
        logits = (base_logits + weights).repeat(draws, 1, 1)  # (D*B, L, 4)
        u = torch.rand(logits.shape, generator=gen, dtype=torch.float64).to(dev).clamp_(1e-12, 1 - 1e-12)
        y_soft = torch.softmax((logits - torch.log(-torch.log(u))) / tau, dim=-1)  # Gumbel-softmax
        hard_idx = y_soft.argmax(-1)  # (D*B, L)
        y_hard = torch.nn.functional.one_hot(hard_idx, 4).double()
        y = y_hard - y_soft.detach() + y_soft  # straight-through: the hard value, the soft gradient
        onehot = relaxed_onehot(y, rep_x0, rep_edit)
        with torch.enable_grad():
            r = soft(onehot).reshape(-1)  # (D*B,)
            edits = 0.5 * (onehot - start_full).abs().sum((1, 2))  # changed positions
            loss = (-r + edit_cost * edits).sum() / draws
            opt.zero_grad()
            loss.backward()
        opt.step()
        calls[0] += int(onehot.shape[0])
        # the best draw within the budget so far (its soft value is the reward: the draw is one-hot)
        drawn = torch.where(rep_edit, bases[hard_idx], rep_x0)
        obj = (r.detach() - edit_cost * edits.detach()).view(draws, B)
        n_edits = (drawn != rep_x0).sum(dim=1).view(draws, B)
        obj = torch.where(n_edits <= max_edits, obj, torch.full_like(obj, -math.inf))
        top, which = obj.max(dim=0)  # (B,)
        better = top > best_obj
        if bool(better.any()):
            stale = 0
            best_obj = torch.where(better, top, best_obj)
            best_x = torch.where(better[:, None], drawn.view(draws, B, L)[which, torch.arange(B)], best_x)
        else:
            stale += 1
        if on_step is not None:
            on_step(step + 1)
        if stale >= PATIENCE:
            break
    with torch.no_grad():
        final = torch.where(editable, bases[(base_logits + weights).argmax(-1)], x0)  # the argmax of the logits
    final = roll_back(x0, final, reward, max_edits, calls)
    cands = torch.stack([x0, final, best_x])  # (3, B, L)
    r_c = torch.stack([before, score(reward, final, calls), score(reward, best_x, calls)])  # (3, B)
    obj = r_c - edit_cost * (cands != x0).sum(dim=2).double()
    pick = obj.argmax(dim=0)  # ties: the earlier candidate (the input first)
    x = cands[pick, torch.arange(B)]
    return EditOutcome(x, before, r_c[pick, torch.arange(B)], calls[0], 0, step + 1)


__all__ = ["EPS", "PATIENCE", "ledidi_edit", "relaxed_onehot", "roll_back"]
