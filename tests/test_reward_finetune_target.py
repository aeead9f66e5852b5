"""The target's estimates (dnadiff/reward_tuning/target.py) on the enumerable case (vocabulary 4 + mask,
length 3, 4 steps), where p_pre, p* ∝ p_pre · exp(r/β), E*[r], KL(p* ‖ p_pre) and a model's trajectory KL
are exact: the SNIS estimates over many pretrained samples land within a few of their ESS-based standard
errors; a huge 1/β leaves one sample carrying the weight (ESS ≈ 1, KL ≈ log n)."""

from __future__ import annotations

import math

import pytest
import torch
from test_reward_finetune_exact import GRID, hard_reward, pretrained

from dnadiff.reward_tuning.target import reached, sample_scores, snis_target
from helpers.tabular_policy import MASK, SEQS, L, TableDenoiser, V, exact_distribution, exact_objective, kl, tilted


def pre_samples(n: int, seed: int):
    x_rewards, _ = sample_scores(pretrained(), None, GRID, MASK, L, V, hard_reward, n, batch_size=5000,
                                 generator=torch.Generator().manual_seed(seed))
    return x_rewards


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_snis_matches_the_exact_target(beta):
    p_pre = exact_distribution(pretrained(), GRID)
    r = hard_reward(SEQS)
    p_star = tilted(p_pre, r, beta)
    exact_reward, exact_kl = float(p_star @ r), kl(p_star, p_pre)
    sd_star = float((p_star @ (r - exact_reward) ** 2).sqrt())
    est = snis_target(pre_samples(20000, seed=11), beta)
    assert est["n"] == 20000 and 1 < est["ess"] < 20000
    # tolerance from the ESS (Kong's rule: the SNIS estimate's se ≈ sd*(r)/√ESS) and from the delta method
    assert abs(est["reward"] - exact_reward) <= 4 * sd_star / math.sqrt(est["ess"])
    assert abs(est["reward"] - exact_reward) <= 4 * est["reward_se"]
    assert 4 * sd_star / math.sqrt(est["ess"]) < 0.05 * exact_reward
    assert abs(est["kl"] - exact_kl) <= 4 * est["kl_se"]
    assert 4 * est["kl_se"] < 0.1 * exact_kl  # a tolerance that can fail: a tenth of the value at most
    assert exact_reward > est["pretrained_reward"] + 0.3  # the target is not the pretrained model


def test_snis_estimates_have_the_stated_spread():
    """Over 40 independent sets of 2,000 samples, the estimates scatter around the exact values with the
    spread their standard errors state (ratio of the empirical sd to the mean stated se in [0.7, 1.4])."""
    beta = 0.5
    p_pre = exact_distribution(pretrained(), GRID)
    r = hard_reward(SEQS)
    p_star = tilted(p_pre, r, beta)
    runs = [snis_target(pre_samples(2000, seed=100 + k), beta) for k in range(40)]
    for key, exact in (("reward", float(p_star @ r)), ("kl", kl(p_star, p_pre))):
        values = torch.tensor([e[key] for e in runs], dtype=torch.float64)
        stated = sum(e[f"{key}_se"] for e in runs) / len(runs)
        assert abs(float(values.mean()) - exact) < 3 * stated / math.sqrt(len(runs)) + 0.002 * abs(exact)
        assert 0.7 < float(values.std()) / stated < 1.4


def test_degenerate_weights_give_an_ess_of_one():
    rewards = torch.randn(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    est = snis_target(rewards, 1e-3)
    assert est["ess"] == pytest.approx(1.0, abs=1e-6)
    assert est["reward"] == pytest.approx(float(rewards.max()))
    assert est["kl"] == pytest.approx(math.log(1000), abs=1e-6)  # the estimate's ceiling, log n
    flat = snis_target(torch.full((50,), 0.7, dtype=torch.float64), 0.1)
    assert flat["ess"] == pytest.approx(50.0) and flat["kl"] == pytest.approx(0.0, abs=1e-12)


def test_huge_inverse_beta_on_the_enumerable_case_counts_the_best_samples():
    """With 1/β huge, the weight sits on the samples at the highest reward: ESS = their number exactly."""
    x = pre_samples(300, seed=3)
    est = snis_target(x, 1e-4)
    best = int((x == x.max()).sum())
    assert est["ess"] == pytest.approx(best, rel=1e-9)
    assert est["kl"] == pytest.approx(math.log(300 / best), rel=1e-9)


def test_a_models_reach_matches_its_exact_reward_and_trajectory_kl():
    torch.manual_seed(0)
    pre = pretrained()
    ft = TableDenoiser(pre.table + 1.0 * torch.randn_like(pre.table))
    ft.table.requires_grad_(False)
    r = hard_reward(SEQS)
    exact_reward = float(exact_distribution(ft, GRID) @ r)
    exact_traj_kl = float(exact_objective(ft, pre, GRID, r, math.inf))  # β = ∞: the trajectory KL alone
    rewards, kls = sample_scores(ft, pre, GRID, MASK, L, V, hard_reward, 20000, batch_size=5000,
                                 generator=torch.Generator().manual_seed(9))
    got = reached(rewards, kls)
    assert got["n"] == 20000 and exact_traj_kl > 0.1
    assert abs(got["reward"] - exact_reward) <= 4 * got["reward_se"]
    assert abs(got["kl"] - exact_traj_kl) <= 4 * got["kl_se"]
    assert 4 * got["kl_se"] < 0.1 * exact_traj_kl
