from pathlib import Path

import pytest

from dnadiff.config import RunConfig, from_dict, load_config, replace, save_config, to_dict
from dnadiff.errors import DnadiffError
from dnadiff.registry import Registry

REPO = Path(__file__).resolve().parent.parent


def test_defaults_and_overrides():
    cfg = load_config(RunConfig, None, ["train.lr=1e-3", "model.preset=dna-467k", "train.betas=[0.9,0.95]"])
    assert cfg.train.lr == 1e-3 and cfg.model.preset == "dna-467k" and cfg.train.betas == (0.9, 0.95)


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.lrr=1", "unknown config key train.lrr"),
        ("nope.x=1", "unknown config key nope"),
        ("train.max_steps=abc", "train.max_steps: expected an integer"),
        ("train.max_steps=0", "train.max_steps: must be > 0"),
        ("data.seq_len=-1", "data.seq_len: must be > 0"),
        ("data.rc_prob=2", "data.rc_prob: must be in"),
        ("train.progress=maybe", "train.progress: expected true/false"),
        ("train.lr_schedule=linear", "train.lr_schedule: must be"),
        ("train", "expected key=value"),
        ("train.lr={a: 1, a: 2}", "override 'train.lr={a: 1, a: 2}': invalid YAML"),  # a traceback before
    ],
)
def test_bad_overrides(override, message):
    with pytest.raises(DnadiffError, match=message):
        load_config(RunConfig, None, [override])


def test_yaml_booleans_in_number_fields_say_what_yaml_read(tmp_path, capsys):
    """Issue 49: `train.ema=yes` said "got True"; YAML 1.1 reads yes/no/on/off as booleans: the message
    says so in the words typed, and what the number means."""
    from dnadiff.cli import main

    with pytest.raises(DnadiffError) as typed:
        load_config(RunConfig, None, ["train.ema=yes"])
    assert str(typed.value) == ("train.ema: expected a number (the EMA decay, e.g. 0.9999; 0 disables EMA), got "
                                "yes/on/true, which YAML reads as the boolean true")
    with pytest.raises(DnadiffError, match=r"^train.max_steps: expected an integer, got no/off/false, which YAML "
                                           r"reads as the boolean false$"):
        load_config(RunConfig, None, ["train.max_steps=off"])
    (tmp_path / "c.yaml").write_text("train:\n  ema: off\n")  # from a file: the file is named too
    with pytest.raises(DnadiffError, match=r"c.yaml: train.ema: expected a number \(the EMA decay.*got no/off/false"):
        load_config(RunConfig, tmp_path / "c.yaml")
    assert load_config(RunConfig, None, ["train.progress=yes"]).train.progress is True  # a true/false field takes it
    assert main(["train", "experiments/tiny_dna_mdlm", "train.ema=on", "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "got yes/on/true" in err and "True" not in err and not (tmp_path / "run").exists()


def test_yaml_round_trip(tmp_path):
    cfg = load_config(RunConfig, None, ["name=x", "model.overrides.d_model=64", "objective.T=100"])
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(RunConfig, tmp_path / "c.yaml") == cfg
    assert from_dict(RunConfig, to_dict(cfg)) == cfg
    assert replace(cfg, **{"train.lr": 0.5}).train.lr == 0.5


def test_yaml_is_safe(tmp_path):
    bad = tmp_path / "evil.yaml"
    bad.write_text("name: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(DnadiffError, match="invalid YAML"):
        load_config(RunConfig, bad)


def test_config_file_errors(tmp_path):
    with pytest.raises(DnadiffError, match="config file not found"):
        load_config(RunConfig, tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(DnadiffError, match="top level must be a mapping"):
        load_config(RunConfig, tmp_path / "list.yaml")


def test_registry():
    reg = Registry("thing")

    @reg.register("a")
    def make_a(x=1):
        return ("a", x)

    assert reg.build("a", x=2) == ("a", 2) and reg.names() == ["a"]
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(make_a)
    with pytest.raises(DnadiffError, match="unknown thing 'b'; choose one of: a"):
        reg.build("b")
