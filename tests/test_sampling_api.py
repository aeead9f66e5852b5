"""`dnadiff.sample`, the library sampling call under `dnadiff sample`: batches that do not change the samples,
per-sequence streams, progress after every network call, statistics; the model's own length limit."""

import pytest
import torch

import dnadiff
from dnadiff.samplers import SeedStream
from dnadiff.sampling import steps_per_batch
from helpers.cli_model import tiny_model_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return dnadiff.load(tiny_model_dir(tmp_path_factory.mktemp("m"), seq_len=24))


def test_batches_and_first_index_do_not_change_the_samples(model):
    whole = dnadiff.sample(model, 5, 24, steps=8, seed=3)
    split = dnadiff.sample(model, 5, 24, steps=8, seed=3, batch_size=2)
    assert whole.x.shape == (5, 24) and whole.x.dtype == torch.long
    assert torch.equal(whole.x, split.x) and (whole.num_batches, split.num_batches) == (1, 3)
    assert torch.equal(dnadiff.sample(model, 1, 24, steps=8, seed=3, first_index=4).x, whole.x[4:])
    direct = model.generate(5, 24, steps=8, generator=SeedStream(3))
    assert torch.equal(direct, whole.x)
    assert not torch.equal(dnadiff.sample(model, 5, 24, steps=8, seed=4).x, whole.x)


def test_progress_counts_steps_per_batch_and_ends_at_the_total(model):
    seen = []
    res = dnadiff.sample(model, 5, 24, steps=8, seed=0, batch_size=2, on_step=lambda *a: seen.append(a))
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and done[-1] == 8 * 3 and seen[-1] == (24, 3, 8)
    assert all(0 <= s <= 8 and 1 <= b <= 3 for _, b, s in seen)
    assert len(seen) == res.nfe_total + 3  # one report per network call, one per finished batch


def test_semi_ar_progress_counts_every_window(model):
    """semi_ar runs its inner sampler once per window: 1 + ceil((24 - 8) / 4) = 5 windows of 4 steps a batch."""
    opts = {"window": 8, "stride": 4, "inner_options": {"steps": 4}}
    assert steps_per_batch(model, 24, "semi_ar", 16, opts) == 20
    assert steps_per_batch(model, 24, "semi_ar", 3, {"window": 8, "stride": 4}) == 15
    assert steps_per_batch(model, 8, "semi_ar", 3, {"window": 8, "stride": 4}) == 3  # one window
    assert steps_per_batch(model, 24, "semi_ar", 3, {**opts, "inner": "first_hitting"}) == 24
    seen = []
    dnadiff.sample(model, 2, 24, sampler="semi_ar", steps=4, seed=0, batch_size=1,
                   on_step=lambda *a: seen.append(a), window=8, stride=4)
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and seen[-1] == (40, 2, 20)
    assert max(s for _, b, s in seen if b == 1) == 20 and sum(1 for d in done if d < 20) > 10  # not stuck at 4


def test_statistics_describe_the_run(model):
    res = dnadiff.sample(model, 4, 24, steps=8, seed=1, batch_size=3)
    st = res.stats()
    assert (st["sampler"], st["num"], st["length"], st["batch_size"], st["steps"]) == ("ancestral", 4, 24, 3, 8)
    assert st["nfe_total"] == res.nfe_total and st["nfe_per_batch"] == res.nfe_total / 2
    assert st["denoiser_rows"] == int(res.nfe_per_row.sum()) and 1 <= st["steps_used"] <= 8
    assert st["seed"] == 1 and st["first_index"] == 0


def test_statistics_count_every_network_pass(model):
    """A strand-averaged step runs the network twice: twice the passes of the same sampler on the same rows."""
    plain = dnadiff.sample(model, 4, 24, steps=8, seed=2, sampler="ancestral")
    both = dnadiff.sample(model, 4, 24, steps=8, seed=2, sampler="ancestral", rc_symmetric=True)
    passes = []
    handle = model.backbone.register_forward_hook(lambda *_: passes.append(1))
    try:
        again = dnadiff.sample(model, 4, 24, steps=8, seed=2, sampler="ancestral", rc_symmetric=True)
    finally:
        handle.remove()
    assert both.nfe_total == 2 * plain.nfe_total == len(passes) == again.nfe_total
    assert torch.equal(both.nfe_per_row, 2 * plain.nfe_per_row)


