"""HyenaDNA: FFT convolutions equal direct ones, the operator equals a direct re-computation,
filter construction, causal vs two-sided behaviour, vocab padding/tied head, and the tiny-1k
parameter count (docs/references.md: 436,096)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dnadiff.backbones import build_backbone
from dnadiff.backbones.layers.fftconv import (
    conv_bidirectional_direct,
    conv_causal_direct,
    fftconv_bidirectional,
    fftconv_causal,
)
from dnadiff.errors import DnadiffError


@pytest.mark.parametrize("L", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fftconv_equals_direct_convolution(L, dtype):
    g = torch.Generator().manual_seed(L)
    u = torch.randn(2, 3, L, generator=g, dtype=dtype)
    kf, kb = torch.randn(3, L, generator=g, dtype=dtype), torch.randn(3, L, generator=g, dtype=dtype)
    tol = dict(atol=1e-12, rtol=1e-10) if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-5)
    # causal against a loop written from the definition y[n] = Σ_{m≤n} k[n−m] u[m]
    loop = torch.zeros_like(u)
    for n in range(L):
        for m in range(n + 1):
            loop[..., n] += kf[:, n - m] * u[..., m]
    torch.testing.assert_close(conv_causal_direct(u, kf), loop, **tol)
    torch.testing.assert_close(fftconv_causal(u, kf), loop, **tol)
    # against torch's own conv1d (cross-correlation with a flipped, left-padded kernel)
    ref = F.conv1d(F.pad(u, (L - 1, 0)), kf.flip(-1)[:, None], groups=3)
    torch.testing.assert_close(fftconv_causal(u, kf), ref, **tol)
    # two-sided
    torch.testing.assert_close(fftconv_bidirectional(u, kf, kb), conv_bidirectional_direct(u, kf, kb), **tol)
    assert fftconv_causal(u, kf).dtype == dtype


def test_two_sided_conv_is_not_circular():
    L = 8
    u = torch.zeros(1, 1, L)
    u[..., 0] = 1.0  # impulse at the left edge: its response must not wrap to the right end
    kf, kb = torch.zeros(1, L), torch.ones(1, L)
    y = fftconv_bidirectional(u, kf, kb)
    assert y.abs().max() < 1e-6  # only the anti-causal side is on, and nothing lies left of n = 0
    u = torch.zeros(1, 1, L)
    u[..., L - 1] = 1.0
    y = fftconv_bidirectional(u, kf, kb)
    torch.testing.assert_close(y[0, 0], torch.tensor([1.0] * (L - 1) + [0.0]), atol=1e-6, rtol=0)


def test_fftconv_gradient_matches_direct():
    u = torch.randn(1, 2, 9, dtype=torch.float64, requires_grad=True)
    kf = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    kb = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1, 2, 9, dtype=torch.float64)
    g1 = torch.autograd.grad((fftconv_bidirectional(u, kf, kb) * w).sum(), (u, kf, kb))
    g2 = torch.autograd.grad((conv_bidirectional_direct(u, kf, kb) * w).sum(), (u, kf, kb))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def _operator_direct(op, u):
    """The order-2 Hyena operator (docs/references.md) recomputed with direct convolutions."""
    L, d = u.shape[1], op.d_model
    z = op.in_proj(u).transpose(1, 2)  # (B, 3d, L)
    w = op.short_filter.weight[:, 0]  # (3d, 3)
    sc = op.short_filter.bias[:, None] + sum(
        w[:, 2 - s, None] * F.pad(z, (s, 0))[..., :L] for s in range(3)
    )  # causal depthwise conv, kernel 3
    x0, x1, v = sc.split(d, dim=1)
    v = v * x1
    kf = op.filter_fn.filter(L).T
    if op.causal:
        y = conv_causal_direct(v, kf)
    else:
        y = conv_bidirectional_direct(v, kf, op.filter_fn.filter(L, reverse=True).T)
    v = y + v * op.filter_fn.bias[:, None]
    return op.out_proj((v * x0).transpose(1, 2))


@pytest.mark.parametrize("preset", ["tiny", "tiny-causal"])
def test_operator_equals_direct_computation(preset):
    torch.manual_seed(0)
    model = build_backbone("hyena", preset).eval()
    op = model.backbone.layers[0].mixer
    u = torch.randn(2, 11, model.hidden_size)
    with torch.no_grad():
        torch.testing.assert_close(op(u), _operator_direct(op, u), atol=1e-5, rtol=1e-4)


def test_filter_construction():
    model = build_backbone("hyena", "tiny-1k-causal")
    fn = model.backbone.layers[0].mixer.filter_fn
    z, t = fn.pos_emb(1026)
    n = torch.arange(1026.0)
    w = 2 * math.pi * n / 1026
    torch.testing.assert_close(z[0, :, 0], n / 1025)  # t = linspace(0, 1)
    torch.testing.assert_close(z[0, :, 1], torch.cos(-1e-4 * w))  # band f = 1e-4
    torch.testing.assert_close(z[0, :, 4], torch.sin(-1.0 * w), atol=1e-5, rtol=0)  # band f = 1
    deltas = fn.modulation.deltas[0, 0]
    torch.testing.assert_close(deltas[[0, -1]], torch.tensor([math.log(1e-2) / 1.5, math.log(1e-2) / 0.3]))
    # shared Sin: one frequency parameter, initialised at activation_freq = 10
    freqs = {id(fn.implicit_filter[i].freq) for i in (1, 3, 5)}
    assert len(freqs) == 1 and torch.equal(fn.implicit_filter[1].freq, torch.full((1, 64), 10.0))
    # modulation window: h(t) = MLP(z) · (exp(−t|δ|) + 0.05)
    h_raw = fn.implicit_filter(z)[0]
    torch.testing.assert_close(fn.filter(1026), h_raw * (torch.exp(-t[0] * deltas.abs()) + 0.05))
    assert "pos_emb.z" not in dict(fn.named_parameters())  # a buffer unless train_pos_emb


def test_backward_kernel_differs_from_forward():
    model = build_backbone("hyena", "tiny")
    fn = model.backbone.layers[0].mixer.filter_fn
    assert fn.rev_bias is not None
    assert (fn.filter(64) - fn.filter(64, reverse=True)).abs().max() > 1e-6
    assert build_backbone("hyena", "tiny-causal").backbone.layers[0].mixer.filter_fn.rev_bias is None


def test_parameter_counts():
    causal = build_backbone("hyena", "tiny-1k-causal").num_parameters()
    bidir = build_backbone("hyena", "tiny-1k").num_parameters()
    print(f"HyenaDNA tiny-1k parameters: causal {causal:,} (official 436,096), bidirectional {bidir:,}")
    assert causal == 436_096
    assert abs(bidir - 436_096) / 436_096 < 0.02


def test_padded_vocab_and_tied_head():
    model = build_backbone("hyena", "tiny", vocab_size=12).eval()
    emb = model.backbone.embeddings.word_embeddings.weight
    assert emb.shape == (16, 32) and model.lm_head is None
    x = torch.randint(0, 12, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(model(x), model.features(x) @ emb[:12].T)
    untied = build_backbone("hyena", "tiny", vocab_size=12, tie_embeddings=False)
    assert untied.lm_head.weight.shape == (16, 32)


def test_sequence_longer_than_l_max_is_a_clear_error():
    model = build_backbone("hyena", "tiny", l_max=8)
    with pytest.raises(DnadiffError, match="l_max"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_bad_config():
    with pytest.raises(DnadiffError):
        build_backbone("hyena", "tiny", emb_dim=4)
    with pytest.raises(DnadiffError):
        build_backbone("hyena", "tiny", hyena_order=3)


def test_filter_pair_matches_single_filters():
    fn = build_backbone("hyena", "tiny").backbone.layers[1].mixer.filter_fn
    kf, kb = fn.filter_pair(40)
    torch.testing.assert_close(kf, fn.filter(40))
    torch.testing.assert_close(kb, fn.filter(40, reverse=True))
