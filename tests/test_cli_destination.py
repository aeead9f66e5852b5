"""`sample`, `eval` and `design` check their --out destination before any model is loaded: a folder
that cannot exist (its parent is a file) or cannot be written is one `error:` line, exit 2, and
nothing is computed. Tests run as root (permission bits are ignored), so the read-only case makes
os.access answer as it would for a user without write permission."""

from __future__ import annotations

import os

import pytest

from dnadiff.cli import main
from helpers.cli_model import tiny_model_dir

COMMANDS = {
    "sample": ["--num", "1", "--length", "8", "--steps", "2"],
    "eval": ["--max-windows", "1"],
    "design": ["--reward", "gc", "--method", "none", "--num", "1", "--length", "8", "--steps", "2"],
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("dest"), seq_len=16)


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the model means the work started: fail the test if that happens."""
    import dnadiff.checkpoint

    def refuse(*_a, **_k):
        raise AssertionError("the model was loaded before the destination was checked")

    monkeypatch.setattr(dnadiff.checkpoint, "load_for_inference", refuse)


def run(argv, capsys):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_parent_is_a_file(command, model, tmp_path, capsys, no_model_load):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    out = blocker / "sub" / "x.fa"
    err = run([command, model, *COMMANDS[command], "--out", str(out)], capsys)
    assert f"{blocker} is not a directory" in err and "--out" in err
    assert blocker.read_text() == "a file, not a folder\n"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_read_only_folder(command, model, tmp_path, capsys, monkeypatch, no_model_load):
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if os.fspath(p) == str(locked) and mode & os.W_OK
                        else real_access(p, mode, **k))
    out = locked / "new" / "x.fa"
    err = run([command, model, *COMMANDS[command], "--out", str(out)], capsys)
    assert f"cannot write in {locked} (permission denied)" in err
    assert os.listdir(locked) == []


def test_writable_destination_is_made_and_used(model, tmp_path):
    """A folder that does not exist yet under a writable one is fine (made when writing); the
    write check leaves no probe file behind."""
    out = tmp_path / "a" / "b" / "x.fa"
    assert main(["sample", model, *COMMANDS["sample"], "--out", str(out)]) == 0
    assert out.is_file() and sorted(os.listdir(out.parent)) == ["x.fa", "x.json"]
    assert os.listdir(tmp_path) == ["a"]
