"""Conditional NLL of hidden positions (dnadiff/eval/infill_nll.py) on an enumerable toy with an exact denoiser:
the conditional NELBO bounds the exact conditional and equals it for the exact denoiser (ε → 0), the ordered
conditional NLL is exact, visible positions are never masked, the masks are what they say."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.eval.infill_nll import (
    ar_left_nll,
    conditional_nelbo,
    hidden_mask,
    markov_conditional_nll,
    ordered_conditional_nll,
)
from helpers.exact_sampling_target import ExactDenoiser, all_sequences, random_joint, seq_index

V, L = 3, 5  # real tokens 0..2, mask 3
HIDDEN_SETS = [[1, 2, 3], [0, 2, 4]]


def exact_conditional(p: torch.Tensor, x: torch.Tensor, hidden: list[int]) -> float:
    """-log p(x_H | x_V) by enumeration of the joint."""
    seqs = all_sequences(V, L)
    vis = [i for i in range(L) if i not in hidden]
    agree = (seqs[:, vis] == x[vis]).all(dim=1)
    return -math.log(float(p[seq_index(x[None], V)]) / float(p[agree].sum()))


class Noisy:
    """The exact denoiser with fixed random logit noise per (state, position): not the data's conditionals."""

    time_conditioned = False

    def __init__(self, den: ExactDenoiser, seed: int = 0, scale: float = 1.0):
        self.den = den
        g = torch.Generator().manual_seed(seed)
        self.noise = torch.randn((V + 1) ** L, L, V + 1, generator=g, dtype=torch.float64) * scale
        self.noise[..., V] = 0.0

    def __call__(self, x_t, t):
        return self.den(x_t, t).double() + self.noise[seq_index(x_t, V + 1)]


def enumerated_nelbo(den, x: torch.Tensor, hidden: list[int]) -> float:
    """The conditional NELBO at ε = 0 in closed form: Σ_{S ⊆ H} B(|S|, n - |S| + 1) Σ_{l ∈ S} -log p_θ(x_l | S masked)
    (α_t = 1 - t, w = 1/t, each hidden position masked with probability t: ∫ t^{s-1} (1 - t)^{n-s} dt)."""
    n, total = len(hidden), 0.0
    for s in range(1, n + 1):
        for S in itertools.combinations(hidden, s):
            x_t = x.clone()
            x_t[list(S)] = V
            logp = den(x_t[None], None)[0].double()
            logp[:, V] = -1e6
            logp = logp.log_softmax(-1)
            w = math.factorial(s - 1) * math.factorial(n - s) / math.factorial(n)
            total += w * sum(-float(logp[i, x[i]]) for i in S)
    return total


@pytest.mark.parametrize("hidden", HIDDEN_SETS)
def test_exact_denoiser_bound_and_order_equal_the_exact_conditional(hidden):
    p = random_joint(V, L, seed=11)
    den = ExactDenoiser(p, V, L)
    x = torch.tensor([2, 0, 1, 1, 0])
    want = exact_conditional(p, x, hidden)
    assert enumerated_nelbo(den, x, hidden) == pytest.approx(want, abs=1e-5)
    mask = torch.zeros(1, L, dtype=torch.bool)
    mask[0, hidden] = True
    for order in ("left_to_right", "right_to_left", "random"):
        nats, n = ordered_conditional_nll(den, x[None], mask, V, order, torch.Generator().manual_seed(0))
        assert float(nats) == pytest.approx(want, abs=1e-5) and float(n) == len(hidden)


def test_monte_carlo_conditional_nelbo_estimates_the_closed_form_and_masks_only_hidden_positions():
    p = random_joint(V, L, seed=12)
    hidden = [0, 2, 3]
    den = Noisy(ExactDenoiser(p, V, L), seed=1, scale=0.7)
    x = torch.tensor([1, 2, 0, 2, 1])
    mask = torch.zeros(4000, L, dtype=torch.bool)
    mask[:, hidden] = True
    seen = []

    def spy(x_t, t):
        seen.append(bool((x_t[:, [1, 4]] == torch.tensor([2, 1])).all()))
        return den(x_t, t)

    obj = build_objective("mdlm", schedule=build_schedule("loglinear", eps=0.0), mask_id=V, vocab_size=V + 1, t_min=0.0)
    nats, n = conditional_nelbo(spy, obj, x.expand(4000, L).clone(), mask, generator=torch.Generator().manual_seed(3))
    assert all(seen) and bool((n == 3).all())
    assert obj.pad_policy == "reference"  # the caller's objective is untouched
    want = enumerated_nelbo(den, x, hidden)
    se = float(nats.std()) / math.sqrt(len(nats))
    assert abs(float(nats.mean()) - want) < 4 * se
    assert want > exact_conditional(p, x, hidden) - 2.0  # sanity: same scale as the exact value


