"""SSD-LM (diffusion/ssdlm.py, samplers/ssdlm.py): the simplex representation and its noising, the training
block (context clean, block noised, nothing after it seen, only the block scored), the semi-AR decoding
(blocks in order, the last shorter, finished blocks as clean context, templates, NFE, batch-layout invariance)."""

from __future__ import annotations

import math

import pytest
import torch

from dnadiff.diffusion import build_objective
from dnadiff.diffusion.ssdlm import cosine_alpha_bar, noisy_logits, simplex_logits
from dnadiff.errors import DnadiffError
from dnadiff.samplers import SeedStream, build_sampler

V, MASK = 6, 5


class Recorder:
    """A denoiser that takes the simplex itself (`forward_soft`, as call_soft prefers) and records its inputs;
    it predicts token `(position + shift) % (V - 1)` with logit margin 10 (never the mask id)."""

    time_conditioned = True

    def __init__(self, shift: int = 0):
        self.seen, self.shift = [], shift

    def __call__(self, x, t):
        raise AssertionError("the soft path must be used")

    def forward_soft(self, soft, t):
        self.seen.append((soft.clone(), t.clone()))
        B, L, _ = soft.shape
        target = (torch.arange(L) + self.shift) % (V - 1)
        return 10.0 * torch.nn.functional.one_hot(target, V).float().expand(B, L, V)


def test_simplex_representation_and_noising():
    x = torch.tensor([[0, 3, 2]])
    w = simplex_logits(x, V, 5.0)
    assert w.shape == (1, 3, V) and bool((w.gather(-1, x[..., None]) == 5.0).all()) and float(w.sum()) == 3 * (5 - 25)
    noise = torch.randn(1, 3, V, generator=torch.Generator().manual_seed(0))
    assert torch.equal(noisy_logits(w, torch.tensor([1.0]), 5.0, noise), w)  # ᾱ = 1: clean
    torch.testing.assert_close(noisy_logits(w, torch.tensor([0.0]), 5.0, noise), 5.0 * noise)  # ᾱ = 0: N(0, K²)
    a = cosine_alpha_bar(torch.linspace(0, 1, 101))
    assert float(a[0]) == 1.0 and float(a[-1]) < 1e-12 and bool((a[1:] < a[:-1]).all())
    # the marginal of s_t: mean √ᾱ w̃, standard deviation √(1-ᾱ) K, per coordinate
    ab = torch.tensor([0.3])
    draws = noisy_logits(w.expand(20000, 3, V), ab.expand(20000), 5.0,
                         torch.randn(20000, 3, V, generator=torch.Generator().manual_seed(1)))
    torch.testing.assert_close(draws.mean(0), math.sqrt(0.3) * w[0], atol=0.15, rtol=0)
    torch.testing.assert_close(draws.std(0), torch.full((3, V), math.sqrt(0.7) * 5.0), atol=0.1, rtol=0)


def test_training_block_sees_clean_context_and_nothing_after_it():
    obj = build_objective("ssdlm", vocab_size=V, block_size=4, simplex_value=5.0)
    den = Recorder()
    x0 = torch.randint(0, V - 1, (3, 11), generator=torch.Generator().manual_seed(0))
    am = torch.ones_like(x0)
    am[2, -2:] = 0
    for seed in range(6):
        den.seen.clear()
        out = obj.loss(den, x0, am, generator=torch.Generator().manual_seed(seed))
        soft, t = den.seen[0]
        c = soft.shape[1] - 4  # the input stops after the block
        assert 0 <= c <= 11 - 4
        assert torch.equal(soft[:, :c], torch.nn.functional.one_hot(x0[:, :c], V).float())  # clean context
        assert torch.allclose(soft[:, c:].sum(-1), torch.ones(3, 4)) and bool((soft[:, c:] < 1).all())
        assert bool(((t >= 0) & (t <= 1)).all()) and t.shape == (3,)
        assert out.num_tokens.tolist() == am[:, c:c + 4].sum(1).float().tolist()  # only the block's real tokens
        target = torch.arange(c, c + 4) % (V - 1)
        expected = torch.nn.functional.cross_entropy(  # the recorder's logits, scored at the block only
            10.0 * torch.nn.functional.one_hot(target, V).float().expand(3, 4, V).reshape(-1, V),
            x0[:, c:c + 4].reshape(-1), reduction="none").view(3, 4) * am[:, c:c + 4]
        torch.testing.assert_close(out.nll, expected.sum(1))


