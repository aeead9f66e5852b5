"""The package's import graph at one or more git revisions: modules, import arrows, cycles, arrows that
close a cycle between top-level units, imports written inside functions, lines of code.

    python benchmarks/import_graph.py 31cb9c4 main          # before -> after, as a table
    python benchmarks/import_graph.py HEAD --json out.json

Read with `ast` from `git archive REV dnadiff` (no checkout, nothing imported), with the reader of
tests/test_import_graph.py (import statements and modules named by strings; the `_statements_only`
figures without the strings); `upward_vs_layers` counts module arrows against the test's LAYERS (the
list of docs/architecture.md, bottom to top). A "unit" is a top-level module or folder of dnadiff (dnadiff/model.py,
dnadiff/training/); an arrow between units is "upward" when it lies inside a cycle of the unit graph
(in an acyclic graph every arrow points down a level, so the count is 0 exactly when there is none).
"""

from __future__ import annotations

import argparse
import ast
import json
import runpy
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _reader():
    """import_graph/cycles/upward_imports of the test, pointed at another copy of the package."""
    ns = runpy.run_path(str(REPO / "tests" / "test_import_graph.py"))
    return ns["import_graph"], ns["cycles"], ns["upward_imports"]


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _levels(graph: dict[str, set[str]], cyc: list[list[str]]) -> int:
    """Levels of the unit graph: the longest chain of arrows after collapsing each cycle to one node."""
    comp = {m: m for m in graph}
    for c in cyc:
        for m in c:
            comp[m] = c[0]
    dag: dict[str, set[str]] = {}
    for m, ts in graph.items():
        dag.setdefault(comp[m], set()).update(comp[t] for t in ts if comp[t] != comp[m])
    depth: dict[str, int] = {}

    def d(n: str) -> int:
        if n not in depth:
            depth[n] = 0
            depth[n] = 1 + max((d(t) for t in dag.get(n, ())), default=0)
        return depth[n]

    return max((d(n) for n in dag), default=0)


def _own(node) -> bool:
    """An import of dnadiff itself (absolute or relative)."""
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "dnadiff"
    return any(a.name.split(".")[0] == "dnadiff" for a in node.names)


def _imports(root: Path) -> tuple[int, int, int, int, int]:
    """(imports at a file's top level, inside functions, the same two for dnadiff's own modules, code
    lines) over root/dnadiff."""
    top = local = own_top = own_local = lines = 0
    for path in (root / "dnadiff").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        lines += sum(1 for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#"))
        tree = ast.parse(text)
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        inner = {id(n) for f in funcs for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                local += id(n) in inner
                top += id(n) not in inner
                own_local += id(n) in inner and _own(n)
                own_top += id(n) not in inner and _own(n)
    return top, local, own_top, own_local, lines


def measure(rev: str) -> dict:
    import_graph, cycles, upward_imports = _reader()
    blob = subprocess.run(["git", "archive", rev, "dnadiff"], cwd=REPO, check=True, capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(blob)) as tar:
            tar.extractall(tmp, filter="data")
        import_graph.__globals__["PACKAGE"] = Path(tmp) / "dnadiff"
        graph = import_graph()  # import statements and module-name strings (the graph as it runs)
        written = import_graph(strings=False)  # import statements only
        top, local, own_top, own_local, lines = _imports(Path(tmp))
    units: dict[str, set[str]] = {}
    for m, ts in graph.items():
        units.setdefault(_unit(m), set()).update(_unit(t) for t in ts if _unit(t) != _unit(m))
    unit_cycles = cycles(units)
    in_cycle = {u: i for i, c in enumerate(unit_cycles) for u in c}
    upward = sorted(f"{u} -> {t}" for u, ts in units.items() for t in ts
                    if u in in_cycle and in_cycle.get(t) == in_cycle[u])
    return {"rev": rev, "commit": subprocess.run(["git", "rev-parse", "--short", rev], cwd=REPO, check=True,
                                                 capture_output=True, text=True).stdout.strip(),
            "modules": len(graph), "module_arrows": sum(map(len, graph.values())),
            "module_cycles": len(cycles(graph)), "units": len(units), "unit_levels": _levels(units, unit_cycles),
            "unit_arrows": sum(map(len, units.values())), "unit_cycles": len(unit_cycles),
            "arrows_inside_unit_cycles": len(upward), "imports_at_top": top, "imports_in_functions": local,
            "dnadiff_imports_at_top": own_top, "dnadiff_imports_in_functions": own_local,
            "code_lines": lines, "module_cycles_statements_only": len(cycles(written)),
            "upward_vs_layers": len(upward_imports(graph)),
            "upward_vs_layers_statements_only": len(upward_imports(written)),
            "upward": upward, "upward_vs_layers_list": upward_imports(graph)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("revs", nargs="+", help="git revisions (commits, branches)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    rows = [measure(r) for r in args.revs]
    keys = [k for k in rows[0] if k not in ("rev", "upward", "upward_vs_layers_list")]
    print("| " + " | ".join(["rev", *keys]) + " |")
    print("|" + "---|" * (len(keys) + 1))
    for r in rows:
        print("| " + " | ".join([r["rev"], *(str(r[k]) for k in keys)]) + " |")
    for r in rows:
        if r["upward"]:
            print(f"{r['rev']}: arrows inside unit cycles: {', '.join(r['upward'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
