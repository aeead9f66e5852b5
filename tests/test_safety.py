"""Safety: atomic outputs, no code execution from data, numerical guards."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from dnadiff.cli import main as cli_main

FAST = ["data.seq_len=32", "train.batch_size=4", "train.val_every=100", "train.val_batches=1", "train.ckpt_every=1",
        "train.log_every=1", "train.progress=false", "train.warmup_steps=1", "sample.length=32", "sample.steps=4"]


class Boom(RuntimeError):
    pass


# ----------------------------------------------------------------------------- 2. atomic outputs


def _explode_mid_write(monkeypatch, module):
    """Make the next file written through `module`'s `open` raise after half of its bytes."""
    from helpers.half_write import HalfThenStop

    real_open = open

    def stop():
        raise Boom("interrupted mid-write")

    def fake_open(path, mode="r", *args, **kwargs):
        fh = real_open(path, mode, *args, **kwargs)
        return HalfThenStop(fh, stop) if "w" in mode else fh

    monkeypatch.setattr(module, "open", fake_open, raising=False)


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp")]


@pytest.mark.parametrize("writer", ["write_json", "atomic_write", "write_fasta", "save_config"])
def test_interrupted_writer_keeps_the_old_file(tmp_path, monkeypatch, writer):
    import dnadiff.utils as utils
    from dnadiff.config import RunConfig, save_config
    from dnadiff.data.records import write_fasta

    target = tmp_path / "out.file"
    target.write_text("OLD CONTENT\n")
    write = {
        "write_json": lambda: utils.write_json(target, {"x": list(range(1000))}),
        "atomic_write": lambda: utils.atomic_write(target, "new " * 1000),
        "write_fasta": lambda: write_fasta(target, [("s1", "ACGT" * 500), ("s2", "GGCC" * 500)]),
        "save_config": lambda: save_config(RunConfig(), target),
    }[writer]
    _explode_mid_write(monkeypatch, utils)
    with pytest.raises(Boom):
        write()
    assert target.read_text() == "OLD CONTENT\n"
    assert _no_temp_files(tmp_path)
    monkeypatch.undo()
    write()  # and without the fault the new content lands whole
    assert target.read_text() != "OLD CONTENT\n" and target.stat().st_size > 500


def test_interrupted_model_dir_save_keeps_the_old_model(tmp_path, monkeypatch):
    import safetensors.torch

    from dnadiff.backbones import build_backbone
    from dnadiff.checkpoint import load
    from dnadiff.config import RunConfig
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    cfg, tok = RunConfig(), DNATokenizer()
    torch.manual_seed(0)
    old = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)
    save_model_dir(tmp_path / "model", cfg, old, tok, {"v": 1})
    new = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)

    def broken_save(model, filename, metadata=None, force_contiguous=True):
        open(filename, "wb").write(b"half")  # a partial weights file in the temporary folder
        raise Boom("killed while serialising the weights")

    monkeypatch.setattr(safetensors.torch, "save_model", broken_save)
    with pytest.raises(Boom):
        save_model_dir(tmp_path / "model", cfg, new, tok, {"v": 2})
    monkeypatch.undo()
    model = load(tmp_path / "model")
    assert model.metrics == {"v": 1}
    for k, v in old.state_dict().items():
        assert torch.equal(model.backbone.state_dict()[k], v), k
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp folder left


def test_interrupted_plot_keeps_the_old_png(tmp_path, monkeypatch):
    import matplotlib.figure

    from dnadiff.eval.plots import write_plots

    out = tmp_path / "plots"
    paths = write_plots(["ACGT" * 20, "GGCA" * 20], ["ACGA" * 20, "TTGC" * 20], str(out))
    before = {p: Path(p).read_bytes() for p in (paths.values() if isinstance(paths, dict) else paths)}

    def broken_savefig(self, fname, **kwargs):
        Path(fname).write_bytes(b"\x89PNG half")
        raise Boom("interrupted")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    with pytest.raises(Boom):
        write_plots(["TTTT" * 20], ["ACGA" * 20], str(out))
    for p, data in before.items():
        assert Path(p).read_bytes() == data
    assert _no_temp_files(out)


