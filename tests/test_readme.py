"""The README's Python blocks run as written (offline, from a fresh directory), and `python -m dnadiff`
is the same program as the `dnadiff` script (MUMmer ships another `dnadiff`)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)


def test_readme_has_python_blocks():
    assert PYTHON_BLOCKS and any("dnadiff.load(" in b for b in PYTHON_BLOCKS)


@pytest.mark.training
@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a user's own directory: nothing beside it
    code = compile(PYTHON_BLOCKS[index], f"README.md python block {index + 1}", "exec")
    exec(code, {"__name__": "__readme__"})
    if "dnadiff.load(" in PYTHON_BLOCKS[index]:
        out = capsys.readouterr().out.splitlines()
        seqs = eval(out[0])  # the two sampled sequences
        assert len(seqs) == 2 and all(len(s) == 64 and set(s) <= set("ACGTN") for s in seqs)
        assert 0.5 < float(out[1]) < 3.0  # nats per base of a 10-step model: below uniform's log(12) ≈ 2.48 + slack
        assert (tmp_path / "runs" / "tiny_dna_mdlm" / "model" / "model.safetensors").is_file()


@pytest.mark.subprocess
def test_python_dash_m_dnadiff_is_the_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-m", "dnadiff", "--version"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("dnadiff ")
    run = subprocess.run([sys.executable, "-m", "dnadiff", "configs", "experiments/tiny"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and "experiments/tiny_dna_mdlm" in run.stdout
    run = subprocess.run([sys.executable, "-m", "dnadiff", "train"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "python -m dnadiff" in README and "MUMmer" in README


def test_python_block_time_is_measured_with_its_machine():
    """The sentence above the Python block gives a measured time, the machine and its load, and the
    script that measured it (not "a few seconds")."""
    intro = README.split("## Python API", 1)[1].split("```python", 1)[0]
    assert "a few seconds" not in intro
    assert re.search(r"\b\d+ s on a \d+-core", intro) and "load average" in intro and "torch 2." in intro
    assert "benchmarks/readme_python_block.py" in intro and (REPO / "benchmarks" / "readme_python_block.py").is_file()


def test_ci_runs_the_readmes_test_command():
    """Issue 32 item 10: `.ci/run` and the README's "Run the tests" command are the same line."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("**Run the tests:**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0].strip()
    assert block.startswith("python3 -m venv .venv") and "python -m pytest" in block
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert block in ci
