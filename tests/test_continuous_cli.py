"""Plaid and SSD-LM end to end on the bundled chr22 sample: train a few steps, evaluate and sample through the
command line and `dnadiff.sample()`; their bad inputs (a backbone without embeddings, a non-monotone loaded
schedule, evaluating a model without a bound) give one line and exit 2."""

from __future__ import annotations

import json

import pytest
import torch

import dnadiff
from dnadiff.cli import main
from dnadiff.data import read_fasta

TRAIN = ["train.max_steps=4", "train.batch_size=4", "data.seq_len=32", "train.val_every=4", "train.val_batches=1",
         "train.ckpt_every=4", "train.warmup_steps=1", "train.threads=1"]


def _train(tmp_path, config: str, name: str, extra=()) -> str:
    run = tmp_path / name
    assert main(["train", config, *TRAIN, *extra, "--run-dir", str(run), "-q"]) == 0
    return str(run / "model")


@pytest.mark.training
def test_plaid_trains_evaluates_and_samples(tmp_path, capsys):
    model = _train(tmp_path, "experiments/tiny_dna_plaid", "plaid")
    assert main(["eval", model, "--max-windows", "4", "--out", str(tmp_path / "ev.json"), "-q"]) == 0
    ev = json.loads((tmp_path / "ev.json").read_text())
    assert ev["objective"] == "plaid" and ev["kind"] == "bound" and ev["bits_per_base"] > 0
    assert main(["sample", model, "--num", "2", "--length", "32", "--steps", "6", "--out",
                 str(tmp_path / "s.fa"), "-q"]) == 0
    recs = read_fasta(tmp_path / "s.fa")
    assert len(recs) == 2 and all(len(s) == 32 and set(s) <= set("ACGT") for _, s in recs)
    m = dnadiff.load(model)
    res = dnadiff.sample(m, 3, 32, steps=5, seed=1)
    assert res.x.shape == (3, 32) and res.sampler.name == "plaid"
    assert set(m.decode(res.x)[0]) <= set("ACGT")
    assert torch.equal(res.x, dnadiff.sample(m, 3, 32, steps=5, seed=1, batch_size=1).x)  # per-row streams

    # a schedule edited to be flat (the gap's softplus underflows) is refused when loaded
    from safetensors.torch import load_file, save_file

    weights = tmp_path / "plaid" / "model" / "model.safetensors"
    state = load_file(str(weights))
    state["gamma.log_gap"] = torch.full_like(state["gamma.log_gap"], -1e4)
    save_file(state, str(weights), metadata={"format": "pt"})
    capsys.readouterr()
    assert main(["eval", model, "--max-windows", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "not strictly increasing" in err[0]


@pytest.mark.training
def test_ssdlm_trains_and_samples_and_has_no_bound(tmp_path, capsys):
    model = _train(tmp_path, "experiments/tiny_dna_ssdlm", "ssd", ["objective.options.block_size=8"])
    assert main(["sample", model, "--num", "2", "--length", "20", "--steps", "3", "--out",
                 str(tmp_path / "s.fa"), "-q"]) == 0  # blocks of 8, 8 and 4 (the last one shorter)
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["nfe_per_sequence"] == 9  # 3 steps in each of the 3 blocks
    recs = read_fasta(tmp_path / "s.fa")
    assert len(recs) == 2 and all(len(s) == 20 and set(s) <= set("ACGT") for _, s in recs)
    m = dnadiff.load(model)
    res = dnadiff.sample(m, 2, 20, steps=3, seed=0)
    assert res.x.shape == (2, 20) and res.sampler.name == "ssdlm" and res.sampler.block_size == 8
    capsys.readouterr()
    assert main(["eval", model, "--max-windows", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no likelihood bound" in err[0]


@pytest.mark.training
def test_plaid_refuses_a_backbone_without_embeddings(tmp_path, capsys):
    # the tiny Caduceus is RC-equivariant (PS): its strands read token ids, not embeddings
    assert main(["train", "experiments/tiny_dna_mdlm", *TRAIN, "objective.name=plaid", "--run-dir",
                 str(tmp_path / "bad"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot take embeddings" in err[0]
