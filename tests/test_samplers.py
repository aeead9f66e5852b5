"""Samplers against an exact denoiser of a tiny known distribution (tests/helpers/exact_sampling_target.py).

Exact samplers (first_hitting, confidence with one token per round, semi_ar over an exact inner
sampler on a Markov chain) must reproduce p itself; grid samplers (ancestral, cached, analytic,
remdm) must reproduce the exact law of their N-step chain (computed by enumerating all states),
and that law must converge to p as N grows. 20,000 samples, chi-square p > 0.01.
"""

from __future__ import annotations

import math

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.samplers import SAMPLERS, build_sampler, draw_categorical, guided, rc_symmetric, shape_probs
from dnadiff.samplers.analytic import AnalyticSampler, tweedie_step
from dnadiff.samplers.ancestral import ancestral_step
from dnadiff.samplers.remdm import remdm_sigma, remdm_step
from helpers.exact_sampling_target import (
    ExactDenoiser,
    chain_distribution,
    chi_square_pvalue,
    conditional,
    markov_joint,
    product_joint,
    random_joint,
    remdm_kernel,
    seq_index,
)

N_SAMPLES = 20_000
SCHED = build_schedule("loglinear", eps=1e-3)


@pytest.fixture(scope="module")
def target():
    p = random_joint(3, 3, seed=1)
    return p, ExactDenoiser(p, 3, 3)


def _alphas(steps: int) -> list[float]:
    return SCHED.alpha(torch.linspace(1, 1e-5, steps + 1, dtype=torch.float64)).tolist()


def _sample(name, den, n=N_SAMPLES, L=3, seed=0, template=None, **opts):
    s = build_sampler(name, **opts)
    g = torch.Generator().manual_seed(seed)
    x = s.generate(den, SCHED, den.mask_id, (n, L), template=template, generator=g)
    return x, s


def test_registry_names():
    """The names are the registry's (tests/test_sampler_contract.py runs every one); each builds by name."""
    for name in SAMPLERS.names():
        assert SAMPLERS.name_of(build_sampler(name)) == name
    with pytest.raises(DnadiffError, match="unknown sampler"):
        build_sampler("nope")
    with pytest.raises(DnadiffError, match="steps"):
        build_sampler("ancestral", steps=0)


@pytest.mark.parametrize(
    "name,opts",
    [
        ("first_hitting", {}),
        ("confidence", {"steps": 3, "criterion": "confidence"}),
        ("confidence", {"steps": 3, "criterion": "entropy"}),
        ("confidence", {"steps": 3, "criterion": "margin"}),
        ("confidence", {"steps": 3, "criterion": "random"}),
    ],
)
def test_exact_samplers_reproduce_p(target, name, opts):
    p, den = target
    x, s = _sample(name, den, **opts)
    assert x.shape == (N_SAMPLES, 3) and int(x.max()) < 3
    assert chi_square_pvalue(x, p, 3) > 0.01
    assert s.last_nfe <= 3


def test_confidence_sampled_criterion_is_biased(target):
    """MaskGIT's p(proposed token) depends on the draw: not exact (documented), and detectably so."""
    p, den = target
    x, _ = _sample("confidence", den, steps=3, criterion="sampled")
    assert chi_square_pvalue(x, p, 3) < 1e-6


@pytest.mark.parametrize(
    "name,opts,kernel",
    [
        ("ancestral", {}, None),
        ("cached", {}, None),
        ("analytic", {}, None),
        ("remdm", {"schedule": "cap", "eta": 0.1}, ("cap", 0.1)),
        ("remdm", {"schedule": "rescale", "eta": 0.5}, ("rescale", 0.5)),
    ],
)
def test_grid_samplers_follow_their_exact_chain(target, name, opts, kernel):
    p, den = target
    steps = 16
    law = chain_distribution(den, _alphas(steps), remdm_kernel(*kernel) if kernel else None or _mdlm())
    x, s = _sample(name, den, steps=steps, **opts)
    assert chi_square_pvalue(x, law, 3) > 0.01
    # and the coarse chain is measurably different from p (the test has power)
    assert chi_square_pvalue(x, p, 3) < 1e-6