@pytest.mark.training
def test_interrupted_finetune_results_keep_the_old_ones(tmp_path, monkeypatch):
    """run_finetune writes results.json through write_json: a crash there keeps the previous file."""
    import dnadiff.utils as utils
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.classifier_tuning.runs import run_finetune

    cfg = load_finetune_config("experiments/tiny_finetune", [*_FT, "protocol.seeds=[0]", "data.max_train=16"])
    run_finetune(cfg, tmp_path, echo=lambda *a: None)
    old = (tmp_path / "results.json").read_bytes()
    real = utils.write_json

    def crash_on_results(path, obj):
        if str(path).endswith("results.json"):
            _explode_mid_write(monkeypatch, utils)
        return real(path, obj)

    import dnadiff.classifier_tuning.runs as fp

    monkeypatch.setattr(utils, "write_json", crash_on_results)
    with pytest.raises(Boom):
        fp.run_finetune(cfg, tmp_path, echo=lambda *a: None)
    assert (tmp_path / "results.json").read_bytes() == old


# ----------------------------------------------------------------------------- finetune restart safety

_FT = ["data.max_train=40", "data.max_test=20", "data.max_len=48", "protocol.seeds=[0,1,2]", "train.epochs=1",
       "train.batch_size=8", "train.progress=false", "train.threads=1"]


def _strip(d):
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in ("wall_s", "machine", "log_dir")}
    if isinstance(d, list):
        return [_strip(v) for v in d]
    return d


@pytest.mark.training
def test_finetune_resume_after_crash_equals_uninterrupted(tmp_path, monkeypatch):
    from dnadiff.classifier_tuning.config import load_finetune_config
    from dnadiff.classifier_tuning.runs import run_finetune
    from dnadiff.training import classifier_loop as ft

    cfg = load_finetune_config("experiments/tiny_finetune", _FT)
    ref = run_finetune(cfg, tmp_path / "ref", echo=lambda *a: None)
    real_fit, calls, crashed = ft.fit_classifier, [], []

    def crash_on_second(*args, **kwargs):
        calls.append(args[7])  # seed
        if len(calls) == 2 and not crashed:
            crashed.append(True)
            raise Boom("killed during run 2")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(ft, "fit_classifier", crash_on_second)
    with pytest.raises(Boom):
        run_finetune(cfg, tmp_path / "job", echo=lambda *a: None)
    records = sorted(p.name for p in (tmp_path / "job" / "runs").rglob("*.json"))
    assert records == ["seed0.json"]
    calls.clear()
    res = run_finetune(cfg, tmp_path / "job", echo=lambda *a: None, resume=True)
    assert calls == [1, 2]  # seed 0 reused, the others trained
    assert _strip(res) == _strip(ref)
    on_disk = json.loads((tmp_path / "job" / "results.json").read_text())
    assert _strip(on_disk) == _strip(json.loads((tmp_path / "ref" / "results.json").read_text()))
    # another config never reuses these records
    calls.clear()
    other = load_finetune_config("experiments/tiny_finetune", [*_FT, "protocol.seeds=[0]", "train.lr_grid=[0.002]"])
    run_finetune(other, tmp_path / "job", echo=lambda *a: None, resume=True)
    assert calls == [0]


# ----------------------------------------------------------------------------- 4. no code execution from data


