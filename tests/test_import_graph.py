"""The package's import graph, read from the code with `ast` (every import, at file top or inside a
function): no module imports one that imports it back, and the low layers import nothing above them."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dnadiff"

# the foundation: may import only each other
FOUNDATION = ("dnadiff.errors", "dnadiff.registry", "dnadiff.utils", "dnadiff.yaml_safe", "dnadiff.data_root",
              "dnadiff.version", "dnadiff.lazy", "dnadiff.machine", "dnadiff.logs")
# layer -> what it may import besides itself and the foundation
LAYERS = {
    "dnadiff.tokenizers": (),
    "dnadiff.weights": (),
    "dnadiff.config": (),
    "dnadiff.diffusion": (),
    "dnadiff.backbones": ("dnadiff.tokenizers", "dnadiff.weights"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules) -> str | None:
    """The module an imported name lives in: the longest prefix that is a module of the package."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                names = [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "dnadiff":
                    target = _resolve(name, modules)
                    if target and target != module:
                        graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_reader_sees_function_local_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "dnadiff"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from dnadiff.sub.b import g\n")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("import dnadiff.a\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    graph = import_graph()
    assert graph["dnadiff.a"] == {"dnadiff.sub.b"} and graph["dnadiff.sub"] == {"dnadiff.sub.b"}
    assert cycles(graph) == [["dnadiff.a", "dnadiff.sub.b"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_low_layers_import_nothing_above_them(layer):
    graph = import_graph()
    allowed = (layer, *FOUNDATION, *LAYERS[layer])
    upward = sorted({f"{m} -> {t}" for m, targets in graph.items() if _within(m, (layer,))
                     for t in targets if not _within(t, allowed)})
    assert upward == []


def test_the_foundation_imports_only_the_foundation():
    graph = import_graph()
    upward = sorted({f"{m} -> {t}" for m in FOUNDATION if m in graph for t in graph[m] if not _within(t, FOUNDATION)})
    assert upward == []


def test_top_level_units_import_one_way():
    """dnadiff/X.py and dnadiff/X/ as single nodes: no package reaches another that reaches it back (an arrow
    inside such a loop is an upward import even when no single module closes the loop)."""
    units: dict[str, set[str]] = {}
    for m, targets in import_graph().items():
        unit = ".".join(m.split(".")[:2])
        units.setdefault(unit, set()).update(".".join(t.split(".")[:2]) for t in targets)
    for unit in units:
        units[unit].discard(unit)
    assert cycles(units) == []