def _mdlm():
    from helpers.exact_sampling_target import mdlm_kernel

    return mdlm_kernel


def test_mdlm_chain_converges_to_p(target):
    p, den = target
    tv = [0.5 * float((chain_distribution(den, _alphas(n)) - p).abs().sum()) for n in (16, 256, 2048)]
    assert tv[0] > 0.02 and tv[1] < 3e-3 and tv[2] < 3e-4  # O(1/N): simultaneous unmasking error


@pytest.mark.slow
@pytest.mark.parametrize("name,opts", [("ancestral", {}), ("cached", {}), ("analytic", {}), ("remdm", {"eta": 0.005})])
def test_grid_samplers_reproduce_p_at_many_steps(target, name, opts):
    p, den = target
    x, _ = _sample(name, den, steps=512, **opts)
    assert chi_square_pvalue(x, p, 3) > 0.01


def test_semi_ar_markov_chain_of_any_length():
    """Windows of 3, stride 1 or 2, over an order-1 stationary chain: the length-6 joint is exact."""
    trans = [[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.5, 0.1, 0.4]]
    # stationary initial law so every window of 3 has the same marginal
    P = torch.tensor(trans, dtype=torch.float64)
    pi = torch.linalg.matrix_power(P.T, 200)[:, 0]
    pi = (pi / pi.sum()).tolist()
    den = ExactDenoiser(markov_joint(pi, trans, 3), 3, 3)
    full = markov_joint(pi, trans, 6)
    for stride in (1, 2):
        x, s = _sample("semi_ar", den, L=6, inner="first_hitting", window=3, stride=stride)
        assert x.shape == (N_SAMPLES, 6)
        assert chi_square_pvalue(x, full, 3) > 0.01
        assert s.last_nfe == 6  # first_hitting: one call per generated token, over all rounds


def test_semi_ar_template_and_errors(target):
    _, den = target
    tmpl = torch.full((7,), 3)
    tmpl[0], tmpl[4], tmpl[6] = 2, 1, 0
    x, _ = _sample("semi_ar", den, n=50, L=7, template=tmpl, inner="ancestral", inner_options={"steps": 8}, window=3,
                   stride=2)
    assert x.shape == (50, 7) and bool((x[:, [0, 4, 6]] == torch.tensor([2, 1, 0])).all())
    with pytest.raises(DnadiffError, match="stride"):
        build_sampler("semi_ar", window=4, stride=4)


ALL = [
    ("ancestral", {"steps": 8}),
    ("cached", {"steps": 8}),
    ("analytic", {"steps": 8}),
    ("first_hitting", {}),
    ("semi_ar", {"inner": "ancestral", "window": 3, "stride": 1, "inner_options": {"steps": 8}}),
    ("confidence", {"steps": 2}),
    ("remdm", {"steps": 8, "eta": 0.5, "schedule": "cap"}),
    ("remdm", {"steps": 8, "schedule": "conf"}),
    ("remdm", {"steps": 16, "eta": 0.1, "schedule": "loop"}),
]


@pytest.mark.parametrize("name,opts", ALL)
def test_template_tokens_never_change(target, name, opts):
    _, den = target
    B = 300
    tmpl = torch.full((B, 3), 3)
    tmpl[:100, 0] = 1  # prefix
    tmpl[100:200, 2] = 0  # suffix
    tmpl[200:, 0], tmpl[200:, 2] = 2, 2  # infill
    x, _ = _sample(name, den, n=B, template=tmpl, **opts)
    fixed = tmpl != 3
    assert bool((x[fixed] == tmpl[fixed]).all())
    assert bool((x != 3).all())


@pytest.mark.parametrize("name", ["first_hitting", "ancestral"])
def test_template_gives_the_conditional(target, name):
    p, den = target
    tmpl = torch.tensor([3, 1, 3])
    x, s = _sample(name, den, template=tmpl, steps=64, seed=1)
    assert chi_square_pvalue(x, conditional(p, 3, 3, tmpl, 3), 3) > 0.01
    if name == "first_hitting":
        assert s.last_nfe == 2  # one call per free position


