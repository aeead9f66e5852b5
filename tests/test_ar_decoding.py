"""Incremental decoding of causal backbones: `allocate_cache` / `step` reproduce the
full forward's logits token by token, and the autoregressive sampler gives the same tokens with
the cache as with the O(L^2) full re-run (same seed), with a template prefix too."""

from __future__ import annotations

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.diffusion import build_schedule
from dnadiff.errors import DnadiffError
from dnadiff.model import Denoiser, SuppressTokens
from dnadiff.samplers import build_sampler

CAUSAL = [("mamba", "tiny"), ("hyena", "tiny-causal"), ("dit", "tiny-causal")]


def _model(name, preset):
    torch.manual_seed(0)
    m = build_backbone(name, preset=preset, vocab_size=12).eval()
    if name == "dit":  # adaLN-zero and a zero output layer would make every logit 0: randomise
        with torch.no_grad():
            for p in m.parameters():
                if p.abs().sum() == 0:
                    p.normal_(0, 0.1)
    return m


@pytest.mark.parametrize("name,preset", CAUSAL)
def test_step_logits_equal_full_forward(name, preset):
    m = _model(name, preset)
    x = torch.randint(7, 11, (3, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = m(x)  # (B, L, V)
        cache = m.allocate_cache(3, 40)
        steps = torch.stack([m.step(x[:, i], cache) for i in range(40)], dim=1)
    assert cache["pos"] == 40
    torch.testing.assert_close(steps, full, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("bos_id", [None, 2])
@pytest.mark.parametrize("name,preset", CAUSAL)
def test_cached_sampling_gives_the_full_rerun_tokens(name, preset, bos_id):
    m = _model(name, preset)
    den = SuppressTokens(Denoiser(m), [0, 1, 2, 4, 5, 6, 11])
    sched = build_schedule("loglinear")
    tmpl = torch.full((4, 48), 3)
    tmpl[:, :5] = torch.tensor([7, 8, 9, 10, 7])  # a prefix; the rest is sampled
    tmpl[:2, 30] = 9  # and a fixed token in the middle for half the rows
    runs = {}
    for use_cache in (True, False):
        s = build_sampler("autoregressive", first_token_ids=[7, 8, 9, 10], use_cache=use_cache, bos_id=bos_id)
        runs[use_cache] = (s.generate(den, sched, 3, (4, 48), template=tmpl, generator=5), s.last_nfe)
    assert torch.equal(runs[True][0], runs[False][0])
    assert bool((runs[True][0][:, :5] == tmpl[:, :5]).all()) and bool((runs[True][0][:2, 30] == 9).all())
    assert not bool((runs[True][0] == 3).any())
    # one single-token call per fed token: positions 0..46, plus [BOS] in front when the model reads it
    assert runs[True][1] == (47 if bos_id is None else 48)
    assert runs[False][1] == 48 - 5  # one full call per free position 5..47


def test_cache_is_refused_where_it_does_not_apply():
    with pytest.raises(DnadiffError, match="causal"):
        build_backbone("hyena", preset="tiny", vocab_size=12).allocate_cache(1, 8)
    assert Denoiser(build_backbone("dit", preset="tiny", vocab_size=12)).allocate_cache(1, 8) is None
