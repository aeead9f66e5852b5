"""A model directory names no path of the machine that made it (issue 49: its config.json recorded the absolute
data root, e.g. the checkout's own assets folder): data paths relative to the data root, resolved again under
the reader's data root when the model is loaded; a push rewrites the config.json of an older directory."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from dnadiff.cli import main
from dnadiff.config import RunConfig, load_config
from dnadiff.utils import REPO_ROOT

SLICE = Path(__file__).resolve().parent / "data" / "chr22_slice"
TINY = ["data.seq_len=32", "train.batch_size=2", "train.val_every=2", "train.val_batches=1", "train.ckpt_every=2",
        "train.log_every=1", "train.max_steps=2", "train.progress=false", "train.threads=1", "train.accelerator=cpu"]


def machine_paths(value, found=None) -> list[str]:
    """Every string of a JSON value that is an absolute path or holds a folder of this machine."""
    found = [] if found is None else found
    folders = {REPO_ROOT, os.path.expanduser("~"), tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}
    if isinstance(value, str):
        if value.startswith(("/", "~")) or any(f in value for f in folders):
            found.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            machine_paths(k, found)
            machine_paths(v, found)
    elif isinstance(value, list):
        for v in value:
            machine_paths(v, found)
    return found


@pytest.mark.training
def test_a_trained_model_directory_carries_no_machine_path_and_still_evaluates(tmp_path, monkeypatch, capsys):
    # the data root is the folder of the test genome (as DNADIFF_DATA or data.root would be on a user's machine)
    monkeypatch.setenv("DNADIFF_DATA", str(SLICE))
    config_file = tmp_path / "slice.yaml"  # a config's relative data paths resolve under the data root
    config_file.write_text("defaults:\n  - experiments/tiny_dna_mdlm\n"
                           "data:\n  fasta: chr22_slice.fa.gz\n  bed: sequences.bed\n")
    run = tmp_path / "run"
    assert main(["train", str(config_file), *TINY, "--run-dir", str(run)]) == 0
    model = run / "model"
    config = json.loads((model / "config.json").read_text())
    assert machine_paths(config) == [], machine_paths(config)
    assert config["data"]["root"] is None
    assert (config["data"]["fasta"], config["data"]["bed"]) == ("chr22_slice.fa.gz", "sequences.bed")
    assert machine_paths(json.loads((model / "metrics.json").read_text())) == []
    # on the machine that trained it, from anywhere: its run directory remembers the data root of the run
    monkeypatch.delenv("DNADIFF_DATA")
    monkeypatch.chdir(tmp_path)
    assert main(["eval", str(model), "--max-windows", "2", "--batch-size", "2", "--out", "e.json"]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["num_windows"] == 2
    # a copy on its own (shared, pushed): the paths resolve under the reader's data root
    shared = shutil.copytree(model, tmp_path / "shared" / "model")
    monkeypatch.setenv("DNADIFF_DATA", str(SLICE))
    assert main(["eval", str(shared), "--max-windows", "2", "--batch-size", "2", "--out", "e2.json", "--force"]) == 0
    assert json.loads((tmp_path / "e2.json").read_text())["nats_per_base"] == \
        json.loads((tmp_path / "e.json").read_text())["nats_per_base"]
    monkeypatch.setenv("DNADIFF_DATA", str(tmp_path / "another_root"))  # a reader without that data
    capsys.readouterr()
    assert main(["eval", str(shared), "--max-windows", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{tmp_path / 'another_root'}{os.sep}" in err and "not found" in err


def test_paths_outside_the_data_root_keep_their_name_and_provenance_is_portable(tmp_path, caplog):
    from dnadiff.backbones import build_backbone
    from dnadiff.config import replace
    from dnadiff.modelio.model_dir import load_config_of, save_model_dir

    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [f"data.fasta={tmp_path / 'g.fa'}",
                                                               f"out_dir={tmp_path / 'runs'}"])
    cfg = replace(cfg, reward_finetune={"pretrained": str(tmp_path / "pre" / "model"), "reward": "gc"})
    with caplog.at_level("WARNING", logger="dnadiff"):
        save_model_dir(tmp_path / "m", cfg, build_backbone("caduceus", preset="tiny", vocab_size=12))
    raw = json.loads((tmp_path / "m" / "config.json").read_text())
    assert machine_paths(raw) == []
    assert raw["data"]["fasta"] == "g.fa" and raw["out_dir"] == "runs"  # the file's name, not its folder
    assert f"data.fasta: {tmp_path / 'g.fa'}" in caplog.text and "only the file name" in caplog.text
    assert raw["reward_finetune"]["pretrained"].startswith("$TMPDIR/")
    # loading makes the provenance this machine's path again
    assert load_config_of(tmp_path / "m").reward_finetune["pretrained"] == str(tmp_path / "pre" / "model")


def test_push_rewrites_an_older_config_json_without_machine_paths(tmp_path, monkeypatch):
    """A directory written before (absolute data.root and data paths) is pushed with a portable config.json."""
    from dnadiff.backbones import build_backbone
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.modelio.push import push_to_hub

    d = save_model_dir(tmp_path / "m", load_config(RunConfig, "experiments/tiny_cfg_leptospira"),
                       build_backbone("dit", preset="tiny", vocab_size=12))
    raw = json.loads((d / "config.json").read_text())
    bundled = str(Path(REPO_ROOT) / "dnadiff" / "assets")
    raw["data"].update(root=bundled, benchmark=f"{bundled}/benchmarks/leptospira_coding_vs_intergenic")
    (d / "config.json").write_text(json.dumps(raw))  # as the previous version wrote it

    class Api:
        def create_repo(self, *a, **kw):
            pass

        def upload_folder(self, **kw):
            self.config = json.loads((Path(kw["folder_path"]) / "config.json").read_text())

    api = Api()
    push_to_hub(str(d), "someone/tiny", api=api)
    assert machine_paths(api.config) == []
    assert api.config["data"]["benchmark"] == "benchmarks/leptospira_coding_vs_intergenic"
    assert json.loads((d / "config.json").read_text())["data"]["root"] == bundled  # the local folder is untouched