def test_cached_equals_ancestral_with_fewer_calls(target):
    _, den = target
    a, sa = _sample("ancestral", den, n=4, steps=200, seed=5)
    c, sc = _sample("cached", den, n=4, steps=200, seed=5)
    assert torch.equal(a, c)
    assert sc.last_nfe < sa.last_nfe
    # time-conditioned models disable the cache: same calls as ancestral
    t, st = _sample("cached", den, n=4, steps=200, seed=5, time_conditioned=True)
    assert torch.equal(a, t) and st.last_nfe == sa.last_nfe


def test_cached_calls_follow_the_rows_that_changed(target):
    _, den = target
    s = build_sampler("ancestral", steps=100, noise_removal="none")
    g = torch.Generator().manual_seed(3)
    # replay the ancestral trajectory step by step: the steps after which a sequence that changed
    # still holds a mask (it needs a fresh output)
    changed_steps, x = [], torch.full((2, 3), 3)
    ts = s.time_grid("cpu")
    al = SCHED.alpha(ts)
    for i in range(100):
        if not bool((x == 3).any()):
            break
        q = ancestral_step(s.x0_probs(den(x, ts[i].expand(2).float()), x, 3), x, 3, al[i], al[i + 1])
        new = draw_categorical(q, g)
        changed_steps.append(bool(((new != x).any(dim=1) & (new == 3).any(dim=1)).any()))
        x = new
    c, sc = _sample("cached", den, n=2, steps=100, seed=3, noise_removal="none")
    assert torch.equal(c, x)
    # first call + one after every such step that is followed by another step
    assert sc.last_nfe == 1 + sum(changed_steps[:-1])


def test_first_hitting_nfe_at_most_length(target):
    _, den = target
    x, s = _sample("first_hitting", den, n=64)
    assert s.last_nfe <= 3 and not bool((x == 3).any())


def test_batch_size_chunks(target):
    _, den = target
    x, s = _sample("first_hitting", den, n=10, batch_size=4)
    assert x.shape == (10, 3) and s.last_nfe == 9  # 3 chunks x 3 calls
    assert not bool((x == 3).any())  # every chunk's samples are complete


def test_analytic_step_equals_ancestral_step_and_sedd_parameterisation(target):
    _, den = target
    x = torch.tensor([[3, 3, 1], [0, 3, 3]])
    logits = den(x, torch.zeros(2))
    a_t, a_s = torch.tensor(0.3, dtype=torch.float64), torch.tensor(0.55, dtype=torch.float64)
    subs = AnalyticSampler(4)
    q_tw = tweedie_step(subs.score(logits, x, 3, a_t), x, 3, torch.log(a_s / a_t))
    q_an = ancestral_step(subs.x0_probs(logits, x, 3), x, 3, a_t, a_s)
    torch.testing.assert_close(q_tw, q_an, rtol=1e-9, atol=1e-12)
    # a SEDD-parameterised exact model: logits = log p + log(V - 1) gives the same score
    sedd = AnalyticSampler(4, parameterization="sedd")
    s_sedd = sedd.score(logits.double() + math.log(3), x, 3, a_t)
    s_subs = subs.score(logits, x, 3, a_t)
    masked = (x == 3).unsqueeze(-1).expand_as(s_subs)
    torch.testing.assert_close(s_sedd[masked], s_subs[masked], rtol=1e-5, atol=1e-9)


