"""The backbone contract (dnadiff/backbones/base.py) for every registered backbone and tiny preset.

Shape, dtype, finiteness, bf16 autocast close to fp32, gradients reaching every parameter,
bidirectionality for MDLM backbones (changing token j changes the output at i < j), strict causality for
causal ones, the optional `cond` vector, and rebuilding from the saved config dict.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from dnadiff.backbones import BACKBONES, build_backbone, build_backbone_from_config
from dnadiff.errors import DnadiffError

V, B, L = 12, 2, 17


def _cases() -> list[tuple[str, str, tuple[tuple[str, object], ...]]]:
    """Every `tiny*` preset (not the paper-sized ones), plus the `tiny` preset with the family's
    causal / time-conditioning switches flipped on when its Config has them and no preset does."""
    cases = []
    for name in BACKBONES.names():
        cls = BACKBONES.get(name)
        if not cls.neural:  # the Markov baseline: counts, tested in test_markov.py
            continue
        presets = sorted(p for p in cls.PRESETS if p == "tiny" or (p.startswith("tiny-") and "1k" not in p))
        cases += [(name, p, ()) for p in presets]
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        if "causal" in fields and not any(cls.PRESETS[p].get("causal") for p in presets):
            cases.append((name, "tiny", (("causal", True),)))
        if "time_conditioning" in fields:
            cases.append((name, "tiny", (("time_conditioning", True),)))
    return cases


CASES = _cases()
IDS = [f"{n}-{p}" + "".join(f"-{k}" for k, _ in o) for n, p, o in CASES]


def _perturbed(name: str, preset: str, overrides=(), **more) -> torch.nn.Module:
    """Build in eval mode and jitter every float parameter, so zero-initialised layers (adaLN-zero,
    DiT output) do not hide a broken gradient path or a missing dependency."""
    torch.manual_seed(0)
    model = build_backbone(name, preset=preset, vocab_size=V, **dict(overrides), **more).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.add_(0.05 * torch.randn_like(p))
    return model


def _t(model) -> torch.Tensor:
    return torch.full((B,), 0.4)


def test_every_family_has_tiny():
    assert BACKBONES.names(), "no backbone registered"
    for name in BACKBONES.names():
        assert "tiny" in BACKBONES.get(name).PRESETS, name


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_shapes_dtype_finite(name, preset, overrides):
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V, (B, L))
    logits = model(x, _t(model))
    feats = model.features(x, _t(model))
    assert logits.shape == (B, L, V) and logits.dtype == torch.float32
    assert feats.shape == (B, L, model.hidden_size)
    assert torch.isfinite(logits).all() and torch.isfinite(feats).all()
    assert model.vocab_size == V
    assert dataclasses.is_dataclass(model.config)
    assert isinstance(model.is_causal, bool) and isinstance(model.time_conditioned, bool)


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_bf16_autocast_close_to_fp32(name, preset, overrides):
    """CPU bf16 autocast (training's precision=bf16) stays within 5 % of the fp32 logits' largest magnitude
    (measured: 0.5–0.9 % for every case) over 64 positions, long enough for Hyena's FFT convolution."""
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V, (B, 64))
    with torch.no_grad():
        ref = model(x, _t(model))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(x, _t(model))
    assert torch.isfinite(low).all()
    assert (low.float() - ref).abs().max() < 0.05 * ref.abs().max() + 1e-3


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_gradients_reach_every_parameter(name, preset, overrides):
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V, (B, L))
    w = torch.randn(B, L, V, generator=torch.Generator().manual_seed(1))
    (model(x, _t(model)) * w).sum().backward()
    dead = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or p.grad.abs().sum() == 0)]
    assert not dead, f"{name}/{preset}: no gradient reaches {dead}"


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_bidirectional_or_strictly_causal(name, preset, overrides):
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V - 1, (B, L))
    j = L // 2
    y = x.clone()
    y[:, j] = (x[:, j] + 1) % V  # change one token
    with torch.no_grad():
        a, b = model(x, _t(model)), model(y, _t(model))
    diff = (a - b).abs().amax(dim=(0, 2))  # (L,)
    assert diff[j:].max() > 1e-4, "the changed token must influence its own and later outputs"
    if model.is_causal:
        assert diff[:j].max() < 1e-5, f"causal model leaks the future: {diff[:j]}"
    else:
        assert diff[:j].min() > 1e-5, f"bidirectional model ignores the right context: {diff[:j]}"


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_time_used_only_when_conditioned(name, preset, overrides):
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V, (B, L))
    with torch.no_grad():
        a, b = model(x, torch.full((B,), 0.1)), model(x, torch.full((B,), 0.9))
    if model.time_conditioned:
        assert (a - b).abs().max() > 1e-4
    else:
        torch.testing.assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_cond_vector(name, preset, overrides):
    fields = {f.name for f in dataclasses.fields(BACKBONES.get(name).Config)}
    assert "cond_dim" in fields, f"{name}: Config lacks cond_dim"
    model = _perturbed(name, preset, overrides, cond_dim=5)
    x = torch.randint(0, V, (B, L))
    c1, c2 = torch.randn(B, 5), torch.randn(B, 5)
    with torch.no_grad():
        o1, o2 = model(x, _t(model), c1), model(x, _t(model), c2)
    assert o1.shape == (B, L, V)
    assert (o1 - o2).abs().max() > 1e-4
    plain = build_backbone(name, preset=preset, vocab_size=V, **dict(overrides))
    with pytest.raises(DnadiffError):
        plain(x, _t(plain), c1)


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_rebuild_from_config(name, preset, overrides):
    model = build_backbone(name, preset=preset, vocab_size=V, **dict(overrides))
    again = build_backbone_from_config(name, dataclasses.asdict(model.config))
    assert again.config == model.config
    assert {k: v.shape for k, v in again.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    again.load_state_dict(model.state_dict())
    x = torch.randint(0, V, (B, L))
    model.eval(), again.eval()
    with torch.no_grad():
        torch.testing.assert_close(again(x, _t(model)), model(x, _t(model)))


def test_unknown_preset_and_key():
    with pytest.raises(DnadiffError):
        build_backbone("dit", preset="nope")
    with pytest.raises(DnadiffError):
        build_backbone("hyena", preset="tiny", not_a_field=1)


# ---------------------------------------------------------------------- pads
PAD_LENGTHS = (11, 6, 1)  # real lengths of the rows of a right-padded batch


def _padded(total: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of PAD_LENGTHS real tokens, right-padded to `total` with random ids (not only [PAD]):
    a pad must not matter whatever token sits there."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (len(PAD_LENGTHS), total), generator=g)
    mask = torch.zeros_like(x)
    for i, n in enumerate(PAD_LENGTHS):
        mask[i, :n] = 1
    return x, mask


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_pad_invariance(name, preset, overrides):
    """With attention_mask, a row's outputs at its real positions equal those of the unpadded row
    run alone (<= 1e-5, float32), whatever the pads hold and however many there are."""
    model = _perturbed(name, preset, overrides)
    for total in (11, 40):
        x, mask = _padded(total, seed=total)
        t = torch.full((x.shape[0],), 0.4)
        with torch.no_grad():
            logits = model(x, t, attention_mask=mask)
            feats = model.features(x, t, attention_mask=mask)
            for i, n in enumerate(PAD_LENGTHS):
                alone = model(x[i:i + 1, :n], t[i:i + 1])
                alone_f = model.features(x[i:i + 1, :n], t[i:i + 1])
                torch.testing.assert_close(logits[i, :n], alone[0], rtol=0, atol=1e-5)
                torch.testing.assert_close(feats[i, :n], alone_f[0], rtol=0, atol=1e-5)
        assert torch.isfinite(logits).all() and torch.isfinite(feats).all()


@pytest.mark.parametrize("name,preset,overrides", CASES, ids=IDS)
def test_full_mask_changes_nothing_and_left_padding_is_refused(name, preset, overrides):
    model = _perturbed(name, preset, overrides)
    x = torch.randint(0, V, (B, L))
    with torch.no_grad():
        torch.testing.assert_close(model(x, _t(model), attention_mask=torch.ones_like(x)), model(x, _t(model)),
                                   rtol=0, atol=0)
    left = torch.ones_like(x)
    left[0, :3] = 0
    with pytest.raises(DnadiffError, match="attention_mask"):
        model(x, _t(model), attention_mask=left)
    with pytest.raises(DnadiffError, match="attention_mask"):
        model(x, _t(model), attention_mask=torch.ones(B, L + 1))


def test_caduceus_conjoined_outputs_are_pad_invariant():
    """Post-hoc RC conjoining of Caduceus-PH: the RC strand of a padded row starts at its last real base."""
    model = _perturbed("caduceus", "tiny-ph")
    x, mask = _padded(30, seed=3)
    with torch.no_grad():
        both = model.conjoined_logits(x, attention_mask=mask)
        feats = model.conjoined_features(x, attention_mask=mask)
        for i, n in enumerate(PAD_LENGTHS):
            torch.testing.assert_close(both[i, :n], model.conjoined_logits(x[i:i + 1, :n])[0], rtol=0, atol=1e-5)
            torch.testing.assert_close(feats[i, :n], model.conjoined_features(x[i:i + 1, :n])[0], rtol=0, atol=1e-5)
