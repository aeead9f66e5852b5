"""A trainable tabulated denoiser small enough to enumerate (vocabulary 4 + mask, length 3), and the
exact distribution of the ancestral rollout (dnadiff/finetune_reward/trajectory.py) it induces.

    den = TableDenoiser.random(seed=0)        # logits[pattern of x_t] : a (5³, 3, 5) parameter table
    p = exact_distribution(den, grid)          # Float64[64]: P(x0 = each of the 4³ sequences)
    SEQS                                       # Long[64, 3] in the order of p

The table is indexed by the whole (partly masked) input, so it can express any p(x0 | x_t);
`forward_soft` is its multilinear extension (Σ over patterns of Π_l onehot[l, pattern_l] · table),
equal to the table at one-hot inputs, so relaxed states have gradients.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

from dnadiff.finetune_reward.trajectory import Grid, masked_log_probs

V, L, MASK = 5, 3, 4
STATES = torch.tensor(list(itertools.product(range(V), repeat=L)))  # (125, 3): index = x0·25 + x1·5 + x2
SEQS = torch.tensor(list(itertools.product(range(V - 1), repeat=L)))  # (64, 3): the clean sequences


def pattern_index(x: Tensor) -> Tensor:
    return x[..., 0] * V * V + x[..., 1] * V + x[..., 2]


class TableDenoiser(nn.Module):
    time_conditioned = False

    def __init__(self, table: Tensor, functional: bool = False):
        super().__init__()
        # (125, 3, 5); functional: the given tensor itself (gradients flow back to the caller's tensor)
        self.table = table if functional else nn.Parameter(table.double().clone())

    @classmethod
    def random(cls, seed: int = 0, scale: float = 1.5) -> "TableDenoiser":
        g = torch.Generator().manual_seed(seed)
        return cls(torch.randn(V**L, L, V, generator=g, dtype=torch.float64) * scale)

    def forward(self, x: Tensor, t: Tensor | None = None) -> Tensor:
        return self.table[pattern_index(x)]  # (B, 3, 5)

    def forward_soft(self, onehot: Tensor, t: Tensor | None = None) -> Tensor:
        oh = onehot.double()
        w = torch.einsum("bi,bj,bk->bijk", oh[:, 0], oh[:, 1], oh[:, 2]).reshape(oh.shape[0], -1)  # (B, 125)
        return torch.einsum("bp,plv->blv", w, self.table)


@torch.no_grad()
def exact_distribution(den: TableDenoiser, grid: Grid) -> Tensor:
    """P(final x = SEQS[k]) under the rollout with this denoiser: the Markov chain over the 125
    partly masked states, one transition matrix per step (positions move independently)."""
    probs = torch.zeros(V**L, dtype=torch.float64)
    probs[pattern_index(torch.full((L,), MASK))] = 1.0
    for i in range(grid.steps):
        log_p = masked_log_probs(den(STATES), MASK)  # (125, 3, 5)
        q = log_p.exp() * grid.unmask_prob(i)
        q[..., MASK] = grid.stay_prob(i)
        keep = STATES != MASK  # unmasked positions are carried over
        q = torch.where(keep.unsqueeze(-1), nn.functional.one_hot(STATES, V).double(), q)
        trans = torch.ones(V**L, V**L, dtype=torch.float64)
        for l in range(L):
            trans = trans * q[:, l, STATES[:, l]]  # (from, to)
        probs = probs @ trans
    return probs[pattern_index(SEQS)]


def kl(p: Tensor, q: Tensor) -> float:
    """KL(p ‖ q) in nats."""
    m = p > 0
    return float((p[m] * (p[m].log() - q[m].log())).sum())


def tilted(p_pre: Tensor, reward: Tensor, beta: float) -> Tensor:
    """p*(x) ∝ p_pre(x) · exp(r(x)/β)."""
    w = p_pre.log() + reward / beta
    return (w - w.logsumexp(0)).exp()


def exact_objective(den: TableDenoiser, pre: TableDenoiser, grid: Grid, reward: Tensor, beta: float) -> Tensor:
    """KL(P_θ ‖ P_pre) over trajectories − E_θ[r(x0)]/β, exactly (differentiable in den's table):
    the chain over the 125 states, with the per-step KL of trajectory.step_kl at every state.
    `reward`: Float64[64] over SEQS."""
    from dnadiff.finetune_reward.trajectory import step_kl

    probs = torch.zeros(V**L, dtype=torch.float64)
    probs[pattern_index(torch.full((L,), MASK))] = 1.0
    kl_total = torch.zeros((), dtype=torch.float64)
    masked = STATES == MASK
    for i in range(grid.steps):
        log_p = masked_log_probs(den(STATES), MASK)  # (125, 3, 5)
        with torch.no_grad():
            log_pre = masked_log_probs(pre(STATES), MASK)
        kl_total = kl_total + probs @ step_kl(log_p, log_pre, masked, grid.unmask_prob(i))
        q = log_p.exp() * grid.unmask_prob(i)
        q = torch.cat([q[..., :MASK], torch.full_like(q[..., :1], grid.stay_prob(i))], dim=-1)
        q = torch.where(masked.unsqueeze(-1), q, nn.functional.one_hot(STATES, V).double())
        trans = torch.ones(V**L, V**L, dtype=torch.float64)
        for l in range(L):
            trans = trans * q[:, l, STATES[:, l]]
        probs = probs @ trans
    return kl_total - probs[pattern_index(SEQS)] @ reward / beta
