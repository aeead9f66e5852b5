"""Plaid (diffusion/plaid.py, plaid_net.py, plaid_schedule.py, samplers/plaid.py): the bound's terms against
quadrature on a toy with an exact denoiser, the bound >= the exact entropy and -> it as the schedule's ends
widen, the learned schedule's monotonicity, the sampler's law, the backbones' inputs_embeds path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.diffusion import build_objective
from dnadiff.diffusion.plaid_net import PlaidNetwork
from dnadiff.diffusion.plaid_schedule import MonotoneGamma, alpha_sigma, check_monotone
from dnadiff.errors import DnadiffError
from dnadiff.samplers import SeedStream, build_sampler

PI = torch.tensor([0.7, 0.3], dtype=torch.float64)
E1 = torch.tensor([[1.0], [-1.0]])  # V = 2 unit embeddings in D = 1
H_PI = float(-(PI * PI.log()).sum())


class ExactMixture:
    """i.i.d. tokens x ~ PI embedded as E1: logits of the exact posterior q(x | z_t) = softmax(log π_v + log q(z_t|e_v))
    (so x̂ = softmax @ E is the exact posterior mean: the best denoiser of the bound)."""

    training = False

    def __init__(self, gamma: MonotoneGamma, log_prior: torch.Tensor = PI.log()):
        self.gamma, self.log_prior = gamma, log_prior

    def embedding_table(self):
        return E1

    def plaid_predict(self, z, g, t, self_cond=None, attention_mask=None):
        a, s = alpha_sigma(g.double())
        a, s2 = a[:, None, None], (s**2)[:, None, None]
        E = E1.double()
        return (self.log_prior + (a * (z.double() @ E.T) - 0.5 * a**2 * (E**2).sum(-1)) / s2).float()


def schedule(g0: float, g1: float, seed: int = 0) -> MonotoneGamma:
    torch.manual_seed(seed)
    gamma = MonotoneGamma(g0, g1, hidden=8)
    with torch.no_grad():  # a curved (not linear) schedule: the integral must not depend on its shape
        gamma.w2.add_(torch.randn(8) * 2)
        gamma.w3.add_(3.0)
    return gamma


def gh(n: int = 120):
    """Gauss-Hermite (probabilists') nodes and weights for E over N(0, 1)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return torch.tensor(x), torch.tensor(w / math.sqrt(2 * math.pi))


def posterior_mean(z: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    a, s = (v[..., None] for v in alpha_sigma(g))  # g broadcasts against z; the last axis runs over tokens
    logits = PI.log() + (a * z[..., None] * E1.double()[:, 0] - 0.5 * a**2) / s**2
    return (torch.softmax(logits, -1) * E1.double()[:, 0]).sum(-1)


def quadrature_terms(gamma: MonotoneGamma, x: int, nodes: int = 4001) -> dict[str, float]:
    """The bound's three terms for token x by deterministic quadrature: the diffusion term as the integral over t
    of ½ γ'(t) e^{-γ(t)} E_ε (e_x - x̂)² (trapezoid in t, Gauss-Hermite in ε), the reconstruction term by
    Gauss-Hermite, the prior term in closed form."""
    eps, w = gh()
    e = float(E1[x, 0])
    t = torch.linspace(0, 1, nodes, dtype=torch.float64)
    with torch.no_grad():
        g, dg = gamma(t)
        g0, g1 = (v.double() for v in gamma.endpoints())
    a, s = alpha_sigma(g)
    z = a[:, None] * e + s[:, None] * eps[None]  # (T, n)
    mse = (((e - posterior_mean(z, g[:, None])) ** 2) * w).sum(-1)
    diff = float(torch.trapezoid(0.5 * dg * torch.exp(-g) * mse, t))
    a0, s0 = alpha_sigma(g0)
    z0 = a0 * e + s0 * eps
    logits = -((z0[:, None] - a0 * E1.double()[:, 0]) ** 2) / (2 * s0**2)
    recon = float((-(logits.log_softmax(-1)[:, x]) * w).sum())
    a1, s1 = alpha_sigma(g1)
    prior = float(0.5 * (s1**2 - 1 - torch.log(s1**2) + a1**2 * e**2))
    return {"diffusion": diff, "recon": recon, "prior": prior}


def mc_terms(gamma, x: int, n: int = 20000, seed: int = 0) -> dict[str, tuple[float, float]]:
    """(mean, standard error) of each term of the objective's one-sample estimator over n draws."""
    obj = build_objective("plaid", vocab_size=2)
    x0 = torch.full((n, 1), x)
    with torch.no_grad():
        parts = obj.terms(ExactMixture(gamma), x0, generator=torch.Generator().manual_seed(seed))
    return {k: (float(v.mean()), float(v.std() / math.sqrt(n))) for k, v in parts.items()}


@pytest.mark.parametrize("x", [0, 1])
def test_diffusion_and_recon_terms_match_quadrature(x):
    gamma = schedule(-4.0, 4.0)
    quad, mc = quadrature_terms(gamma, x), mc_terms(gamma, x)
    for k in ("diffusion", "recon", "prior"):
        mean, se = mc[k]
        assert abs(mean - quad[k]) <= 4 * se + 1e-6, (k, mean, quad[k], se)
    assert quad["diffusion"] > 1e-3  # a non-trivial check


def test_diffusion_term_of_a_fixed_prediction_is_closed_form():
    """x̂ = e_1 whatever z_t: L_diff = ½ |e_0 - e_1|² (e^{-γ_0} - e^{-γ_1}) exactly (VDM eq. 17 in γ), whatever
    the schedule's shape: checks the weight ½ γ' e^{-γ} and γ' itself (the MC mean over stratified t)."""
    gamma = schedule(-2.0, 3.0, seed=1)
    fixed = ExactMixture(gamma, log_prior=torch.tensor([-1e4, 0.0], dtype=torch.float64))
    fixed.plaid_predict = lambda z, g, t, sc=None, m=None: torch.tensor([-1e4, 0.0]).expand(*z.shape[:2], 2)
    obj = build_objective("plaid", vocab_size=2)
    with torch.no_grad():
        d = obj.terms(fixed, torch.zeros(40000, 1, dtype=torch.long), generator=torch.Generator().manual_seed(2))
        g0, g1 = gamma.endpoints()
    exact = 0.5 * 4.0 * float(torch.exp(-g0) - torch.exp(-g1))
    mean, se = float(d["diffusion"].mean()), float(d["diffusion"].std() / 200)
    assert abs(mean - exact) <= 4 * se and se < 0.02 * exact, (mean, exact, se)


def test_bound_is_above_the_entropy_and_tightens_to_it():
    """With the exact denoiser, E_x[L] = H(π) + KL terms at the two ends (I-MMSE): >= H(π), decreasing to it
    as the schedule's end points widen."""
    bounds = []
    for g0, g1 in [(-1.0, 1.0), (-3.0, 3.0), (-6.0, 6.0), (-10.0, 10.0)]:
        gamma = schedule(g0, g1)
        per_x = [sum(quadrature_terms(gamma, x).values()) for x in (0, 1)]
        bounds.append(float(PI[0]) * per_x[0] + float(PI[1]) * per_x[1])
    assert all(b >= H_PI - 1e-6 for b in bounds), (bounds, H_PI)
    assert all(a > b for a, b in zip(bounds, bounds[1:])), bounds
    assert bounds[-1] - H_PI < 1e-4 and bounds[0] - H_PI > 0.02, (bounds, H_PI)


def test_a_wrong_denoiser_gives_a_larger_bound():
    gamma = schedule(-6.0, 6.0)
    obj = build_objective("plaid", vocab_size=2)
    x0 = (torch.rand(20000, 1, generator=torch.Generator().manual_seed(0)) > PI[0]).long()
    with torch.no_grad():
        exact = obj.loss(ExactMixture(gamma), x0, generator=torch.Generator().manual_seed(1)).nll
        flat = obj.loss(ExactMixture(gamma, torch.zeros(2, dtype=torch.float64)), x0,
                        generator=torch.Generator().manual_seed(1)).nll  # the uniform prior's posterior
    diff = flat - exact
    assert float(diff.mean()) > 4 * float(diff.std()) / math.sqrt(len(diff))
    se = float(exact.std()) / math.sqrt(len(exact))
    assert abs(float(exact.mean()) - H_PI) < 4 * se + 1e-3  # the bound ≈ H(π) at these end points


def test_schedule_stays_monotone_after_random_updates_and_derivative_is_exact():
    t = torch.linspace(0, 1, 101, dtype=torch.float64)
    for seed in range(6):
        gamma = MonotoneGamma(-7.0, 4.0, hidden=16)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in gamma.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 3.0)
        check_monotone(gamma)
        g, dg = gamma(t)
        g0, g1 = gamma.endpoints()
        assert bool((g[1:] > g[:-1]).all()) and torch.allclose(g[[0, -1]], torch.stack([g0, g1]).double())
        h = 1e-6
        fd = (gamma(t.clamp(h, 1 - h) + h)[0] - gamma(t.clamp(h, 1 - h) - h)[0]) / (2 * h)
        torch.testing.assert_close(dg, fd, rtol=1e-5, atol=1e-5)


def test_non_monotone_schedules_are_refused():
    flat = MonotoneGamma()
    with torch.no_grad():
        flat.log_gap.fill_(-1e4)  # softplus underflows to 0: γ constant
    with pytest.raises(DnadiffError, match="not strictly increasing"):
        check_monotone(flat)
    net = PlaidNetwork(build_backbone("dit", "tiny", vocab_size=6))
    state = net.state_dict()
    state["gamma.w2"] = torch.full_like(state["gamma.w2"], float("nan"))
    with pytest.raises(DnadiffError, match="plaid model weights: the noise schedule γ\\(t\\) is not finite"):
        net.load_state_dict(state)


def test_backbones_that_cannot_take_embeddings_are_refused():
    for name, over in [("hyena", {}), ("caduceus", {"rcps": True})]:
        with pytest.raises(DnadiffError, match="cannot take embeddings"):
            PlaidNetwork(build_backbone(name, "tiny", vocab_size=12, **over))


@pytest.mark.parametrize("name,over", [("dit", {}), ("mamba", {}), ("caduceus", {"rcps": False})])
def test_inputs_embeds_equals_the_token_lookup(name, over):
    torch.manual_seed(0)
    b = build_backbone(name, "tiny", vocab_size=12, **over)
    with torch.no_grad():
        for p in b.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # DiT's zero-initialised output layer would hide a difference
    ids = torch.randint(0, 12, (2, 9))
    lookup = {"dit": lambda: b.vocab_embed, "mamba": lambda: b.backbone.embedding,
              "caduceus": lambda: b.backbone.embeddings}[name]()
    ref = b(ids)
    assert ref.abs().max() > 1e-3
    torch.testing.assert_close(b(None, inputs_embeds=lookup(ids)), ref)
    assert b.takes_embeddings


def test_loss_is_differentiable_in_every_part():
    torch.manual_seed(0)
    net = PlaidNetwork(build_backbone("dit", "tiny", vocab_size=12, time_conditioning=True), embed_dim=4)
    torch.nn.init.normal_(net.backbone.output_layer.linear.weight, std=0.1)  # zero at init: no gradient inside
    net.train()
    obj = build_objective("plaid", vocab_size=12, self_cond_prob=1.0)
    x0 = torch.randint(7, 11, (4, 16))
    am = torch.ones_like(x0)
    am[:, -3:] = 0
    out = obj.loss(net, x0, am, generator=torch.Generator().manual_seed(1))
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.num_tokens.tolist() == [13.0] * 4
    for p in (net.embedding, net.gamma.gamma_0, net.gamma.log_gap, net.input_proj.weight):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


def test_sampler_draws_the_data_law_with_an_exact_denoiser():
    gamma = schedule(-9.0, 9.0)
    smp = build_sampler("plaid", steps=200)
    x = smp.generate(ExactMixture(gamma), None, 5, (4000, 1), generator=torch.Generator().manual_seed(0))
    p0 = float((x == 0).float().mean())
    assert abs(p0 - 0.7) < 4 * math.sqrt(0.21 / 4000), p0
    assert set(x.unique().tolist()) <= {0, 1} and smp.last_nfe == 200


def test_sampler_keeps_templates_and_does_not_depend_on_the_batch_layout():
    den = ExactMixture(schedule(-6.0, 6.0))
    tmpl = torch.full((4, 5), 5)
    tmpl[:, 2] = 1
    smp = build_sampler("plaid", steps=12)
    whole = smp.generate(den, None, 5, (4, 5), template=tmpl, generator=3)
    parts = torch.cat([smp.generate(den, None, 5, (1, 5), template=tmpl[:1], generator=SeedStream(3)),
                       smp.generate(den, None, 5, (3, 5), template=tmpl[1:], generator=SeedStream(3, first_row=1))])
    assert torch.equal(whole, parts) and bool((whole[:, 2] == 1).all())
    assert not torch.equal(whole, smp.generate(den, None, 5, (4, 5), template=tmpl, generator=4))


def test_schedule_shape_gets_the_gradient_of_the_squared_diffusion_term(monkeypatch):
    """VDM's variance-minimising schedule (app. I.2): with the hooks, d(Σ_b L_b)/dη for the shape's parameters η
    equals (without them) d(Σ_b L_b²)/dη; the end points keep the bound's own gradient."""
    from dnadiff.diffusion import plaid

    gamma = schedule(-5.0, 5.0)
    obj = build_objective("plaid", vocab_size=2)
    x0 = torch.tensor([[0, 1, 0], [1, 1, 0], [0, 0, 1]])

    def grads(square: bool):
        gamma.zero_grad()
        d = obj.terms(ExactMixture(gamma), x0, generator=torch.Generator().manual_seed(4))["diffusion"].sum(1)
        ((d**2).sum() if square else d.sum()).backward()
        return gamma.w2.grad.clone(), gamma.gamma_0.grad.clone(), d.detach()

    hooked, ends_hooked, d = grads(False)
    monkeypatch.setattr(plaid, "variance_gradient", lambda *a: None)
    plain, ends_plain, _ = grads(False)
    squared, _, _ = grads(True)
    torch.testing.assert_close(hooked, squared)
    torch.testing.assert_close(ends_hooked, ends_plain)
    assert not torch.allclose(hooked, plain) and hooked.abs().sum() > 0

