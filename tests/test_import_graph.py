"""The package's import graph as it runs, read from the code with `ast`: every import statement (at file top
or inside a function) and every module named by a string (`_string_targets`: literals, f-strings,
Registry packages, lazy export dicts). No module imports one that imports it back, no module imports
one of a higher layer (LAYERS, the list docs/architecture.md shows), and no import hides in a name
built at run time beyond DYNAMIC_IMPORTS."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dnadiff"

# The layers, bottom to top, named as in docs/architecture.md's list (a test checks the two agree): a module
# imports only from its own layer and the layers below it, by import statement or by a module-name string.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("dnadiff.errors", "dnadiff.registry", "dnadiff.utils", "dnadiff.yaml_safe", "dnadiff.data_root",
                    "dnadiff.version", "dnadiff.lazy", "dnadiff.machine", "dnadiff.logs", "dnadiff.threads",
                    "dnadiff.denoiser", "dnadiff.config_types")),
    ("config.py", ("dnadiff.config",)),
    ("tokenizers/", ("dnadiff.tokenizers",)),
    ("weights.py", ("dnadiff.weights",)),
    ("backbones/", ("dnadiff.backbones",)),
    ("diffusion/", ("dnadiff.diffusion",)),
    ("samplers/", ("dnadiff.samplers",)),
    ("data/", ("dnadiff.data",)),
    ("config_options.py", ("dnadiff.config_options",)),
    ("heads/", ("dnadiff.heads",)),
    ("modelio/", ("dnadiff.modelio",)),
    ("baselines/", ("dnadiff.baselines",)),
    ("sampling.py", ("dnadiff.sampling",)),
    ("model.py", ("dnadiff.model",)),
    ("checkpoint.py", ("dnadiff.checkpoint",)),
    ("eval/", ("dnadiff.eval",)),
    ("guidance/", ("dnadiff.guidance",)),
    ("reward_tuning/, finetune_reward/", ("dnadiff.reward_tuning", "dnadiff.finetune_reward")),  # old name: an alias
    ("training/", ("dnadiff.training",)),
    ("classifier_tuning/, finetune/", ("dnadiff.classifier_tuning", "dnadiff.finetune")),  # old name: an alias
    ("commands/, cli.py, __main__.py, __init__.py", ("dnadiff.commands", "dnadiff.cli", "dnadiff.__main__", "dnadiff")),
]
FOUNDATION = LAYERS[0][1]
DOCS = PACKAGE.parent / "docs" / "architecture.md"


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the layer holding `module` (the package itself, "dnadiff", only as itself)."""
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p != "dnadiff" and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    return None if best is None else best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """The arrows from a module to one of a higher layer."""
    return sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                  if layer_of(m) is not None and layer_of(t) is not None and layer_of(t) > layer_of(m))


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


# a string naming a module of the package ("dnadiff.x.y" or "dnadiff.x.y:attr"): an import made at run time
MODULE_STRING = re.compile(r"dnadiff(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?")
# the modules whose import_module calls take a name that is not written in them, and why that is no hidden edge
DYNAMIC_IMPORTS = {
    "dnadiff.lazy": "lazy_exports(package, exports): each export dict is read below as arrows of its package",
    "dnadiff.backbones.kernels": "third-party CUDA kernels (mamba_ssm, causal_conv1d), never a dnadiff module",
    "dnadiff.guidance.rewards": "a user's `module:function` reward, never a dnadiff module",
}


def _string_targets(tree: ast.AST, package: str, modules) -> tuple[set[str], bool]:
    """Modules named by strings: literals "dnadiff.x[:attr]", f-strings f"dnadiff.x.{...}" (every module
    under the prefix), `package=` of a Registry (every module of that package), the export dicts of a
    lazy_exports call (module names relative to the package). Second: an import_module/__import__ call
    whose argument is none of these (a name the reader cannot see)."""
    out: set[str] = set()
    dynamic = False
    lazy = any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "lazy_exports"
               for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
            target = _resolve(node.value.partition(":")[0], modules)
            if target:
                out.add(target)
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
                and str(node.values[0].value).startswith("dnadiff."):
            prefix = str(node.values[0].value)
            out.update(m for m in modules if m.startswith(prefix))
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            for kw in node.keywords:
                if name == "Registry" and kw.arg == "package" and isinstance(kw.value, ast.Constant):
                    pkg = kw.value.value
                    out.update(m for m in modules if m.rpartition(".")[0] == pkg)
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                seen = (isinstance(arg, ast.Constant) and MODULE_STRING.fullmatch(str(arg.value))) or \
                    (isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant)
                     and str(arg.values[0].value).startswith("dnadiff."))
                dynamic = dynamic or not seen
        elif lazy and isinstance(node, ast.Dict):
            for v in node.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str) and f"{package}.{v.value}" in modules:
                    out.add(f"{package}.{v.value}")
    return out, dynamic


