import json
import subprocess
import sys

from dnadiff.cli import main


def test_help_lists_commands(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "demo" in out


def test_demo_summary(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "dnadiff", "demo", "--out", str(tmp_path), "--summary-only"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "genome_summary.json").read_text())
    splits = {row["split"]: row for row in summary["splits"]}
    assert set(splits) == {"train", "valid", "test"}
    assert 0.35 < splits["train"]["gc"] < 0.6


def test_error_is_one_line_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "dnadiff", "demo", "--out", str(tmp_path), "--seq-len", "0", "--summary-only"],
        capture_output=True, text=True, timeout=300,
    )
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
