import json
import sys

import pytest

from dnadiff.cli import main
from helpers import progress_wait  # waits by progress, not by a wall-clock limit


def test_help_lists_commands(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "demo" in out


@pytest.mark.subprocess
@pytest.mark.training
def test_demo_summary(tmp_path):
    proc = progress_wait.run(
        [sys.executable, "-m", "dnadiff", "demo", "--out", str(tmp_path), "--summary-only"], watch=[tmp_path])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "genome_summary.json").read_text())
    splits = {row["split"]: row for row in summary["splits"]}
    assert set(splits) == {"train", "valid", "test"}
    assert 0.35 < splits["train"]["gc"] < 0.6


@pytest.mark.subprocess
@pytest.mark.training
def test_demo_runs_end_to_end(tmp_path):
    """The README's main command, shortened (3 steps, 32-bp windows): train, evaluate, sample, write."""
    proc = progress_wait.run(
        [sys.executable, "-m", "dnadiff", "demo", "--out", str(tmp_path), "--steps", "3", "--num-samples", "2", "-q",
         "data.seq_len=32", "sample.length=32", "sample.steps=4", "train.val_every=1000"], watch=[tmp_path])
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "eval_test.json").read_text())
    bound = res["bound"]
    assert bound["objective"] == "mdlm" and bound["num_tokens"] > 100_000 and 1.0 < bound["bits_per_token"] < 8.0
    records = [line for line in (tmp_path / "samples.fa").read_text().splitlines() if line.startswith(">")]
    assert len(records) == 2
    assert (tmp_path / "tiny_dna_mdlm" / "model" / "model.safetensors").is_file()


@pytest.mark.subprocess
@pytest.mark.training
def test_error_is_one_line_exit_2(tmp_path):
    proc = progress_wait.run(
        [sys.executable, "-m", "dnadiff", "demo", "--out", str(tmp_path), "--seq-len", "0", "--summary-only"],
        watch=[tmp_path])
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: ") and "\n" not in proc.stderr.strip()
    assert "Traceback" not in proc.stderr


def test_ci_runs_the_readme_test_command():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    ci = (root / ".ci" / "run").read_text()
    blocks = [b.split("```")[0].strip() for b in readme.split("```bash\n")[1:]]
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd in ci.splitlines()
