"""Issue 50: the packages renamed to say what they hold (dnadiff.finetune -> dnadiff.classifier_tuning,
dnadiff.finetune_reward -> dnadiff.reward_tuning) keep their old import paths for users' code: the same
objects, submodules included, with a DeprecationWarning naming the new path; dnadiff itself never uses them."""

import ast
import importlib
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dnadiff"
RENAMED = {"dnadiff.finetune": "dnadiff.classifier_tuning", "dnadiff.finetune_reward": "dnadiff.reward_tuning"}


def _fresh_import(old: str):
    """Import the alias `old` as a first import would (its module and its submodule entries dropped first)."""
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]
    return importlib.import_module(old)


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_package_path_warns_and_names_the_new_one(old):
    with pytest.warns(DeprecationWarning, match=rf"{old} was renamed {RENAMED[old]}"):
        alias = _fresh_import(old)
    new = importlib.import_module(RENAMED[old])
    assert alias.__all__ == new.__all__ and len(new.__all__) >= 10
    for name in new.__all__:  # every public name is the new package's own object
        assert getattr(alias, name) is getattr(new, name), name
    with pytest.raises(AttributeError):
        alias.no_such_name  # noqa: B018


def test_old_submodule_paths_are_the_moved_modules_themselves():
    import dnadiff.classifier_tuning.runs as runs
    import dnadiff.diffusion.soft_input as soft_input
    import dnadiff.reward_tuning.drakes as drakes
    import dnadiff.reward_tuning.trajectory as trajectory

    _fresh_import("dnadiff.finetune")
    _fresh_import("dnadiff.finetune_reward")
    import dnadiff.finetune.runs as old_runs
    from dnadiff.finetune.config import load_finetune_config
    from dnadiff.finetune_reward import drakes as old_drakes
    from dnadiff.finetune_reward.soft_input import call_soft
    from dnadiff.finetune_reward.trajectory import rollout

    assert old_runs is runs and old_drakes is drakes
    assert load_finetune_config is importlib.import_module("dnadiff.classifier_tuning.config").load_finetune_config
    assert call_soft is soft_input.call_soft and rollout is trajectory.rollout
    assert importlib.import_module("dnadiff.finetune.kmer_lr").run_kmer_lr is runs.run_kmer_lr


def test_an_old_monkeypatch_target_patches_the_moved_module(monkeypatch):
    import dnadiff.reward_tuning.drakes as drakes

    _fresh_import("dnadiff.finetune_reward")
    monkeypatch.setattr("dnadiff.finetune_reward.drakes.rollout", "patched")
    assert drakes.rollout == "patched"


def test_dnadiff_itself_imports_only_the_new_names():
    """The aliases are for users' code: no module of the package imports them (statement or string)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name in ("finetune", "finetune_reward"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
            found += [f"{path.relative_to(PACKAGE)}: {n}" for n in names
                      if any(n == old or n.startswith(old + ".") for old in RENAMED)]
    assert found == []
