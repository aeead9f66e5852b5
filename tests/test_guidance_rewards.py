"""Rewards of guided design: built-ins on hand-counted sequences, specs and their one-line errors,
user entry points, RC averaging, and the classifier directory `dnadiff finetune` leaves behind."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from dnadiff.errors import DnadiffError
from dnadiff.guidance.rewards import build_reward, rc_averaged
from dnadiff.tokenizers.dna import DNATokenizer

TOK = DNATokenizer()


def ids(*seqs):
    return torch.tensor([TOK.encode(s) for s in seqs])


def test_builtin_rewards_count_by_hand():
    x = ids("GGCCAATT", "ATATATAT", "TATAAACC")
    assert build_reward("gc")(x).tolist() == [0.5, 0.0, 0.25]
    assert torch.allclose(build_reward("gc:0.42")(x), torch.tensor([-0.08, -0.42, -0.17], dtype=torch.float64))
    # TATAAA forward once in row 3; its reverse complement TTTATA nowhere; ATAT (palindromic RC ATAT):
    assert build_reward("motif:TATAAA")(x).tolist() == [0.0, 0.0, 1.0]
    assert build_reward("motif:TTTATA")(ids("GGTATAAAGG")).tolist() == [1.0]  # found on the other strand
    assert build_reward("motif:atat")(x).tolist() == [0.0, 6.0, 0.0]  # 3 sites × both strands
    masked = x.clone()
    masked[0, :2] = TOK.mask_id  # masks count as no base
    assert build_reward("gc")(masked).tolist()[0] == 0.25


@pytest.mark.parametrize("spec", ["gc", "gc:0.3", "motif:TATA", "motif:ACG"])
def test_soft_rewards_equal_the_reward_on_one_hot_inputs(spec):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(7, 11, (5, 12), generator=g)
    r = build_reward(spec)
    onehot = torch.nn.functional.one_hot(x, TOK.vocab_size).double()
    assert torch.allclose(r.soft(onehot), r(x))
    rc = rc_averaged(build_reward(spec))
    assert torch.allclose(rc.soft(onehot), rc(x))


def test_rc_averaged_reward_is_strand_symmetric_and_counts_calls():
    x = ids("TATAAACCGT", "GGGGATTTTT")
    r = build_reward("motif:TATAAA")
    rc = rc_averaged(r)
    back = torch.tensor(TOK.reverse_complement(x))
    assert torch.equal(rc(x), rc(back))
    assert build_reward("gc").calls == 0
    g = build_reward("gc")
    g(x)
    assert g.calls == 2


def test_entry_point_reward(monkeypatch):
    mod = types.ModuleType("my_guidance_rewards")
    mod.score = lambda x: (x == TOK.a_id).sum(1).tolist()
    mod.wrong = lambda x: [1.0]
    monkeypatch.setitem(sys.modules, "my_guidance_rewards", mod)
    assert build_reward("my_guidance_rewards:score")(ids("AACG", "CCCC")).tolist() == [2.0, 0.0]
    with pytest.raises(DnadiffError, match="returned 1 values for 2"):
        build_reward("my_guidance_rewards:wrong")(ids("AACG", "CCCC"))


@pytest.mark.parametrize("spec,message", [
    ("", "empty spec"), ("gcc", "unknown reward"), ("gc:abc", "must be a number"), ("gc:1.5", r"in \[0, 1\]"),
    ("motif:", "give the motif"), ("motif:TANA", "only A, C, G, T"), ("classifier:", "give the classifier"),
    ("classifier:/nonexistent/dir", "no such classifier directory"), ("no_such_mod_xyz:f", "cannot import module"),
    ("json:no_such_function", "has no function"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(DnadiffError, match=message) as err:
        build_reward(spec)
    assert "\n" not in str(err.value)


def test_target_only_for_classifiers():
    with pytest.raises(DnadiffError, match="--target applies to"):
        build_reward("gc", target="coding")


def test_noisy_inputs_mask_real_positions_at_a_random_rate():
    from dnadiff.training.classifier_loop import noisy_inputs

    x = torch.full((400, 50), TOK.a_id)
    att = torch.ones_like(x)
    att[:, 40:] = 0  # pads are never masked
    z = noisy_inputs(x, att, TOK.mask_id, torch.Generator().manual_seed(0))
    frac = (z[:, :40] == TOK.mask_id).double().mean(1)  # (B,) ≈ t ~ U(0, 1)
    assert not bool((z[:, 40:] == TOK.mask_id).any()) and bool(((z == TOK.mask_id) | (z == TOK.a_id)).all())
    assert abs(float(frac.mean()) - 0.5) < 0.05 and float(frac.min()) < 0.1 and float(frac.max()) > 0.9


@pytest.mark.training
def test_finetune_saves_its_best_classifier_as_a_loadable_directory(tmp_path):
    """A tiny noise-aware (`model.noisy=true`) finetune run leaves OUT/classifier; loaded, its test
    accuracy is the reported one, and `classifier:DIR` gives log p(target | x)."""
    from torch.utils.data import DataLoader, Subset

    from dnadiff.cli import main
    from dnadiff.data.benchmarks import (
        SequenceClassificationDataset,
        load_benchmark_split,
        pad_batch,
        resolve_benchmark,
    )
    from dnadiff.data.splits import stratified_subsample
    from dnadiff.heads.saved import load_classifier_dir
    from dnadiff.training.classifier_loop import predict_logits

    out = tmp_path / "ft"
    rc = main(["finetune", "experiments/tiny_finetune", "model.backbone=hyena", "protocol.seeds=[0]",
               "data.max_train=64", "data.max_test=40", "train.batch_size=16", "train.lr_grid=[3e-3]",
               "train.epochs=1", "model.noisy=true", "--out", str(out), "--no-progress"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["classifier_dir"] == "classifier"  # relative to the output folder
    clf_dir = str(out / res["classifier_dir"])
    model, meta = load_classifier_dir(clf_dir)
    assert meta["classes"] == res["classes"] and meta["run"] == "lr0.003/seed0" and meta["noisy"] is True
    root = resolve_benchmark(res["dataset"])
    test_all = load_benchmark_split(root, "test", TOK)
    keep = stratified_subsample(test_all.labels, 40, 1)
    ds = Subset(SequenceClassificationDataset(test_all, TOK, None), keep.tolist())
    loader = DataLoader(ds, batch_size=16, collate_fn=lambda b: pad_batch(b, pad_id=TOK.pad_id))
    logits, labels = predict_logits(model, loader)
    acc = float((logits.argmax(1) == labels).double().mean())
    assert acc == pytest.approx(res["runs"][0]["test"]["accuracy"], abs=1e-9)
    # as a reward: log-probabilities of the named class
    target = res["classes"][0]
    reward = build_reward(f"classifier:{clf_dir}", target=target)
    seqs = torch.stack([ds[i]["input_ids"] for i in range(4)])
    want = model(seqs).double().log_softmax(-1)[:, 0]
    assert torch.allclose(reward(seqs), want, atol=1e-5) and bool((reward(seqs) <= 0).all())
    assert reward.noise_aware
    with pytest.raises(DnadiffError, match="knows the classes"):
        build_reward(f"classifier:{clf_dir}", target="nope")


@pytest.mark.parametrize("backbone,preset", [("hyena", "tiny"), ("caduceus", "tiny-ph")])
def test_classifier_soft_reward_matches_and_differentiates(tmp_path, backbone, preset):
    """`soft` (used by cg_grad) equals the classifier's log p on one-hot inputs (post-hoc strand
    conjoining included) and its gradient matches finite differences."""
    from dnadiff.backbones import build_backbone
    from dnadiff.heads.classifier import SequenceClassifier
    from dnadiff.heads.saved import save_classifier_dir

    torch.manual_seed(0)
    clf = SequenceClassifier(build_backbone(backbone, preset=preset, vocab_size=12), 2).eval()
    reward = build_reward(f"classifier:{save_classifier_dir(tmp_path / 'c', clf, ['neg', 'pos'])}", target="pos")
    x = torch.randint(7, 11, (3, 20), generator=torch.Generator().manual_seed(1))
    x[:, 5:9] = TOK.mask_id
    onehot = torch.nn.functional.one_hot(x, TOK.vocab_size).double().requires_grad_(True)
    value = reward.soft(onehot)
    assert torch.allclose(value.detach(), reward(x), atol=1e-5)
    (grad,) = torch.autograd.grad(value.sum(), onehot)
    d = torch.randn(onehot.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    h = 1e-2
    with torch.no_grad():
        fd = (reward.soft(onehot + h * d) - reward.soft(onehot - h * d)) / (2 * h)  # (B,)
    assert torch.allclose(fd, (grad * d).sum((1, 2)), rtol=0.05, atol=1e-3)


def test_reward_capabilities_are_declared_and_read_in_one_place():
    """Issue 50 §2: a reward's optional parts (soft input, time input, noise awareness, row counter, name, unit)
    are read by `reward_capabilities` alone, from what its class or a user object declares."""
    import re
    from pathlib import Path

    from dnadiff.guidance.rewards import reward_capabilities

    gc = reward_capabilities(build_reward("gc"))
    assert (gc.name, gc.soft, gc.counts_calls, gc.takes_time, gc.unit) == ("gc", True, True, False, None)
    rc = reward_capabilities(rc_averaged(build_reward("gc")))
    assert rc.name == "rc(gc)" and rc.soft and not rc.noise_aware

    def plain(x):
        return x.float().mean(1)

    bare = reward_capabilities(plain)
    assert (bare.name, bare.soft, bare.counts_calls, bare.unit) == (None, False, False, None)
    assert not reward_capabilities(rc_averaged(plain)).soft  # no soft inside: none outside
    timed = types.SimpleNamespace(takes_time=True, unit=0.5, noise_aware=True)
    assert (reward_capabilities(timed).takes_time, reward_capabilities(timed).unit) == (True, 0.5)
    assert reward_capabilities(types.SimpleNamespace(unit=-1)).unit is None  # a unit must be > 0
    package = Path(__file__).resolve().parent.parent / "dnadiff"
    names = "soft|name|calls|takes_time|noise_aware|unit"
    probe = re.compile(r"(getattr|hasattr)\(\s*[\w.]*reward[\w.]*\s*,\s*[\"'](" + names + r")[\"']")
    files = [p for sub in ("guidance", "commands") for p in sorted((package / sub).glob("*.py"))
             if p.name != "rewards.py"]
    found = [f"{p.relative_to(package)}:{i}" for p in files
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert found == []
