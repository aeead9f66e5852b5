"""BD3-LM's attention layout on a bidirectional DiT (diffusion/bd3lm_attention.py, samplers/block_attention.py):
the 2L-token x_t ⊕ x_0 pass with the block-causal mask equals running the blocks one by one; the KV-cached
sampler equals a full recompute; B = L is the MDLM NELBO on the same network outputs."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from dnadiff.backbones import build_backbone
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.diffusion.bd3lm import block_layout, block_spans
from dnadiff.diffusion.bd3lm_attention import attention_logits, block_diff_mask
from dnadiff.diffusion.subs import subs_masked_nll
from dnadiff.errors import DnadiffError
from dnadiff.model import Denoiser
from dnadiff.samplers import build_sampler

V, MASK = 12, 3


def random_dit(n_blocks: int = 2, seed: int = 0) -> Denoiser:
    """A tiny bidirectional DiT with every weight random (the zero-initialised adaLN and output layers would make
    all logits 0 and every comparison vacuous), in float64."""
    torch.manual_seed(seed)
    net = build_backbone("dit", preset="tiny", vocab_size=V, n_blocks=n_blocks).double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.3)
    return Denoiser(net)


def noisy(x0: Tensor, p: float, seed: int) -> Tensor:
    u = torch.rand(x0.shape, generator=torch.Generator().manual_seed(seed))
    return torch.where(u < p, torch.full_like(x0, MASK), x0)


def test_the_mask_is_the_papers_block_diff_mask():
    """L = 4, blocks of 2: noisy queries see their noisy block and the earlier clean blocks; clean queries the
    clean blocks up to their own, never a noisy token (BD3-LM §3.2: M_BD, M_OBC, M_BC)."""
    want = torch.tensor([
        [1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 0, 0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(block_diff_mask(4, 2), want)
    assert block_diff_mask(5, 2)[4, :5].tolist() == [False] * 4 + [True]  # a ragged last block


def test_one_layer_vectorised_pass_equals_each_block_run_alone_with_full_attention():
    """One DiT layer: for each block b, the DiT on x^{<b} ⊕ x_t^b alone (full attention, positions 0..e-1), read
    at block b, gives the 2L pass's logits, and the bd3lm loss is the same sum over blocks."""
    den = random_dit(n_blocks=1)
    x0 = torch.randint(7, 11, (3, 10), generator=torch.Generator().manual_seed(1))
    x_t = noisy(x0, 0.5, 2)
    with torch.no_grad():
        got = attention_logits(den, x_t, x0, 4)  # (B, L, V): blocks 4, 4, 2
        ref = torch.cat([den(torch.cat([x0[:, :s], x_t[:, s:e]], 1))[:, s:e] for s, e in block_spans(10, 4)], 1)
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)
        obj = build_objective("bd3lm", schedule=build_schedule("loglinear", eps=1e-3), mask_id=MASK, vocab_size=V,
                              block_size=4)
        t = torch.tensor([[0.3, 0.6, 0.9]], dtype=torch.float64).expand(3, 3)
        loss = obj.nll_given(den, x0, x_t, t)
        w = obj.weight(t.reshape(-1)).reshape(3, 3)[:, torch.arange(10) // 4]
        want = (w * subs_masked_nll(ref, x0, MASK) * (x_t == MASK)).sum(1)
        torch.testing.assert_close(loss.nll.double(), want, rtol=1e-9, atol=1e-9)
        assert float(want.min()) > 0


def test_deep_vectorised_pass_equals_blocks_generated_one_by_one_with_a_kv_cache():
    """Two DiT layers: block b's logits from the 2L pass equal a block-by-block run (the noisy block against the
    cached keys/values of the clean blocks before it; each clean block then cached from the blocks before it).
    Full attention on x^{<b} ⊕ x_t^b is NOT that (its clean tokens would see later ones): the mask matters."""
    den = random_dit(n_blocks=2)
    x0 = torch.randint(7, 11, (3, 10), generator=torch.Generator().manual_seed(3))
    x_t = noisy(x0, 0.5, 4)
    with torch.no_grad():
        got = attention_logits(den, x_t, x0, 4)
        cache, parts = den.backbone.new_kv_cache(), []
        for s, e in block_spans(10, 4):
            pos = torch.arange(s, e)
            parts.append(den(x_t[:, s:e], kv_cache=cache, position_ids=pos))
            den(x0[:, s:e], kv_cache=cache, position_ids=pos, cache_tokens=e - s)
        assert cache.length == 10
        torch.testing.assert_close(got, torch.cat(parts, 1), rtol=1e-10, atol=1e-10)
        full = torch.cat([den(torch.cat([x0[:, :s], x_t[:, s:e]], 1))[:, s:e] for s, e in block_spans(10, 4)], 1)
        assert not torch.allclose(got[:, 4:], full[:, 4:], atol=1e-4)  # blocks after the first differ
        # the clean half never reads the noisy one
        pos = torch.arange(10).repeat(2)
        a = den(torch.cat([x_t, x0], 1), attn_mask=block_diff_mask(10, 4), position_ids=pos)[:, 10:]
        b = den(torch.cat([x0, x0], 1), attn_mask=block_diff_mask(10, 4), position_ids=pos)[:, 10:]
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_block_size_L_is_the_mdlm_nelbo_on_the_same_network():
    """B = L: one block whose noisy half sees only itself at positions 0..L-1: MDLM's estimate with the same
    draws, value for value, on the same DiT."""
    den = random_dit(n_blocks=2, seed=5)
    sched = build_schedule("loglinear", eps=1e-3)
    x0 = torch.randint(7, 11, (6, 8), generator=torch.Generator().manual_seed(6))
    mdlm = build_objective("mdlm", schedule=sched, mask_id=MASK, vocab_size=V)
    obj = build_objective("bd3lm", schedule=sched, mask_id=MASK, vocab_size=V, block_size=8)
    assert block_layout(den) == "attention"
    with torch.no_grad():
        a = mdlm.loss(den, x0, generator=torch.Generator().manual_seed(7))
        b = obj.loss(den, x0, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(b.nll.double(), a.nll.double(), rtol=1e-9, atol=1e-9)
    assert float(a.nll.sum()) > 0


@pytest.mark.parametrize("length", [10, 23])  # 23: past any training window, a ragged last block
def test_kv_cached_sampler_equals_the_no_cache_recompute(length):
    den = random_dit(n_blocks=2, seed=8)
    sched = build_schedule("loglinear", eps=1e-3)
    opts = dict(block_size=4, inner="ancestral", steps=3)
    a, b = build_sampler("block", **opts), build_sampler("block", use_cache=False, **opts)
    with torch.no_grad():
        xa = a.generate(den, sched, MASK, (5, length), generator=11)
        xb = b.generate(den, sched, MASK, (5, length), generator=11)
    assert torch.equal(xa, xb) and not bool((xa == MASK).any())
    assert a.last_nfe == b.last_nfe <= 3 * len(block_spans(length, 4)) + len(block_spans(length, 4))


def test_a_bidirectional_network_without_attention_masks_is_still_refused():
    from dnadiff.config import ModelConfig
    from dnadiff.config_options import check_causal_backbone

    check_causal_backbone(ModelConfig(backbone="dit", preset="tiny"))  # the attention layout: accepted
    with pytest.raises(DnadiffError, match="needs a causal network"):
        check_causal_backbone(ModelConfig(backbone="caduceus", preset="tiny"))
    net = Denoiser(build_backbone("caduceus", preset="tiny", vocab_size=V))
    with pytest.raises(DnadiffError, match="needs a causal network"):
        block_layout(net)


@pytest.mark.training
def test_text_bidirectional_dit_trains_evaluates_and_samples_from_the_cli(tmp_path, capsys):
    """text/cpu_fortunes_bd3lm_attn (a bidirectional DiT, the 2L layout) on a small corpus: train, eval (the
    block bound), sample 40 tokens (> the 16 trained on) with `block` by default, stopping at EOS."""
    import json

    from dnadiff.cli import main as cli_main
    from helpers.word_corpus import tiny_text_dit, word_corpus

    tok = word_corpus(tmp_path)
    assert cli_main(["train", "text/cpu_fortunes_bd3lm_attn", f"out_dir={tmp_path}/runs", *tiny_text_dit(tmp_path, tok),
                     "train.max_steps=10", "--threads", "1"]) == 0
    model = tmp_path / "runs" / "cpu_fortunes_bd3lm_attn" / "model"
    import dnadiff

    loaded = dnadiff.load(model)
    assert not loaded.backbone.is_causal and block_layout(loaded.denoiser) == "attention"
    assert cli_main(["eval", str(model), "--out", str(tmp_path / "e.json"), "--threads", "1"]) == 0
    ev = json.loads((tmp_path / "e.json").read_text())
    row = ev["rows"][0] if "rows" in ev else ev
    assert row["objective"] == "bd3lm" and 0.5 < row["nats_per_token"] < 8  # 10 steps: between data and uniform
    out = tmp_path / "s.txt"
    assert cli_main(["sample", str(model), "--num", "3", "--length", "40", "--out", str(out), "--threads", "1"]) == 0
    stats = json.loads(out.with_suffix(".json").read_text())
    assert stats["sampler"] == "block" and stats["length"] == 40 and 0 < stats["nfe_per_sequence"] <= 4 * 10
    capsys.readouterr()


def test_guided_attention_block_model_recomputes_instead_of_sharing_one_cache():
    """CFG (two models) on the attention layout: the mask and positions reach both models, the KV cache
    none (the context recomputes); the samples are a function of the seed either way."""
    from dnadiff.samplers.wrappers import Guided

    g = Guided(random_dit(2, 1), random_dit(2, 2), 1.5, mask_id=MASK)
    sched = build_schedule("loglinear", eps=1e-3)
    with torch.no_grad():
        xa = build_sampler("block", block_size=4, inner="ancestral", steps=3).generate(g, sched, MASK, (3, 10),
                                                                                       generator=1)
        xb = build_sampler("block", block_size=4, inner="ancestral", steps=3, use_cache=False).generate(
            g, sched, MASK, (3, 10), generator=1)
        assert torch.equal(xa, xb) and not bool((xa == MASK).any())
        with pytest.raises(DnadiffError, match="cannot share a KV cache"):
            g(xa, torch.zeros(3), kv_cache=g.cond.backbone.new_kv_cache())


def test_class_conditional_dit_takes_the_attention_layout():
    """A ClassConditional DiT (labels through the cond vector) trains on x_t ⊕ x_0 and samples with the KV cache;
    its labels reach every call (other labels, other samples)."""
    from dnadiff.backbones.conditioning import ClassConditional

    torch.manual_seed(0)
    net = ClassConditional(build_backbone("dit", preset="tiny", vocab_size=V, cond_dim=8).double(), 3).double()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.3)
    sched = build_schedule("loglinear", eps=1e-3)
    obj = build_objective("bd3lm", schedule=sched, mask_id=MASK, vocab_size=V, block_size=4)
    x0 = torch.randint(7, 11, (4, 12), generator=torch.Generator().manual_seed(1))
    den = Denoiser(net, labels=torch.tensor([0, 1, 2, 0]))
    assert block_layout(den) == "attention" and float(obj.loss(den, x0).loss) > 0
    opts = dict(block_size=4, inner="ancestral", steps=3)
    with torch.no_grad():
        xa = build_sampler("block", **opts).generate(den, sched, MASK, (4, 10), generator=1)
        xb = build_sampler("block", use_cache=False, **opts).generate(den, sched, MASK, (4, 10), generator=1)
        xc = build_sampler("block", **opts).generate(Denoiser(net, labels=2), sched, MASK, (4, 10), generator=1)
    assert torch.equal(xa, xb) and not torch.equal(xa, xc)
