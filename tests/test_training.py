"""Training end to end on the real chr22 sample: tiny models, a few steps each (CPU seconds)."""

import pytest
import torch

import dnadiff
from dnadiff.config import RunConfig, load_config
from dnadiff.data.datasets import build_split_dataset
from dnadiff.errors import DnadiffError
from dnadiff.training import train
from dnadiff.weights import read_weights

pytestmark = [pytest.mark.training]

FAST = ["data.seq_len=32", "train.batch_size=4", "train.val_every=2", "train.val_batches=1", "train.ckpt_every=2",
        "train.log_every=1", "train.progress=false", "train.warmup_steps=1", "sample.length=32", "sample.steps=4"]


def _cfg(tmp_path, *extra):
    return load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"out_dir={tmp_path}", *FAST, *extra])


@pytest.mark.parametrize(
    "backbone, objective, extra",
    [
        ("caduceus", "mdlm", []),
        ("caduceus", "sedd", []),
        ("caduceus", "d3pm", ["objective.T=100"]),
        ("caduceus", "mlm", []),
        ("mamba", "ar", []),
        ("hyena", "ar", ["model.overrides.causal=true"]),
        ("hyena", "mdlm", []),
        ("dit", "mdlm", []),
    ],
)
def test_three_steps_each_objective(tmp_path, backbone, objective, extra):
    cfg = _cfg(tmp_path, f"model.backbone={backbone}", f"objective.name={objective}", "train.max_steps=3", *extra)
    res = train(cfg)
    assert res.metrics["steps"] == 3
    assert torch.isfinite(torch.tensor(res.metrics["train_loss_last"]))
    assert (res.model_dir / "model.safetensors").is_file() and (res.run_dir / "loss_curve.png").is_file()


def test_model_dir_round_trip_and_eval_equals_objective(tmp_path):
    res = train(_cfg(tmp_path, "train.max_steps=2"))
    model = dnadiff.load(res.model_dir)
    again = dnadiff.load(res.model_dir)
    x = torch.randint(7, 11, (2, 32))
    assert torch.equal(model.denoiser(x, torch.full((2,), 0.5)), again.denoiser(x, torch.full((2,), 0.5)))
    # the bound of `dnadiff eval` is the objective's mean nll on the same batch and generator
    from dnadiff.eval import evaluate_model

    items = build_split_dataset(model.config, model.tokenizer, "test")
    subset = [items[i] for i in range(4)]
    res_eval = evaluate_model(model, subset, batch_size=4, seed=3, progress=False)
    batch = torch.utils.data.default_collate(subset)
    out = model.objective.loss(model.denoiser, batch["input_ids"], batch["attention_mask"],
                               generator=torch.Generator().manual_seed(3))
    assert res_eval["nats_per_token"] == pytest.approx(float(out.nll.sum() / out.num_tokens.sum()), rel=1e-6)
    samples = model.generate(2, 32, steps=4, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (2, 32) and set(samples.unique().tolist()) <= {7, 8, 9, 10}


def test_resume_gives_identical_weights(tmp_path):
    full = train(_cfg(tmp_path / "a", "train.max_steps=4"))
    part = _cfg(tmp_path / "b", "train.max_steps=2")
    train(part)
    resumed = train(_cfg(tmp_path / "b", "train.max_steps=4"), resume=True)
    wa, wb = read_weights(full.model_dir / "model.safetensors"), read_weights(resumed.model_dir / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def test_existing_run_dir_is_refused(tmp_path):
    cfg = _cfg(tmp_path, "train.max_steps=1")
    train(cfg)
    with pytest.raises(DnadiffError, match="run directory exists"):
        train(cfg)
    train(cfg, overwrite=True)
    # --resume of a run that does not exist yet (a job requeued before it started) starts it afresh
    assert train(_cfg(tmp_path / "other", "train.max_steps=1"), resume=True).metrics["steps"] == 1


def test_ema_weights_are_exported(tmp_path):

    captured = {}

    class Grab(__import__("lightning").pytorch.Callback):
        def on_train_end(self, trainer, module):
            captured["live"] = {k: v.clone() for k, v in module.backbone.state_dict().items()}
            captured["export"] = module.export_state_dict()

    res = train(_cfg(tmp_path, "train.max_steps=3", "train.ema=0.5"), callbacks=[Grab()])
    saved = read_weights(res.model_dir / "model.safetensors")
    assert any(not torch.equal(captured["live"][k], saved[k]) for k in saved)  # not the live weights
    for k in saved:
        assert torch.equal(saved[k], captured["export"][k])


def test_init_from_refuses_architecture_changes(tmp_path):
    base = train(_cfg(tmp_path / "base", "train.max_steps=1"))
    with pytest.raises(DnadiffError, match="cannot change the architecture"):
        train(_cfg(tmp_path / "a", "train.max_steps=1", f"model.init_from={base.model_dir}",
                   "model.overrides.d_model=64"))
    # an unconditional network gains a label embedding (issue 47 §4: tests/test_init_from_classes.py); one of
    # another number of classes cannot be reused
    two = train(_cfg(tmp_path / "b", "train.max_steps=1", f"model.init_from={base.model_dir}", "model.num_classes=2"))
    assert dnadiff.load(two.model_dir).config.model.num_classes == 2
    with pytest.raises(DnadiffError, match="a conditional one keeps its number of classes"):
        train(_cfg(tmp_path / "b3", "train.max_steps=1", f"model.init_from={two.model_dir}", "model.num_classes=3"))
    ok = train(_cfg(tmp_path / "c", "train.max_steps=1", f"model.init_from={base.model_dir}", "objective.name=sedd"))
    assert dnadiff.load(ok.model_dir).config.objective.name == "sedd"


def test_generate_keeps_training_mode_and_explicit_steps(tmp_path):
    res = train(_cfg(tmp_path, "train.max_steps=1", "sample.options.steps=50"))
    model = dnadiff.load(res.model_dir)
    model.backbone.train()
    _, smp = model.generate(1, 16, steps=3, return_sampler=True, generator=torch.Generator().manual_seed(0))
    assert smp.steps == 3 and model.backbone.training
