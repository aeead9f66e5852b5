"""The README's user stories run from a clone (issue 49, item 2): every shell block marked `<!-- story: NAME -->`
is what benchmarks/readme_stories.py runs in an empty directory with DNADIFF_DATA unset. The default tests
check the blocks cheaply (each training config resolves to data that a clone has); the slow test runs them."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dnadiff.cli import main

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_stories", REPO / "benchmarks" / "readme_stories.py")
readme_stories = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_stories)
NAMES = ["dna", "mlm-to-mdlm", "text", "finetune", "long-dna-recipe"]


def commands(script: str) -> list[list[str]]:
    """The shell lines of a story block as argument lists (continuation lines joined)."""
    return [shlex.split(line) for line in script.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_readme_marks_its_stories_and_the_parser_finds_them():
    found = readme_stories.stories()
    assert [name for name, _ in found] == NAMES
    for name, script in found:
        lines = commands(script)
        assert lines and all(argv[0] == "dnadiff" for argv in lines), name  # the installed command, nothing else
        assert "DNADIFF_DATA" not in script and "shared" not in script, name
    text = "<!-- story: a -->\n```bash\ndnadiff demo\n```\n<!-- story: a -->\n\n```bash\nx\n```\n"
    with pytest.raises(SystemExit, match="used twice: a"):
        readme_stories.stories(text)
    assert readme_stories.stories("```bash\ndnadiff demo\n```\n") == []  # an unmarked block is not a story


def test_each_story_trains_on_data_a_clone_has(monkeypatch, tmp_path, capsys):
    """Every train/finetune line of a story resolves (--print-config) with DNADIFF_DATA unset and warns of no
    missing data file: before the fix the MLM and text stories named $DNADIFF_DATA's chr22 subset and corpus."""
    monkeypatch.delenv("DNADIFF_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    checked = 0
    for name, script in readme_stories.stories():
        for argv in commands(script):
            if argv[1] not in ("train", "finetune"):
                continue
            assert main([*argv[1:], "--print-config"]) == 0, (name, argv)
            captured = capsys.readouterr()
            assert "warning" not in captured.err and "not found" not in captured.err, (name, captured.err)
            checked += 1
    assert checked == 6


def test_the_bundled_fortunes_slice_is_small_and_split():
    folder = REPO / "dnadiff" / "assets" / "text" / "fortunes_sample"
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    assert set(sizes) == {"train.jsonl", "valid.jsonl", "test.jsonl"} and sum(sizes.values()) < 200_000
    for path in folder.iterdir():
        assert all(json.loads(line)["text"] for line in path.read_text().splitlines())


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_readme_story_runs_from_a_clone(tmp_path):
    out = tmp_path / "stories.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "readme_stories.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=3600)
    result = json.loads(out.read_text())
    assert [r["story"] for r in result["stories"]] == NAMES
    assert proc.returncode == 0 and all(r["exit"] == 0 for r in result["stories"]), proc.stdout