@pytest.mark.parametrize("length", [12, 10])
def test_decoding_blocks_in_order_last_shorter(length):
    den = Recorder(shift=1)
    smp = build_sampler("ssdlm", steps=3, vocab_size=V, block_size=4)
    x = smp.generate(den, None, MASK, (2, length), generator=0)
    expected_blocks = [(a, min(a + 4, length)) for a in range(0, length, 4)]
    assert smp.blocks(length) == expected_blocks
    assert torch.equal(x, ((torch.arange(length) + 1) % (V - 1)).expand(2, length))  # the argmax of the last call
    assert smp.last_nfe == 3 * len(expected_blocks) and smp.last_nfe_per_row.tolist() == [smp.last_nfe] * 2
    widths = [s.shape[1] for s, _ in den.seen]
    assert widths == [b for _, b in expected_blocks for _ in range(3)]  # each block sees context + itself only
    for soft, t in den.seen:
        a = max(a for a, b in expected_blocks if b == soft.shape[1])
        assert torch.equal(soft[:, :a], torch.nn.functional.one_hot(x[:, :a], V).float())  # finished blocks, clean
    assert [float(t[0]) for _, t in den.seen[:3]] == pytest.approx([1.0, 2 / 3, 1 / 3])


def test_templates_are_kept_and_samples_do_not_depend_on_the_batch_layout():
    class Random(Recorder):  # logits that depend on the input: the sampled path matters
        def forward_soft(self, soft, t):
            return 3.0 * soft.roll(1, dims=1) + torch.sin(torch.arange(soft.shape[1]))[:, None]

    tmpl = torch.full((4, 9), MASK)
    tmpl[:, 1] = 2
    tmpl[:, 6] = 0
    smp = build_sampler("ssdlm", steps=4, vocab_size=V, block_size=4, projection="sample")
    whole = smp.generate(Random(), None, MASK, (4, 9), template=tmpl, generator=5)
    parts = torch.cat([smp.generate(Random(), None, MASK, (1, 9), template=tmpl[:1], generator=SeedStream(5)),
                       smp.generate(Random(), None, MASK, (3, 9), template=tmpl[1:],
                                    generator=SeedStream(5, first_row=1))])
    assert torch.equal(whole, parts)
    assert bool((whole[:, 1] == 2).all() and (whole[:, 6] == 0).all())


def test_bad_options_are_refused():
    with pytest.raises(DnadiffError, match="block_size"):
        build_sampler("ssdlm", block_size=0)
    with pytest.raises(DnadiffError, match="simplex_value"):
        build_objective("ssdlm", vocab_size=V, simplex_value=-1.0)
    with pytest.raises(DnadiffError, match="vocab_size .* is required"):
        build_sampler("ssdlm", steps=2).generate(Recorder(), None, MASK, (1, 4))


def test_context_limits_what_a_block_reads():
    den = Recorder(shift=1)
    smp = build_sampler("ssdlm", steps=2, vocab_size=V, block_size=4, context=3)
    x = smp.generate(den, None, MASK, (2, 11), generator=0)
    assert [s.shape[1] for s, _ in den.seen] == [4, 4, 7, 7, 6, 6]  # at most 3 finished tokens + the block
    soft, _ = den.seen[-1]
    assert torch.equal(soft[:, :3], torch.nn.functional.one_hot(x[:, 5:8], V).float())
