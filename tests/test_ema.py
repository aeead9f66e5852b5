"""EMA on torch's AveragedModel: the same numbers as MDLM's update rule, bit for bit."""

from pathlib import Path

import pytest
import torch
from torch import nn

from dnadiff.training.ema import EMA

REPO = Path(__file__).resolve().parent.parent


def _net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 5))
    net[3].weight = net[0].weight  # tied (the shape fits: 5 x 4)
    net[2].weight.requires_grad_(False)  # frozen: never averaged into the export
    return net


def test_ema_matches_the_mdlm_rule_exactly_and_resumes():
    net, decay = _net(), 0.9
    ema = EMA(net, decay)
    ref = {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}
    assert sorted(ema.shadow) == sorted(ref) and "2.weight" not in ema.shadow and "3.weight" not in ema.shadow
    g = torch.Generator().manual_seed(1)
    for n in range(6):
        with torch.no_grad():
            for p in net.parameters():
                if p.requires_grad:
                    p.add_(torch.randn(p.shape, generator=g))
        ema.update(net)
        d = min(decay, (1 + n) / (10 + n))  # MDLM's warm-up of the decay
        for name, p in net.named_parameters():
            if name in ref:
                ref[name].mul_(d).add_(p.detach(), alpha=1 - d)
        assert ema.num_updates == n + 1
    for name in ref:
        assert torch.equal(ema.shadow[name], ref[name]), name
    # the swap restores the live weights; copy_to writes the average (the tied weight too)
    live = {n: p.detach().clone() for n, p in net.named_parameters()}
    with ema.swapped(net):
        assert torch.equal(net[0].weight, ref["0.weight"]) and torch.equal(net[3].weight, ref["0.weight"])
    assert all(torch.equal(p, live[n]) for n, p in net.named_parameters())
    # resume: a fresh EMA loaded from the state continues identically
    state = ema.state_dict()
    again = EMA(_net(), 0.5)
    again.load_state_dict(state)
    assert again.num_updates == 6 and again.decay == decay
    ema.update(net), again.update(net)
    for name in ref:
        assert torch.equal(ema.shadow[name], again.shadow[name])


def test_ema_copy_is_not_part_of_the_module_tree():
    """Held outside the LightningModule's modules: DDP never sees (nor all-reduces) the average."""
    net = _net()
    ema = EMA(net, 0.99)
    assert not isinstance(ema, nn.Module)
    assert all(not p.requires_grad for p in ema.averaged.parameters())
    before = {n: v.clone() for n, v in ema.shadow.items()}
    ema.unshare()
    assert all(torch.equal(before[n], v) for n, v in ema.shadow.items())


@pytest.mark.training
def test_ema_vs_raw_benchmark_reads_both_weight_sets_of_a_checkpoint(tmp_path):
    """benchmarks/ema_vs_raw.py: the checkpoint's EMA shadow is what the run exported; its raw weights
    are the optimiser's (different after a few steps at lr 3e-3), keyed like the backbone."""
    import importlib.util

    import dnadiff
    from dnadiff.config import RunConfig, load_config
    from dnadiff.training import train

    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [
        f"out_dir={tmp_path}", "name=e", "data.seq_len=32", "train.batch_size=4", "train.max_steps=4",
        "train.progress=false", "train.val_every=4", "train.ckpt_every=4", "train.ema=0.9", "train.lr=3e-3",
        "model.overrides.scan_impl=chunked", "train.threads=1"])
    model_dir = train(cfg).model_dir
    spec = importlib.util.spec_from_file_location("ema_vs_raw", REPO / "benchmarks" / "ema_vs_raw.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sets = bench.weight_sets(str(tmp_path / "e" / "checkpoints" / "last.ckpt"))
    assert sets["step"] == 4
    exported = dnadiff.load(model_dir).backbone.state_dict()
    assert set(sets["ema"]) <= set(exported) and set(sets["raw"]) <= set(exported)
    assert all(torch.equal(sets["ema"][k], exported[k]) for k in sets["ema"])
    assert any(not torch.equal(sets["raw"][k], sets["ema"][k]) for k in sets["ema"])
