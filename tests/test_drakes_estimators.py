"""DRAKES's gradient estimators against the exact gradient, step by step, on an enumerable chain.

The chain (tests/helpers/tabular_policy.py): vocabulary 4 + mask, length 3, T = 4 linear steps (step i
unmasks 1/4, 1/3, 1/2 and all of the masked positions), one logit table per step (StepTableDenoiser), so
the gradient w.r.t. table i is the objective's gradient through step i's decisions alone. The exact
objective KL(P_θ ‖ P_pre) − E[r]/β (β = 1) is enumerated over the 125 partly masked states, its KL from
the transition matrices (not from trajectory.step_kl, which is tested against it here).

ratio_i = ⟨E ĝ_i, g_i⟩ / |g_i|², the share of step i's true gradient an estimator delivers on average.
Measured with 262,144 trajectories (benchmarks/drakes_estimator_bias.py, results/drakes_estimator_bias.md):
    estimator (τ)                 E[r] gradient, steps 0..3      objective gradient, steps 0..3
    straight_through (1)          0.40  0.44  0.53  0.70         0.49  0.38  0.69  0.81
    straight_through (0.1)        0.58  0.65  0.77  0.99         0.64  0.57  0.83  0.99
    soft (1)                      0.32  0.12  0.19  0.29         0.46  0.13  0.18  0.19
    soft (0.1)                    0.88  0.84  0.90  0.91         0.89  0.87  0.88  0.84
    soft (0.05)                   1.04  1.06  0.97  0.95         0.95  0.94  0.94  0.92
    policy_gradient (reference)   —                              1.00  1.00  0.99  0.99
With the gradient truncated to the last K = 2 steps, the first two steps get only their KL's direct term
(objective ratio 0.16 and −0.01; kl=live: 0).
Per-step straight-through stays biased as τ → 0 (its early steps near 0.6); the soft-state estimator (the
official code's) tends to the exact gradient as τ → 0, at growing variance; the score-function estimator
(policy gradient) is unbiased at every β.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dnadiff.reward_tuning import drakes_loss, policy_gradient_loss, sample_groups
from dnadiff.reward_tuning.trajectory import masked_log_probs, rollout, step_kl
from helpers.tabular_policy import (
    MASK,
    SEQS,
    STATES,
    L,
    V,
    exact_objective,
    exact_reward,
    exact_step_kls,
    linear_grid,
    pretrained_and_finetuned,
    soft_reward,
    start_state,
    transition_matrix,
)

T = 4
GRID = linear_grid(T)
BETA = 1.0


R = soft_reward(F.one_hot(SEQS, V).double())


def models():
    return pretrained_and_finetuned(GRID.times)


def ratios(exact, estimate):
    return [float((exact[i] * estimate[i]).sum() / (exact[i] * exact[i]).sum()) for i in range(T)]


def mean_gradient(loss_fn, ft, draws: int, batch: int = 32768, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    total = torch.zeros_like(ft.table)
    n = draws // batch
    for _ in range(n):
        total += torch.autograd.grad(loss_fn(torch.full((batch, L), MASK), gen), ft.table)[0]
    return total / n


def test_step_kl_is_the_transition_matrices_kl():
    """Σ_x P_i(x) · step_kl(x) equals step i's KL between the whole transition matrices, at every step;
    without step_kl's unmask factor (α_s − α_t)/(1 − α_t) it would not (the test can fail)."""
    pre, ft = models()
    exact = exact_step_kls(ft, pre, GRID).detach()
    probs, ours, unscaled = start_state(), [], []
    masked = STATES == MASK
    with torch.no_grad():
        for i in range(T):
            t = GRID.times[i].expand(STATES.shape[0])
            log_p, log_pre = masked_log_probs(ft(STATES, t), MASK), masked_log_probs(pre(STATES, t), MASK)
            ours.append(probs @ step_kl(log_p, log_pre, masked, GRID.unmask_prob(i)))
            unscaled.append(probs @ step_kl(log_p, log_pre, masked, 1.0))
            probs = probs @ transition_matrix(ft, GRID, i)
    torch.testing.assert_close(torch.stack(ours), exact, rtol=1e-10, atol=1e-12)
    assert float(exact.min()) > 1e-3  # every step's KL is live
    assert not torch.allclose(torch.stack(unscaled)[:-1], exact[:-1], rtol=1e-3)


def test_rollout_kl_averages_to_the_trajectory_kl():
    """The rollout's summed per-step KL at sampled states is an unbiased estimate of KL(P_θ ‖ P_pre)."""
    pre, ft = models()
    exact = float(exact_step_kls(ft, pre, GRID).sum())
    with torch.no_grad():
        ro = rollout(ft, pre, GRID, MASK, torch.full((40000, L), MASK), V, grad_steps=0,
                     generator=torch.Generator().manual_seed(0))
    se = float(ro.kl.std()) / 200
    assert abs(float(ro.kl.mean()) - exact) < 4 * se, (float(ro.kl.mean()), exact, se)


