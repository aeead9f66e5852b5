"""Caduceus: parameter counts, BiMamba, PS RC equivariance, PH conjoining, fused-path half swap."""

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.caduceus import BiMambaWrapper, Caduceus
from dnadiff.backbones.rcps import complement_table, rc_hidden
from dnadiff.errors import DnadiffError

COMP12 = torch.tensor([0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11])


def _rc_ids(ids):
    return COMP12[ids.flip(-1)]


@pytest.mark.parametrize("preset,expected", [("dna-467k", 470_702), ("dna-467k-ph", 470_702),
                                             ("ph-131k", 7_725_312), ("ps-131k", 7_725_312)])
def test_parameter_counts(preset, expected):
    n = build_backbone("caduceus", preset).num_parameters()
    print(f"caduceus {preset}: {n:,} parameters (reference {expected:,})")
    assert abs(n - expected) / expected < 0.02
    assert n == expected


def test_complement_map_and_padding():
    model = build_backbone("caduceus", "tiny")
    assert model.padded_vocab_size == 16 and model.vocab_size == 12
    assert model.complement.tolist() == [0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11, 12, 13, 14, 15]
    with pytest.raises(ValueError):
        complement_table(4, [1, 2, 0, 3])  # not an involution
    with pytest.raises(DnadiffError):
        build_backbone("caduceus", "tiny", bidirectional_strategy="concat")


@pytest.mark.parametrize("fused", [True, False])
def test_ps_rc_equivariance(fused):
    torch.manual_seed(0)
    model = build_backbone("caduceus", "tiny", fused_add_norm=fused, cond_dim=3).eval()
    ids = torch.randint(0, 12, (3, 41))
    cond = torch.randn(3, 3)
    with torch.no_grad():
        logits, logits_rc = model(ids, cond=cond), model(_rc_ids(ids), cond=cond)
        feats, feats_rc = model.features(ids), model.features(_rc_ids(ids))
    assert logits.shape == (3, 41, 12) and feats.shape == (3, 41, 64) and model.hidden_size == 64
    err = (logits_rc - logits.flip(1)[..., COMP12]).abs().max().item()
    print(f"PS equivariance error (fused_add_norm={fused}): {err:.2e}")
    assert err < 1e-5
    assert (feats_rc - rc_hidden(feats)).abs().max() < 1e-5  # hidden states are RC-equivariant too
    assert (logits - logits.flip(1)[..., COMP12]).abs().max() > 1e-3  # not trivially symmetric


def test_ph_is_not_equivariant_but_conjoining_is():
    torch.manual_seed(0)
    model = build_backbone("caduceus", "tiny-ph").eval()
    assert model.hidden_size == 32
    ids = torch.randint(0, 12, (2, 29))
    with torch.no_grad():
        manual = 0.5 * (model(ids) + model(_rc_ids(ids)).flip(1)[..., COMP12])
        conj = model.conjoined_logits(ids)
        conj_rc = model.conjoined_logits(_rc_ids(ids))
        plain_err = (model(_rc_ids(ids)) - model(ids).flip(1)[..., COMP12]).abs().max()
        feats = model.conjoined_features(ids)
    assert torch.equal(conj, manual)
    assert (conj_rc - conj.flip(1)[..., COMP12]).abs().max() < 1e-6
    assert plain_err > 1e-3
    assert torch.allclose(feats, 0.5 * (model.features(ids) + model.features(_rc_ids(ids)).flip(1)))


@pytest.mark.parametrize("preset", ["tiny", "tiny-ph"])
def test_bidirectional(preset):
    torch.manual_seed(0)
    model = build_backbone("caduceus", preset).eval()
    assert not model.is_causal and not model.time_conditioned
    ids = torch.randint(7, 11, (1, 24))
    ids2 = ids.clone()
    ids2[0, 20] = 7 if ids[0, 20] != 7 else 8
    with torch.no_grad():
        diff = (model(ids) - model(ids2)).abs().amax(-1)[0]
    assert (diff[:20] > 0).all()  # every earlier position sees the change


def test_bimamba_tying_and_strategies():
    torch.manual_seed(0)
    bi = BiMambaWrapper(16, strategy="add").double()
    assert bi.mamba_rev.in_proj.weight is bi.mamba_fwd.in_proj.weight
    assert bi.mamba_rev.out_proj.weight is bi.mamba_fwd.out_proj.weight
    assert bi.mamba_rev.conv1d.weight is not bi.mamba_fwd.conv1d.weight
    assert bi.mamba_rev.A_log is not bi.mamba_fwd.A_log
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    fwd, rev = bi.mamba_fwd(x), bi.mamba_rev(x.flip(1)).flip(1)
    assert torch.allclose(bi(x), fwd + rev, atol=1e-12)
    bi.strategy = "ew_multiply"
    assert torch.allclose(bi(x), fwd * rev, atol=1e-12)
    untied = BiMambaWrapper(16, weight_tie=False)
    assert untied.mamba_rev.in_proj.weight is not untied.mamba_fwd.in_proj.weight
    model = build_backbone("caduceus", "tiny-ph", bidirectional_strategy="ew_multiply")
    assert model(torch.randint(0, 12, (1, 9))).shape == (1, 9, 12)


def test_fused_half_swap_changes_ps_only():
    torch.manual_seed(0)
    ids = torch.randint(0, 12, (2, 30))
    for preset, differs in (("tiny", True), ("tiny-ph", False)):
        a = build_backbone("caduceus", preset, fused_add_norm=True).eval()
        b = build_backbone("caduceus", preset, fused_add_norm=False).eval()
        b.load_state_dict(a.state_dict())
        with torch.no_grad():
            delta = (a(ids) - b(ids)).abs().max().item()
        assert (delta > 1e-3) == differs, (preset, delta)


def test_ps_lm_head_tied_and_gradients():
    torch.manual_seed(0)
    model = build_backbone("caduceus", "tiny")
    assert isinstance(model, Caduceus)
    emb = model.backbone.embeddings.word_embeddings.embedding.weight
    assert model.lm_head.lm_head.weight is emb
    ids = torch.randint(0, 12, (2, 16))
    model(ids).logsumexp(-1).sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    with pytest.raises(DnadiffError):
        model(ids, cond=torch.zeros(2, 3))
