"""Per-registry option schemas: a typo in model.overrides, objective.options,
sample.options or data.text fails at load time listing the valid keys; Registry.build refuses
unknown keywords but lets a constructor's own TypeError through (a bug, not a user error)."""

import json

import pytest

from dnadiff.config import RunConfig
from dnadiff.config_options import load_config
from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry


@pytest.mark.parametrize("override, message", [
    ("model.overrides.d_modle=64",
     r"model.overrides.d_modle: not an option of backbone 'caduceus'; valid options: .*d_model"),
    ("objective.options.bos_idd=2",
     r"objective.options.bos_idd: not an option of objective 'mdlm'; valid options: .*pad_policy"),
    ("sample.options.etaa=0.1",
     r"sample.options.etaa: not an option of sampler 'ancestral'; valid options: .*temperature"),
    ("data.text.pathh=x", r"unknown config key data.text.pathh \(valid keys here: .*path"),
])
def test_option_typos_fail_at_load_time(override, message):
    with pytest.raises(DnadiffError, match=message):
        load_config(RunConfig, None, [override])


def test_option_types_are_checked_and_converted(tmp_path):
    with pytest.raises(DnadiffError, match=r"model.overrides.d_model='wide': backbone 'caduceus' expects int"):
        load_config(RunConfig, None, ["model.overrides.d_model=wide"])
    with pytest.raises(DnadiffError, match=r"sample.options.eta='abc': sampler 'remdm' expects float"):
        load_config(RunConfig, None, ["sample.sampler=remdm", "sample.options.eta=abc"])
    with pytest.raises(DnadiffError, match=r"data.text.max_docs: expected an integer"):
        load_config(RunConfig, None, ["data.text.max_docs=many"])
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  overrides:\n    d_model: '64'\nsample:\n  sampler: remdm\n  options:\n    eta: '0.1'\n")
    cfg = load_config(RunConfig, path)
    assert cfg.model.overrides == {"d_model": 64} and cfg.sample.options == {"eta": 0.1}
    cfg = load_config(RunConfig, None, ["objective.name=ar", "objective.options.bos_id=2", "model.backbone=mamba",
                                        "model.overrides.d_model=16", "data.text.path=corpus.txt"])
    assert cfg.objective.options == {"bos_id": 2} and cfg.model.overrides == {"d_model": 16}
    assert cfg.data.text["path"].endswith("corpus.txt")


def test_registry_build_checks_names_and_surfaces_bugs():
    reg = Registry("thing")

    @reg.register("ok")
    class Ok:
        def __init__(self, steps: int = 3, *, eta: float = 0.5):
            self.steps, self.eta = steps, eta

    @reg.register("buggy")
    class Buggy:
        def __init__(self, steps: int = 3):
            len(steps)  # a bug inside the constructor: TypeError

    assert reg.build("ok", steps=4).steps == 4
    with pytest.raises(DnadiffError, match=r"thing 'ok': unknown option 'etaa'; valid options: eta, steps"):
        reg.build("ok", etaa=1.0)
    with pytest.raises(TypeError):  # not turned into a user error
        reg.build("buggy", steps=2)
    assert reg.check_options("ok", {"eta": "0.25"}, "x") == {"eta": 0.25}
    with pytest.raises(DnadiffError,
                       match=r"x.steps=1.5: thing 'ok' expects int; valid options: steps \(int, default 3\)"):
        reg.check_options("ok", {"steps": 1.5}, "x")


def test_config_alone_reads_and_config_options_checks():
    """config.py sits below the registries and never imports them: its load_config takes the check as an
    argument; config_options.load_config (what commands, training and finetune call) passes it."""
    from dnadiff import config

    raw = config.load_config(RunConfig, None, ["sample.options.etaa=0.1", "objective.options.bos_id=2"])
    assert raw.sample.options == {"etaa": 0.1} and raw.objective.options == {"bos_id": 2}
    seen = []
    config.load_config(RunConfig, None, ["train.lr=1e-3"], check=lambda obj: seen.append(obj.train.lr) or obj)
    assert seen == [1e-3]
    with pytest.raises(DnadiffError, match=r"sample.options.etaa: not an option of sampler 'ancestral'"):
        load_config(RunConfig, None, ["sample.options.etaa=0.1"])


