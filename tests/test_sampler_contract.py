"""The step contract of dnadiff/samplers/base.py, checked for EVERY registered sampler.

A new sampler must add its options to OPTIONS (the first test fails otherwise). For each one:
  * `generate` is exactly the base loop over `init_state` / `model_time` / `step` / `finish`
    (the test drives the step API by hand and gets the same tokens, NFE and step count);
  * `step` is pure: the state it gets is left unchanged, and the same state + same draws give
    the same next state;
  * template tokens never change and `last_nfe` counts every denoiser call (`last_nfe_per_row`
    each sequence's share, `last_rows` their sum);
  * with a seed (counter-based stream) samples do not depend on the batch layout: one batch of 6,
    chunks of 2 + 4 (first_row offsets) and `batch_size=4` give identical samples.
"""

from __future__ import annotations

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.samplers import SAMPLERS, SeedStream, build_sampler
from dnadiff.samplers.base import CountingDenoiser, Sampler, SamplerState, make_stream
from helpers.exact_sampling_target import ExactDenoiser, random_joint

SCHED = build_schedule("loglinear", eps=1e-3)
MASK = 3
# Every registered sampler is tested (the names come from SAMPLERS); these are only the options that
# keep a case small or that a sampler needs on this 3-token problem. A new sampler runs with its defaults
# unless it adds an entry here.
OVERRIDES = {
    "ancestral": {"steps": 6},
    "cached": {"steps": 6},
    "analytic": {"steps": 6},
    "first_hitting": {},
    "confidence": {"steps": 3, "criterion": "random", "score_noise": 0.5},
    "remdm": {"steps": 6, "eta": 0.3},
    "semi_ar": {"inner": "ancestral", "window": 4, "stride": 2, "inner_options": {"steps": 4}},
    "autoregressive": {"first_token_ids": [0, 1, 2]},
    "udlm": {"steps": 6, "data_ids": [0, 1, 2]},  # uniform noise over the non-mask tokens
    "block": {"block_size": 3, "inner": "ancestral", "steps": 4},  # blocks 3 + 1 of the stream network below
}
# samplers of continuous noise (plaid: Gaussian embeddings, ssdlm: the vocabulary simplex) need their own
# networks, not this token-level denoiser: tests/test_plaid.py and tests/test_ssdlm.py run them
CONTINUOUS = ("gaussian", "simplex")
NAMES = [name for name in SAMPLERS.names() if SAMPLERS.get(name).noise not in CONTINUOUS]
OPTIONS = {name: OVERRIDES.get(name, {}) for name in NAMES}
# composite samplers run an inner sampler's loop per window (they override `run`) instead of defining step()
COMPOSITE = {name for name in NAMES if SAMPLERS.get(name).run is not Sampler.run}


@pytest.fixture(scope="module")
def den():
    return ExactDenoiser(random_joint(3, 4, seed=2), 3, 4)


def _net(name, den):
    """The network a sampler of `name` takes: `den` itself, or for a block-diffusion sampler (noise "block")
    the causal stream network whose blocks have den's exact conditionals (helpers/exact_block.py)."""
    if SAMPLERS.get(name).noise != "block":
        return den
    from helpers.exact_block import BlockStream, exact_rule

    return BlockStream(4, OPTIONS[name]["block_size"], exact_rule(den, 4, MASK), 4)


def test_the_overrides_name_registered_samplers():
    assert sorted(set(OVERRIDES) - set(NAMES)) == [] and NAMES
    assert "semi_ar" not in NAMES or "semi_ar" in COMPOSITE


def test_declarations_agree():
    """An objective's own sampler is registered and decodes the way the objective trains."""
    from dnadiff.diffusion import OBJECTIVES

    for name in OBJECTIVES.names():
        obj = OBJECTIVES.get(name)
        if obj.default_sampler is not None:
            assert SAMPLERS.get(obj.default_sampler).autoregressive == obj.autoregressive, name
            assert obj.autoregressive or SAMPLERS.get(obj.default_sampler).noise == obj.noise, name
    for name in SAMPLERS.where(autoregressive=True):
        assert not SAMPLERS.get(name).guidable and not SAMPLERS.get(name).has_time, name


def _template(B):
    tmpl = torch.full((B, 4), MASK)
    tmpl[::2, 1] = 2  # half the rows fix position 1
    return tmpl


def _by_hand(smp, den, x, rng):
    """The loop of base.py, written out: what `generate` must do."""
    counting = CountingDenoiser(den)
    state = smp.init_state(counting, SCHED, MASK, x)
    while not state.done:
        t = smp.model_time(state)
        logits = None
        if t is not None:
            logits, state = smp.evaluate(counting, state, t)
        state = smp.step(state, logits, rng.at(state.step))
    return smp.finish(counting, state, rng.at(state.step)), counting.calls


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_generate_is_the_base_loop_over_step(den, name):
    B = 6
    smp, den = build_sampler(name, **OPTIONS[name]), _net(name, den)
    x = smp.generate(den, SCHED, MASK, (B, 4), template=_template(B), generator=torch.Generator().manual_seed(1))
    tmpl = _template(B)
    assert bool((x[tmpl != MASK] == tmpl[tmpl != MASK]).all()) and not bool((x == MASK).any())
    assert smp.last_nfe >= 1 and smp.last_steps >= 1
    if name in COMPOSITE:
        return
    rng = make_stream(torch.Generator().manual_seed(1), B, "cpu")
    state, calls = _by_hand(smp, den, tmpl.clone(), rng)
    assert torch.equal(state.x, x) and calls == smp.last_nfe and state.step == smp.last_steps
    assert torch.equal(state.nfe, smp.last_nfe_per_row) and int(state.nfe.sum()) == smp.last_rows


