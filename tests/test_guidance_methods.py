"""Guidance methods against exact answers on a tiny known distribution (tests/helpers/exact_sampling_target.py).

Target of reward tilting: π(x) = p(x) exp(r(x)/α) / Z over all 3^3 sequences (ids 0..2, mask 3).
  * exact classifier guidance with the exact noise-aware classifier log E_{p(x0|x_t)} exp(r/α),
    on first_hitting (one position per step: the guided chain is exact) samples π (chi-square);
  * SMC with many particles samples π (chi-square; its bias is O(1/K));
  * the gradient variant equals the exact one for a classifier linear in the one-hot input, and
    approaches it as the scale shrinks on the tiny case;
  * SVDD with α = 0 keeps the argmax candidate; best-of-N keeps its best candidate and its cost
    is N unguided samples.
"""

from __future__ import annotations

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.guidance import build_method
from dnadiff.guidance.best_of_n import budget_n
from dnadiff.guidance.classifier_guidance import exact_guidance_logits, gradient_guidance_logits
from dnadiff.guidance.svdd import select_candidates
from dnadiff.samplers import SeedStream, build_sampler
from dnadiff.samplers.rng import make_stream
from helpers.exact_sampling_target import ExactDenoiser, all_sequences, chi_square_pvalue, random_joint, seq_index

SCHED = build_schedule("loglinear", eps=1e-3)
N_REAL, L, MASK = 3, 3, 3
ALPHA = 0.5
IDS = [0, 1, 2]


@pytest.fixture(scope="module")
def setup():
    p = random_joint(N_REAL, L, seed=4)
    den = ExactDenoiser(p, N_REAL, L)
    g = torch.Generator().manual_seed(9)
    table = torch.randn(N_REAL**L, generator=g, dtype=torch.float64) * 0.6  # r over all sequences

    def reward(x):
        return table[seq_index(x, N_REAL)]

    tilted = p * (table / ALPHA).exp()
    return den, p, table, reward, tilted / tilted.sum()


class NoisyClassifier:
    """The exact noise-aware classifier log p(y | x_t) = log E_{p(x0 | x_t)} exp(r(x0)/α) (+ const),
    and its multilinear relaxation `soft` (equal at one-hot inputs)."""

    def __init__(self, p, table):
        self.p, self.e = p, (table / ALPHA).exp()
        self.seqs = all_sequences(N_REAL, L)  # (N, L)

    def parts(self, x):
        """(A, B) Float64[B]: Σ p e^{r/α} and Σ p over the sequences consistent with x."""
        agree = ((x[:, None, :] == self.seqs[None]) | (x[:, None, :] == MASK)).all(-1).double()  # (B, N)
        return agree @ (self.p * self.e), agree @ self.p

    def __call__(self, x):
        a, b = self.parts(x)
        return a.log() - b.log()

    def soft(self, onehot):
        pick = onehot[:, torch.arange(L)[:, None], self.seqs.T]  # (B, L, N): onehot[l, seq_n[l]]
        w = (pick + onehot[..., MASK : MASK + 1]).prod(dim=1)  # (B, N)
        return (w @ (self.p * self.e)).log() - (w @ self.p).log()


def test_exact_classifier_guidance_samples_the_tilted_target(setup):
    den, p, table, reward, target = setup
    clf = NoisyClassifier(p, table)
    method = build_method("cg", build_sampler("first_hitting"), clf, scale=1.0, token_ids=IDS)
    n = 3000
    x = method.generate(den, SCHED, MASK, (n, L), generator=torch.Generator().manual_seed(0))
    assert chi_square_pvalue(x, target, N_REAL) > 0.01
    assert chi_square_pvalue(x, p, N_REAL) < 1e-6  # guidance moved the law away from p
    st = method.last_stats
    assert st["denoiser_calls"] == 3 and st["denoiser_rows"] == 3 * n
    assert st["reward_calls"] == n * 3 * (3 + 2 + 1)  # masked positions × 3 tokens, per call
    assert torch.allclose(method.last_rewards, clf(x))


def test_smc_with_many_particles_samples_the_tilted_target(setup):
    """SMC's bias is O(1/K): a milder tilt (α = 1) and K = 128 particles bring it under the test's power."""
    den, p, table, reward, _ = setup
    target = p * table.exp()
    target = target / target.sum()
    method = build_method("smc", build_sampler("first_hitting"), reward, particles=128, alpha=1.0, ess_threshold=1.0)
    n = 2000
    x = method.generate(den, SCHED, MASK, (n, L), generator=torch.Generator().manual_seed(1))
    assert chi_square_pvalue(x, target, N_REAL) > 0.01
    assert chi_square_pvalue(x, p, N_REAL) < 1e-4
    assert method.last_resamples > 0
    st = method.last_stats
    assert st["nfe_per_sequence"] == 128 * 3  # initial call + one per step; none after the last token
    assert st["reward_evals_per_sequence"] == 128 * 4  # look-ahead at the start and after each step


