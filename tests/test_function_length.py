"""No function or method of the product is longer than 80 lines (docstring included): a longer one is split into
named steps (docs/development.md)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

LIMIT = 80
PRODUCT = ("mallocgame", "solvers", "search", "hybrid", "hardware")


def long_functions(source: str, path: str) -> list[str]:
    """``path:line name (length)`` of each function in ``source`` over :data:`LIMIT` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > LIMIT:
                found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_scan_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions(f"def f():\n{body}\n", "m.py") == ["m.py:1 f (81 lines)"]
    assert long_functions("def g():\n    return 1\n", "m.py") == []


def test_no_product_function_is_over_80_lines():
    found = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            # mallocgame/ links the card's folders (solvers/, search/, ...): each file is read once, from its folder
            if top == "mallocgame" and path.relative_to(ROOT / top).parts[0] in PRODUCT:
                continue
            found += long_functions(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "split into named steps: " + "; ".join(found)