def test_conditional_nelbo_bounds_the_conditional_entropy_for_any_denoiser():
    """E_{x_H ~ p(.|x_V)} NELBO_θ(x) >= H(X_H | x_V) (Gibbs), with equality for the exact denoiser."""
    p = random_joint(V, L, seed=13)
    hidden = [1, 2, 4]
    exact, noisy = ExactDenoiser(p, V, L), Noisy(ExactDenoiser(p, V, L), seed=2)
    visible = torch.tensor([0, 0, 0, 2, 0])
    ent = bound_exact = bound_noisy = 0.0
    for fill in itertools.product(range(V), repeat=len(hidden)):
        x = visible.clone()
        x[hidden] = torch.tensor(fill)
        nll = exact_conditional(p, x, hidden)
        q = math.exp(-nll)
        ent += q * nll
        bound_exact += q * enumerated_nelbo(exact, x, hidden)
        bound_noisy += q * enumerated_nelbo(noisy, x, hidden)
    assert bound_exact == pytest.approx(ent, abs=1e-5)
    assert bound_noisy > ent + 0.05


def test_hidden_masks_are_central_spans_and_exact_random_fractions():
    real = torch.ones(3, 100, dtype=torch.bool)
    real[1, 48] = False  # an N inside the span stays visible
    span = hidden_mask("span8", real)
    assert span[0].nonzero().flatten().tolist() == list(range(46, 54))
    assert int(span[1].sum()) == 7 and not bool(span[1, 48])
    real[2, :50] = False
    rnd = hidden_mask("random15", real, torch.Generator().manual_seed(0))
    assert rnd.sum(dim=1).tolist() == [15, 15, 8] and not bool((rnd & ~real).any())  # round(0.15 x 99) = 15
    other = hidden_mask("random15", real, torch.Generator().manual_seed(1))
    assert not torch.equal(rnd, other)
    for bad in ("span0", "span101", "random100", "middle"):
        with pytest.raises(DnadiffError, match="mask"):
            hidden_mask(bad, real)


def test_ar_left_only_and_markov_conditionals_of_a_chain():
    """An order-2 chain as the AR: the left-only NLL of a span is Σ -log P(x_i | left context); the two-flank
    exact conditional differs from it and is the markov_infill value."""
    from dnadiff.backbones.markov import MarkovChain, MarkovConfig, count_ngrams
    from dnadiff.eval.markov_infill import conditional_nll
    from dnadiff.tokenizers import DNATokenizer

    tok = DNATokenizer()
    rng = np.random.default_rng(0)
    chain = MarkovChain(MarkovConfig(order=2)).set_counts(count_ngrams(rng.choice(4, size=(4, 60)), 3))
    seq = "ACGTTGCAAGCT"
    x = torch.tensor([tok.encode(seq)])
    mask = torch.zeros_like(x, dtype=torch.bool)
    mask[0, 4:8] = True
    ar = build_objective("ar", bos_id=tok.bos_id)
    nats, n = ar_left_nll(lambda ids, t: chain(ids), ar, x, mask)
    code = {"A": 0, "C": 1, "G": 2, "T": 3}
    t2 = chain.tables()[2]
    want = -sum(math.log(t2[code[seq[i - 2]] * 4 + code[seq[i - 1]], code[seq[i]]]) for i in range(4, 8))
    assert float(nats) == pytest.approx(want, abs=1e-5) and float(n) == 4
    both, _ = markov_conditional_nll(chain, x, mask)
    codes = np.array([code[b] for b in seq])
    assert float(both) == pytest.approx(conditional_nll(chain, codes, mask[0].numpy()))
    assert abs(float(both) - want) > 1e-3
    with pytest.raises(DnadiffError, match="autoregressive"):
        ar_left_nll(None, build_objective("mdlm", schedule=build_schedule("loglinear"), mask_id=3), x, mask)
