"""Mamba mixer / unidirectional Mamba LM against transformers' pure-torch Mamba (mamba-ssm absent)."""

import logging
import math

import pytest
import torch
from transformers import MambaConfig as HFMambaConfig  # noqa: E402  (a core dependency: imported, never skipped)
from transformers.models.mamba.modeling_mamba import MambaMixer, MambaModel  # noqa: E402

from dnadiff.backbones import build_backbone
from dnadiff.backbones.mamba import Mamba, MambaLM
from dnadiff.errors import DnadiffError

logging.getLogger("transformers").setLevel(logging.ERROR)


def _hf_config(d_model, n_layer, vocab):
    return HFMambaConfig(hidden_size=d_model, state_size=16, num_hidden_layers=n_layer, expand=2, conv_kernel=4,
                         vocab_size=vocab, use_conv_bias=True, use_bias=False, time_step_rank="auto",
                         residual_in_fp32=True, layer_norm_epsilon=1e-5, use_mambapy=False)


def test_mixer_equals_transformers_mamba_mixer():
    torch.manual_seed(0)
    hf = MambaMixer(_hf_config(24, 1, 16), layer_idx=0).double()
    ours = Mamba(24).double()
    assert set(ours.state_dict()) == set(hf.state_dict())  # official parameter names
    ours.load_state_dict(hf.state_dict())
    x = torch.randn(2, 45, 24, dtype=torch.float64, requires_grad=True)
    y_hf, y = hf(x), ours(x)
    assert (y - y_hf).abs().max() < 1e-10
    g = torch.randn_like(y)
    gx_hf, ga_hf, gd_hf = torch.autograd.grad(y_hf, [x, hf.A_log, hf.dt_proj.bias], g)
    gx, ga, gd = torch.autograd.grad(y, [x, ours.A_log, ours.dt_proj.bias], g)
    assert (gx - gx_hf).abs().max() < 1e-10
    assert (ga - ga_hf).abs().max() / ga_hf.abs().max() < 1e-6  # HF takes A in fp32
    assert (gd - gd_hf).abs().max() / gd_hf.abs().max() < 1e-6


def test_mamba_lm_features_equal_transformers_mamba_model():
    torch.manual_seed(1)
    hf = MambaModel(_hf_config(32, 2, 16)).eval()
    ours = build_backbone("mamba", "tiny", d_model=32, n_layer=2).eval()
    sd = {"backbone." + k.replace("embeddings.", "embedding."): v for k, v in hf.state_dict().items()}
    sd["lm_head.weight"] = sd["backbone.embedding.weight"]
    ours.load_state_dict(sd)
    ids = torch.randint(0, 12, (2, 40))
    with torch.no_grad():
        ref = hf(input_ids=ids).last_hidden_state
        feats = ours.features(ids)
        logits = ours(ids)
    assert (feats - ref).abs().max() < 1e-5
    assert logits.shape == (2, 40, 12)
    assert torch.allclose(logits, feats @ ours.backbone.embedding.weight[:12].T, atol=1e-5)


def test_official_initialisation():
    torch.manual_seed(0)
    m = Mamba(64, dt_min=0.001, dt_max=0.1)
    assert m.d_inner == 128 and m.dt_rank == 4
    assert torch.equal(m.A_log, torch.log(torch.arange(1, 17.0)).repeat(128, 1))
    assert torch.equal(m.D, torch.ones(128))
    dt = torch.nn.functional.softplus(m.dt_proj.bias)
    assert dt.min() >= 0.001 * (1 - 1e-5) and dt.max() <= 0.1 * (1 + 1e-5)
    assert m.dt_proj.weight.abs().max() <= 4 ** -0.5
    assert [tuple(p.shape) for p in (m.in_proj.weight, m.conv1d.weight, m.x_proj.weight, m.out_proj.weight)] == [
        (256, 64), (128, 1, 4), (4 + 32, 128), (64, 128)]
    lm = build_backbone("mamba", "tiny")
    bound = 1 / math.sqrt(lm.backbone.layers[0].mixer.d_inner) / math.sqrt(lm.config.n_layer)
    assert lm.backbone.layers[0].mixer.out_proj.weight.abs().max() <= bound  # kaiming(a=√5)/√n_layer
    assert lm.lm_head.weight is lm.backbone.embedding.weight


def test_strict_causality_and_contract():
    torch.manual_seed(0)
    model = build_backbone("mamba", "tiny").eval()
    assert isinstance(model, MambaLM) and model.is_causal and not model.time_conditioned
    ids = torch.randint(0, 12, (1, 30))
    ids2 = ids.clone()
    ids2[0, 17] = (ids[0, 17] + 1) % 12
    with torch.no_grad():
        a, b = model(ids), model(ids2)
    assert torch.equal(a[:, :17], b[:, :17])  # nothing before position 17 changes
    assert (a[:, 17:] - b[:, 17:]).abs().amax(-1).min() > 0
    assert model(ids, t=torch.rand(1)).shape == (1, 30, 12) and model.features(ids).shape == (1, 30, 32)
    with pytest.raises(DnadiffError):
        model(ids, cond=torch.zeros(1, 4))
    cmodel = build_backbone("mamba", "tiny", cond_dim=4)
    assert cmodel(ids, cond=torch.randn(1, 4)).shape == (1, 30, 12)


def test_reference_scan_model_equals_chunked_model():
    torch.manual_seed(0)
    fast = build_backbone("mamba", "tiny", scan_impl="chunked").double()
    ref = build_backbone("mamba", "tiny", scan_impl="ref").double()
    ref.load_state_dict(fast.state_dict())
    ids = torch.randint(0, 12, (2, 50))
    lf, lr = fast(ids), ref(ids)
    assert (lf - lr).abs().max() < 1e-10
    gf = torch.autograd.grad(lf.square().sum(), fast.backbone.layers[0].mixer.in_proj.weight)[0]
    gr = torch.autograd.grad(lr.square().sum(), ref.backbone.layers[0].mixer.in_proj.weight)[0]
    assert (gf - gr).abs().max() / gr.abs().max() < 1e-9