def test_remdm_step_preserves_mdlm_marginal():
    """P(masked at s) = 1 - α_s whatever σ: (1-α_t)·stay + α_t·σ (ReMDM §3.1)."""
    p = torch.tensor([[[0.2, 0.5, 0.3, 0.0]]], dtype=torch.float64)
    for kind, eta in (("cap", 0.3), ("rescale", 0.7)):
        for a_t, a_s in ((0.2, 0.3), (0.6, 0.95)):
            a_t_, a_s_ = torch.tensor(a_t, dtype=torch.float64), torch.tensor(a_s, dtype=torch.float64)
            sig = remdm_sigma(a_t_, a_s_, kind, eta)
            assert 0 < float(sig) <= min(1.0, (1 - a_s) / a_t) + 1e-12
            fixed = torch.zeros(1, 1, dtype=torch.bool)
            q_mask = remdm_step(p, torch.tensor([[3]]), fixed, 3, a_t_, a_s_, sig)[0, 0]
            q_tok = remdm_step(p, torch.tensor([[1]]), fixed, 3, a_t_, a_s_, sig)[0, 0]
            assert math.isclose(float(q_mask.sum()), 1.0) and math.isclose(float(q_tok.sum()), 1.0)
            masked_s = (1 - a_t) * float(q_mask[3]) + a_t * float(q_tok[3])
            assert math.isclose(masked_s, 1 - a_s, rel_tol=1e-12)


def test_shape_probs_temperature_and_top_p():
    lp = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64).log()
    t = shape_probs(lp, temperature=0.5)
    want = torch.tensor([0.25, 0.09, 0.0225, 0.0025], dtype=torch.float64)
    torch.testing.assert_close(t, want / want.sum())
    # ReMDM-code nucleus: keep cumulative mass <= p, plus the top token
    n = shape_probs(lp, top_p=0.8)  # cumulative 0.5, 0.8 <= 0.8, 0.95 > 0.8: keep two
    torch.testing.assert_close(n, torch.tensor([0.625, 0.375, 0.0, 0.0], dtype=torch.float64))
    assert torch.equal(shape_probs(lp, top_p=0.7) > 0, torch.tensor([True, False, False, False]))  # 0.8 > 0.7
    assert torch.equal(shape_probs(lp, top_p=0.4) > 0, torch.tensor([True, False, False, False]))  # top token always
    assert torch.equal(shape_probs(lp, top_p=0.96) > 0, torch.tensor([True, True, True, False]))


def test_temperature_and_nucleus_apply_before_the_step():
    """L = 1, independent token: samples follow p^{1/T} / Z and the nucleus set, for every grid sampler."""
    p = product_joint([[0.5, 0.3, 0.2]])
    den = ExactDenoiser(p, 3, 1)
    for name in ("ancestral", "first_hitting", "analytic"):
        x, _ = _sample(name, den, L=1, steps=32, temperature=2.0)
        want = p.sqrt() / p.sqrt().sum()
        assert chi_square_pvalue(x, want, 3) > 0.01
        x, _ = _sample(name, den, n=2000, L=1, steps=32, top_p=0.85)  # cumulative 0.5, 0.8 <= 0.85 < 1
        assert set(x.flatten().tolist()) == {0, 1}


def test_float32_draws_reproduce_reference_noise():
    """float32_draws uses the reference's noise exactly: argmax p / (1e-10 - log(rand + 1e-10))."""
    probs = torch.softmax(torch.randn(5, 7, 11, generator=torch.Generator().manual_seed(0)), -1)
    got = draw_categorical(probs, torch.Generator().manual_seed(9), float32=True)
    u = torch.rand(probs.shape, generator=torch.Generator().manual_seed(9), dtype=torch.float32)
    want = (probs / (1e-10 - (u + 1e-10).log())).argmax(-1)
    assert torch.equal(got, want)


