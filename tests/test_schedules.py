"""Schedules (MDLM tab. 9 / app. E.1): α, α', loss weights, time sampling."""

import math

import pytest
import torch

from dnadiff.diffusion import SCHEDULES, build_schedule
from dnadiff.errors import DnadiffError

NAMES = ["loglinear", "linear", "cosine", "cosine2"]


def test_registry_names():
    assert SCHEDULES.names() == sorted(NAMES)
    with pytest.raises(DnadiffError, match="unknown schedule"):
        build_schedule("cosine3")
    with pytest.raises(DnadiffError, match="eps"):
        build_schedule("loglinear", eps=1.5)


@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_loglinear_weight_is_one_over_t(eps):
    s = build_schedule("loglinear", eps=eps)
    t = torch.linspace(1e-3, 1.0, 101, dtype=torch.float64)
    assert torch.equal(s.loss_weight(t), 1.0 / t)
    # and the generic formula -α'/(1-α) agrees (up to rounding), as docs/references.md: dσ/expm1(σ) = 1/t
    generic = -s.dalpha(t) / (1.0 - s.alpha(t))
    torch.testing.assert_close(generic, 1.0 / t, rtol=1e-9, atol=0)
    t = t[:-1]  # σ(1) = inf when ε = 0
    sigma = -torch.log(1 - (1 - eps) * t)
    dsigma = (1 - eps) / (1 - (1 - eps) * t)
    torch.testing.assert_close(dsigma / torch.expm1(sigma), 1.0 / t, rtol=1e-9, atol=0)
    assert float(s.mask_prob(torch.tensor(0.5))) == pytest.approx((1 - eps) * 0.5)


@pytest.mark.parametrize("name", NAMES)
def test_alpha_endpoints_and_monotone(name):
    s = build_schedule(name, eps=1e-3)
    t = torch.linspace(0, 1, 1001, dtype=torch.float64)
    a = s.alpha(t)
    assert float(a[0]) == pytest.approx(1.0, abs=1e-12)  # α(0) = 1: x_0 = x
    assert float(a[-1]) < 2e-3  # almost everything masked at t = 1
    assert torch.all(a[1:] < a[:-1])  # strictly decreasing
    assert torch.all(s.loss_weight(t[1:]) > 0)


@pytest.mark.parametrize("name", NAMES)
def test_dalpha_matches_autograd_and_weight_formula(name):
    s = build_schedule(name, eps=1e-3)
    t = torch.linspace(0.01, 0.99, 50, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(s.alpha(t).sum(), t)
    torch.testing.assert_close(s.dalpha(t.detach()), grad, rtol=1e-10, atol=1e-12)
    td = t.detach()
    torch.testing.assert_close(s.loss_weight(td), -grad / (1 - s.alpha(td)), rtol=1e-8, atol=0)


def test_closed_forms():
    t = torch.tensor([0.25, 0.5], dtype=torch.float64)
    lin = build_schedule("linear")
    torch.testing.assert_close(lin.alpha(t), torch.exp(-10 * t))
    cos = build_schedule("cosine", eps=0.0)
    torch.testing.assert_close(cos.alpha(t), torch.cos(math.pi * t / 2))
    cos2 = build_schedule("cosine2", eps=0.0)
    torch.testing.assert_close(cos2.alpha(t), torch.cos(math.pi * t / 2) ** 2)


def test_sample_t_stratified_one_per_stratum_and_seeded():
    s = build_schedule("loglinear")
    n = 64
    t = s.sample_t(n, t_min=1e-3, stratified=True, generator=torch.Generator().manual_seed(0))
    assert t.dtype == torch.float32 and t.shape == (n,)
    u = (t.double() - 1e-3) / (1 - 1e-3)
    assert torch.equal(torch.floor(u * n + 1e-6).long().clamp_max(n - 1), torch.arange(n))
    t2 = s.sample_t(n, t_min=1e-3, stratified=True, generator=torch.Generator().manual_seed(0))
    assert torch.equal(t, t2)
    plain = s.sample_t(10_000, t_min=0.2, stratified=False, generator=torch.Generator().manual_seed(1))
    assert float(plain.min()) >= 0.2 and float(plain.max()) <= 1.0
    assert abs(float(plain.mean()) - 0.6) < 4 * (0.8 / math.sqrt(12) / 100)  # 4 SE
