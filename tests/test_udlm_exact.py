"""UDLM (uniform-noise diffusion, diffusion/udlm.py, samplers/uniform.py) on an enumerable toy.

Toy: sequences [d, d, NON, PAD] with two data positions over N = 3 data tokens (ids 2, 3, 4), a visible
non-data token (id 1) and a pad (attention_mask 0). The exact denoisers enumerate the 9 data pairs:
  posterior mean  x̂_v = p(x^l = v | z_t)
  leave-one-out   x̂_v ∝ p(x^l = v | z_t) / q(z_t^l | v)      (the exact x of the x-parameterisation)
and put large logits on every non-data column, which the objective and the sampler must ignore.
References are computed independently: the D3PM discrete-time bound from generic transition matrices
(T → ∞ by Richardson extrapolation) and -log p(x) by enumeration.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.diffusion.udlm import prior_kl, udlm_rate_kl
from dnadiff.guidance import build_method
from dnadiff.samplers import build_sampler

MASK, NON, PAD = 0, 1, 5
DATA = [2, 3, 4]
N, V = 3, 6
COMBOS = torch.tensor(list(itertools.product(range(N), repeat=2)))  # (9, 2) data indices
P_DATA = torch.tensor([0.30, 0.02, 0.08, 0.05, 0.20, 0.05, 0.01, 0.09, 0.20], dtype=torch.float64)
P_Y = torch.tensor([0.9, 0.2, 0.5, 0.1, 0.7, 0.3, 0.6, 0.05, 0.4], dtype=torch.float64)  # p(y = 1 | x)


def q_mat(alpha: torch.Tensor) -> torch.Tensor:
    """Q̄ [..., v, z] = q(z | v) = α δ + (1 - α)/N."""
    a = alpha.double()[..., None, None]
    return a * torch.eye(N, dtype=torch.float64) + (1 - a) / N


class ExactDenoiser:
    """denoiser(z, t) for data p (over COMBOS); kind 'mean' or 'loo' (see the module docstring)."""

    time_conditioned = True

    def __init__(self, schedule, p=P_DATA, kind="loo"):
        self.schedule, self.p, self.kind = schedule, p, kind

    def posterior(self, z: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(p(combo | z_t) Float64[B, 9], q(z_t^l | v) Float64[B, 2, N]) for the data positions of z."""
        zi = (z[:, :2] - 2).clamp(0, N - 1)  # (B, 2) data indices
        Q = q_mat(self.schedule.alpha(t.double()))  # (B, N, N)
        lik_pos = torch.stack([Q[torch.arange(z.shape[0]), :, zi[:, k]] for k in range(2)], 1)  # (B, 2, N): q(z^l | v)
        lik = lik_pos[:, 0, COMBOS[:, 0]] * lik_pos[:, 1, COMBOS[:, 1]]  # (B, 9)
        post = self.p * lik
        return post / post.sum(1, keepdim=True), lik_pos

    def __call__(self, z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        post, lik_pos = self.posterior(z, t)
        marg = torch.stack([torch.stack([post[:, COMBOS[:, k] == v].sum(1) for v in range(N)], 1) for k in range(2)], 1)
        x_hat = marg if self.kind == "mean" else marg / lik_pos
        x_hat = x_hat / x_hat.sum(-1, keepdim=True)  # (B, 2, N)
        logits = torch.full((z.shape[0], z.shape[1], V), 30.0, dtype=torch.float64)  # garbage off the data
        logits[:, :2, 2:5] = x_hat.log()
        return logits


def seq(c: int) -> torch.Tensor:
    return torch.tensor([2 + int(COMBOS[c, 0]), 2 + int(COMBOS[c, 1]), NON, PAD])


def enumerated_rate(obj, den, c: int, t: torch.Tensor) -> torch.Tensor:
    """E_{z_t ~ q(.|x)} Σ_l f_l(t) for x = COMBOS[c], at each time of t (Float64[K]) -> Float64[K]."""
    K = t.numel()
    x_idx = COMBOS[c].expand(9, 2)
    Q = q_mat(obj.schedule.alpha(t))  # (K, N, N)
    w = Q[:, x_idx[0, 0], COMBOS[:, 0]] * Q[:, x_idx[0, 1], COMBOS[:, 1]]  # (K, 9) q(z_t | x)
    z = torch.cat([COMBOS + 2, torch.full((9, 1), NON), torch.full((9, 1), PAD)], 1)  # (9, 4)
    zz, tt = z.repeat(K, 1), t.repeat_interleave(9)
    log_x_hat = den(zz, tt)[:, :2, 2:5].log_softmax(-1)
    f = udlm_rate_kl(log_x_hat, x_idx.repeat(K, 1), COMBOS.repeat(K, 1), obj.schedule.alpha(tt),
                     obj.schedule.dalpha(tt)).sum(1)  # (K·9,)
    return (w * f.view(K, 9)).sum(1)


def continuous_nelbo(obj, den, c: int) -> float:
    """∫_0^1 E f dt (composite Gauss-Legendre, nodes dense at both ends) + the prior term."""
    edges = [0.0, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0]
    x, wt = np.polynomial.legendre.leggauss(24)
    ts, ws = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        ts += list(a + (b - a) * (x + 1) / 2)
        ws += list((b - a) / 2 * wt)
    t = torch.tensor(ts, dtype=torch.float64)
    integral = float((enumerated_rate(obj, den, c, t) * torch.tensor(ws, dtype=torch.float64)).sum())
    alpha_1 = float(obj.schedule.alpha(torch.ones((), dtype=torch.float64)))
    return integral + 2 * prior_kl(alpha_1, N)


def discrete_bound(schedule, den, c: int, T: int) -> float:
    """The D3PM bound with T steps from generic matrices (x-parameterisation
    p_θ(z_s|z_t) ∝ q(z_t|z_s) Σ_v q(z_s|v) x̂_v), the prior KL included: independent of the closed-form
    posterior and of the continuous formula."""
    i = torch.arange(1, T + 1, dtype=torch.float64)
    t, s = i / T, (i - 1) / T
    a_t, a_s = schedule.alpha(t), schedule.alpha(s)
    Qt, Qs, Qts = q_mat(a_t), q_mat(a_s), q_mat(a_t / a_s)  # (T, N, N)
    x = COMBOS[c]
    zs = COMBOS  # the 9 values of z_t
    z = torch.cat([zs + 2, torch.full((9, 1), NON), torch.full((9, 1), PAD)], 1)
    x_hat = den(z.repeat(T, 1), t.repeat_interleave(9))[:, :2, 2:5].softmax(-1).view(T, 9, 2, N)
    total = torch.zeros(T, dtype=torch.float64)
    for k in range(2):
        zi = zs[:, k]  # (9,)
        fwd = Qts[:, :, zi].transpose(1, 2)  # (T, 9, N): q(z_t = zi | z_s = j)
        q_true = fwd * Qs[:, x[k], :][:, None, :]
        q_true = q_true / q_true.sum(-1, keepdim=True)
        p_mod = fwd * torch.einsum("tbv,tvj->tbj", x_hat[:, :, k], Qs)
        p_mod = p_mod / p_mod.sum(-1, keepdim=True)
        kl = torch.where(q_true > 0, q_true * (q_true.clamp_min(1e-300).log() - p_mod.log()), torch.zeros_like(q_true))
        total = total + (Qt[:, x[0], zs[:, 0]] * Qt[:, x[1], zs[:, 1]] * kl.sum(-1)).sum(1)
    alpha_1 = float(schedule.alpha(torch.ones((), dtype=torch.float64)))
    return float(total.sum()) + 2 * prior_kl(alpha_1, N)


def make(eps: float):
    sched = build_schedule("loglinear", eps=eps)
    return sched, build_objective("udlm", schedule=sched, mask_id=MASK, vocab_size=V, data_ids=DATA, t_min=0.0)


def test_nelbo_of_the_leave_one_out_denoiser_is_minus_log_p():
    sched, obj = make(0.0)
    den = ExactDenoiser(sched, kind="loo")
    for c in range(9):
        assert continuous_nelbo(obj, den, c) == pytest.approx(-math.log(P_DATA[c]), abs=2e-7)


def test_nelbo_with_a_prior_gap_matches_its_enumerated_value():
    # α_1 = ε > 0: NELBO = -log p(x) + E_{q(z_1|x)} log(q(z_1)/u(z_1)) for the exact reverse process
    sched, obj = make(0.05)
    den = ExactDenoiser(sched, kind="loo")
    Q1 = q_mat(sched.alpha(torch.ones((), dtype=torch.float64)))
    q_z1 = (P_DATA[:, None] * Q1[COMBOS[:, 0]][:, COMBOS[:, 0]] * Q1[COMBOS[:, 1]][:, COMBOS[:, 1]]).sum(0)
    for c in (0, 4, 6):
        w = Q1[COMBOS[c, 0], COMBOS[:, 0]] * Q1[COMBOS[c, 1], COMBOS[:, 1]]
        gap = float((w * (q_z1 * N**2).log()).sum())
        assert continuous_nelbo(obj, den, c) == pytest.approx(-math.log(P_DATA[c]) + gap, abs=2e-7)


def test_nelbo_of_the_posterior_mean_is_the_discrete_bound_limit_and_above_the_entropy():
    sched, obj = make(1e-3)
    den = ExactDenoiser(sched, kind="mean")
    cont = [continuous_nelbo(obj, den, c) for c in range(9)]
    for c in (0, 4, 7):
        b1, b2, b4 = (discrete_bound(sched, den, c, T) for T in (2000, 4000, 8000))
        assert b1 < b2 < b4 < cont[c]  # the discrete bound rises toward the continuous one
        # T → ∞: the gap is (a + b log T)/T, removed by two levels of Richardson extrapolation
        r1, r2 = 2 * b2 - b1, 2 * b4 - b2
        assert cont[c] - b4 > 1e-4 and 2 * r2 - r1 == pytest.approx(cont[c], abs=2e-6)
    entropy = float(-(P_DATA * P_DATA.log()).sum())
    expected = float((P_DATA * torch.tensor(cont)).sum())
    assert expected > entropy + 1e-2  # the posterior mean is not the exact x of this parameterisation
    loo = [continuous_nelbo(obj, ExactDenoiser(sched, kind="loo"), c) for c in range(9)]
    assert float((P_DATA * torch.tensor(loo)).sum()) < expected


def test_loss_estimates_the_enumerated_integrand_and_ignores_non_data_tokens():
    sched, obj = make(1e-3)
    den = ExactDenoiser(sched, kind="mean")
    c, M = 4, 20000
    x0 = seq(c).expand(M, 4).clone()
    mask = torch.tensor([1, 1, 1, 0]).expand(M, 4)
    t = torch.full((M,), 0.3)
    out = obj.loss(den, x0, mask, t=t, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out.num_tokens, torch.full((M,), 2.0))  # NON and the pad are neither noised nor counted
    want = float(enumerated_rate(obj, den, c, torch.tensor([0.3], dtype=torch.float32).double())[0]) \
        + 2 * prior_kl(float(sched.alpha(torch.ones((), dtype=torch.float64))), N)
    nll = out.nll.double()
    assert abs(float(nll.mean()) - want) < 5 * float(nll.std()) / math.sqrt(M)


def sample_counts(x: torch.Tensor) -> np.ndarray:
    assert bool((x[:, 2] == NON).all()) and bool((x[:, 3] == PAD).all())  # template positions never change
    assert bool(((x[:, :2] >= 2) & (x[:, :2] <= 4)).all())  # only data tokens are drawn
    idx = (x[:, 0] - 2) * N + (x[:, 1] - 2)
    return np.bincount(idx.numpy(), minlength=9)


def template(M: int) -> torch.Tensor:
    return torch.tensor([MASK, MASK, NON, PAD]).expand(M, 4).clone()


def test_sampler_with_the_exact_denoiser_reproduces_the_data():
    sched = build_schedule("loglinear", eps=0.0)
    M = 20000
    smp = build_sampler("udlm", steps=200, data_ids=DATA)
    x = smp.generate(ExactDenoiser(sched), sched, MASK, (M, 4), template=template(M),
                     generator=torch.Generator().manual_seed(1))
    assert smp.last_nfe == 200 and smp.last_steps == 201  # the first loop step draws z_1 (no call)
    counts = sample_counts(x)
    assert chisquare(counts, M * P_DATA.numpy()).pvalue > 1e-3
    # the posterior mean in place of the leave-one-out x̂ samples another distribution
    x = build_sampler("udlm", steps=50, data_ids=DATA).generate(
        ExactDenoiser(sched, kind="mean"), sched, MASK, (M // 2, 4), template=template(M // 2),
        generator=torch.Generator().manual_seed(1))
    assert chisquare(sample_counts(x), M // 2 * P_DATA.numpy()).pvalue < 1e-6


def test_cbg_with_gamma_one_and_the_exact_classifier_samples_p_x_given_y():
    sched = build_schedule("loglinear", eps=0.0)
    den = ExactDenoiser(sched)

    class Classifier:
        takes_time = True  # p(y = 1 | z_t, t) = Σ_x p(y = 1 | x) p(x | z_t)

        def __call__(self, z, t=None):  # t None: clean sequences (the method's final score)
            post, _ = den.posterior(z, torch.zeros(z.shape[0]) if t is None else t)
            return (post * P_Y).sum(1).log()

    M = 8000
    smp = build_sampler("udlm", steps=200, data_ids=DATA)
    method = build_method("cg", smp, Classifier(), scale=1.0)
    x = method.generate(den, sched, MASK, (M, 4), template=template(M), generator=torch.Generator().manual_seed(2))
    target = P_DATA * P_Y / (P_DATA * P_Y).sum()
    counts = sample_counts(x)
    assert chisquare(counts, M * target.numpy()).pvalue > 1e-3
    assert chisquare(counts, M * P_DATA.numpy()).pvalue < 1e-6  # and it is guided away from p(x)
    assert smp.posterior_guidance == []  # the hook is removed after the run


def test_cfg_combines_the_posteriors_with_gamma():
    # one step from the prior to clean tokens: x^l ∝ [p_c]^γ [p_u]^(1-γ), p(v | z_1) ∝ x̂_v q(z_1^l | v)
    sched = build_schedule("loglinear", eps=0.4)  # α_1 = 0.4: the step depends on z_1
    p_cond = P_DATA * P_Y / (P_DATA * P_Y).sum()
    cond, uncond = ExactDenoiser(sched, p=p_cond), ExactDenoiser(sched)
    gamma, M = 2.0, 30000
    z = torch.cat([COMBOS + 2, torch.full((9, 1), NON), torch.full((9, 1), PAD)], 1)
    one = torch.ones(9, dtype=torch.float64)
    Q1 = q_mat(sched.alpha(one))  # (9, N, N)
    target = torch.zeros(9, dtype=torch.float64)
    step_probs = []
    for d in (cond, uncond):
        x_hat = d(z, one)[:, :2, 2:5].softmax(-1)  # (9, 2, N)
        lik = torch.stack([Q1[torch.arange(9), :, COMBOS[:, k]] for k in range(2)], 1)  # (9, 2, N): q(z_1^l | v)
        step_probs.append((x_hat * lik) / (x_hat * lik).sum(-1, keepdim=True))
    mixed = (gamma * step_probs[0].log() + (1 - gamma) * step_probs[1].log()).softmax(-1)  # (9, 2, N)
    for zc in range(9):  # z_1 uniform over the 9 pairs
        target += mixed[zc, 0, COMBOS[:, 0]] * mixed[zc, 1, COMBOS[:, 1]] / 9
    smp = build_sampler("udlm", steps=1, data_ids=DATA).with_cfg(uncond, gamma)
    x = smp.generate(cond, sched, MASK, (M, 4), template=template(M), generator=torch.Generator().manual_seed(3))
    counts = sample_counts(x)
    assert chisquare(counts, M * target.numpy()).pvalue > 1e-3
    plain = build_sampler("udlm", steps=1, data_ids=DATA)
    y = plain.generate(cond, sched, MASK, (M, 4), template=template(M), generator=torch.Generator().manual_seed(3))
    assert chisquare(sample_counts(y), M * target.numpy()).pvalue < 1e-6  # γ = 2 differs from the conditional


def test_udlm_refuses_what_it_cannot_do():
    from dnadiff.errors import DnadiffError

    sched = build_schedule("loglinear")
    with pytest.raises(DnadiffError, match="pad_policy must be visible"):
        build_objective("udlm", schedule=sched, mask_id=MASK, vocab_size=V, data_ids=DATA, pad_policy="reference")
    with pytest.raises(DnadiffError, match="continuous-time only"):
        build_objective("udlm", schedule=sched, mask_id=MASK, vocab_size=V, data_ids=DATA, T=100)
    with pytest.raises(DnadiffError, match="mask id"):
        build_objective("udlm", schedule=sched, mask_id=MASK, vocab_size=V, data_ids=[0, 2, 3])
    with pytest.raises(DnadiffError, match="no output cache"):
        build_sampler("udlm", steps=4, cache=True)


def test_design_takes_udlm_models_and_reward_fine_tuning_does_not():
    from dnadiff.commands.request import diffusion_dna, masked_diffusion_dna
    from dnadiff.config import RunConfig, load_config

    udlm = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["objective=udlm"])
    assert udlm.objective.name == "udlm" and udlm.sample.sampler == "udlm"
    assert diffusion_dna(udlm) and not masked_diffusion_dna(udlm)
    mdlm = load_config(RunConfig, "experiments/tiny_dna_mdlm", [])
    assert diffusion_dna(mdlm) and masked_diffusion_dna(mdlm)