def test_smc_on_a_grid_sampler_improves_the_reward_and_keeps_templates(setup):
    den, p, table, reward, target = setup
    tmpl = torch.tensor([MASK, 1, MASK])
    method = build_method("smc", build_sampler("ancestral", steps=8, eps=1e-3), reward, particles=8, alpha=0.2)
    x = method.generate(den, SCHED, MASK, (200, L), template=tmpl, generator=5)
    assert bool((x[:, 1] == 1).all()) and not bool((x == MASK).any())
    plain = build_method("none", build_sampler("ancestral", steps=8, eps=1e-3), reward)
    y = plain.generate(den, SCHED, MASK, (200, L), template=tmpl, generator=5)
    assert method.last_rewards.mean() > plain.last_rewards.mean() + 0.2
    # seeded: the same sequences in chunks (counter-based streams, expanded per particle)
    a = method.generate(den, SCHED, MASK, (6, L), template=tmpl, generator=SeedStream(3))
    b = torch.cat([method.generate(den, SCHED, MASK, (2, L), template=tmpl, generator=SeedStream(3, first_row=0)),
                   method.generate(den, SCHED, MASK, (4, L), template=tmpl, generator=SeedStream(3, first_row=2))])
    assert torch.equal(a, b) and y.shape == (200, L)


def test_gradient_guidance_is_exact_for_a_linear_classifier():
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(L, MASK + 1, generator=g, dtype=torch.float64)
    theta[:, MASK] = 0.0

    class Linear:
        def __call__(self, x):
            return theta[torch.arange(L), x].sum(-1)

        def soft(self, onehot):
            return (onehot * theta).sum((1, 2))

    x = torch.tensor([[MASK, 1, MASK], [MASK, MASK, MASK], [0, 2, MASK]])
    logits = torch.randn(3, L, MASK + 1, generator=g, dtype=torch.float64)
    exact, used = exact_guidance_logits(logits, x, MASK, Linear(), 1.7, IDS)
    grad = gradient_guidance_logits(logits, x, MASK, Linear(), 1.7, IDS)
    assert used == (2 + 3 + 1) * 3
    assert torch.allclose(exact.exp(), grad.exp(), atol=1e-12)


def test_gradient_guidance_is_the_first_order_expansion_of_the_exact_one(setup):
    """The exact noisy classifier's relaxation is log A - log B with A, B multilinear in the one-hot
    input, so its gradient shift is A'/A - B'/B (A' = A(x^{l<-v})) where the exact shift is
    log(A'/A) - log(B'/B): both pinned on the tiny case (equal to first order in A'/A - 1, B'/B - 1)."""
    den, p, table, reward, target = setup
    x = torch.tensor([[MASK, MASK, MASK], [1, MASK, MASK], [MASK, 0, MASK]])
    logits = den(x, None).double()
    from dnadiff.diffusion.subs import subs_log_probs

    lp = subs_log_probs(logits, x, MASK).double()
    for eps in (1.0, 0.1):
        clf = NoisyClassifier(p, table * eps)
        grad = gradient_guidance_logits(logits, x, MASK, clf, 1.0, IDS)
        exact = exact_guidance_logits(logits, x, MASK, clf, 1.0, IDS)[0]
        for b, l in (x == MASK).nonzero().tolist():
            cand = x[b].repeat(3, 1)
            cand[:, l] = torch.tensor(IDS)
            dc = clf(cand) - clf(x[b : b + 1])  # (3,) exact shifts
            (a1, b1), (a0, b0) = clf.parts(cand), clf.parts(x[b : b + 1])
            want_grad = (lp[b, l, IDS] + a1 / a0 - b1 / b0).log_softmax(0)
            want_exact = (lp[b, l, IDS] + dc).log_softmax(0)
            assert torch.allclose(grad[b, l, IDS], want_grad, atol=1e-9)
            assert torch.allclose(exact[b, l, IDS], want_exact, atol=1e-9)


def test_svdd_alpha_zero_keeps_the_argmax_candidate():
    values = torch.tensor([[0.1, 0.9, 0.3], [2.0, -1.0, 2.0]], dtype=torch.float64)
    assert select_candidates(values, 0.0, None).tolist() == [1, 0]
    rng = make_stream(torch.Generator().manual_seed(0), 2, "cpu").at(0)
    assert select_candidates(values * 1e6, 1e-3, rng).tolist()[0] == 1
    # α > 0: softmax(v/α) frequencies
    rng = make_stream(torch.Generator().manual_seed(1), 20000, "cpu").at(0)
    picks = select_candidates(values[:1].expand(20000, 3), 0.5, rng)
    freq = torch.bincount(picks, minlength=3).double() / 20000
    assert torch.allclose(freq, (values[0] / 0.5).softmax(0), atol=0.015)


