"""Model I/O in one package (dnadiff/modelio/): a model path is resolved once per command, its format
detected once and its config read once (counted with a profiler over the functions that do each), the
reader gives the parts the model is built from, and model.py names no Hub module."""

import ast
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

import dnadiff
from dnadiff.backbones import formats
from dnadiff.cli import main
from dnadiff.modelio import ModelSource, hub, model_dir, read_model, resolve, save
from helpers.cli_model import tiny_model_dir

COUNTED = {"resolve": hub.resolve_model_path, "detect": model_dir.is_dnadiff_config,
           "official": formats.detect_format, "config": model_dir.load_config_of}


def _counts(fn) -> Counter:
    """How often each function of COUNTED runs while `fn()` does (every call site, whatever its import)."""
    codes = {f.__code__: name for name, f in COUNTED.items()}
    seen: Counter = Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            seen[codes[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        assert fn() == 0
    finally:
        sys.setprofile(None)
    return seen


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("io"), seq_len=16)


def test_sample_design_eval_resolve_the_path_once(model, tmp_path, capsys):
    common = ["--threads", "1", "-q"]
    sample = _counts(lambda: main(["sample", model, "-n", "2", "--length", "16", "--steps", "4", *common]))
    design = _counts(lambda: main(["design", model, "--reward", "gc", "--method", "best_of_n", "-n", "2",
                                   "--length", "16", "--steps", "4", "--out", str(tmp_path / "d.fa"), *common]))
    evaluate = _counts(lambda: main(["eval", model, "--max-windows", "2", "--out", str(tmp_path / "e.json"), *common]))
    capsys.readouterr()
    # one Hub lookup, one format detection (a dnadiff marker: no official format is tried), one config read
    assert sample == design == evaluate == Counter({"resolve": 1, "detect": 1, "config": 1})


def test_a_source_is_resolved_once_and_read_into_parts(model, tmp_path):
    source = resolve(model)
    assert isinstance(source, ModelSource) and source.format == "dnadiff" and source.official is None
    assert resolve(source) is source and source.path == Path(model)
    assert source.config is source.config  # read once
    parts = read_model(source)
    assert parts.config == source.config and parts.metrics == {"steps": 0} and not parts.backbone.training
    loaded = dnadiff.load(source)
    for k, v in parts.backbone.state_dict().items():
        assert torch.equal(v, loaded.backbone.state_dict()[k])
    again = dnadiff.load(save(loaded, tmp_path / "copy"))  # save is a function; save_pretrained calls it
    assert again.config == loaded.config
    assert all(torch.equal(v, again.backbone.state_dict()[k]) for k, v in loaded.backbone.state_dict().items())


def test_model_py_names_no_hub_module():
    tree = ast.parse((Path(dnadiff.__file__).parent / "model.py").read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert [n for n in names if "hub" in n or "push" in n] == []
    assert "dnadiff.modelio" in names  # save_pretrained / push_to_hub call modelio.save / modelio.push
