"""Block diffusion (BD3-LM): the `bd3lm` objective against exact values, and the `block` sampler.

The toy: an explicit joint over short sequences and the exact conditional p(x^b | x_t^b, x^{<b}) as a causal
network on the objective's stream (helpers/exact_block.py). With it the block NELBO at eps -> 0 is the NLL
for every block size; B = 1 is the AR objective and B = L the MDLM NELBO on the same network outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.diffusion.ar import ar_inputs
from dnadiff.diffusion.bd3lm import stream_index, training_stream
from dnadiff.diffusion.subs import NEG_INF
from dnadiff.errors import DnadiffError
from dnadiff.model import Denoiser
from dnadiff.samplers import build_sampler
from helpers.exact_block import BlockStream, exact_rule
from helpers.exact_denoiser import ExactDenoiser, mask_patterns
from helpers.exact_sampling_target import ExactDenoiser as JointDenoiser
from helpers.exact_sampling_target import random_joint

MASK, V, L = 3, 4, 4


@pytest.fixture(scope="module")
def den():
    return ExactDenoiser.random(length=L, real_ids=(0, 1, 2), mask_id=MASK, vocab_size=V, seed=3)


def bd3lm(block_size, eps=0.0, **kw):
    return build_objective("bd3lm", schedule=build_schedule("loglinear", eps=eps), mask_id=MASK, vocab_size=V,
                           block_size=block_size, **kw)


def exact_block_bound(obj, net, x0, nodes=3):
    """E_t E_{x_t}[L_BD estimate] exactly: all 2^L mask patterns, one shared t (the exact network ignores the
    other blocks' noise, so the per-block expectations are those of independent times), Gauss-Legendre in t
    (the integrand is a polynomial of degree < L for the log-linear schedule)."""
    t_nodes, w_nodes = np.polynomial.legendre.leggauss(nodes)
    pats = mask_patterns(x0.shape[1])  # (P, L)
    total = torch.zeros(x0.shape[0], dtype=torch.float64)
    nb = len(range(0, x0.shape[1], obj.block_size))
    for tn, wn in zip(0.5 * (t_nodes + 1), 0.5 * w_nodes):
        m = float(obj.schedule.mask_prob(torch.tensor(tn, dtype=torch.float64)))
        k = pats.sum(1).double()
        p_pat = m**k * (1 - m) ** (x0.shape[1] - k)  # (P,)
        for pat, pp in zip(pats, p_pat):
            x_t = torch.where(pat[None], torch.full_like(x0, MASK), x0)
            t = torch.full((x0.shape[0], nb), float(tn))
            total += wn * pp * obj.nll_given(net, x0, x_t, t).nll.double()
    return total


def test_stream_layout_is_noisy_noisy_clean_per_block():
    x_t = torch.tensor([[10, 11, 12, 13, 14]])
    x0 = torch.tensor([[20, 21, 22, 23, 24]])
    stream, read = training_stream(x_t, x0, 2)
    assert stream.tolist() == [[10, 11, 10, 11, 20, 21, 12, 13, 12, 13, 22, 23, 14, 14, 24]]
    assert read.tolist() == [2, 3, 8, 9, 13]  # the second copy of each block (the last one is shorter)
    assert stream_index(5, 2)[2].tolist() == [0, 0, 1, 1, 2]


@pytest.mark.parametrize("block_size", [1, 2, 3, L])
def test_block_nelbo_equals_nll_at_eps_zero(den, block_size):
    """Exact conditionals: L_BD is tight for B = 1, 2, L (and a ragged 3 + 1)."""
    net = BlockStream(L, block_size, exact_rule(den, L, MASK), V)
    x0 = den.sequences[::9]  # 9 of the 81 support sequences
    bound = exact_block_bound(bd3lm(block_size), net, x0)
    torch.testing.assert_close(bound, -den.log_prob(x0), rtol=0, atol=1e-6)  # float32 weights


def test_a_worse_network_gives_a_larger_block_bound(den):
    def blurred(clean, noisy, s, e):
        p = exact_rule(den, L, MASK)(clean, noisy, s, e).exp()
        p = 0.7 * p + 0.3 * torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.0], dtype=torch.float64)
        return p.clamp_min(1e-30).log()

    x0 = den.sequences  # the expected bound over the data: above the entropy (a sequence alone may gain)
    bound = exact_block_bound(bd3lm(2), BlockStream(L, 2, blurred, V), x0)
    assert float((den.probs * bound).sum()) > den.entropy() + 0.05


def test_block_size_one_is_the_ar_objective_on_the_same_outputs():
    """B = 1, every token masked at t = 1 (weight 1): Σ_l -log p(x_l | x_<l), the `ar` objective's NLL on the
    same causal network's outputs; at t = 0.5 each masked token counts twice (w = 1/t)."""
    torch.manual_seed(0)
    net = build_backbone("mamba", preset="tiny", vocab_size=12).eval()

    def ar_net(x, t=None):
        out = net(x).double()
        out[..., MASK] = NEG_INF  # neither objective gives the mask token mass
        return out

    def rule(clean, noisy, s, e):  # the AR's prediction of token s from [BOS, x_<s]
        return ar_net(ar_inputs(torch.cat([clean, noisy], dim=1), 2))[:, s:e]

    x0 = torch.randint(7, 11, (5, 6), generator=torch.Generator().manual_seed(1))
    obj = build_objective("bd3lm", schedule=build_schedule("loglinear", eps=0.0), mask_id=MASK, vocab_size=12,
                          block_size=1)
    ar = build_objective("ar", bos_id=2)
    stream = BlockStream(6, 1, rule, 12)
    with torch.no_grad():
        want = ar.loss(ar_net, x0).nll
        got = obj.nll_given(stream, x0, torch.full_like(x0, MASK), torch.ones(5, 6)).nll
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-6, atol=1e-6)
        half = torch.where(torch.arange(6)[None] % 2 == 0, torch.full_like(x0, MASK), x0)
        got_half = obj.nll_given(stream, x0, half, torch.full((5, 6), 0.5)).nll
        per_tok = -torch.log_softmax(ar_net(ar_inputs(x0, 2)), -1).gather(-1, x0[..., None])[..., 0]
        torch.testing.assert_close(got_half.double(), 2 * per_tok[:, ::2].sum(1), rtol=1e-6, atol=1e-6)


