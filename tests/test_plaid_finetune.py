"""A Plaid-trained model as the start of other runs (the Genomic Benchmarks table's Plaid column, issue 48):
fine-tuning and `model.init_from` with another objective take the backbone inside the PlaidNetwork, drop Plaid's
own parts (embedding table, noise schedule, input/time maps) and say so in the init_from line."""

from __future__ import annotations

import json

import pytest
import torch

from dnadiff.cli import main

TRAIN = ["train.max_steps=2", "train.batch_size=4", "data.seq_len=32", "train.val_every=2", "train.val_batches=1",
         "train.ckpt_every=2", "train.warmup_steps=1", "train.threads=1"]


def _saved_tensors(model_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.mark.training
def test_finetune_and_init_from_a_plaid_model_take_its_backbone(tmp_path, capsys):
    run = tmp_path / "plaid"
    assert main(["train", "experiments/tiny_dna_plaid", *TRAIN, "--run-dir", str(run), "-q"]) == 0
    model = run / "model"
    saved = _saved_tensors(model)
    inner = {k[len("backbone."):]: v for k, v in saved.items() if k.startswith("backbone.")}
    plaid_only = {k: v for k, v in saved.items() if not k.startswith("backbone.")}
    assert {"embedding"} <= set(plaid_only) and any(k.startswith("gamma.") for k in plaid_only)

    # the fine-tuning template: the DiT inside, with the Plaid model's weights, and the note counts the rest
    from dnadiff.classifier_tuning import load_finetune_config
    from dnadiff.classifier_tuning.runs import load_backbone_template

    cfg = load_finetune_config("experiments/tiny_finetune", [f"model.init_from={model}"])
    template, note = load_backbone_template(cfg)
    state = template.state_dict()
    assert set(state) == set(inner)
    assert all(torch.equal(state[k], v) for k, v in inner.items())
    assert note == (f"dropped Plaid's embedding table, noise schedule and input/time maps "
                    f"({sum(v.numel() for v in plaid_only.values()):,} parameters)")

    # a tiny fine-tuning run from it, through the command line; the classifier saved holds the same weights
    out = tmp_path / "ft"
    assert main(["finetune", "experiments/tiny_finetune", f"model.init_from={model}", "protocol.seeds=[0]",
                 "train.epochs=1", "train.max_steps_per_epoch=1", "train.batch_size=4", "data.max_train=40",
                 "data.max_test=20", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "model.init_from: loaded dit backbone" in printed and "dropped Plaid's embedding table" in printed
    res = json.loads((out / "results.json").read_text())
    assert res["runs"][0]["test"]["accuracy"] is not None and res["num_parameters"] > 0

    # init_from with another objective (continued MDLM training) also starts from the backbone inside
    from dnadiff.config import RunConfig
    from dnadiff.config_options import load_config
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training.run import build_backbone_for

    run_cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"model.init_from={model}"])
    run_cfg, backbone = build_backbone_for(run_cfg, build_tokenizer(run_cfg.tokenizer.kind, run_cfg.tokenizer.path))
    assert type(backbone).__name__ == "DiT" and run_cfg.model.backbone == "dit"
    assert all(torch.equal(backbone.state_dict()[k], v) for k, v in inner.items())
    # and plaid from plaid keeps the whole network (embeddings and schedule included)
    run_cfg = load_config(RunConfig, "experiments/tiny_dna_plaid", [f"model.init_from={model}"])
    _, net = build_backbone_for(run_cfg, build_tokenizer(run_cfg.tokenizer.kind, run_cfg.tokenizer.path))
    assert torch.equal(net.state_dict()["embedding"], saved["embedding"])


def test_plaid_init_from_an_mdlm_model_wraps_its_backbone(tmp_path):
    """The other way: a plaid run from a model of another objective gets that backbone inside a fresh
    PlaidNetwork (new embeddings and schedule), the backbone's weights unchanged."""
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, from_dict
    from dnadiff.config_options import load_config
    from dnadiff.diffusion.plaid_net import PlaidNetwork
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import build_tokenizer
    from dnadiff.training.run import build_backbone_for

    torch.manual_seed(0)
    dit = build_backbone("dit", preset="tiny", vocab_size=12, time_conditioning=True)
    save_model_dir(tmp_path / "m", from_dict(RunConfig, {"model": {"backbone": "dit", "preset": "tiny"}}), dit)
    cfg = load_config(RunConfig, "experiments/tiny_dna_plaid", [f"model.init_from={tmp_path / 'm'}"])
    _, net = build_backbone_for(cfg, build_tokenizer(cfg.tokenizer.kind, cfg.tokenizer.path))
    assert isinstance(net, PlaidNetwork)
    assert all(torch.equal(net.backbone.state_dict()[k], v) for k, v in dit.state_dict().items())
