"""Per-row output caching (samplers/output_cache.py, `Sampler.evaluate`): the denoiser sees only
the sequences whose tokens changed since their last evaluation, the samples stay those of the
uncached sampler bit for bit, and the per-row NFE is exactly the count the replayed trajectory
predicts."""

from __future__ import annotations

import pytest
import torch

from dnadiff.diffusion import build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.samplers import SeedStream, build_sampler
from dnadiff.samplers.base import CountingDenoiser, OutputCache, make_stream
from helpers.exact_sampling_target import ExactDenoiser, random_joint

SCHED = build_schedule("loglinear", eps=1e-3)
MASK = 3


@pytest.fixture(scope="module")
def den():
    return ExactDenoiser(random_joint(3, 5, seed=4), 3, 5)


class TimeReading:
    """The exact denoiser, declared time-conditioned (what a model reading t says)."""

    time_conditioned = True

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, x, t):
        return self.inner(x, t)


def _template() -> torch.Tensor:
    """Rows with 5, 4, 2, 1 and 0 free positions: they finish (stop changing) at different steps."""
    tmpl = torch.full((6, 5), MASK)
    tmpl[1, 0] = 2
    tmpl[2, :3] = torch.tensor([0, 1, 2])
    tmpl[3, 1:] = torch.tensor([1, 1, 0, 2])
    tmpl[4] = torch.tensor([2, 2, 1, 0, 1])  # nothing to sample
    return tmpl


def _replay(den, tmpl, steps, seed, **opts):
    """The uncached ancestral loop, by hand: final state and, per step, which rows changed and
    which rows still hold a masked position after it."""
    smp = build_sampler("ancestral", steps=steps, **opts)
    rng = make_stream(seed, tmpl.shape[0], "cpu")
    state = smp.init_state(den, SCHED, MASK, tmpl.clone())
    changed, masked = [], []
    while not state.done:
        new = smp.step(state, smp.model_output(den, state, state.t), rng.at(state.step))
        changed.append((new.x != state.x).any(dim=1))
        masked.append(new.masked.any(dim=1))
        state = new
    return state, torch.stack(changed), torch.stack(masked)  # (S, B) each


def _expected_nfe(start, changed, masked, noise_removal: bool) -> tuple[torch.Tensor, int]:
    """Per-row NFE and batched calls of the cached loop for a replayed trajectory: at step 0 the
    rows with a masked position (`start`), at step i > 0 the rows that changed at step i - 1 and
    still hold a masked position, and in noise removal the same rule for the last step (the other
    rows reuse their output, or need none)."""
    S = changed.shape[0]
    fresh = changed & masked  # (S, B): a new output is needed after step i
    last = S if noise_removal else S - 1
    rows = start.long() + fresh[:last].long().sum(dim=0)
    calls = 1 + int(fresh[:last].any(dim=1).sum())
    return rows, calls


@pytest.mark.parametrize("generator", [11, "torch"])
def test_cached_equals_ancestral_when_rows_change_at_different_steps(den, generator):
    tmpl = _template()
    gen = (lambda: torch.Generator().manual_seed(11)) if generator == "torch" else (lambda: 11)
    anc = build_sampler("ancestral", steps=40)
    a = anc.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=gen())
    cac = build_sampler("cached", steps=40)
    c = cac.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=gen())
    assert torch.equal(a, c) and not bool((c == MASK).any())
    # ancestral: every row at every call; cached: a row only when it changed, in fewer calls
    assert anc.last_rows == 6 * anc.last_nfe and torch.equal(anc.last_nfe_per_row, torch.full((6,), anc.last_nfe))
    assert cac.last_rows == int(cac.last_nfe_per_row.sum()) < 6 * cac.last_nfe <= 6 * anc.last_nfe
    # the fully fixed row is never evaluated; a row with one free token once, at the start (it
    # changes once, and is complete after that change)
    assert cac.last_nfe_per_row[4] == 0 and cac.last_nfe_per_row[3] == 1
    assert int(cac.last_nfe_per_row.max()) > 1


