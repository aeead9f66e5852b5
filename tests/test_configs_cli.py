"""`dnadiff configs` lists the shipped configs with one-line descriptions; every command takes
`--print-config` (the fully resolved config as YAML on stdout) and then exits without running."""

from pathlib import Path

import torch
import yaml

from dnadiff.classifier_tuning.config import FinetuneConfig, load_finetune_config
from dnadiff.cli import SUBCOMMANDS, build_parser, main
from dnadiff.config import CONFIG_ROOT, RunConfig, from_dict, load_config, to_dict
from dnadiff.data_root import bundled_data_root

SHIPPED = sorted(str(p.relative_to(CONFIG_ROOT).with_suffix("")) for p in Path(CONFIG_ROOT).rglob("*.yaml"))


def test_configs_lists_every_shipped_config_with_a_description(capsys):
    assert main(["configs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == SHIPPED
    for line in lines:
        name, text = line.split(None, 1)
        assert 10 <= len(text) <= 100, line  # one line, a real description
    tiny = next(line for line in lines if line.startswith("experiments/tiny_dna_mdlm "))
    assert "Tiny Caduceus MDLM on the human chr22 sample" in tiny


def test_configs_filter_and_unknown_filter(capsys):
    assert main(["configs", "text/"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names and all(n.startswith("text/") for n in names)
    assert main(["configs", "nothing-like-this"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_description_is_the_first_sentence_not_an_abbreviation(tmp_path):
    from dnadiff.commands.configs import describe

    p = tmp_path / "c.yaml"
    p.write_text("# App. D.6 of the paper, tab. 2 (Lou et al. 2024). Second sentence.\n# more\nname: x\n")
    assert describe(str(p)) == "App. D.6 of the paper, tab. 2 (Lou et al. 2024)."


def _printed(capsys, argv):
    assert main(argv) == 0
    out = capsys.readouterr().out
    return yaml.safe_load(out)


def test_every_command_takes_print_config():
    parser = build_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    assert set(subs) == set(SUBCOMMANDS)
    for name, sub in subs.items():
        assert any("--print-config" in a.option_strings for a in sub._actions), name
        assert sub.get_default("_resolved") is not None, name


def test_train_print_config_is_the_resolved_run_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    printed = _printed(capsys, ["train", "experiments/tiny_cfg_leptospira", "--print-config", "train.lr=0.01"])
    expected = load_config(RunConfig, "experiments/tiny_cfg_leptospira", ["train.lr=0.01"])
    assert from_dict(RunConfig, printed) == expected
    assert printed["train"]["lr"] == 0.01 and printed["data"]["root"] == bundled_data_root()
    assert printed["data"]["benchmark"] == str(Path(bundled_data_root()) / "benchmarks"
                                               / "leptospira_coding_vs_intergenic")
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_finetune_demo_and_configs_print_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ft = _printed(capsys, ["finetune", "experiments/tiny_finetune", "--print-config", "--dataset", "my/set",
                           "train.epochs=3"])
    assert from_dict(FinetuneConfig, ft) == load_finetune_config("experiments/tiny_finetune",
                                                                 ['data.dataset="my/set"', "train.epochs=3"])
    demo = _printed(capsys, ["demo", "--print-config", "--steps", "7"])
    assert demo["train"]["max_steps"] == 7 and demo["out_dir"] == "dnadiff_demo" and demo["name"] == "tiny_dna_mdlm"
    named = _printed(capsys, ["configs", "experiments/tiny_finetune", "--print-config"])
    assert named == to_dict(load_finetune_config("experiments/tiny_finetune"))
    run = _printed(capsys, ["configs", "text/cpu_fortunes_mdlm", "--print-config"])
    assert run["tokenizer"]["train"] == "bert-like"
    assert list(tmp_path.iterdir()) == []


def test_eval_sample_metrics_print_config(tmp_path, monkeypatch, capsys):
    from dnadiff.backbones import build_backbone
    from dnadiff.modelio.model_dir import save_model_dir
    from dnadiff.tokenizers import DNATokenizer

    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["data.seq_len=32"])
    torch.manual_seed(0)
    save_model_dir(tmp_path / "m", cfg, build_backbone("caduceus", preset="tiny", vocab_size=12), DNATokenizer())
    monkeypatch.chdir(tmp_path)
    ev = _printed(capsys, ["eval", "m", "--print-config", "--seq-len", "64", "--split", "valid"])
    assert ev["data"]["seq_len"] == 64 and ev["eval"]["split"] == "valid" and ev["model"]["backbone"] == "caduceus"
    sm = _printed(capsys, ["sample", "m", "--print-config", "--num", "3", "--sampler", "remdm", "--option", "eta=0.02",
                           "--out", "x.fa"])
    assert sm["sample"]["sampler"] == "remdm" and sm["sample"]["num"] == 3 and sm["sample"]["options"] == {"eta": 0.02}
    assert sm["sample"]["length"] == cfg.sample.length and sm["request"]["out"] == "x.fa"
    mt = _printed(capsys, ["metrics", "s.fa", "--reference", "r.fa", "--print-config"])
    assert mt["samples"] == "s.fa" and mt["kmax"] == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # nothing written

    # --print-config reads the config only (issue 50): a corrupt weights file is never opened
    (tmp_path / "m" / "model.safetensors").write_bytes(b"not a safetensors file")
    assert _printed(capsys, ["sample", "m", "--print-config", "--num", "3"])["sample"]["num"] == 3
    assert _printed(capsys, ["eval", "m", "--print-config", "--seq-len", "64"])["data"]["seq_len"] == 64
    assert main(["sample", "m", "--num", "1", "--length", "8", "--out", "y.fa"]) == 2  # a run does read them
    assert "model.safetensors" in capsys.readouterr().err


def test_print_config_of_a_bad_config_is_one_line(tmp_path, capsys):
    assert main(["train", "experiments/tiny_dna_mdlm", "--print-config", "train.lr=-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "train.lr" in err and err.count("\n") == 1


def test_configs_name_prints_the_whole_header(capsys):
    """A description cut with "..." in the list is readable whole: `dnadiff configs NAME` prints the
    config's entire leading comment block, line by line."""
    assert main(["configs"]) == 0
    out, err = capsys.readouterr()
    cut = [line.split()[0] for line in out.splitlines() if line.endswith("...")]
    assert cut and "dnadiff configs NAME" in err
    for name in cut:
        assert main(["configs", name]) == 0
        printed = capsys.readouterr().out.splitlines()
        path = Path(CONFIG_ROOT) / f"{name}.yaml"
        comments = [line[1:].strip() for line in path.read_text().splitlines()]
        first_setting = next(i for i, line in enumerate(path.read_text().splitlines()) if not line.startswith("#"))
        assert printed[0] == f"{name}  ({path})" and printed[1] == ""
        assert [line.strip() for line in printed[2:]] == comments[:first_setting]
        assert not printed[-1].endswith("...")