class _Payload:
    """Unpickling this creates a marker file (a harmless stand-in for arbitrary code)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_pickle(path: Path, marker: Path) -> None:
    path.write_bytes(pickle.dumps({"weight": _Payload(str(marker))}))
    assert not marker.exists()


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "model.ckpt"])
def test_model_dir_with_pickle_is_refused(tmp_path, capsys, name):
    from dnadiff.config import RunConfig, save_config

    d, marker = tmp_path / "model", tmp_path / "PWNED"
    d.mkdir()
    save_config(RunConfig(), d / "config.yaml")
    _evil_pickle(d / name, marker)
    for argv in (["eval", str(d)], ["sample", str(d), "--out", str(tmp_path / "s.fa")]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "refusing to unpickle" in err and name in err and "\n" not in err
    assert not marker.exists() and not (tmp_path / "s.fa").exists()


@pytest.mark.parametrize("kind", ["hyena", "caduceus"])
def test_official_bin_is_read_weights_only(tmp_path, capsys, kind):
    d, marker = tmp_path / "official", tmp_path / "PWNED"
    d.mkdir()
    cfg = ({"model_type": "hyenadna", "d_model": 16, "n_layer": 1, "vocab_size": 12, "max_seq_len": 64}
           if kind == "hyena" else {"model_type": "caduceus", "d_model": 16, "n_layer": 1, "vocab_size": 16,
                                    "rcps": False, "bidirectional": True})
    (d / "config.json").write_text(json.dumps(cfg))
    _evil_pickle(d / "pytorch_model.bin", marker)
    assert cli_main(["eval", str(d), "--max-windows", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "pytorch_model.bin" in err and "\n" not in err
    assert not marker.exists()


def test_resume_checkpoint_with_pickle_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    _evil_pickle(run / "checkpoints" / "last.ckpt", marker)
    rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=2", "--run-dir", str(run), "--resume"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "last.ckpt" in err and "\n" not in err
    assert not marker.exists()


@pytest.mark.parametrize("text", [
    "name: !!python/object/apply:os.system ['touch PWNED']\n",
    "train: !!python/object/new:builtins.dict {}\n",
    "name: ${oc.env:HOME}\n",
])
def test_config_code_tags_are_refused(tmp_path, capsys, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "evil.yaml"
    f.write_text(text)
    assert cli_main(["train", str(f), "train.max_steps=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "evil.yaml" in err and "\n" not in err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "runs").exists()


# ----------------------------------------------------------------------------- 5. numerical guards


@pytest.mark.parametrize("objective", ["mdlm", "sedd", "d3pm", "mlm", "ar"])
@pytest.mark.parametrize("fill", ["all_n", "all_pad"])
def test_all_n_or_all_pad_batch_has_finite_loss(objective, fill):
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, replace
    from dnadiff.model import DiffusionModel
    from dnadiff.tokenizers import DNATokenizer

    tok = DNATokenizer()
    cfg = replace(RunConfig(), **{"objective.name": objective, "objective.T": 100 if objective == "d3pm" else None})
    torch.manual_seed(0)
    backbone = build_backbone("mamba" if objective == "ar" else "caduceus", preset="tiny", vocab_size=tok.vocab_size)
    model = DiffusionModel(cfg, backbone, tok)
    x = torch.full((3, 16), tok.n_id if fill == "all_n" else tok.pad_id)
    mask = torch.zeros_like(x)  # N is input but never scored (data.mask_n): the loader's mask is 0 on N and pads
    out = model.objective.loss(model.denoiser, x, mask, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(out.loss) and float(out.num_tokens.sum()) == 0.0
    out.loss.backward()  # and the gradient is finite (zero) too
    for p in backbone.parameters():
        assert p.grad is None or torch.isfinite(p.grad).all()


@pytest.mark.training
def test_nan_loss_stops_training_and_keeps_last_good_checkpoint(tmp_path, capsys, monkeypatch):
    import dataclasses

    import dnadiff.training.module as module

    real_step = module.DiffusionLitModule.training_step

    def nan_at_step_3(self, batch, batch_idx):
        if self.global_step == 3:
            batch = dict(batch)
            orig = self.model.objective.loss

            def nan_loss(*a, **k):
                out = orig(*a, **k)
                return dataclasses.replace(out, loss=out.loss * float("nan"))

            self.model.objective.loss = nan_loss
            try:
                return real_step(self, batch, batch_idx)
            finally:
                del self.model.objective.loss
        return real_step(self, batch, batch_idx)

    monkeypatch.setattr(module.DiffusionLitModule, "training_step", nan_at_step_3)
    run = tmp_path / "run"
    rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=6", "--run-dir", str(run)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("error: non-finite training loss") and "step 3" in err[-1]
    assert not any("Traceback" in line for line in err)
    state = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 3  # the last good step
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())
    assert not (run / "model").exists()  # no model directory from a diverged run
    # resuming from the kept checkpoint works (the fault is gone)
    monkeypatch.undo()
    assert cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=5", "--run-dir", str(run),
                     "--resume"]) == 0
    assert (run / "model" / "model.safetensors").is_file()


def test_model_files_are_byte_identical_for_equal_weights(tmp_path):
    """safetensors writes its metadata map in random order; the saved header is canonical."""
    import hashlib

    import safetensors.torch

    from dnadiff.weights import canonical_safetensors

    tensors = {"b.weight": torch.arange(6.0).reshape(2, 3), "a.bias": torch.ones(3)}
    meta = {"format": "pt", "c.weight": "b.weight"}  # what save_model records for a dropped tied key
    blobs = {hashlib.sha256(canonical_safetensors(safetensors.torch.save(
        tensors, metadata=dict(reversed(list(meta.items())) if i % 2 else meta.items())))).hexdigest()
        for i in range(8)}
    assert len(blobs) == 1


def test_tied_weights_are_stored_once_and_re_tied_on_load(tmp_path):
    """Model dirs go through safetensors' save_model/load_model: a tied tensor (Caduceus' LM head and
    embedding, BiMamba's shared projections) is stored once and is tied again after loading."""
    from safetensors import safe_open

    import dnadiff
    from dnadiff.backbones import build_backbone
    from dnadiff.config import RunConfig, load_config
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    torch.manual_seed(0)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=16"])
    backbone = build_backbone("caduceus", preset="tiny", vocab_size=12)
    own = backbone.state_dict()
    tied = [(a, b) for a in own for b in own if a < b and own[a].data_ptr() == own[b].data_ptr()]
    assert tied, "the tiny Caduceus has tied weights"
    path = save_model_dir(tmp_path / "m", cfg, backbone, DNATokenizer(), {})
    with safe_open(str(path / "model.safetensors"), framework="pt") as fh:
        stored = set(fh.keys())
    assert all((a in stored) != (b in stored) for a, b in tied)  # each tie stored under one name
    loaded = dnadiff.load(path).backbone
    state = loaded.state_dict()
    for a, b in tied:
        assert state[a].data_ptr() == state[b].data_ptr()
    x = torch.randint(7, 11, (2, 16))
    backbone.eval()
    torch.testing.assert_close(loaded(x), backbone(x), rtol=0, atol=0)
    # EMA-style weights given apart from the module are written in its layout, ties included
    ema = {k: v + 1.0 if v.is_floating_point() else v for k, v in own.items()}
    path2 = save_model_dir(tmp_path / "m2", cfg, backbone, DNATokenizer(), {}, state_dict=ema)
    state2 = dnadiff.load(path2).backbone.state_dict()
    for k in own:
        torch.testing.assert_close(state2[k], ema[k])


@pytest.mark.training
def test_inf_gradient_stops_training_before_it_reaches_a_checkpoint(tmp_path, capsys, monkeypatch):
    """A finite loss whose gradient is inf (overflow in backward) stops at that step; last.ckpt stays finite."""
    import logging

    import dnadiff.training.module as module

    monkeypatch.setattr(logging, "raiseExceptions", False)
    real_step = module.DiffusionLitModule.training_step

    def inf_grad_at_step_2(self, batch, batch_idx):
        loss = real_step(self, batch, batch_idx)
        if self.global_step == 2:
            p = next(self.backbone.parameters())
            p.register_hook(lambda g: g * float("inf"))
        return loss

    monkeypatch.setattr(module.DiffusionLitModule, "training_step", inf_grad_at_step_2)
    run = tmp_path / "run"
    rc = cli_main(["train", "experiments/tiny_dna_mdlm", *FAST, "train.max_steps=5", "--run-dir", str(run)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: non-finite gradient at step 2"), err[-3:]
    state = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())