@pytest.mark.parametrize("steps,eps,noise_removal", [(200, 1e-5, "none"), (6, 0.3, "argmax"), (9, 0.2, "sample")])
def test_per_row_nfe_is_the_replayed_count(den, steps, eps, noise_removal):
    tmpl = _template()
    state, changed, masked = _replay(den, tmpl, steps, 5, eps=eps, noise_removal=noise_removal)
    rows, calls = _expected_nfe((tmpl == MASK).any(dim=1), changed, masked, noise_removal != "none")
    assert len({tuple(c) for c in changed.tolist()}) > 2  # rows change at different steps
    cac = build_sampler("cached", steps=steps, eps=eps, noise_removal=noise_removal)
    x = cac.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=5)
    anc = build_sampler("ancestral", steps=steps, eps=eps, noise_removal=noise_removal)
    assert torch.equal(x, anc.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=5))
    assert torch.equal(cac.last_nfe_per_row, rows) and cac.last_nfe == calls
    if noise_removal == "none":
        assert torch.equal(x, state.x)
    else:  # masks were left: noise removal made a call, only on rows still masked
        assert bool(state.masked.any()) and anc.last_nfe == changed.shape[0] + 1
        assert torch.equal(anc.last_nfe_per_row, changed.shape[0] + state.masked.any(dim=1).long())


def test_nfe_of_a_row_that_ends_unmasked_is_its_changed_steps(den):
    """The sampler's old docstring said NFE = changed steps + 1: the change that unmasks the last
    token is followed by no call, so it is exactly the changed steps (one sequence, 200 steps)."""
    state, changed, _ = _replay(den, torch.full((1, 5), MASK), 200, 2, noise_removal="none")
    c = int(changed.sum())
    assert not bool(state.masked.any()) and bool(changed[-1].all())  # the last step unmasked the last token
    cac = build_sampler("cached", steps=200, noise_removal="none")
    cac.generate(den, SCHED, MASK, (1, 5), generator=2)
    assert cac.last_nfe == c and cac.last_nfe_per_row.tolist() == [c]


def test_one_token_rows_are_evaluated_once():
    """L = 1: a row changes once, when its token is drawn, and is never evaluated again; a row
    still masked after the loop kept its output, so noise removal reuses it."""
    den = ExactDenoiser(random_joint(3, 1, seed=0), 3, 1)
    for steps in (3, 50):
        cac = build_sampler("cached", steps=steps)
        x = cac.generate(den, SCHED, MASK, (5, 1), generator=1)
        assert not bool((x == MASK).any())
        assert cac.last_nfe == 1 and cac.last_nfe_per_row.tolist() == [1] * 5 and cac.last_rows == 5


def test_time_conditioned_denoisers_are_never_cached(den):
    tmpl = _template()
    timed = TimeReading(den)
    anc = build_sampler("ancestral", steps=30)
    a = anc.generate(timed, SCHED, MASK, (6, 5), template=tmpl, generator=3)
    for smp in (build_sampler("cached", steps=30), build_sampler("cached", steps=30, time_conditioned=True)):
        c = smp.generate(timed if smp.time_conditioned is None else den, SCHED, MASK, (6, 5), template=tmpl,
                         generator=3)
        assert torch.equal(a, c) and smp.last_nfe == anc.last_nfe and smp.last_rows == 6 * smp.last_nfe
    # the option forces it on for a model that ignores t despite its attribute
    forced = build_sampler("cached", steps=30, time_conditioned=False)
    assert torch.equal(a, forced.generate(timed, SCHED, MASK, (6, 5), template=tmpl, generator=3))
    assert forced.last_rows < 6 * forced.last_nfe


