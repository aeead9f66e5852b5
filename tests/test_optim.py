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


# ---- the learning-rate schedule, pinned by hand (issue 50 §6): warmup (n+1)/W, then
# min_lr_ratio + (1 - min_lr_ratio) * (1 + cos(pi * progress)) / 2, progress = (n - W) / (N - W), floored at 1
COSINE_PINS = [  # (step, multiplier) for warmup 4, total 12, min_lr_ratio 0.1
    (0, 0.25), (1, 0.5), (3, 1.0),  # warm-up
    (4, 1.0),  # progress 0: the peak
    (6, 0.1 + 0.45 * (1 + 2 ** -0.5)),  # progress 1/4: 0.86819805...
    (8, 0.55),  # progress 1/2: halfway between the peak and the floor
    (10, 0.1 + 0.45 * (1 - 2 ** -0.5)),  # progress 3/4: 0.23180194...
    (12, 0.1), (40, 0.1),  # the end and past it: the floor
]


def test_cosine_schedule_and_min_lr_ratio_are_pinned():
    from dnadiff.training.optim import lr_lambda

    fn = lr_lambda("cosine", warmup_steps=4, total_steps=12, min_lr_ratio=0.1)
    for step, want in COSINE_PINS:
        assert fn(step) == pytest.approx(want, abs=1e-12), step
    assert [fn(n) for n in range(4, 13)] == sorted((fn(n) for n in range(4, 13)), reverse=True)  # decays
    plain = lr_lambda("cosine", warmup_steps=0, total_steps=8)  # no warmup, floor 0
    assert [plain(n) for n in (0, 2, 4, 6, 8)] == pytest.approx([1.0, 0.5 + 0.5 * 2 ** -0.5, 0.5,
                                                                 0.5 - 0.5 * 2 ** -0.5, 0.0], abs=1e-12)
    const = lr_lambda("constant", warmup_steps=2, total_steps=8, min_lr_ratio=0.5)  # the floor is cosine's only
    assert [const(n) for n in (0, 1, 2, 7, 20)] == [0.5, 1.0, 1.0, 1.0, 1.0]


def test_training_module_follows_the_pinned_cosine_schedule():
    """The config fields reach the optimiser: lr_n = train.lr * multiplier_n after n scheduler steps."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training.module import DiffusionLitModule

    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [
        "train.lr=0.002", "train.lr_schedule=cosine", "train.warmup_steps=4", "train.max_steps=12",
        "train.min_lr_ratio=0.1"])
    tok = build_tokenizer("dna")
    module = DiffusionLitModule(cfg, build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size), tok)
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    seen = {}
    for n in range(41):
        seen[n] = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
    for step, want in COSINE_PINS:
        assert seen[step] == pytest.approx(0.002 * want, rel=1e-9), step
