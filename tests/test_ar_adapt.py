"""A Mamba AR adapted into a Caduceus-PH (backbones/ar_adapt.py) starts as the AR, and then learns both sides."""

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.backbones.ar_adapt import caduceus_from_mamba_ar
from dnadiff.diffusion.ar import ar_inputs
from dnadiff.errors import DnadiffError

BOS, MASK = 2, 3  # the DNA tokenizer's ids; bases A C G T are 7..10


def _trained_like_ar(seed=0, **overrides):
    """A tiny Mamba AR with every parameter perturbed (so no copied weight can hide at its default)."""
    torch.manual_seed(seed)
    ar = build_backbone("mamba", preset="tiny", vocab_size=12, **overrides)
    with torch.no_grad():
        for p in ar.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return ar.eval()


def test_adapted_model_starts_as_the_ar_on_any_input():
    ar = _trained_like_ar()
    model = caduceus_from_mamba_ar(ar, bos_id=BOS).eval()
    x = torch.randint(7, 11, (3, 17))
    x[:, 5:9] = MASK  # masked positions: the adapted model reads only the left context at the start
    with torch.no_grad():
        want = ar(ar_inputs(x, BOS))  # position i: next token after [BOS], x_0 .. x_{i-1}
        got = model(x)
    assert got.shape == want.shape == (3, 17, 12)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_reverse_scan_is_off_at_the_start_and_learns():
    ar = _trained_like_ar(seed=1)
    model = caduceus_from_mamba_ar(ar, bos_id=BOS)
    x = torch.randint(7, 11, (2, 12))
    with torch.no_grad():
        right_changed = x.clone()
        right_changed[:, 8:] = (x[:, 8:] - 7 + 1) % 4 + 7  # every base changed
        before = model(x)[:, :8]
        assert torch.equal(before, model(right_changed)[:, :8])  # no right context yet
    model.zero_grad()
    model(x).logsumexp(-1).sum().backward()
    rev = model.backbone.layers[0].mixer.mamba_rev
    c_rows = rev.x_proj.weight.grad[rev.dt_rank + rev.d_state:]
    assert c_rows.abs().sum() > 0 and rev.D.grad.abs().sum() > 0
    with torch.no_grad():  # one step along those gradients and the right context is read
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad)
        assert not torch.allclose(model(x)[:, :8], model(right_changed)[:, :8])


def test_shifted_caduceus_is_pad_invariant():
    model = build_backbone("caduceus", preset="tiny-ph", vocab_size=12, ar_shift=True).eval()
    x = torch.randint(7, 11, (2, 10))
    mask = torch.ones_like(x)
    mask[1, 6:] = 0
    with torch.no_grad():
        batch = model(x, attention_mask=mask)
        alone = model(x[1:, :6])
    torch.testing.assert_close(batch[1, :6], alone[0], rtol=1e-5, atol=1e-5)


def test_refusals():
    with pytest.raises(DnadiffError, match="rcps=false"):
        build_backbone("caduceus", preset="tiny", vocab_size=12, ar_shift=True)
    with pytest.raises(DnadiffError, match="causal Mamba LM"):
        caduceus_from_mamba_ar(build_backbone("caduceus", preset="tiny-ph", vocab_size=12), bos_id=BOS)
    with pytest.raises(DnadiffError, match="bias"):
        caduceus_from_mamba_ar(build_backbone("mamba", preset="tiny", vocab_size=12, bias=True), bos_id=BOS)
    with pytest.raises(DnadiffError, match="BOS"):
        caduceus_from_mamba_ar(build_backbone("mamba", preset="tiny", vocab_size=12), bos_id=None)


@pytest.mark.training
def test_mdlm_training_adapts_an_ar_model_dir(tmp_path):
    from dnadiff.config import RunConfig, load_config
    from dnadiff.modelio import read_model, resolve
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer
    from dnadiff.training import train

    ar = _trained_like_ar(seed=2)
    save_model_dir(tmp_path / "ar", load_config(RunConfig, "experiments/tiny_dna_mdlm",
                                                ["model.backbone=mamba", "objective.name=ar"]), ar, DNATokenizer())
    fast = ["data.seq_len=16", "train.batch_size=2", "train.val_every=2", "train.val_batches=1", "train.ckpt_every=2",
            "train.log_every=1", "train.progress=false", "train.max_steps=2", "train.ema=0", "train.lr=1e-5"]
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm",
                      [f"out_dir={tmp_path / 'run'}", *fast, f"model.init_from={tmp_path / 'ar'}",
                       "model.adapt_ar=true"])
    parts = read_model(resolve(str(train(cfg).model_dir)))
    assert parts.config.model.backbone == "caduceus" and parts.backbone.config.ar_shift
    x = torch.randint(7, 11, (2, 16))
    with torch.no_grad():  # two updates at lr 1e-5 leave it next to the AR it started as
        torch.testing.assert_close(parts.backbone(x), ar(ar_inputs(x, BOS)), rtol=0, atol=2e-3)


def test_adapt_ar_needs_init_from():
    from dnadiff.config import RunConfig, load_config

    with pytest.raises(DnadiffError, match="model.adapt_ar"):
        load_config(RunConfig, "experiments/tiny_dna_mdlm", ["model.adapt_ar=true"])
