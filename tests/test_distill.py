"""SDTT distillation (dnadiff/training/sdtt.py) on an enumerable toy: every output distribution of the
ancestral sampler is computed exactly (a Markov chain over the (V+1)^L partly masked states, the step's
transition from samplers/ancestral.py), so the student's K-step distribution is compared with the teacher's
2K-step one by exact KL."""

from __future__ import annotations

import itertools

import pytest
import torch

from dnadiff.diffusion.schedules import build_schedule
from dnadiff.diffusion.subs import subs_log_probs
from dnadiff.errors import DnadiffError
from dnadiff.samplers.ancestral import ancestral_step
from dnadiff.samplers.base import build_sampler
from dnadiff.training.sdtt import check_steps, sdtt_loss, teacher_pairs
from tests.helpers.exact_denoiser import ExactDenoiser

EPS = 1e-3


class Toy:
    """Length L over R real tokens (ids 0..R-1) and the mask R: all (R+1)^L states, their index."""

    def __init__(self, L: int, R: int):
        self.L, self.R, self.M, self.V = L, R, R, R + 1
        self.states = torch.tensor(list(itertools.product(range(self.V), repeat=L)))
        self.powers = self.V ** torch.arange(L - 1, -1, -1)

    def index(self, x):
        return (x * self.powers).sum(-1)

    def random_teacher(self, seed: int):
        """An inexact teacher: a random logit table over the states (time-independent)."""
        g = torch.Generator().manual_seed(seed)
        table = torch.randn(len(self.states), self.L, self.V, generator=g, dtype=torch.float64) * 1.5
        return lambda x, t=None: table[self.index(x)].clone()

    @torch.no_grad()
    def chain(self, denoiser, steps: int, schedule) -> torch.Tensor:
        """Exact P(output = state) of `build_sampler("ancestral", steps, eps=EPS, noise_removal argmax)`."""
        grid = torch.linspace(1.0, EPS, steps + 1, dtype=torch.float64)
        alphas = schedule.alpha(grid).double()
        S, n = self.states, len(self.states)
        p = torch.zeros(n, dtype=torch.float64)
        p[self.index(torch.full((self.L,), self.M))] = 1.0
        for i in range(steps):
            t = torch.full((n,), float(grid[i]))
            probs = subs_log_probs(denoiser(S, t).double(), S, self.M).exp()
            q = ancestral_step(probs, S, self.M, alphas[i], alphas[i + 1])  # (n, L, V)
            T = torch.ones(n, n, dtype=torch.float64)
            for pos in range(self.L):
                T = T * q[:, pos, :][:, S[:, pos]]
            p = p @ T
        t = torch.full((n,), EPS)
        fill = subs_log_probs(denoiser(S, t).double(), S, self.M).argmax(-1)
        final = torch.where(S == self.M, fill, S)
        return torch.zeros(n, dtype=torch.float64).index_add_(0, self.index(final), p)


def kl(p, q) -> float:
    m = p > 0
    return float((p[m] * (p[m].log() - q[m].clamp_min(1e-300).log())).sum())


class TableStudent(torch.nn.Module):
    """A time-conditioned table: logits[k, state] for the student's K grid times, from the teacher's."""

    def __init__(self, toy: Toy, teacher, K: int):
        super().__init__()
        self.toy, self.K = toy, K
        init = teacher(toy.states).double()
        self.table = torch.nn.Parameter(init[None].repeat(K, 1, 1, 1))

    def forward(self, x, t):
        k = torch.round((1.0 - t.double()) / (1.0 - EPS) * self.K).long().clamp(0, self.K - 1)
        return self.table[k, self.toy.index(x)]


def distill_table(toy, teacher, K, target, loss, updates=300, batch=64, seed=0):
    schedule = build_schedule("loglinear")
    student = TableStudent(toy, teacher, K)
    opt = torch.optim.Adam(student.parameters(), lr=0.05)
    sampler = build_sampler("ancestral", steps=2 * K, eps=EPS)
    x_init = torch.full((batch, toy.L), toy.M)
    for u in range(updates):
        g = torch.Generator().manual_seed(seed * 100_003 + u)
        value, _ = sdtt_loss(student, teacher, sampler, schedule, toy.M, x_init, generator=g, target=target, loss=loss)
        opt.zero_grad()
        value.backward()
        opt.step()
    return student, schedule


