"""A time-conditioned denoiser embeds σ(t) = −log α(t) (MDLM feeds sigma), not t; the choice is a
config field, `model.time_input`, and model directories saved before it existed keep feeding t."""

from pathlib import Path

import pytest
import torch
import yaml

from dnadiff.backbones import build_backbone
from dnadiff.checkpoint import load
from dnadiff.config import RunConfig, from_dict
from dnadiff.errors import DnadiffError
from dnadiff.model import DiffusionModel
from dnadiff.modelio.model_dir import save_model_dir
from dnadiff.tokenizers import DNATokenizer
from helpers.legacy_layout import to_legacy_layout

EPS = 1e-3


def _dit():
    torch.manual_seed(0)
    bb = build_backbone("dit", preset="tiny", vocab_size=12, time_conditioning=True)
    with torch.no_grad():  # the adaLN / output layers are zero-initialised: make t matter
        for p in bb.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return bb.eval()


def _cfg(**model):
    return from_dict(RunConfig, {"model": {"backbone": "dit", "preset": "tiny",
                                           "overrides": {"time_conditioning": True}, **model},
                                 "schedule": {"name": "loglinear", "eps": EPS}})


def _sigma(t):
    return -torch.log1p(-(1 - EPS) * t.double()).float()  # loglinear σ(t), MDLM


X = torch.randint(7, 11, (3, 16), generator=torch.Generator().manual_seed(1))
T = torch.tensor([0.05, 0.5, 1.0])


def test_new_models_feed_sigma_by_default():
    bb = _dit()
    model = DiffusionModel(_cfg(), bb, DNATokenizer())
    with torch.no_grad():
        out = model.denoiser(X, T)
        torch.testing.assert_close(out, bb(X, _sigma(T)), rtol=0, atol=1e-6)
        assert (out - bb(X, T)).abs().max() > 1e-3  # t itself would give other logits


def test_time_input_t_feeds_t():
    bb = _dit()
    model = DiffusionModel(_cfg(time_input="t"), bb, DNATokenizer())
    with torch.no_grad():
        torch.testing.assert_close(model.denoiser(X, T), bb(X, T), rtol=0, atol=0)


def test_bad_time_input_is_a_config_error():
    with pytest.raises(DnadiffError, match="model.time_input"):
        _cfg(time_input="sigmas")


def test_model_dir_records_the_choice_and_old_dirs_keep_t(tmp_path: Path):
    bb = _dit()
    save_model_dir(tmp_path / "new", _cfg(), bb, DNATokenizer())
    saved = yaml.safe_load((tmp_path / "new" / "config.json").read_text())  # JSON is YAML
    assert saved["model"]["time_input"] == "sigma"
    new = load(tmp_path / "new")
    with torch.no_grad():
        torch.testing.assert_close(new.denoiser(X, T), bb(X, _sigma(T)), rtol=0, atol=1e-6)
    # a directory written before the field existed: no time_input key -> t, as before
    save_model_dir(tmp_path / "old", _cfg(), bb, DNATokenizer())
    f = to_legacy_layout(tmp_path / "old")  # written before the field existed: the config.yaml layout
    data = yaml.safe_load(f.read_text())
    del data["model"]["time_input"]
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    old = load(tmp_path / "old")
    assert old.config.model.time_input == "t"
    with torch.no_grad():
        torch.testing.assert_close(old.denoiser(X, T), bb(X, T), rtol=0, atol=0)


def test_training_resolves_and_inherits_time_input(tmp_path: Path):
    from dnadiff.training.run import build_backbone_for

    tok = DNATokenizer()
    cfg, _ = build_backbone_for(_cfg(), tok)
    assert cfg.model.time_input == "sigma"
    # continued training from an old (t-fed) model directory keeps feeding t
    save_model_dir(tmp_path / "old", _cfg(), _dit(), tok)
    f = to_legacy_layout(tmp_path / "old")  # written before the field existed: the config.yaml layout
    data = yaml.safe_load(f.read_text())
    del data["model"]["time_input"]
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    cfg, _ = build_backbone_for(_cfg(init_from=str(tmp_path / "old")), tok)
    assert cfg.model.time_input == "t"
    cfg, _ = build_backbone_for(_cfg(init_from=str(tmp_path / "old"), time_input="sigma"), tok)
    assert cfg.model.time_input == "sigma"  # an explicit choice wins


def test_lit_module_loss_uses_sigma():
    from dnadiff.training.module import DiffusionLitModule

    bb = _dit()
    module = DiffusionLitModule(_cfg(), bb, DNATokenizer())
    seen = []
    hook = bb.sigma_map.register_forward_hook(lambda m, args, out: seen.append(args[0].clone()))
    try:
        module.model.objective.loss(module._denoiser_for({"input_ids": X}), X, t=torch.tensor(0.5))
    finally:
        hook.remove()
    torch.testing.assert_close(seen[0], _sigma(torch.full((3,), 0.5)))