@pytest.mark.parametrize("name", sorted(set(OPTIONS) - COMPOSITE))
def test_step_is_pure(den, name):
    smp = build_sampler(name, **OPTIONS[name])
    x0 = _template(4)
    state = smp.init_state(CountingDenoiser(den), SCHED, MASK, x0.clone())
    rng = SeedStream(3).bind(4, "cpu", False)
    # advance one step so that the state is not the initial one
    t = smp.model_time(state)
    state = smp.step(state, None if t is None else smp.model_output(den, state, t), rng.at(state.step))
    if state.done:
        pytest.skip("finished in one step")
    snapshot = (state.x.clone(), state.step, None if state.t is None else state.t.clone(),
                {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in state.extra.items() if k != "cache"})
    t = smp.model_time(state)
    logits = None if t is None else smp.model_output(den, state, t)
    a = smp.step(state, logits, rng.at(state.step))
    b = smp.step(state, logits, rng.at(state.step))
    assert isinstance(a, SamplerState) and a is not state
    assert torch.equal(a.x, b.x) and a.step == b.step == state.step + 1
    assert torch.equal(state.x, snapshot[0]) and state.step == snapshot[1]
    if snapshot[2] is not None:
        assert torch.equal(state.t, snapshot[2])
    for k, v in snapshot[3].items():
        now = state.extra[k]
        assert (torch.equal(now, v) if isinstance(v, torch.Tensor) else now == v), k


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_seeded_samples_do_not_depend_on_the_batch_layout(den, name):
    tmpl = _template(6)
    smp, den = build_sampler(name, **OPTIONS[name]), _net(name, den)
    whole = smp.generate(den, SCHED, MASK, (6, 4), template=tmpl, generator=7)
    parts = torch.cat([
        smp.generate(den, SCHED, MASK, (2, 4), template=tmpl[:2], generator=SeedStream(7, first_row=0)),
        smp.generate(den, SCHED, MASK, (4, 4), template=tmpl[2:], generator=SeedStream(7, first_row=2)),
    ])
    chunked = build_sampler(name, batch_size=4, **OPTIONS[name]).generate(den, SCHED, MASK, (6, 4), template=tmpl,
                                                                           generator=SeedStream(7))
    assert torch.equal(whole, parts) and torch.equal(whole, chunked)
    other = smp.generate(den, SCHED, MASK, (6, 4), template=tmpl, generator=8)
    assert not torch.equal(whole, other)  # the seed matters


def test_seed_stream_rows_are_independent_and_float64():
    """Different rows / steps get different streams; categorical draws use float64 uniforms."""
    rng = SeedStream(0).bind(3, "cpu", False)
    u = rng.at(0).rand((5,))
    assert u.dtype == torch.float64 and u.shape == (3, 5)
    assert not torch.equal(u[0], u[1]) and not torch.equal(u, rng.at(1).rand((5,)))
    assert torch.equal(u[1:], SeedStream(0, first_row=1).bind(2, "cpu", False).at(0).rand((5,)))


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_guidance_hooks_see_every_model_call(den, name):
    """Guidance is owned by the loop: a hook that bans token 0 reaches every call (no 0 sampled
    at a free position) and sees the state of the step it guides."""
    seen = []

    def ban_zero(state, logits):
        assert isinstance(state, SamplerState)
        seen.append(state.step)
        logits = logits.clone()
        logits[..., 0] = logits.min(dim=-1).values - 1e3  # below every other token, even -1e6 ones
        return logits

    smp, den = build_sampler(name, **OPTIONS[name]).add_guidance(ban_zero), _net(name, den)
    tmpl = _template(6)
    x = smp.generate(den, SCHED, MASK, (6, 4), template=tmpl, generator=3)
    free = tmpl == MASK
    if SAMPLERS.get(name).autoregressive:
        free[:, 0] = False  # the first token is drawn from first_token_ids without a model call
    assert not bool((x[free] == 0).any()) and len(seen) == smp.last_nfe


def test_state_select_resamples_sequences(den):
    """SamplerState.select (the hook SMC-style guidance needs): picked rows carry their tokens,
    times and sampler fields; the next step of the selection runs."""
    smp = build_sampler("remdm", steps=6, schedule="conf")
    state = smp.init_state(den, SCHED, MASK, _template(4))
    rng = SeedStream(0).bind(4, "cpu", False)
    state = smp.step(state, smp.model_output(den, state, state.t), rng.at(0))
    rows = torch.tensor([3, 3, 0])
    sel = state.select(rows)
    assert torch.equal(sel.x, state.x[rows]) and torch.equal(sel.extra["psi"], state.extra["psi"][rows])
    assert torch.equal(sel.grid, state.grid) and sel.step == state.step
    nxt = smp.step(sel, smp.model_output(den, sel, sel.t), SeedStream(0).bind(3, "cpu", False).at(sel.step))
    assert nxt.x.shape == (3, 4) and bool((nxt.x[nxt.fixed] == sel.x[sel.fixed]).all())