@pytest.mark.parametrize("target,loss,K", [("marginal", "kl-fwd", 1), ("marginal", "kl-fwd", 2),
                                           ("sdtt", "kl-fwd", 1), ("sdtt", "kl-bwd", 2)])
def test_student_at_k_steps_is_closer_to_the_teacher_at_2k_than_the_teacher_at_k(target, loss, K):
    torch.manual_seed(0)
    toy = Toy(L=2, R=3)
    teacher = toy.random_teacher(seed=100)
    schedule = build_schedule("loglinear")
    p_2k = toy.chain(teacher, 2 * K, schedule)
    p_k = toy.chain(teacher, K, schedule)
    student, _ = distill_table(toy, teacher, K, target, loss)
    p_s = toy.chain(student, K, schedule)
    before, after = kl(p_2k, p_k), kl(p_2k, p_s)
    assert before > 0.02  # the teacher's K and 2K distributions differ: there is something to distil
    assert after < 0.7 * before, (before, after)


def test_without_updates_the_student_is_the_teacher():
    """The comparison above is not vacuous: the untrained student (the teacher's weights) gives the same KL."""
    toy = Toy(L=2, R=3)
    teacher = toy.random_teacher(seed=100)
    schedule = build_schedule("loglinear")
    student = TableStudent(toy, teacher, 2)
    assert torch.allclose(toy.chain(student, 2, schedule), toy.chain(teacher, 2, schedule), atol=1e-12)


def test_exact_teacher_has_nothing_to_gain_from_a_marginal_student():
    """An exact teacher's per-position two-step marginal equals its one-step prediction up to the
    factorisation error: a marginal-matching student stays at the teacher's K-step distribution (the reason
    the tests above use an inexact teacher)."""
    den = ExactDenoiser.random(length=2, real_ids=(0, 1, 2), mask_id=3, vocab_size=4, seed=0, temperature=2.0)
    toy = Toy(L=2, R=3)
    schedule = build_schedule("loglinear")
    student, _ = distill_table(toy, den, 2, "marginal", "kl-fwd", updates=150)
    p_2k, p_k, p_s = toy.chain(den, 4, schedule), toy.chain(den, 2, schedule), toy.chain(student, 2, schedule)
    assert abs(kl(p_2k, p_s) - kl(p_2k, p_k)) < 0.3 * kl(p_2k, p_k)


def test_marginal_target_is_unbiased_for_the_two_step_reveal_distribution():
    """At the first student step (x = all masked) the mean target over rollouts equals the exact
    distribution of the token each position is revealed with over the teacher's two steps."""
    toy = Toy(L=2, R=3)
    teacher = toy.random_teacher(seed=7)
    schedule = build_schedule("loglinear")
    sampler = build_sampler("ancestral", steps=4, eps=EPS)
    x_init = torch.full((20000, toy.L), toy.M)
    pairs = teacher_pairs(teacher, sampler, schedule, toy.M, x_init, torch.Generator().manual_seed(0), "marginal")
    first = pairs.step == 0
    mean_tau = pairs.target[first].mean(0)  # (L, V)
    # exact: reveal at step 0 with a = p(.|all masked); else reveal at step 1 with p(.|x') for x' after step 0
    grid = torch.linspace(1.0, EPS, 5, dtype=torch.float64)
    al = schedule.alpha(grid).double()
    S = toy.states
    start = torch.full((1, toy.L), toy.M)
    a = subs_log_probs(teacher(start).double(), start, toy.M).exp()[0]  # (L, V)
    q = ancestral_step(a[None], start, toy.M, al[0], al[1])[0]  # (L, V)
    p_next = torch.ones(len(S), dtype=torch.float64)
    for pos in range(toy.L):
        p_next = p_next * q[pos, S[:, pos]]
    b = subs_log_probs(teacher(S).double(), S, toy.M).exp()  # (n, L, V)
    u2 = (al[2] - al[1]) / (1 - al[1])
    reveal = (1 - q[:, toy.M])[:, None] * a + u2 * torch.einsum("n,nlv->lv", p_next * 1.0,
                                                                 torch.where((S == toy.M)[..., None], b, 0 * b))
    exact = reveal / reveal.sum(-1, keepdim=True)
    assert torch.allclose(mean_tau, exact, atol=0.01), (mean_tau, exact)


def test_check_steps():
    assert check_steps(128, 64) == 1 and check_steps(128, 8) == 4
    for bad in (3, 128, 256, 0, 48):
        with pytest.raises(DnadiffError, match="--steps"):
            check_steps(128, bad)