def test_svdd_greedy_value_decoding_end_to_end(setup):
    """On L = 3 with first_hitting, each step unmasks one token; with α = 0 and as many candidates as
    needed, the last step keeps the best completion: the output beats the unguided mean reward,
    and the cost is M denoiser rows and M reward rows per step."""
    den, p, table, reward, target = setup
    M = 12
    method = build_method("svdd", build_sampler("first_hitting"), reward, candidates=M, alpha=0.0)
    x = method.generate(den, SCHED, MASK, (300, L), generator=2)
    unguided = (p * table).sum()
    assert method.last_rewards.mean() > unguided + 0.3
    st = method.last_stats
    assert st["nfe_per_sequence"] == 1 + M * 2  # first call, then M per step with a mask left
    assert st["reward_evals_per_sequence"] == M * 3
    assert torch.allclose(method.last_rewards, reward(x))


def test_best_of_n_keeps_its_best_candidate_at_n_times_the_cost(setup):
    den, p, table, reward, target = setup
    smp = build_sampler("ancestral", steps=4, eps=1e-3)
    method = build_method("best_of_n", smp, reward, n=5)
    x = method.generate(den, SCHED, MASK, (7, L), generator=SeedStream(11))
    st = method.last_stats
    one = build_method("none", build_sampler("ancestral", steps=4, eps=1e-3), reward)
    one.generate(den, SCHED, MASK, (35, L), generator=0)
    assert st["nfe_per_sequence"] <= 5 * 5 and st["reward_evals_per_sequence"] == 5
    # the candidates, regenerated from the same expanded stream: the output is each group's best
    cand = smp.run(den, SCHED, MASK, torch.full((35, L), MASK), SeedStream(11).bind(7, "cpu", False).expand(5, 11)).x
    best = reward(cand).view(7, 5).argmax(1)
    assert torch.equal(x, cand.view(7, 5, L)[torch.arange(7), best])
    assert budget_n(st["nfe_per_sequence"], st["nfe_per_sequence"] / 5) == 5
    assert budget_n(40.0, 4.0) == 10 and budget_n(3.0, 4.0) == 1


@pytest.mark.parametrize("name,opts", [("svdd", {"candidates": 2}), ("smc", {"particles": 2})])
def test_step_methods_keep_calling_the_model_while_remdm_runs_with_nothing_masked(setup, name, opts):
    """ReMDM keeps stepping after every token is revealed (it may remask): the methods must query
    the denoiser until the sampler's state is done, not until nothing is masked (was: logits=None
    passed to the step, a crash). Rows: the first call, then one per candidate per step but the last."""
    den, p, table, reward, target = setup
    method = build_method(name, build_sampler("remdm", steps=64, eps=1e-3), reward, **opts)
    x = method.generate(den, SCHED, MASK, (2, L), generator=3)
    assert x.shape == (2, L) and not bool((x == MASK).any())
    assert method.last_stats["steps"] == 64
    first = 2 * (2 if name == "smc" else 1)  # SMC's first call is on its K particles per sequence
    assert method.last_stats["denoiser_rows"] == first + 63 * 2 * 2
    assert torch.allclose(method.last_rewards, reward(x))


# every registered method is tested (the names come from METHODS); these are the options that keep a case
# small or that a method needs here; a new method runs with its defaults unless it adds an entry
METHOD_OVERRIDES = {"best_of_n": {"n": 2}, "svdd": {"candidates": 2}, "smc": {"particles": 2},
                    "cg": {"token_ids": IDS}, "cg_grad": {"token_ids": IDS}}


def test_every_registered_method_keeps_the_template_and_reports_its_cost(setup):
    from dnadiff.guidance import METHODS

    assert sorted(set(METHOD_OVERRIDES) - set(METHODS.names())) == []
    den, p, table, reward, target = setup
    clf = NoisyClassifier(p, table)  # differentiable (soft) for cg_grad
    tmpl = torch.tensor([MASK, 1, MASK])
    for name in METHODS.names():
        opts = METHOD_OVERRIDES.get(name, {})
        method = build_method(name, build_sampler("ancestral", steps=4, eps=1e-3), clf, **opts)
        x = method.generate(den, SCHED, MASK, (5, L), template=tmpl, generator=2)
        assert bool((x[:, 1] == 1).all()) and not bool((x == MASK).any()), name
        assert method.last_stats["denoiser_rows"] >= 5 and torch.allclose(method.last_rewards, clf(x)), name
