"""The pipeline harness (pipelines/common.py, issue 50): the common options, where results go, the stamp, and
the writers' repository-relative paths and whole-file writes."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest

common = importlib.import_module("common")  # pipelines/ is on sys.path in the tests (pyproject.toml)
REPO = Path(__file__).resolve().parent.parent


def test_common_options_defaults_and_optional_flags():
    p = argparse.ArgumentParser()
    common.add_common_options(p, scales={"cpu": {}, "tiny": {}}, resume_help="keep rows", from_json="re-render")
    args = p.parse_args([])
    assert (args.scale, args.threads, args.results, args.dry_run, args.resume, args.from_json) == \
        ("cpu", 1, None, False, False, None)
    args = p.parse_args(["--scale", "tiny", "--threads", "3", "--dry-run", "--from-json", "x.json"])
    assert (args.scale, args.threads, args.dry_run, args.from_json) == ("tiny", 3, True, "x.json")
    with pytest.raises(SystemExit):
        p.parse_args(["--scale", "paper"])  # not one of the pipeline's scales
    bare = argparse.ArgumentParser()
    common.add_common_options(bare, threads=None)  # no --scale, --resume, --from-json unless asked for
    args = bare.parse_args([])
    assert args.threads is None and not hasattr(args, "scale") and not hasattr(args, "from_json")


def test_results_stem(tmp_path):
    ns = argparse.Namespace
    assert common.results_stem(ns(results=None), "dhs_cpu") == REPO / "results" / "dhs_cpu"
    assert common.results_stem(ns(results=None), "dhs_cpu", tmp_path) == tmp_path / "results" / "dhs_cpu"
    assert common.results_stem(ns(results="out/x"), "dhs_cpu", tmp_path) == Path("out/x")


def test_stamp_names_the_machine_and_the_load_under_the_pipelines_key():
    from dnadiff.machine import describe_machine

    s = common.stamp("load_after")
    assert list(s) == ["machine", "load_after"] and s["machine"] == describe_machine()
    assert "load average" in s["load_after"]


def test_writers_make_paths_repository_relative(tmp_path):
    from dnadiff.utils import portable_paths

    inside = str(REPO / "runs" / "m" / "model")
    common.write_results(tmp_path / "a" / "t", {"model": inside, "n": 3}, f"model `{inside}`\n")
    assert json.loads((tmp_path / "a" / "t.json").read_text()) == {"model": "runs/m/model", "n": 3}
    assert (tmp_path / "a" / "t.md").read_text() == "model `runs/m/model`\n"
    drawn = []

    def plot(payload, path):
        drawn.append((payload["model"], path))
        return str(path)

    out = common.write_report(tmp_path / "b" / "r", {"model": inside}, lambda r, png: f"{r['model']} {png}\n", plot)
    assert out == {"model": "runs/m/model"}
    assert drawn == [("runs/m/model", tmp_path / "b" / "r.png")]  # the plot sees the portable payload
    # the page is made portable too: the PNG's temporary path as $TMPDIR/..., like any result names it
    assert (tmp_path / "b" / "r.md").read_text() == portable_paths(f"runs/m/model {tmp_path / 'b' / 'r.png'}\n")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["r.json", "r.md"]  # no temporary file left


def test_read_results_json_refuses_what_is_not_a_results_file(tmp_path):
    from dnadiff.errors import DnadiffError

    good = tmp_path / "r.json"
    good.write_text('{"rows": []}')
    assert common.read_results_json(good, "x") == {"rows": []}
    for text in ("[1, 2]", "{not json"):
        good.write_text(text)
        with pytest.raises(DnadiffError, match=r"--from-json .*r\.json: not a x results JSON"):
            common.read_results_json(good, "x")
    with pytest.raises(DnadiffError, match="not a x results JSON"):
        common.read_results_json(tmp_path / "absent.json", "x")


def test_main_plain_turns_a_dnadiff_error_into_one_line_and_exit_2(capsys):
    from dnadiff.errors import DnadiffError

    def run(args, command):
        assert command == "python pipelines/x.py --a"
        raise DnadiffError("bad --a")

    assert common.main_plain(run, argparse.Namespace(), str(REPO / "pipelines" / "x.py"), ["--a"]) == 2
    assert capsys.readouterr().err == "error: bad --a\n"
