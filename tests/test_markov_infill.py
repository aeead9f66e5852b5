"""Exact Markov-chain infilling (dnadiff/eval/markov_infill.py) against brute-force enumeration of the hidden bases,
with the joint scored by the chain's own forward pass (the `ar` objective's numbers)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from dnadiff.backbones.markov import MarkovChain, MarkovConfig, count_ngrams
from dnadiff.errors import DnadiffError
from dnadiff.eval.markov_infill import chain_tables, conditional_nll, sample_hidden
from dnadiff.tokenizers import DNATokenizer

TOK = DNATokenizer()
IDS = np.array([TOK.a_id, TOK.c_id, TOK.g_id, TOK.t_id])


def toy_chain(order: int, seed: int = 0, smoothing: str = "kn") -> MarkovChain:
    rng = np.random.default_rng(seed)
    tiles = rng.choice(4, size=(6, 40), p=[0.4, 0.1, 0.2, 0.3])
    tiles[:, 1::3] = (tiles[:, :-1:3] + 1) % 4  # some structure, so the orders differ
    return MarkovChain(MarkovConfig(order=order, smoothing=smoothing)).set_counts(count_ngrams(tiles, order + 1))


def joint_log_prob(chain: MarkovChain, codes: np.ndarray) -> float:
    """log p(x) by the chain's forward: an N in front is the empty context of the first base, N breaks the chain."""
    ids = np.where(codes >= 0, IDS[np.clip(codes, 0, 3)], TOK.n_id)
    x = torch.tensor(np.concatenate([[TOK.n_id], ids]))[None]
    logp = chain(x)[0, :-1].double().log_softmax(-1)  # row i predicts codes[i]
    return float(sum(logp[i, ids[i]] for i in range(len(codes)) if codes[i] >= 0))


def brute_force(chain, codes, hidden) -> tuple[float, dict]:
    """(-log p(x_H | x_V), {filling: probability}) by enumerating the 4^|H| fillings."""
    pos = np.flatnonzero(hidden)
    logs = {}
    for fill in itertools.product(range(4), repeat=len(pos)):
        x = codes.copy()
        x[pos] = fill
        logs[fill] = joint_log_prob(chain, x)
    z = np.logaddexp.reduce(list(logs.values()))
    return z - logs[tuple(codes[pos])], {f: math.exp(v - z) for f, v in logs.items()}


CASES = [  # (order, sequence with N as -1, hidden positions)
    (2, [0, 1, 2, 3, 0, 0, 1, 3, 2, 2, 1, 0], [4, 5, 6]),  # a contiguous span
    (3, [2, 0, 1, 3, 3, 0, 1, 2, 0, 3, 1, 1, 0], [1, 5, 6, 10]),  # scattered, gaps shorter and longer than k
    (2, [1, 3, 0, -1, 2, 0, 1, 3, 0, 2], [2, 4, 8]),  # an N breaks the chain between two hidden bases
    (3, [0, 1, 2, 3, 1, 0, 2, 2, 3], [0, 1, 8]),  # hidden at both window ends (the short contexts)
    (1, [3, 2, 1, 0, 0, 1, 2, 3], [0, 2, 3, 4, 7]),
]


@pytest.mark.parametrize("order,seq,hid", CASES)
def test_conditional_nll_is_the_brute_force_conditional(order, seq, hid):
    chain = toy_chain(order, seed=order)
    codes = np.array(seq)
    hidden = np.zeros(len(seq), dtype=bool)
    hidden[hid] = True
    want, _ = brute_force(chain, codes, hidden)
    assert conditional_nll(chain, codes, hidden) == pytest.approx(want, abs=2e-5)  # float32 log-table of forward
    assert conditional_nll(chain_tables(chain), codes, hidden) == pytest.approx(want, abs=2e-5)


def test_both_flanks_matter_and_an_empty_mask_costs_nothing():
    chain = toy_chain(2, seed=5)
    codes = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1])
    hidden = np.zeros(10, dtype=bool)
    hidden[4] = True
    row = 2 * 4 + 3  # context "GT": P(A | GT), the left flank alone
    left_only = -math.log(chain.tables()[2][row, 0])
    both = conditional_nll(chain, codes, hidden)
    assert abs(both - left_only) > 1e-3  # the right flank changes the answer
    assert conditional_nll(chain, codes, np.zeros(10, dtype=bool)) == 0.0


def test_witten_bell_chain_too():
    chain = toy_chain(2, seed=7, smoothing="wb")
    codes = np.array([3, 3, 0, 1, 2, 0, 1, 1, 2])
    hidden = np.zeros(9, dtype=bool)
    hidden[[2, 3, 6]] = True
    assert conditional_nll(chain, codes, hidden) == pytest.approx(brute_force(chain, codes, hidden)[0], abs=2e-5)


def test_samples_follow_the_exact_posterior():
    chain = toy_chain(2, seed=3)
    codes = np.array([0, 2, 1, 3, 0, 1, 1, 2, 3])
    hidden = np.zeros(9, dtype=bool)
    hidden[[1, 2, 5]] = True
    _, probs = brute_force(chain, codes, hidden)
    draws = sample_hidden(chain, codes, hidden, np.random.default_rng(0), num=20_000)
    assert (draws[:, ~hidden] == codes[~hidden]).all()  # visible bases untouched
    fills, counts = np.unique(draws[:, hidden], axis=0, return_counts=True)
    freq = {tuple(f): c / len(draws) for f, c in zip(fills, counts)}
    from scipy.stats import chisquare

    keys = sorted(probs)
    expected = np.array([probs[f] for f in keys]) * len(draws)
    observed = np.array([freq.get(f, 0.0) * len(draws) for f in keys])
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    assert chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3
    assert max(abs(freq.get(f, 0.0) - p) for f, p in probs.items()) < 0.02


def test_an_unscorable_hidden_position_is_refused():
    chain = toy_chain(1)
    with pytest.raises(DnadiffError, match="no A/C/G/T base"):
        conditional_nll(chain, np.array([0, -1, 2]), np.array([False, True, False]))
    with pytest.raises(DnadiffError, match="differ in shape"):
        conditional_nll(chain, np.array([0, 1, 2]), np.array([False, True]))