def test_float32_noise_starves_the_tail_exactly():
    """Zheng et al. 2024: exact win probability of a tail token under float32 noise, by enumerating
    all 2^24 float32 uniforms of the tail token, is below q/2; float64 noise resolves that scale."""
    import numpy as np

    q = 3e-8
    p_head = 1.0 - q
    u = (np.arange(2**24, dtype=np.float64) * 2.0**-24).astype(np.float32)
    e_tail = (np.float32(1e-10) - np.log(u + np.float32(1e-10))).astype(np.float64)
    # tail wins iff q / e_tail > p_head / e_head  <=>  e_head > p_head e_tail / q; e_head ~ Exp(1)
    # (the head's float32 noise is accurate in the bulk where this threshold lies)
    p32 = float(np.exp(-p_head * e_tail / q).mean())
    assert p32 < 0.5 * q  # float32 draws give the tail token less than half its probability
    # float64 noise: U has 53-bit resolution, so E = -log1p(-U) has steps of 2^-53 near 0,
    # a relative resolution of ~4e-9 at the scale q where the tail token wins: no starving
    steps = -np.log1p(-np.array([1, 2], dtype=np.float64) * 2.0**-53)
    assert steps[0] < 1.2e-16 and (steps[1] - steps[0]) / q < 1e-8


@pytest.mark.slow
def test_float32_vs_float64_tail_mass_on_heavy_tail():
    """Empirical: M tokens of 3e-8 each (tail mass ~0.06): float64 keeps it, float32 loses most."""
    M, q = 2**21, 3e-8
    probs = torch.full((M + 1,), q, dtype=torch.float64)
    probs[0] = 1.0 - M * q
    counts = {}
    for f32 in (False, True):
        g = torch.Generator().manual_seed(1)
        tail = 0
        for _ in range(50):
            tail += int((draw_categorical(probs.expand(20, -1), g, float32=f32) > 0).sum())
        counts[f32] = tail
    expected = 1000 * M * q
    assert abs(counts[False] - expected) < 4 * math.sqrt(expected)
    assert counts[True] < 0.6 * expected


def _rc_target():
    p = random_joint(4, 3, seed=4, concentration=0.5)  # A C G T = 0 1 2 3, mask 4; not RC-symmetric
    return p, ExactDenoiser(p, 4, 3), torch.tensor([3, 2, 1, 0, 4])


def _rc_index(comp):
    from helpers.exact_sampling_target import all_sequences

    seqs = all_sequences(4, 3)
    return seq_index(comp[seqs].flip(1), 4)


def _symmetry_pvalue(x, comp):
    from scipy.stats import chi2

    counts = torch.bincount(seq_index(x, 4), minlength=64).double()
    rc = _rc_index(comp)
    stat, dof = 0.0, 0
    for i in range(64):
        j = int(rc[i])
        if i < j and counts[i] + counts[j] > 0:
            stat += float((counts[i] - counts[j]) ** 2 / (counts[i] + counts[j]))
            dof += 1
    return float(chi2.sf(stat, dof))


def test_rc_symmetric_wrapper_is_equivariant_and_sampling_symmetric():
    p, den, comp = _rc_target()
    sym = rc_symmetric(den, comp, mask_id=4)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 5, (50, 3), generator=g)
    out = sym(x, torch.zeros(50)).softmax(-1)
    out_rc = sym(comp[x].flip(1), torch.zeros(50)).softmax(-1)
    torch.testing.assert_close(out_rc, out.flip(1)[..., comp], atol=1e-6, rtol=1e-5)
    assert not sym.time_conditioned
    for name, opts in (("first_hitting", {}), ("ancestral", {"steps": 16})):
        xs, _ = _sample(name, sym, **opts)
        assert _symmetry_pvalue(xs, comp) > 0.01
        raw, _ = _sample(name, den, **opts)
        assert _symmetry_pvalue(raw, comp) < 1e-6  # the unwrapped model is not symmetric


