"""Classification heads: pooling ignores pads, strand handling (PH conjoining, PS invariance), freezing."""

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.errors import DnadiffError
from dnadiff.heads import SequenceClassifier, pool, reverse_complement_padded
from dnadiff.heads.pooling import complement_tensor
from dnadiff.tokenizers import DNATokenizer


def _batch(lengths, seed=0, pad_to=None):
    g = torch.Generator().manual_seed(seed)
    L = pad_to or max(lengths)
    ids = torch.full((len(lengths), L), DNATokenizer.pad_id)
    mask = torch.zeros((len(lengths), L), dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(7, 11, (n,), generator=g)
        mask[i, :n] = 1
    return ids, mask


@pytest.mark.parametrize("mode", ["mean", "first", "last"])
def test_pooling_ignores_pads(mode):
    g = torch.Generator().manual_seed(0)
    real = torch.randn(2, 5, 3, generator=g)
    lengths = torch.tensor([5, 3])
    outs = []
    for extra in (0, 4, 9):  # pad the batch more, with garbage (even NaN) in pad positions
        h = torch.cat([real, torch.full((2, extra, 3), float("nan"))], dim=1)
        mask = (torch.arange(5 + extra)[None] < lengths[:, None]).long()
        h[1, 3:] = 1e6 if extra == 0 else float("nan")
        outs.append(pool(h, mask, mode))
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0], rtol=0, atol=0)
    expect = {"mean": real[1, :3].mean(0), "first": real[1, 0], "last": real[1, 2]}[mode]
    torch.testing.assert_close(outs[0][1], expect)


def test_reverse_complement_padded_keeps_pads():
    ids, mask = _batch([6, 3], seed=1, pad_to=7)
    rc = reverse_complement_padded(ids, mask, complement_tensor())
    tok = DNATokenizer()
    for i, n in enumerate([6, 3]):
        assert tok.decode(rc[i, :n]) == tok.reverse_complement_str(tok.decode(ids[i, :n]))
        assert (rc[i, n:] == tok.pad_id).all()
    torch.testing.assert_close(reverse_complement_padded(rc, mask, complement_tensor()), ids)


def test_ph_conjoining_is_mean_of_both_strands():
    torch.manual_seed(0)
    bb = build_backbone("caduceus", preset="tiny-ph", vocab_size=12)
    ph = SequenceClassifier(bb, 3, conjoin="ph").eval()
    one = SequenceClassifier(bb, 3, conjoin="none").eval()
    one.head.load_state_dict(ph.head.state_dict())
    ids, mask = _batch([12, 9, 5], seed=2)
    rc = reverse_complement_padded(ids, mask, complement_tensor())
    with torch.no_grad():
        expect = 0.5 * (one(ids, mask) + one(rc, mask))
        got = ph(ids, mask)
        torch.testing.assert_close(got, expect)
        # conjoined logits are RC-invariant, a single strand's are not
        torch.testing.assert_close(ph(rc, mask), got, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(one(rc, mask), one(ids, mask), atol=1e-4)
    assert ph.train().conjoin == "ph"  # in training (no conjoin_train) only one strand runs


def test_ps_strand_average_is_rc_invariant():
    torch.manual_seed(0)
    bb = build_backbone("caduceus", preset="tiny", vocab_size=12)  # RCPS
    for pooling in ("mean", "first", "last"):
        clf = SequenceClassifier(bb, 2, pooling=pooling).eval()
        assert clf.conjoin == "ps" and clf.head.dense.in_features == bb.hidden_size // 2
        ids, _ = _batch([16, 16], seed=3)
        rc = reverse_complement_padded(ids, None, complement_tensor())
        with torch.no_grad():
            torch.testing.assert_close(clf(rc), clf(ids), rtol=1e-4, atol=1e-5)


def test_conjoin_choices_and_errors():
    dit = build_backbone("dit", preset="tiny", vocab_size=12)
    assert SequenceClassifier(dit, 2).conjoin == "none"
    assert SequenceClassifier(build_backbone("caduceus", preset="tiny-ph", vocab_size=12), 2).conjoin == "ph"
    with pytest.raises(DnadiffError, match="RCPS"):
        SequenceClassifier(dit, 2, conjoin="ps")
    with pytest.raises(DnadiffError, match="pooling"):
        SequenceClassifier(dit, 2, pooling="max")


def test_rc_aug_and_frozen_backbone():
    torch.manual_seed(0)
    bb = build_backbone("hyena", preset="tiny", vocab_size=12)
    clf = SequenceClassifier(bb, 2, rc_aug=True, freeze_backbone=True, dropout=0.5).train()
    assert not bb.training and clf.head.training  # frozen backbone stays in eval mode
    assert clf.num_parameters(trainable_only=True) == bb.hidden_size * 2 + 2
    ids, mask = _batch([10, 10, 7, 4], seed=4)
    aug = clf.rc_augment(ids, mask, generator=torch.Generator().manual_seed(1))
    rc = clf.reverse_complement(ids, mask)
    for i in range(4):  # every row is either itself or its reverse complement
        assert torch.equal(aug[i], ids[i]) or torch.equal(aug[i], rc[i])
    clf(ids, mask).sum().backward()
    assert all(p.grad is None for p in bb.parameters()) and clf.head.dense.weight.grad is not None


def test_time_conditioned_backbone_gets_t_zero():
    bb = build_backbone("dit", preset="tiny", vocab_size=12)
    clf = SequenceClassifier(bb, 2).eval()
    ids, mask = _batch([8, 8], seed=5)
    with torch.no_grad():
        h = bb.features(ids, torch.zeros(2))
        expect = clf.head(pool(h, mask))
        torch.testing.assert_close(clf(ids, mask), expect)


@pytest.mark.parametrize("backbone,preset,conjoin", [
    ("caduceus", "tiny-ph", "ph"), ("caduceus", "tiny", "ps"), ("hyena", "tiny", "none"), ("dit", "tiny", "none"),
    ("mamba", "tiny", "none")])
def test_classifier_logits_do_not_depend_on_batch_padding(backbone, preset, conjoin):
    """A sequence's logits are the same alone, in a batch, and with 100 more pads."""
    torch.manual_seed(0)
    bb = build_backbone(backbone, preset=preset, vocab_size=12)
    with torch.no_grad():  # jitter zero-initialised layers (DiT) so the check has teeth
        for p in bb.parameters():
            p.add_(0.05 * torch.randn_like(p))
    clf = SequenceClassifier(bb, 2, conjoin=conjoin).eval()
    lengths = [50, 23, 7]
    ids, mask = _batch(lengths, seed=4)
    big_ids, big_mask = _batch(lengths, seed=4, pad_to=150)
    with torch.no_grad():
        got = clf(ids, mask)
        torch.testing.assert_close(clf(big_ids, big_mask), got, rtol=0, atol=1e-5)
        for i, n in enumerate(lengths):
            torch.testing.assert_close(clf(ids[i:i + 1, :n], mask[i:i + 1, :n])[0], got[i], rtol=0, atol=1e-5)
        if conjoin == "ps":  # exact RC invariance now holds for padded rows too
            rc = reverse_complement_padded(big_ids, big_mask, complement_tensor())
            torch.testing.assert_close(clf(rc, big_mask), got, rtol=0, atol=1e-5)