def test_the_model_owns_its_length_limit(model, tmp_path):
    assert model.max_length is None  # tiny_dna_mdlm: Caduceus, no position table
    hyena = dnadiff.load(tiny_model_dir(tmp_path, seq_len=24, overrides=["model.backbone=hyena", "model.preset=tiny"]))
    assert hyena.max_length == hyena.backbone.config.l_max > 0  # HyenaDNA: its filter length


def test_a_guidance_method_samples_through_the_same_call(model):
    """What `dnadiff design` runs: a built method in place of a sampler name; its rewards read per batch."""
    from dnadiff.guidance import build_method, build_reward
    from dnadiff.model import SuppressTokens

    method = build_method("best_of_n", model.build_sampler("ancestral", 6), build_reward("gc"), n=2)
    batches = []
    res = dnadiff.sample(model, 3, 16, sampler=method, batch_size=2, seed=5,
                         on_batch=lambda m, x: batches.append((m.last_rewards.clone(), m.last_stats["denoiser_rows"])))
    assert res.x.shape == (3, 16) and res.num_batches == 2 and res.nfe_per_row is None
    assert [r.shape[0] for r, _ in batches] == [2, 1] and res.nfe_total == method.last_nfe + 6  # 6 calls, batch 1
    den = SuppressTokens(model.denoiser, model.banned_ids())
    whole = method.generate(den, model.schedule, model.tokenizer.mask_id, (3, 16), generator=SeedStream(5))
    assert torch.equal(whole.cpu(), res.x)  # per-sequence streams: the batches do not change the designs
    assert torch.equal(torch.cat([r for r, _ in batches]), method.last_rewards.cpu())
    with pytest.raises(dnadiff.DnadiffError, match="built sampler"):
        dnadiff.sample(model, 1, 16, sampler=method, steps=4)


def test_the_sampler_is_built_once_per_run(model, monkeypatch):
    """Issue 50: one resolution per run, not one per batch (and not again for the progress bar's count)."""
    from dnadiff.samplers import SAMPLERS

    built, build = [], SAMPLERS.build
    monkeypatch.setattr(SAMPLERS, "build", lambda name, **kw: built.append(name) or build(name, **kw))
    res = dnadiff.sample(model, 5, 24, steps=4, seed=0, batch_size=2, on_step=lambda *a: None)
    assert built == ["ancestral"] and res.num_batches == 3
    built.clear()
    res = dnadiff.sample(model, 3, 24, sampler="semi_ar", steps=2, seed=0, batch_size=1, on_step=lambda *a: None,
                         window=8, stride=4)
    assert built == ["semi_ar", "ancestral"] and res.num_batches == 3  # semi_ar builds its inner sampler once


def test_the_cli_resolves_and_builds_its_sampler_once_before_the_weights_load(model, tmp_path, monkeypatch):
    """`dnadiff sample`: resolve_sampler once, on the config-only ModelSpec (before any weights load), and one
    build; the run's batches and its progress bar use that one sampler."""
    from dnadiff import sampling
    from dnadiff.cli import main
    from dnadiff.model import DiffusionModel, ModelSpec
    from dnadiff.samplers import SAMPLERS

    calls, resolve = [], sampling.resolve_sampler
    monkeypatch.setattr(sampling, "resolve_sampler", lambda *a, **k: calls.append(a) or resolve(*a, **k))
    built, build = [], SAMPLERS.build
    monkeypatch.setattr(SAMPLERS, "build", lambda name, **kw: built.append(name) or build(name, **kw))
    model_dir = tiny_model_dir(tmp_path, seq_len=24)
    assert main(["sample", model_dir, "-n", "4", "--length", "24", "--steps", "3", "--batch-size", "2",
                 "--out", str(tmp_path / "s.fa")]) == 0
    assert built == ["ancestral"]  # no trial build beside the run's
    spec, calls = calls[0][0], [c[1:] for c in calls]
    assert type(spec) is ModelSpec and not isinstance(spec, DiffusionModel)  # no network: before the load
    assert calls[0] == (None, 3)  # (sampler, steps) as typed: the name is chosen inside
    assert len(calls) == 2 and calls[1][0].name == "ancestral"  # then dnadiff.sample gets it built: passed through
    from dnadiff.samplers import Sampler

    assert isinstance(calls[1][0], Sampler) and calls[1][1] is None
