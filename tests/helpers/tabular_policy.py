"""A trainable tabulated denoiser small enough to enumerate (vocabulary 4 + mask, length 3), and the
exact distribution of the ancestral rollout (dnadiff/reward_tuning/trajectory.py) it induces.

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

from dnadiff.reward_tuning.trajectory import Grid, masked_log_probs

V, L, MASK = 5, 3, 4
STATES = torch.tensor(list(itertools.product(range(V), repeat=L)))  # (125, 3): index = x0·25 + x1·5 + x2
SEQS = torch.tensor(list(itertools.product(range(V - 1), repeat=L)))  # (64, 3): the clean sequences


def linear_grid(steps: int) -> Grid:
    """`steps` equal steps of t from 1 to 0 under the linear schedule α = 1 − t."""
    ts = torch.linspace(1, 0, steps + 1, dtype=torch.float64)
    return Grid(times=ts[:-1], alphas=1 - ts)


def soft_reward(onehot: Tensor) -> Tensor:
    """1.5·[x_1 = 2] + [x_0 = x_2], multilinear in the one-hot (exact at one-hot inputs): a reward the DRAKES
    estimators can differentiate through relaxed states."""
    return 1.5 * onehot[:, 1, 2] + (onehot[:, 0, :4] * onehot[:, 2, :4]).sum(-1)


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


def transition_matrix(den, grid: Grid, i: int) -> Tensor:
    """The sampler's step-i transition matrix over the 125 partly masked states, Float64[from, to]
    (differentiable in den's table): each masked position stays masked with (1 − α_s)/(1 − α_t) or
    becomes v with p(v | x_t)·(α_s − α_t)/(1 − α_t); unmasked positions are carried over; positions move
    independently given x_t (MDLM, eq. 7-8)."""
    t = grid.times[i].expand(STATES.shape[0])
    log_p = masked_log_probs(den(STATES, t), MASK)  # (125, 3, 5)
    q = log_p.exp() * grid.unmask_prob(i)
    q = torch.cat([q[..., :MASK], torch.full_like(q[..., :1], grid.stay_prob(i))], dim=-1)
    keep = STATES != MASK
    q = torch.where(keep.unsqueeze(-1), nn.functional.one_hot(STATES, V).double(), q)
    trans = torch.ones(V**L, V**L, dtype=torch.float64)
    for pos in range(L):
        trans = trans * q[:, pos, STATES[:, pos]]  # (from, to)
    return trans


def start_state() -> Tensor:
    probs = torch.zeros(V**L, dtype=torch.float64)
    probs[pattern_index(torch.full((L,), MASK))] = 1.0
    return probs


@torch.no_grad()
def exact_distribution(den, grid: Grid) -> Tensor:
    """P(final x = SEQS[k]) under the rollout with this denoiser: the Markov chain over the 125
    partly masked states, one transition matrix per step."""
    probs = start_state()
    for i in range(grid.steps):
        probs = probs @ transition_matrix(den, grid, i)
    return probs[pattern_index(SEQS)]


def kl(p: Tensor, q: Tensor) -> float:
    """KL(p ‖ q) in nats."""
    m = p > 0
    return float((p[m] * (p[m].log() - q[m].log())).sum())


def tilted(p_pre: Tensor, reward: Tensor, beta: float) -> Tensor:
    """p*(x) ∝ p_pre(x) · exp(r(x)/β)."""
    w = p_pre.log() + reward / beta
    return (w - w.logsumexp(0)).exp()


def row_kl(trans: Tensor, trans_pre: Tensor) -> Tensor:
    """KL(trans[x, ·] ‖ trans_pre[x, ·]) of each row, Float64[from]: Σ_y M log(M / M_pre) over the common
    support (the same for both models: it is set by which positions are masked)."""
    support = trans_pre > 0
    ratio = torch.where(support, trans, 1.0).log() - torch.where(support, trans_pre, 1.0).log()
    return (torch.where(support, trans, 0.0) * ratio).sum(-1)


def exact_step_kls(den, pre, grid: Grid) -> Tensor:
    """E_θ[KL(P_θ(x_s | x_t) ‖ P_pre(x_s | x_t))] of each step, Float64[T], from the whole transition
    matrices (not from trajectory.step_kl, which the tests check against it); their sum is
    KL(P_θ ‖ P_pre) over trajectories (the chain rule of the KL)."""
    probs, out = start_state(), []
    for i in range(grid.steps):
        trans = transition_matrix(den, grid, i)
        with torch.no_grad():
            trans_pre = transition_matrix(pre, grid, i)
        out.append(probs @ row_kl(trans, trans_pre))
        probs = probs @ trans
    return torch.stack(out)


def exact_reward(den, grid: Grid, reward: Tensor) -> Tensor:
    """E_θ[r(x0)] (differentiable), `reward`: Float64[64] over SEQS."""
    probs = start_state()
    for i in range(grid.steps):
        probs = probs @ transition_matrix(den, grid, i)
    return probs[pattern_index(SEQS)] @ reward


def exact_objective(den, pre, grid: Grid, reward: Tensor, beta: float) -> Tensor:
    """KL(P_θ ‖ P_pre) over trajectories − E_θ[r(x0)]/β, exactly (differentiable in den's table), the
    KL from the transition matrices (exact_step_kls). `reward`: Float64[64] over SEQS."""
    kl_total = exact_step_kls(den, pre, grid).sum()
    if beta == float("inf"):
        return kl_total
    return kl_total - exact_reward(den, grid, reward) / beta


class StepTableDenoiser(nn.Module):
    """One table per sampler step (Float64[T, 125, 3, 5]), chosen by the time t of `times`: the gradient
    with respect to table[i] is the objective's gradient through step i's decisions alone."""

    time_conditioned = True

    def __init__(self, tables: Tensor, times: Tensor, functional: bool = False):
        super().__init__()
        self.table = tables if functional else nn.Parameter(tables.double().clone())
        self.times = times.double()

    def step_of(self, t: Tensor) -> int:
        return int((self.times - float(t.reshape(-1)[0])).abs().argmin())

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        return self.table[self.step_of(t)][pattern_index(x)]

    def forward_soft(self, onehot: Tensor, t: Tensor) -> Tensor:
        return TableDenoiser(self.table[self.step_of(t)], functional=True).forward_soft(onehot)


def pretrained_and_finetuned(times: Tensor) -> tuple[StepTableDenoiser, StepTableDenoiser]:
    """A frozen pretrained model (the seed-0 random table at every step of `times`) and a fine-tuned one that
    starts 0.5·N(0, 1) away from it (seed 0), so its gradients differ step by step."""
    base = TableDenoiser.random(seed=0).table.detach()
    pre = StepTableDenoiser(base.expand(len(times), *base.shape).clone(), times)
    pre.table.requires_grad_(False)
    gen = torch.Generator().manual_seed(0)
    ft = StepTableDenoiser(pre.table + 0.5 * torch.randn(pre.table.shape, generator=gen, dtype=torch.float64), times)
    return pre, ft