def import_graph(strings: bool = True, dynamic: dict | None = None) -> dict[str, set[str]]:
    """module -> the modules it imports: import statements anywhere in the file, and (with `strings`) the
    modules it names by strings (`_string_targets`). `dynamic`, when given, collects the modules with an
    import_module call the reader cannot follow."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if strings:
            targets, unseen = _string_targets(tree, package, modules)
            graph[module].update(targets - {module})
            if unseen and dynamic is not None:
                dynamic[module] = True
        for node in ast.walk(tree):
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


@pytest.mark.parametrize("strings", [False, True], ids=["statements", "with_strings"])
def test_no_import_cycles_and_no_upward_imports(strings):
    """Counted both ways: import statements only, and with the modules named by strings."""
    graph = import_graph(strings=strings)
    assert cycles(graph) == []
    assert upward_imports(graph) == []


def test_every_module_has_a_layer():
    assert sorted(m for m in import_graph() if layer_of(m) is None) == []


def test_the_foundation_imports_only_the_foundation():
    graph = import_graph()
    upward = sorted({f"{m} -> {t}" for m in FOUNDATION if m in graph for t in graph[m] if not _within(t, FOUNDATION)})
    assert upward == []


def test_every_import_module_call_is_accounted_for():
    """A name built at run time is an import the reader cannot see: only the listed, harmless ones exist."""
    dynamic: dict[str, bool] = {}
    import_graph(dynamic=dynamic)
    assert sorted(dynamic) == sorted(DYNAMIC_IMPORTS)


def _docs_layers() -> list[tuple[str, str]]:
    """(name, description) of each entry of the code block under "## Layers" in docs/architecture.md."""
    text = DOCS.read_text(encoding="utf-8").split("## Layers", 1)[1].split("```", 2)[1]
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line.strip() and not line.startswith(" "):
            m = re.match(r"(\S.*?)(?:\s{2,}(.*))?$", line)
            entries.append([m[1].strip(), m[2] or ""])
        elif line.strip() and entries:
            entries[-1][1] += " " + line.strip()
    return [(n, d) for n, d in entries]


def test_the_docs_list_the_layers_of_this_test():
    docs = _docs_layers()
    assert [n for n, _ in docs] == [n for n, _ in LAYERS]
    for (name, description), (_, prefixes) in zip(docs, LAYERS):
        if name == "foundation":  # its files are named in the description
            assert sorted(f"dnadiff.{f}" for f in re.findall(r"\b([a-z_]+)\.py\b", description)) == sorted(prefixes)
        else:
            named = [t.strip().removesuffix("/").removesuffix(".py") for t in name.split(",")]
            assert sorted("dnadiff" if n == "__init__" else f"dnadiff.{n}" for n in named) == sorted(prefixes)


def _registering(tree: ast.AST) -> bool:
    """The module registers an entry: a decorator `@SOMETHING.register(...)`."""
    return any(isinstance(d, ast.Call) and getattr(d.func, "attr", None) == "register"
               for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))
               for d in n.decorator_list)


def test_every_registering_module_is_imported_by_its_package():
    """Registration is by import: a module that registers an entry is imported by its package's __init__
    (Python runs it before any module of the package), so no lookup can miss it."""
    graph = import_graph(strings=False)
    missing = []
    for module, path in _modules().items():
        if path.name != "__init__.py" and _registering(ast.parse(path.read_text(encoding="utf-8"))):
            package = module.rpartition(".")[0]
            if module not in graph[package]:
                missing.append(module)
    assert missing == []


def test_the_reader_sees_module_name_strings(tmp_path, monkeypatch):
    pkg = tmp_path / "dnadiff"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("SPEC = 'dnadiff.sub.b:fit'\n")
    (pkg / "c.py").write_text("import importlib\n\ndef f(n):\n    return importlib.import_module(f'dnadiff.sub.{n}')\n")
    (pkg / "d.py").write_text("R = Registry('x', package='dnadiff.sub')\n")
    (pkg / "e.py").write_text("import importlib\n\ndef f(n):\n    return importlib.import_module(n)\n")
    (pkg / "sub" / "__init__.py").write_text("__getattr__ = lazy_exports(__name__, {'g': 'b'})\n")
    (pkg / "sub" / "b.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    dynamic: dict[str, bool] = {}
    graph = import_graph(dynamic=dynamic)
    assert graph["dnadiff.a"] == {"dnadiff.sub.b"} and graph["dnadiff.c"] == {"dnadiff.sub.b"}
    assert graph["dnadiff.d"] == {"dnadiff.sub", "dnadiff.sub.b"} and graph["dnadiff.sub"] == {"dnadiff.sub.b"}
    assert dynamic == {"dnadiff.e": True}
    assert import_graph(strings=False)["dnadiff.a"] == set()


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