def test_guided_combination_and_sampling():
    pc = product_joint([[0.6, 0.3, 0.1]])
    pu = product_joint([[0.2, 0.4, 0.4]])
    dc, du = ExactDenoiser(pc, 3, 1), ExactDenoiser(pu, 3, 1)
    x = torch.full((2, 1), 3)
    w = 1.5
    g = guided(dc, du, w, mask_id=3)
    got = g(x, torch.zeros(2)).softmax(-1)[0, 0, :3].double()
    want = pc.pow(1 + w) / pu.pow(w)
    torch.testing.assert_close(got, want / want.sum(), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(guided(dc, du, 0.0, mask_id=3)(x, torch.zeros(2)).softmax(-1), dc(x, None).softmax(-1))
    xs, _ = _sample("first_hitting", g, L=1)
    assert chi_square_pvalue(xs, want / want.sum(), 3) > 0.01


def test_rc_symmetric_on_caduceus_backbones():
    """PH (not equivariant) becomes exactly equivariant; PS (equivariant) keeps its prediction."""
    from dnadiff.backbones import build_backbone
    from dnadiff.tokenizers import DNATokenizer

    tok = DNATokenizer()
    comp = torch.tensor(tok.complement_map(12))
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (2, 24), generator=g)
    x[:, ::5] = tok.mask_id
    x_rc = comp[x].flip(1)
    t = torch.full((2,), 0.5)
    torch.manual_seed(0)
    for preset in ("tiny-ph", "tiny"):
        model = build_backbone("caduceus", preset=preset, vocab_size=12).eval()
        sym = rc_symmetric(model, comp, mask_id=tok.mask_id)
        with torch.no_grad():
            p, p_rc = sym(x, t).softmax(-1), sym(x_rc, t).softmax(-1)
            V = p.shape[-1]
            perm = torch.arange(V)
            perm[:12] = comp
            torch.testing.assert_close(p_rc, p.flip(1)[..., perm], atol=1e-5, rtol=1e-4)
            if preset == "tiny":
                logits = model(x, t).clone()
                logits[..., tok.mask_id] = -1e6
                torch.testing.assert_close(p, logits.softmax(-1), atol=1e-5, rtol=1e-4)
    x_gen = build_sampler("first_hitting").generate(sym, SCHED, tok.mask_id, (2, 16), generator=g)
    assert x_gen.shape == (2, 16) and bool((x_gen != tok.mask_id).all())


def test_noise_removal_options(target):
    """Stopping at eps = 0.5 leaves ~half the tokens masked: none keeps them, argmax fills the mode."""
    _, den = target
    x, s = _sample("ancestral", den, n=200, steps=4, eps=0.5, noise_removal="none")
    assert 0.3 < float((x == 3).double().mean()) < 0.7 and s.last_nfe <= 4
    x, s = _sample("ancestral", den, n=200, steps=4, eps=0.5, noise_removal="argmax")
    assert not bool((x == 3).any()) and s.last_nfe == 5
    ref, _ = _sample("ancestral", den, n=200, steps=4, eps=0.5, noise_removal="none")
    masked = ref == 3
    mode = den(ref, None).argmax(-1)
    assert torch.equal(x[masked], mode[masked])  # same generator: same trajectory, then argmax
    x, _ = _sample("ancestral", den, n=200, steps=4, eps=0.5, noise_removal="sample")
    assert not bool((x == 3).any())
    with pytest.raises(DnadiffError, match="noise_removal"):
        build_sampler("ancestral", noise_removal="maybe")


def test_analytic_sedd_score_keeps_alpha_in_float64(target):
    """At α_t = 1 - 3e-9 (t near 0) float32 rounds α to 1 and the SEDD score to inf;
    in float64 the sedd and subs parameterisations of an exact model still agree."""
    _, den = target
    x = torch.tensor([[3, 3, 1]])
    logits = den(x, torch.zeros(1))
    a_t = torch.tensor(1.0 - 3e-9, dtype=torch.float64)
    s_sedd = AnalyticSampler(4, parameterization="sedd").score(logits.double() + math.log(3), x, 3, a_t)
    s_subs = AnalyticSampler(4).score(logits, x, 3, a_t)
    masked = (x == 3).unsqueeze(-1).expand_as(s_subs)
    assert bool(torch.isfinite(s_sedd).all())
    torch.testing.assert_close(s_sedd[masked], s_subs[masked], rtol=1e-6, atol=0.0)


