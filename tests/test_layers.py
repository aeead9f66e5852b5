"""The layers do what their names say (docs/architecture.md): data-layer code lives in
dnadiff/data, `dnadiff eval` runs without Lightning, pipelines use the public API only."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.subprocess
def test_dnadiff_eval_imports_no_lightning(tmp_path):
    """A whole `dnadiff eval` on a model dir, in a fresh interpreter: Lightning is never imported."""
    script = f"""
import sys
sys.path.insert(0, {str(REPO / 'tests')!r})
from pathlib import Path
from helpers.cli_model import tiny_model_dir
from dnadiff.cli import main
model = tiny_model_dir(Path({str(tmp_path)!r}))
rc = main(["eval", model, "--max-windows", "4", "--batch-size", "4", "--out", {str(tmp_path / 'e.json')!r}, "-q"])
assert rc == 0, rc
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_fabric"))
print("HEAVY", heavy)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HEAVY []" in out.stdout, out.stdout[-500:]
    assert (tmp_path / "e.json").exists()


def test_training_package_holds_no_data_layer_code():
    training = REPO / "dnadiff" / "training"
    for path in training.glob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        moved = {"build_split_dataset", "LabelledWindows", "genome_paths", "PermutedStream", "RepeatedStream",
                 "StreamSampler", "IndexedStream", "rank_batches", "paper_splits", "kfold_splits",
                 "stratified_subsample"}
        assert not defined & moved, f"{path.name} defines {defined & moved}: they belong in dnadiff/data"
    from dnadiff.data import LabelledWindows, build_split_dataset, genome_paths  # noqa: F401
    from dnadiff.eval import evaluate_model  # noqa: F401
    from dnadiff.samplers import build_template  # noqa: F401


def _dnadiff_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dnadiff":
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "dnadiff":
                    yield node.lineno, a.name, []


@pytest.mark.parametrize("path", sorted((REPO / "pipelines").glob("*.py")), ids=lambda p: p.name)
def test_pipelines_use_the_public_api_only(path):
    """`from dnadiff.X import name`: X is `dnadiff` or one level below it (a package or a top-level
    module, never a command module or a package's internal file), and `name` is in X.__all__."""
    for line, module, names in _dnadiff_imports(path):
        where = f"{path.name}:{line}: {module}"
        assert module.count(".") <= 1, f"{where}: import from the package, not its internal module"
        assert not module.startswith("dnadiff.commands"), f"{where}: commands are the CLI, not an API"
        mod = importlib.import_module(module)
        public = getattr(mod, "__all__", None)
        assert public is not None, f"{where}: has no __all__"
        for name in names:
            assert name in public, f"{where}: {name} is not in its __all__"
            getattr(mod, name)  # and it resolves


def test_a_command_module_that_fails_to_import_is_an_error(monkeypatch):
    """No module-skipping scaffolding: a broken command is an ImportError, not a vanished command."""
    from dnadiff.cli import build_parser

    monkeypatch.setitem(sys.modules, "dnadiff.commands.design", None)  # importing it now raises
    with pytest.raises(ImportError):
        build_parser()
