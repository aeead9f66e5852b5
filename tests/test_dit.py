"""DiT (MDLM §3.5.1): adaLN-zero init, attention equals an explicit softmax with rotary positions,
causal masking, time conditioning, and the `small` preset's parameter count (docs/references.md: 92.4M
non-embedding parameters)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dnadiff.backbones import build_backbone
from dnadiff.backbones.dit import DiT, timestep_embedding
from dnadiff.backbones.layers.rotary import Rotary, rotate_half
from dnadiff.errors import DnadiffError


def _jitter(model, scale=0.1):
    torch.manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model


def test_zero_init_gives_zero_logits_and_identity_blocks():
    model = build_backbone("dit", "tiny", vocab_size=12).eval()
    x = torch.randint(0, 12, (2, 9))
    assert torch.equal(model(x), torch.zeros(2, 9, 12))
    emb = model.vocab_embed(x)
    c = F.silu(model.sigma_map(torch.zeros(2)))
    for block in model.blocks:  # gates are 0: every block is the identity at init
        assert torch.equal(block(emb, c, model.rotary), emb)


def test_rotate_half_and_relative_positions():
    x = torch.arange(8.0)
    assert torch.equal(rotate_half(x), torch.tensor([-4.0, -5, -6, -7, 0, 1, 2, 3]))
    rot = Rotary(8)
    q = torch.randn(1, 1, 1, 8).expand(1, 1, 12, 8).contiguous()  # the same vector at every position
    k = torch.randn(1, 1, 1, 8).expand(1, 1, 12, 8).contiguous()
    rq, rk = rot(q, k)
    dots = (rq[0, 0][:, None] * rk[0, 0][None]).sum(-1)  # (12, 12) q_p · k_s
    for d in range(-3, 4):  # q_p·k_s depends on p − s only
        diag = torch.diagonal(dots, offset=d)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-5, rtol=1e-5)
    # angle of the first pair at position p is p (inv_freq[0] = 1): a pure rotation of (x_0, x_4)
    cos, sin = rot.tables(3, torch.device("cpu"))
    assert (torch.allclose(cos[:, 0], torch.cos(torch.arange(3.0)))
            and torch.allclose(sin[:, 4], torch.sin(torch.arange(3.0))))
    assert math.isclose(rot.inv_freq[1].item(), 10_000 ** (-2 / 8), rel_tol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_block_equals_explicit_attention(causal):
    model = _jitter(build_backbone("dit", "tiny", vocab_size=12, causal=causal)).eval()
    block, rot = model.blocks[0], model.rotary
    B, L, H, nh = 2, 7, 64, 4
    x, c = torch.randn(B, L, H), torch.randn(B, 32)
    shift1, scale1, gate1, shift2, scale2, gate2 = block.adaLN_modulation(c)[:, None].chunk(6, -1)

    def ln(v, w):
        return (v - v.mean(-1, keepdim=True)) / torch.sqrt(v.var(-1, unbiased=False, keepdim=True) + 1e-5) * w

    h = ln(x, block.norm1.weight) * (1 + scale1) + shift1
    q, k, v = (block.attn_qkv(h).view(B, L, 3, nh, H // nh)).unbind(2)  # each (B, L, nh, hd)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    cos, sin = rot.tables(L, x.device)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    s = q @ k.transpose(-1, -2) / math.sqrt(H // nh)  # (B, nh, L, L)
    if causal:
        s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H)
    x1 = x + gate1 * block.attn_out(a)
    h2 = ln(x1, block.norm2.weight) * (1 + scale2) + shift2
    m = block.mlp[2](0.5 * block.mlp[0](h2)
                     * (1 + torch.tanh(math.sqrt(2 / math.pi) * (block.mlp[0](h2) + 0.044715 * block.mlp[0](h2) ** 3))))
    expected = x1 + gate2 * m
    torch.testing.assert_close(block(x, c, rot), expected, atol=2e-5, rtol=1e-4)


def test_time_conditioning_switch():
    x = torch.randint(0, 12, (2, 8))
    off = _jitter(build_backbone("dit", "tiny", vocab_size=12)).eval()
    assert not off.time_conditioned
    with torch.no_grad():  # t is ignored; it is the same as feeding t = 0
        torch.testing.assert_close(off(x, torch.tensor([0.9, 0.1])), off(x))
    on = _jitter(build_backbone("dit", "tiny", vocab_size=12, time_conditioning=True)).eval()
    assert on.time_conditioned
    with torch.no_grad():
        a, b = on(x, torch.tensor([0.9, 0.9])), on(x, torch.tensor([0.1, 0.1]))
        torch.testing.assert_close(on(x, torch.tensor([0.0, 0.0])), off_equivalent(on, x))
    assert (a - b).abs().max() > 1e-3
    with pytest.raises(DnadiffError):
        on(x)


def off_equivalent(model, x):
    """A time-conditioned model at t = 0 computes what the unconditioned path does."""
    model.time_conditioned = False
    try:
        return model(x)
    finally:
        model.time_conditioned = True


def test_timestep_embedding_values():
    e = timestep_embedding(torch.tensor([0.0, 2.0]), 8)
    assert torch.equal(e[0], torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0]))
    freqs = torch.exp(-math.log(10_000) * torch.arange(4) / 4)
    torch.testing.assert_close(e[1], torch.cat([torch.cos(2 * freqs), torch.sin(2 * freqs)]))


def test_small_preset_parameter_count():
    with torch.device("meta"):
        model = build_backbone("dit", "small", vocab_size=30522)
    assert (model.hidden_size, len(model.blocks), model.blocks[0].n_heads) == (768, 12, 12)
    non_embedding = sum(
        p.numel() for n, p in model.named_parameters() if not n.startswith(("vocab_embed", "output_layer.linear"))
    )
    print(f"DiT small non-embedding parameters: {non_embedding:,}")
    assert non_embedding == 92_380_672  # 92.4M (MDLM reference)
    assert isinstance(model, DiT) and not model.is_causal
    with torch.device("meta"):
        assert build_backbone("dit", "small-causal", vocab_size=30522).is_causal


def test_dropout_only_in_training():
    model = build_backbone("dit", "tiny", vocab_size=12, dropout=0.5)
    _jitter(model)
    x = torch.randint(0, 12, (1, 6))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model(x))
    model.train()
    with torch.no_grad():
        assert not torch.equal(model(x), model(x))


def test_bad_config():
    with pytest.raises(DnadiffError):
        build_backbone("dit", "tiny", hidden_size=66, n_heads=4)