def test_block_size_L_is_the_mdlm_nelbo_with_the_same_draws(den):
    """B = L: one block, its time and masks drawn as MDLM draws them: the same estimate, value for value,
    for a network that is not exact (a fixed random function of the whole noisy sequence)."""
    table = torch.randn(V, L, V, generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def f(x_t, t=None):  # bidirectional: every output depends on every token
        ctx = table[x_t].sum(1, keepdim=True)  # (B, 1, L, V)
        return ctx[:, 0] + table[x_t, torch.arange(x_t.shape[1])]

    mdlm = build_objective("mdlm", schedule=build_schedule("loglinear", eps=1e-3), mask_id=MASK, vocab_size=V)
    obj = bd3lm(L, eps=1e-3)
    x0 = den.sequences[::5]
    stream = BlockStream(L, L, lambda clean, noisy, s, e: f(noisy), V)
    a = mdlm.loss(f, x0, generator=torch.Generator().manual_seed(5))
    b = obj.loss(stream, x0, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(b.nll.double(), a.nll.double(), rtol=1e-6, atol=1e-9)
    assert float(a.nll.sum()) > 0


def test_monte_carlo_mean_within_3se_of_the_nll(den):
    net = BlockStream(L, 2, exact_rule(den, L, MASK), V)
    x0 = den.sequences[[0, 40, 80]].repeat(400, 1)
    with torch.no_grad():
        nll = bd3lm(2).loss(net, x0, generator=torch.Generator().manual_seed(0)).nll.double().view(400, 3)
    mean, se = nll.mean(0), nll.std(0) / 400**0.5
    assert bool(((mean + den.log_prob(x0[:3])).abs() < 3 * se + 1e-9).all())


def test_clip_draws_only_in_training_and_within_the_interval(den):
    obj, plain = bd3lm(2, clip=[0.45, 0.95]), bd3lm(2)
    t = obj.sample_block_t(64, 2, torch.Generator().manual_seed(0), clipped=True)
    assert float(t.min()) >= 0.45 and float(t.max()) <= 0.95 and float(t.max() - t.min()) > 0.3
    net = BlockStream(L, 2, exact_rule(den, L, MASK), V)
    x0 = den.sequences[::9]
    with torch.no_grad():  # evaluation: the NELBO, U[t_min, 1], whatever the clip
        a = obj.loss(net, x0, generator=torch.Generator().manual_seed(1))
        b = plain.loss(net, x0, generator=torch.Generator().manual_seed(1))
        c = obj.loss(net, x0, generator=torch.Generator().manual_seed(1), clipped=True)
    assert torch.equal(a.nll, b.nll) and not torch.equal(a.nll, c.nll)


def test_objective_errors():
    with pytest.raises(DnadiffError, match="block_size"):
        bd3lm(0)
    with pytest.raises(DnadiffError, match="clip"):
        bd3lm(2, clip=[0.9, 0.1])


# ---------------------------------------------------------------------------------------- the block sampler

SCHED = build_schedule("loglinear", eps=1e-3)


def joint_stream(length=3, block_size=2, seed=4):
    joint = JointDenoiser(random_joint(3, length, seed=seed), 3, length)
    return joint, BlockStream(length, block_size, exact_rule(joint, length, 3), 4)


@pytest.mark.parametrize("inner,opts,n,tol", [("first_hitting", {}, 3000, 0.05),
                                              ("ancestral", {"steps": 32}, 1000, 0.1)])
def test_block_sampler_reproduces_the_joint(inner, opts, n, tol):
    """Exact conditionals, blocks 2 + 1: the samples follow the joint (first hitting is exact; TV's
    sampling noise at n draws over 27 cells is about 0.5·sqrt(2·27/(πn)): 0.04 at 3000, 0.07 at 1000)."""
    joint, net = joint_stream()
    smp = build_sampler("block", block_size=2, inner=inner, inner_options=opts)
    x = smp.generate(net, SCHED, 3, (n, 3), generator=0)
    idx = (x * torch.tensor([9, 3, 1])).sum(1)
    emp = torch.bincount(idx, minlength=27).double() / n
    tv = 0.5 * float((emp - joint.probs).abs().sum())
    assert tv < tol, tv
    assert smp.last_nfe >= 2 and int(smp.last_nfe_per_row.min()) >= 2


def test_cached_state_gives_the_samples_of_a_full_recompute():
    """Same seed: the carried-state path (fork, 2n tokens a call) and the no-cache path (the whole stream each
    call) give the same tokens and calls; the fresh context noise is part of both."""
    _, net = joint_stream(length=3, block_size=2)
    a = build_sampler("block", block_size=2, inner="ancestral", steps=4)
    b = build_sampler("block", block_size=2, inner="ancestral", steps=4, use_cache=False)
    xa, xb = a.generate(net, SCHED, 3, (32, 3), generator=7), b.generate(net, SCHED, 3, (32, 3), generator=7)
    assert torch.equal(xa, xb) and a.last_nfe == b.last_nfe
    assert torch.equal(a.last_nfe_per_row, b.last_nfe_per_row)


def test_cached_mamba_any_length_equals_recompute():
    """A causal Mamba on the stream, 70 tokens in blocks of 16 (a ragged last block; any length): the
    recurrent state carried over finished blocks gives the samples of re-running the stream."""
    torch.manual_seed(0)
    net = Denoiser(build_backbone("mamba", preset="tiny", vocab_size=12).eval())
    opts = dict(block_size=16, inner="ancestral", steps=4)
    a, b = build_sampler("block", **opts), build_sampler("block", use_cache=False, **opts)
    xa = a.generate(net, SCHED, 3, (3, 70), generator=1)
    xb = b.generate(net, SCHED, 3, (3, 70), generator=1)
    assert torch.equal(xa, xb) and not bool((xa == 3).any())
    assert a.last_nfe == b.last_nfe <= 4 * 5 + 5  # steps per block (+ a noise-removal call per block at most)


def test_eos_stops_text_generation():
    """Once every row has produced EOS (id 2 here), the block loop stops and the rest is padding (id 1)."""
    def rule(clean, noisy, s, e):
        out = torch.full((noisy.shape[0], e - s, 4), -5.0, dtype=torch.float64)
        out[..., 0] = 0.0
        if s >= 2:
            out[..., 2] = 20.0  # EOS once two tokens exist
        return out

    net = BlockStream(8, 2, rule, 4)
    smp = build_sampler("block", block_size=2, inner="first_hitting", eos_id=2, pad_id=1)
    x = smp.generate(net, SCHED, 3, (4, 8), generator=0)
    assert x[:, :2].eq(0).all() and x[:, 2].eq(2).all() and x[:, 3:].eq(1).all()
    assert smp.last_nfe == 4  # two blocks of two tokens, one call per token: blocks 3 and 4 never ran


def test_sampler_errors():
    with pytest.raises(DnadiffError, match="inner must be a masked-diffusion sampler"):
        build_sampler("block", inner="semi_ar")
    with pytest.raises(DnadiffError, match="inner must be"):
        build_sampler("block", inner="autoregressive")
    with pytest.raises(DnadiffError, match="block_size"):
        build_sampler("block", block_size=0)
    with pytest.raises(DnadiffError, match="cache"):
        build_sampler("block", cache=True)
    with pytest.raises(DnadiffError, match="output cache"):
        build_sampler("block", inner="cached")


def test_mamba_step_many_is_n_steps_in_one_pass():
    """backbones/mamba_chunk.py: n tokens from a carried state in one parallel pass give the logits and states of
    n `step` calls (and of the full forward); update=False leaves the cache untouched."""
    torch.manual_seed(0)
    m = build_backbone("mamba", preset="tiny", vocab_size=12).eval()
    x = torch.randint(0, 12, (3, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = m.allocate_cache(3, 20), m.allocate_cache(3, 20)
        steps = torch.stack([m.step(x[:, j], a) for j in range(7)], dim=1)
        torch.testing.assert_close(m.step_many(x[:, :7], b), steps, rtol=0, atol=1e-5)
        for (ca, sa), (cb, sb) in zip(a["layers"], b["layers"]):
            torch.testing.assert_close(cb, ca, rtol=0, atol=1e-5)
            torch.testing.assert_close(sb, sa, rtol=0, atol=1e-5)
        before = [t.clone() for layer in b["layers"] for t in layer]
        peek = m.step_many(x[:, 7:], b, update=False)
        assert all(torch.equal(t, u) for t, u in zip(before, [t for layer in b["layers"] for t in layer]))
        assert b["pos"] == 7
        torch.testing.assert_close(peek, m(x)[:, 7:], rtol=0, atol=1e-5)


def block_conditional_nll(den, x: torch.Tensor, hidden: list[int], block_size: int) -> float:
    """-Σ_b log p(x_{H∩b} | x^{<b}, x_{V∩b}) by enumeration of the joint: what the block sampler with the visible
    bases as a template draws (each block given the finished blocks and its own visible bases)."""
    total = 0.0
    for s in range(0, L, block_size):
        e = min(s + block_size, L)
        here = [i for i in hidden if s <= i < e]
        if not here:
            continue
        given = [i for i in range(e) if i not in here]
        num = den.probs[(den.sequences[:, :e] == x[:e]).all(dim=1)].sum()
        norm = den.probs[(den.sequences[:, given] == x[given]).all(dim=1)].sum()
        total -= float(torch.log(num / norm))
    return total


@pytest.mark.parametrize("block_size", [1, 2, L])
@pytest.mark.parametrize("hidden", [[1, 2], [0, 3], [1, 2, 3]])
def test_conditional_block_nelbo_is_the_block_template_conditional(den, block_size, hidden):
    """infill's bd3 row: the bound with only hidden positions maskable and counted (eval/infill_nll.py's
    conditional_nelbo on a bd3lm model) equals, for the exact network at eps -> 0, the conditional of each block's
    hidden bases given the clean blocks before it and the block's own visible bases; B = L is MDLM's two-flank
    conditional, B = 1 the AR's left-only NLL of the hidden bases."""
    from dnadiff.eval.infill_nll import conditional_nelbo

    obj = bd3lm(block_size)
    net = BlockStream(L, block_size, exact_rule(den, L, MASK), V)
    x0 = den.sequences[::9]
    h = torch.zeros_like(x0, dtype=torch.bool)
    h[:, hidden] = True
    # exact expectation: every subset of the hidden set masked, each hidden position with probability m(t)
    t_nodes, w_nodes = np.polynomial.legendre.leggauss(3)
    pats = mask_patterns(len(hidden))
    bound = torch.zeros(len(x0), dtype=torch.float64)
    for tn, wn in zip(0.5 * (t_nodes + 1), 0.5 * w_nodes):
        m = float(obj.schedule.mask_prob(torch.tensor(tn, dtype=torch.float64)))
        for pat in pats:
            k = int(pat.sum())
            x_t = x0.clone()
            x_t[:, [i for i, p in zip(hidden, pat) if p]] = MASK
            t = torch.full((len(x0), len(range(0, L, block_size))), float(tn))
            bound += wn * m**k * (1 - m) ** (len(hidden) - k) * obj.nll_given(net, x0, x_t, t, h).nll.double()
    want = torch.tensor([block_conditional_nll(den, x, hidden, block_size) for x in x0], dtype=torch.float64)
    torch.testing.assert_close(bound, want, rtol=0, atol=1e-6)
    # the estimator infill uses (visible bases never masked, each window its own times), with T = 4 steps (bounded
    # weights: a reliable SE; the continuous bound's 1/t weight has a log-divergent variance at eps = 0): the Monte
    # Carlo mean within 4 SE of that bound's exact value (the grid's four times, every hidden subset masked)
    obj4 = bd3lm(block_size, T=4)
    exact4 = torch.zeros(len(x0), dtype=torch.float64)
    for tn in (0.25, 0.5, 0.75, 1.0):
        m = float(obj4.schedule.mask_prob(torch.tensor(tn, dtype=torch.float64)))
        for pat in pats:
            k = int(pat.sum())
            x_t = x0.clone()
            x_t[:, [i for i, p in zip(hidden, pat) if p]] = MASK
            t = torch.full((len(x0), len(range(0, L, block_size))), tn)
            exact4 += 0.25 * m**k * (1 - m) ** (len(hidden) - k) * obj4.nll_given(net, x0, x_t, t, h).nll.double()
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([conditional_nelbo(net, obj4, x0, h, generator=g)[0] for _ in range(400)])  # (400, N)
    assert ((draws.mean(dim=0) - exact4).abs() <= 4 * draws.std(dim=0) / 20 + 1e-9).all()
    assert conditional_nelbo(net, obj, x0, h)[1].tolist() == [float(len(hidden))] * len(x0)