@pytest.mark.parametrize("name,opts", [
    ("analytic", {"steps": 12}),
    ("first_hitting", {}),
    ("confidence", {"steps": 4, "criterion": "random", "score_noise": 0.5}),
    ("remdm", {"steps": 12, "schedule": "cap", "eta": 0.3}),
    ("remdm", {"steps": 12, "schedule": "conf"}),
    ("remdm", {"steps": 20, "schedule": "loop", "eta": 0.05}),
    ("semi_ar", {"inner": "ancestral", "window": 3, "stride": 1, "inner_options": {"steps": 8}}),
])
def test_the_cache_option_is_exact_for_every_masked_sampler(den, name, opts):
    tmpl = _template()
    if name == "semi_ar":  # windows of 3 over the 5 positions: the exact denoiser of length 3
        den = ExactDenoiser(random_joint(3, 3, seed=6), 3, 3)
    plain = build_sampler(name, **opts)
    a = plain.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=SeedStream(9))
    cached = build_sampler(name, cache=True, **opts)
    c = cached.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=SeedStream(9))
    assert torch.equal(a, c)
    assert cached.last_rows == int(cached.last_nfe_per_row.sum()) < plain.last_rows == int(plain.last_nfe_per_row.sum())
    assert cached.last_nfe_per_row[4] == 0 < plain.last_nfe_per_row[4]  # nothing to sample: no call


def test_guidance_hooks_see_only_the_rows_evaluated(den):
    seen = []

    def ban_zero(state, logits):
        seen.append(state.x.shape[0])
        assert logits.shape[0] == state.x.shape[0]
        logits = logits.clone()
        logits[..., 0] = logits.min(dim=-1).values - 1e3
        return logits

    tmpl = _template()
    anc = build_sampler("ancestral", steps=25).add_guidance(ban_zero)
    a = anc.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=4)
    seen.clear()
    cac = build_sampler("cached", steps=25).add_guidance(ban_zero)
    c = cac.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=4)
    assert torch.equal(a, c) and not bool((c[tmpl == MASK] == 0).any())
    assert len(seen) == cac.last_nfe and sum(seen) == cac.last_rows and min(seen) < 6


def test_batch_chunks_and_counting(den):
    """`batch_size` chunks: per-row NFE is that of the same sequences sampled whole (the
    counter-based stream makes their trajectories identical); CountingDenoiser agrees."""
    tmpl = _template()
    whole = build_sampler("cached", steps=30)
    x = whole.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=8)
    parts = build_sampler("cached", steps=30, batch_size=4)
    assert torch.equal(x, parts.generate(den, SCHED, MASK, (6, 5), template=tmpl, generator=8))
    assert torch.equal(whole.last_nfe_per_row, parts.last_nfe_per_row) and whole.last_rows == parts.last_rows
    counting = CountingDenoiser(den)
    smp = build_sampler("cached", steps=30)
    state = smp.run(counting, SCHED, MASK, tmpl.clone(), make_stream(8, 6, "cpu"))
    assert counting.rows == int(state.nfe.sum()) == whole.last_rows and counting.calls == whole.last_nfe


def test_autoregressive_rejects_the_cache_option():
    with pytest.raises(DnadiffError, match="cache option"):
        build_sampler("autoregressive", cache=True)


def test_output_cache_rows():
    x = torch.tensor([[0, 3], [1, 3], [3, 3]])
    cache = OutputCache.empty(3, "cpu")
    assert cache.stale(x).tolist() == [True, True, True]
    new = torch.arange(2 * 2 * 2, dtype=torch.float32).view(2, 2, 2)
    merged = cache.merged(torch.tensor([0, 2]), new)
    assert merged.tolist() == [new[0].tolist(), [[0.0, 0.0], [0.0, 0.0]], new[1].tolist()]
    cache = cache.store(x, torch.tensor([0, 2]), merged)
    assert cache.stale(x).tolist() == [False, True, False]  # row 1 holds a placeholder
    moved = x.clone()
    moved[2, 0] = 1
    assert cache.stale(moved).tolist() == [False, True, True]
    again = cache.merged(torch.tensor([2]), torch.full((1, 2, 2), 9.0))
    assert again[0].tolist() == new[0].tolist() and again[2].tolist() == [[9.0, 9.0], [9.0, 9.0]]
    assert merged[2].tolist() == new[1].tolist()  # the earlier merge is untouched
    picked = cache.select(torch.tensor([2, 2, 0]))
    assert picked.valid.tolist() == [True, True, True] and torch.equal(picked.logits[0], new[1])
    assert cache.stale(torch.zeros(3, 4, dtype=torch.long)).all()  # another length: nothing is valid
