"""Bounded, safe YAML reading for configs: no Python tags, a size bound, an alias-expansion bound."""

from __future__ import annotations

from typing import Any

from dnadiff.errors import DnadiffError

MAX_CONFIG_BYTES = 1 << 20  # a config is a page of keys; 1 MiB is generous
MAX_CONFIG_NODES = 100_000  # YAML nodes after expanding aliases (a "billion laughs" bomb expands to 10^9)


def _expanded_nodes(node: Any, memo: dict[int, int]) -> int:
    """Nodes of the document once aliases are expanded, counted on the shared graph (linear time)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias counts once (PyYAML refuses recursion when constructing anyway)
    value = node.value
    total = 1
    if isinstance(value, list):
        for item in value:
            if isinstance(item, tuple):  # mapping: (key node, value node)
                total += _expanded_nodes(item[0], memo) + _expanded_nodes(item[1], memo)
            else:
                total += _expanded_nodes(item, memo)
            if total > MAX_CONFIG_NODES:
                break
    memo[key] = total
    return total


def _where_in_text(exc: Exception) -> str:
    """` at line L, column C` of a YAML syntax error (the problem's mark, else its context's; 1-based)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _what_in_text(exc: Exception) -> str:
    """The problem of a YAML syntax error, with the construct it was in and the line that began it."""
    problem, context, start = (getattr(exc, k, None) for k in ("problem", "context", "context_mark"))
    if not problem:
        return str(exc).splitlines()[0]
    if context:
        problem += f" {context}" + (f" that began at line {start.line + 1}" if start is not None else "")
    return problem


def _bounded_safe_load(text: str, where: str) -> Any:
    """yaml.safe_load with a bound on the document size and on alias expansion."""
    import yaml

    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_CONFIG_BYTES:
        raise DnadiffError(f"{where}: {size:,} bytes is too large for a config (at most {MAX_CONFIG_BYTES:,})")
    loader = yaml.SafeLoader(text)  # safe: no Python object tags
    try:
        node = loader.get_single_node()  # the node graph: aliases stay shared here, cheap to count
        if node is not None and _expanded_nodes(node, {}) > MAX_CONFIG_NODES:
            raise DnadiffError(f"{where}: YAML aliases expand to more than {MAX_CONFIG_NODES:,} values "
                               "(an alias bomb?); write the values out instead")
        return None if node is None else loader.construct_document(node)  # what safe_load returns
    except yaml.YAMLError as exc:
        raise DnadiffError(f"{where}: invalid YAML{_where_in_text(exc)} ({_what_in_text(exc)})") from None
    finally:
        loader.dispose()
