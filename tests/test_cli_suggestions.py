"""Mistyped commands and flags that are config keys (issue 49, item 7): `dnadiff trian` printed the top-level
usage and the whole list of choices; `dnadiff train CONFIG --max-steps 5` said only "unrecognized". Each
now says what was probably meant, in one line, exit 2."""

from __future__ import annotations

from dnadiff.cli import SUBCOMMANDS, config_keys, main


def _run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    return code, capsys.readouterr()


def test_a_mistyped_command_gets_the_closest_one(capsys):
    code, out = _run(capsys, ["trian", "experiments/tiny_dna_mdlm"])
    assert code == 2 and out.out == ""
    assert out.err == "error: unknown command 'trian'; did you mean 'train'?\n"
    code, out = _run(capsys, ["design_finetune"])
    assert code == 2 and out.err == "error: unknown command 'design_finetune'; did you mean 'design-finetune'?\n"
    code, out = _run(capsys, ["xyzzy"])
    assert code == 2 and out.err.startswith("error: unknown command 'xyzzy'; the commands: train, eval, sample")
    assert all(name in out.err for name in SUBCOMMANDS) and len(out.err.splitlines()) == 1


def test_a_flag_that_is_a_config_key_points_to_the_override(capsys):
    code, out = _run(capsys, ["train", "experiments/tiny_dna_mdlm", "--max-steps", "5"])
    assert code == 2
    assert out.err.splitlines()[-1] == ("dnadiff train: error: unrecognized arguments: --max-steps 5; did you mean "
                                        "the config key train.max_steps=5?")
    code, out = _run(capsys, ["train", "experiments/tiny_dna_mdlm", "--seq-len=64", "--lr", "1e-3"])
    assert code == 2 and out.err.splitlines()[-1].endswith(
        "did you mean the config key data.seq_len=64 for --seq-len, the config key train.lr=1e-3 for --lr?")
    code, out = _run(capsys, ["finetune", "experiments/tiny_finetune", "--epochs", "3"])
    assert code == 2 and out.err.splitlines()[-1].endswith("did you mean the config key train.epochs=3?")


def test_a_misspelt_option_still_gets_the_option(capsys):
    code, out = _run(capsys, ["train", "experiments/tiny_dna_mdlm", "--resme"])
    assert code == 2 and out.err.splitlines()[-1].endswith("did you mean --resume?")


def test_config_keys_lists_every_leaf_key():
    from dnadiff.config import RunConfig

    keys = config_keys(RunConfig)
    assert {"train.max_steps", "data.seq_len", "model.backbone", "name", "out_dir"} <= set(keys)
    assert "train" not in keys and len(keys) == len(set(keys))