def test_remdm_conf_sigma_and_confidence_bookkeeping():
    """ReMDM-conf (official code): σ^ℓ = softmax_ℓ(ψ) σ_max over decoded tokens, 0 at masked ones;
    ψ = -p_θ(token) when a token is decoded, reset to -inf when it is remasked."""
    from dnadiff.samplers.remdm import conf_sigma

    psi = torch.tensor([[-0.9, -0.2, -float("inf"), -0.5]], dtype=torch.float64)
    decoded = torch.tensor([[True, True, False, True]])
    sig = conf_sigma(psi, decoded, torch.tensor(0.4, dtype=torch.float64))
    w = torch.tensor([-0.9, -0.2, -0.5], dtype=torch.float64).softmax(0) * 0.4
    torch.testing.assert_close(sig[0, [0, 1, 3]], w)
    assert float(sig[0, 2]) == 0.0 and float(sig[0, 1]) > float(sig[0, 3]) > float(sig[0, 0])  # least confident first
    # nothing decoded yet: all zero (no NaN)
    assert torch.equal(conf_sigma(psi, torch.zeros_like(decoded), torch.tensor(0.4)),
                       torch.zeros(1, 4, dtype=torch.float64))
    # per-position σ in the step: a decoded token is remasked with probability σ^ℓ
    p = torch.tensor([[[0.2, 0.5, 0.3, 0.0]] * 4], dtype=torch.float64)
    x = torch.tensor([[0, 1, 3, 2]])
    q = remdm_step(p, x, torch.zeros(1, 4, dtype=torch.bool), 3, 0.5, 0.6, sig)
    torch.testing.assert_close(q[0, [0, 1, 3], 3], sig[0, [0, 1, 3]])
    torch.testing.assert_close(q[0, 2], torch.tensor([0.2, 0.5, 0.3, 0.8], dtype=torch.float64)
                               * torch.tensor([0.2, 0.2, 0.2, 1.0], dtype=torch.float64))
    # through the sampler: ψ holds -p_θ of the decoded tokens after a step
    _, den = _rc_target()[:2]
    s = build_sampler("remdm", steps=4, schedule="conf")
    state = s.init_state(den, SCHED, 4, torch.full((5, 3), 4))
    logits = den(state.x, state.t.float())
    from dnadiff.samplers.base import SeedStream

    nxt = s.step(state, logits, SeedStream(0).bind(5, "cpu", False).at(0))
    newly = nxt.x != 4
    probs = s.x0_probs(logits, state.x, 4)
    want = -probs.gather(-1, nxt.x.clamp_max(3).unsqueeze(-1)).squeeze(-1)
    assert bool(newly.any())
    torch.testing.assert_close(nxt.extra["psi"][newly], want[newly])
    assert bool(torch.isinf(nxt.extra["psi"][~newly]).all())


def test_remdm_loop_phases_and_exactness(target):
    """ReMDM-loop (official code): α rises linearly to α_on at t_on, stays there (remasking with
    σ = eta) until t_off, then rises to 1; with an exact denoiser the chain still targets p."""
    from dnadiff.samplers.remdm import loop_alphas

    assert loop_alphas(1.0, 0.9, 0.55, 0.05, 0.9)[:2] == (0.0, pytest.approx(0.9 * 0.1 / 0.45))
    assert loop_alphas(0.6, 0.55, 0.55, 0.05, 0.9)[1] == pytest.approx(0.9)
    assert loop_alphas(0.5, 0.4, 0.55, 0.05, 0.9) == (0.9, 0.9, True)
    a_t, a_s, remask = loop_alphas(0.05, 0.0, 0.55, 0.05, 0.9)
    assert (a_t, a_s, remask) == (pytest.approx(0.9), pytest.approx(1.0), False)
    with pytest.raises(DnadiffError, match="t_off < t_on"):
        build_sampler("remdm", schedule="loop", t_on=0.1, t_off=0.2)
    p, den = target
    x, s = _sample("remdm", den, n=8000, steps=200, schedule="loop", eta=0.05, eps=1e-5)
    assert s.last_nfe >= 200 and s.last_steps == 200  # remasking: no early stop
    emp = torch.bincount(seq_index(x, 3), minlength=27).double() / x.shape[0]
    assert 0.5 * float((emp - p).abs().sum()) < 0.05