def test_the_kmer_lr_row_is_checked_against_its_own_options():
    from dnadiff.classifier_tuning.config import load_finetune_config

    with pytest.raises(DnadiffError, match=r"model.overrides: unknown k-mer LR option\(s\) kk"):
        load_finetune_config(None, ["model.backbone=kmer_lr", "model.overrides.kk=[3]"])
    assert load_finetune_config(None, ["model.backbone=kmer_lr", "model.overrides.ks=[3]"]).model.overrides == {
        "ks": [3]}


def test_finetune_and_train_share_the_trainer_fields():
    import dataclasses

    from dnadiff.classifier_tuning.config import FinetuneConfig, FinetuneTrainConfig, load_finetune_config
    from dnadiff.config import TrainConfig, TrainerConfig

    shared = {f.name for f in dataclasses.fields(TrainerConfig)}
    assert {"batch_size", "betas", "weight_decay", "grad_clip", "precision", "threads", "devices"} <= shared
    assert shared <= ({f.name for f in dataclasses.fields(TrainConfig)}
                      & {f.name for f in dataclasses.fields(FinetuneTrainConfig)})
    # the recipe's defaults
    assert FinetuneConfig().train.batch_size == 256 and FinetuneConfig().train.weight_decay == 0.1
    for section, cls in (("train", RunConfig), ("train", FinetuneConfig)):
        with pytest.raises(DnadiffError, match=r"train.threads: must be > 0 or null"):
            load_config(cls, None, [f"{section}.threads=0"])
        with pytest.raises(DnadiffError, match=r"train.precision: must be one of"):
            load_config(cls, None, [f"{section}.precision=8bit"])
    assert load_finetune_config("experiments/tiny_finetune").train.threads == 1


def test_finetune_takes_trains_lr_and_warmup_steps():
    """`train.lr` and `train.warmup_steps` mean in `finetune` what they mean in `train`."""
    from dnadiff.classifier_tuning.config import load_finetune_config

    base = load_finetune_config("experiments/tiny_finetune")
    assert base.train.lr is None and base.train.learning_rates() == [3e-3]  # the config's lr_grid
    assert base.train.warmup(1000) == 10  # warmup_frac 0.01
    one = load_finetune_config("experiments/tiny_finetune", ["train.lr=5e-4", "train.warmup_steps=7"])
    assert one.train.learning_rates() == [5e-4] and one.train.warmup(1000) == 7
    assert load_config(RunConfig, None, ["train.lr=5e-4", "train.warmup_steps=7"]).train.warmup_steps == 7
    for bad, key in (("train.lr=-1", "train.lr"), ("train.warmup_steps=-2", "train.warmup_steps")):
        with pytest.raises(DnadiffError, match=key):
            load_finetune_config("experiments/tiny_finetune", [bad])


def test_model_directory_records_no_runtime_choices(tmp_path):

    from dnadiff.backbones import build_backbone
    from dnadiff.modelio.model_dir import load_config_of, save_model_dir

    cfg = load_config(RunConfig, None, ["model.overrides.scan_impl=ref", "train.threads=3", "train.devices=2",
                                        "train.accelerator=cpu", "train.lr=0.01"])
    bb = build_backbone("caduceus", "tiny", scan_impl="ref")
    save_model_dir(tmp_path / "m", cfg, bb)
    saved = json.loads((tmp_path / "m" / "config.json").read_text())  # a Hugging Face-style model folder
    assert "scan_impl" not in saved["model"]["overrides"] and saved["model"]["overrides"]["d_model"] == 32
    assert (saved["train"]["threads"], saved["train"]["devices"],
            saved["train"]["accelerator"]) == (None, "auto", "auto")
    assert saved["train"]["lr"] == 0.01  # a training choice stays
    assert load_config_of(tmp_path / "m").model.overrides["d_model"] == 32
