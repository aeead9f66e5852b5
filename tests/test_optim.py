"""Optimizer groups honour per-parameter settings (`_optim`), and HyenaDNA's implicit filters get
no weight decay and their own learning rate, as the official HyenaFilter registers them."""

import pytest
import torch
from torch import nn

from dnadiff.backbones import build_backbone
from dnadiff.training.optim import build_optimizer, build_scheduler, param_groups


def _group_of(opt, p):
    (g,) = [g for g in opt.param_groups if any(q is p for q in g["params"])]
    return g


def test_per_parameter_settings_are_honoured_and_follow_the_schedule():
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    m[1].weight._optim = {"lr": 0.5, "weight_decay": 0.0}
    m[1].bias._optim = {"lr": 0.5, "weight_decay": 0.0}  # same settings -> same group
    m[0].bias._optim = {"weight_decay": 0.3}  # an explicit decay on a bias, base lr
    opt = build_optimizer(m, lr=1e-3, weight_decay=0.1)
    assert [sum(p.numel() for p in g["params"]) for g in opt.param_groups] == [12, 10, 4]
    g0, g1, g2 = (_group_of(opt, p) for p in (m[0].weight, m[1].weight, m[0].bias))
    assert (g0["lr"], g0["weight_decay"]) == (1e-3, 0.1)
    assert (g1["lr"], g1["weight_decay"]) == (0.5, 0.0) and _group_of(opt, m[1].bias) is g1
    assert (g2["lr"], g2["weight_decay"]) == (1e-3, 0.3)
    assert opt.param_groups[0] is g0  # the base group stays first (logged as "lr")
    # every group follows the same warmup: lr_n = lr_group * (n + 1) / warmup
    sched = build_scheduler(opt, "constant", warmup_steps=4, total_steps=10)
    assert g1["lr"] == pytest.approx(0.5 / 4) and g0["lr"] == pytest.approx(1e-3 / 4)
    opt.step(), sched.step()
    assert g1["lr"] == pytest.approx(0.5 * 2 / 4)


def test_groups_are_deterministic_for_resume():
    m = nn.Sequential(*[nn.Linear(2, 2) for _ in range(4)])
    for i, lin in enumerate(m):
        lin.weight._optim = {"lr": [0.3, 0.1, 0.2, 0.1][i]}
    a = [(g["lr"], [id(p) for p in g["params"]]) for g in param_groups(m, 0.1, lr=1.0)]
    b = [(g["lr"], [id(p) for p in g["params"]]) for g in param_groups(m, 0.1, lr=1.0)]
    assert a == b and [g[0] for g in a] == [1.0, 1.0, 0.1, 0.2, 0.3]


@pytest.mark.parametrize("preset", ["tiny", "tiny-causal"])
def test_hyena_implicit_filter_no_decay_own_lr(preset):
    model = build_backbone("hyena", preset=preset, filter_lr=1e-3)
    opt = build_optimizer(model, lr=6e-4, weight_decay=0.1)
    filt = {id(p) for n, p in model.named_parameters() if ".filter_fn.implicit_filter." in n or n.endswith("rev_bias")}
    assert len(filt) == (4 + 3 + 1) * 2 + (0 if "causal" in preset else 2)  # 4 Linear W, 3 biases, shared freq
    for name, p in model.named_parameters():
        g = _group_of(opt, p)
        if id(p) in filt:
            assert (g["lr"], g["weight_decay"]) == (1e-3, 0.0), name
        else:
            assert g["lr"] == 6e-4, name
    # the 2-D filter weights are not in the decayed group any more
    w = model.backbone.layers[0].mixer.filter_fn.implicit_filter[2].weight
    assert _group_of(opt, w)["weight_decay"] == 0.0
    assert any(p is model.backbone.layers[0].mixer.in_proj.weight for p in opt.param_groups[0]["params"])


def test_hyena_filter_lr_defaults_to_the_base_lr():
    # HyenaDNA's configs set the filter lr to ${optimizer.lr} and wd 0.0
    model = build_backbone("hyena", preset="tiny")
    opt = build_optimizer(model, lr=2e-3, weight_decay=0.1)
    w = model.backbone.layers[1].mixer.filter_fn.implicit_filter[6].weight
    g = _group_of(opt, w)
    assert (g["lr"], g["weight_decay"]) == (2e-3, 0.0)


def test_trainable_positional_embedding_has_its_own_lr():
    model = build_backbone("hyena", preset="tiny", train_pos_emb=True, pos_emb_lr=1e-5)
    opt = build_optimizer(model, lr=6e-4, weight_decay=0.1)
    g = _group_of(opt, model.backbone.layers[0].mixer.filter_fn.pos_emb.z)
    assert (g["lr"], g["weight_decay"]) == (1e-5, 0.0)


def test_optimizer_steps_with_the_special_groups():
    model = build_backbone("hyena", preset="tiny", filter_lr=1e-2)
    opt = build_optimizer(model, lr=1e-3, weight_decay=0.1)
    x = torch.randint(7, 11, (2, 16))
    model(x).logsumexp(-1).mean().backward()
    opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())
