"""DUO's discrete consistency distillation (dnadiff/training/dcd.py): the Gaussian-uniform duality's operator
and its inverse, the coupled latents' marginals, and on the enumerable udlm toy of tests/test_udlm_exact.py the
student at K steps against the teacher at 2K steps, by exact KL of the udlm sampler's output distribution."""

from __future__ import annotations

import math

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.diffusion.udlm import data_log_probs, uniform_posterior
from dnadiff.training.dcd import alpha_of_nu, coupled_latents, dcd_loss, nu_of_alpha
from tests.test_udlm_exact import COMBOS, NON, P_DATA, PAD, ExactDenoiser, V

EPS = 1e-3
IDS = torch.tensor([2, 3, 4])
STATES = torch.cat([COMBOS + 2, torch.full((9, 1), NON), torch.full((9, 1), PAD)], 1)  # (9, 4): 2 data positions


def test_operator_has_the_closed_form_for_two_tokens_and_inverts():
    nu = torch.tensor([0.0, 0.3, 1.0, 2.5, 5.0], dtype=torch.float64)
    closed = 2 * torch.special.ndtr(nu / math.sqrt(2)) - 1  # N = 2: P(ε_0 - ε_1 > -ν) = Φ(ν/√2)
    assert torch.allclose(alpha_of_nu(nu, 2), closed, atol=1e-9)
    for N in (4, 50257):
        a = torch.tensor([0.0, 1e-3, 0.2, 0.5, 0.9, 0.999], dtype=torch.float64)
        assert torch.allclose(alpha_of_nu(nu_of_alpha(a, N), N), a, atol=1e-6)
        assert bool((nu_of_alpha(a, N).diff() > 0).all())
    assert math.isinf(float(nu_of_alpha(torch.tensor(1.0), 4)))


def test_coupled_latents_have_the_uniform_noise_marginals_and_one_trajectory():
    g = torch.Generator().manual_seed(0)
    n, N = 100_000, 4
    x = torch.randint(0, N, (n, 1), generator=g)
    a_t, a_s = torch.tensor(0.3), torch.tensor(0.7)
    z_t, z_s, z_0 = coupled_latents(x, [nu_of_alpha(a_t, N).expand(n), nu_of_alpha(a_s, N).expand(n),
                                        torch.full((n,), math.inf)], N, g)
    for z, a in ((z_t, 0.3), (z_s, 0.7)):
        stay = float((z == x).double().mean())
        assert abs(stay - (a + (1 - a) / N)) < 0.01  # q(z = x) = α + (1 - α)/N
    assert torch.equal(z_0, x)
    assert bool(((z_t == x) <= (z_s == x)).all())  # one ε: a latent at x stays at x as noise falls


def udlm_chain(den, K: int, schedule) -> torch.Tensor:
    """Exact P(output) of the udlm sampler (samplers/uniform.py) with K steps over the 9 data combinations."""
    grid = torch.linspace(1, EPS, K, dtype=torch.float64)
    p = torch.full((9,), 1 / 9, dtype=torch.float64)
    with torch.no_grad():
        for k in range(K):
            a_t = schedule.alpha(grid[k:k + 1]).expand(9)
            a_s = torch.ones(9, dtype=torch.float64) if k == K - 1 else schedule.alpha(grid[k + 1:k + 2]).expand(9)
            x_hat = data_log_probs(den(STATES, grid[k].expand(9).float()), IDS).double().exp()[:, :2]
            post = uniform_posterior(x_hat, COMBOS, a_t, a_s)  # (9, 2, 3)
            p = p @ (post[:, 0, COMBOS[:, 0]] * post[:, 1, COMBOS[:, 1]])
    return p


def kl(p, q) -> float:
    return float((p * (p / q).log()).sum())


class TableStudent(torch.nn.Module):
    """Logits per (query time of the K-step grid, state), from the teacher's."""

    def __init__(self, teacher, K: int):
        super().__init__()
        self.K = K
        grid = torch.linspace(1, EPS, K, dtype=torch.float64)
        self.table = torch.nn.Parameter(torch.stack([teacher(STATES, g.expand(9)) for g in grid]))

    def forward(self, x, t):
        k = torch.round((1 - t.double()) / (1 - EPS) * (self.K - 1)).long().clamp(0, self.K - 1)
        return self.table[k, (x[:, 0] - 2) * 3 + (x[:, 1] - 2)]


@pytest.mark.parametrize("K", [2, 4])
def test_dcd_student_at_k_steps_is_closer_to_the_teacher_at_2k(K):
    """One DCD round at the student's query times (s = t - one teacher step) with an inexact teacher (x̂ the
    posterior mean, not the exact leave-one-out x̂): the K-step student lands nearer the teacher's 2K-step
    distribution. (With the exact x̂ one round gains nothing at K = 2 and loses at K = 8 on this toy.)"""
    schedule = build_schedule("loglinear")
    teacher = ExactDenoiser(schedule, kind="mean")
    student = TableStudent(teacher, K)
    assert torch.allclose(udlm_chain(student, K, schedule), udlm_chain(teacher, K, schedule))
    opt = torch.optim.Adam(student.parameters(), lr=0.05)
    g_t = torch.linspace(1, EPS, 2 * K, dtype=torch.float64)
    g_s = torch.linspace(1, EPS, K, dtype=torch.float64)
    for u in range(200):
        g = torch.Generator().manual_seed(u)
        x0 = STATES[torch.multinomial(P_DATA, 1024, replacement=True, generator=g)]
        t = g_s[torch.randint(0, K, (1024,), generator=g)]
        s = (t - (g_t[0] - g_t[1])).clamp_min(EPS)
        loss = dcd_loss(student, teacher, x0, t, s, schedule, IDS, V, generator=g, loss="kl-fwd")
        opt.zero_grad()
        loss.backward()
        opt.step()
    p_2k = udlm_chain(teacher, 2 * K, schedule)
    before, after = kl(p_2k, udlm_chain(teacher, K, schedule)), kl(p_2k, udlm_chain(student, K, schedule))
    assert after < 0.7 * before, (before, after)


def test_dcd_loss_is_zero_for_the_teacher_at_equal_times_and_leaves_non_data_tokens():
    schedule = build_schedule("loglinear")
    teacher = ExactDenoiser(schedule, kind="loo")
    x0 = STATES[torch.arange(9)]
    t = torch.full((9,), 0.5, dtype=torch.float64)
    seen = []

    def spy(x, tt):
        seen.append(x.clone())
        return teacher(x, tt)

    value = dcd_loss(spy, teacher, x0, t, t, schedule, IDS, V, generator=torch.Generator().manual_seed(0))
    assert abs(float(value)) < 1e-6
    assert torch.equal(seen[0][:, 2:], x0[:, 2:])  # N and [PAD] never noised