def soft_ratios(draws: int):
    pre, ft = models()
    exact = torch.autograd.grad(exact_objective(ft, pre, GRID, R, BETA), ft.table)[0]

    def loss(x0, gen):
        return drakes_loss(ft, pre, soft_reward, GRID, MASK, x0, V, BETA, temperature=0.05, estimator="soft",
                           generator=gen, recompute=False).loss

    estimate = mean_gradient(loss, ft, draws=draws)
    return ratios(exact, estimate), float((exact * estimate).sum() / (exact * exact).sum())


def test_soft_estimator_is_unbiased_as_the_temperature_goes_to_zero():
    """Soft states through the live steps, straight-through at the reward (the official DRAKES form), at
    τ = 0.05: the expected gradient of the objective is the exact one (65,536 draws: overall ratio 0.88–0.99
    over seeds, each step above 0.73; with 262,144 draws the steps read 0.92–0.95, at τ = 0.1 0.84–0.89, at
    τ = 1 0.13–0.46). Per-step straight-through fails this at any τ (steps 0–1 at 0.38–0.64)."""
    per_step, overall = soft_ratios(65536)
    assert 0.85 < overall < 1.1 and all(0.7 < r < 1.2 for r in per_step), (per_step, overall)


@pytest.mark.slow
def test_soft_estimator_is_unbiased_at_every_step():
    """As above with 524,288 draws: every step's ratio within 0.86–1.1."""
    per_step, overall = soft_ratios(524288)
    assert all(0.86 < r < 1.1 for r in per_step), (per_step, overall)


def test_straight_through_bias_is_the_documented_one():
    """Per-step straight-through at τ = 1 delivers 0.40 / 0.44 / 0.53 / 0.70 of E[r]'s true gradient at
    steps that unmask 1/4, 1/3, 1/2 and all of the masked positions (module docstring)."""
    pre, ft = models()
    exact = -torch.autograd.grad(exact_reward(ft, GRID, R), ft.table)[0]

    def loss(x0, gen):
        ro = rollout(ft, None, GRID, MASK, x0, V, temperature=1.0, estimator="straight_through", generator=gen,
                     recompute=False)
        return -soft_reward(ro.onehot).mean()

    got = ratios(exact, mean_gradient(loss, ft, draws=65536))
    assert got == pytest.approx([0.40, 0.44, 0.53, 0.70], abs=0.06), got


def test_policy_gradient_is_unbiased_at_every_step():
    """The score-function reference: its expected gradient is the exact one at each step (ratio 1 ± 0.05)."""
    pre, ft = models()
    exact = torch.autograd.grad(exact_objective(ft, pre, GRID, R, BETA), ft.table)[0]

    def loss(x0, gen):
        groups = sample_groups(ft, GRID, MASK, x0, V, lambda x: soft_reward(F.one_hot(x, V).double()), generator=gen)
        return policy_gradient_loss(ft, pre, GRID, MASK, groups, BETA, group_size=8, recompute=False).loss

    got = ratios(exact, mean_gradient(loss, ft, draws=65536))
    assert got == pytest.approx([1.0] * T, abs=0.05), got


@pytest.mark.parametrize("estimator", ["straight_through", "soft"])
def test_live_kl_scope_drops_the_truncated_steps(estimator):
    """kl=live (the official truncate_kl): with the gradient through the last 2 of 4 steps, the first
    two steps' KL is left out (zero, and no gradient reaches their tables); the live steps' KL is the
    same as with kl=all (the same noise)."""
    pre, ft = models()
    x0 = torch.full((64, L), MASK)
    out = {}
    for scope in ("all", "live"):
        o = drakes_loss(ft, pre, soft_reward, GRID, MASK, x0, V, BETA, truncate_steps=2, estimator=estimator,
                        kl_scope=scope, temperature=0.5, generator=torch.Generator().manual_seed(3))
        out[scope] = (o.rollout.kl_steps.detach(), torch.autograd.grad(o.loss, ft.table)[0])
    torch.testing.assert_close(out["live"][0][:, 2:], out["all"][0][:, 2:])
    assert float(out["live"][0][:, :2].abs().max()) == 0.0 and float(out["all"][0][:, :2].max()) > 1e-3
    assert float(out["live"][1][:2].abs().max()) == 0.0 and float(out["all"][1][:2].abs().max()) > 1e-4
    torch.testing.assert_close(out["live"][1][2:], out["all"][1][2:])


def test_unknown_estimator_is_refused():
    pre, ft = models()
    with pytest.raises(ValueError, match="estimator"):
        drakes_loss(ft, pre, soft_reward, GRID, MASK, torch.full((2, L), MASK), V, BETA, estimator="gumbel")
    with pytest.raises(ValueError, match="kl_scope"):
        drakes_loss(ft, pre, soft_reward, GRID, MASK, torch.full((2, L), MASK), V, BETA, kl_scope="some")
