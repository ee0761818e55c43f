"""The code-health numbers of issue 17, measured on the tree: long functions, imports inside functions, README.

Prints every function of more than ``--lines`` lines in the core and the card's packages, the
imports that sit inside functions (and how many of them are of the heavy optional dependencies
the rule allows there: torch, ray, matplotlib, ortools, jax, executorch), and the README's length::

    python experiments/measure_code.py --out code_measures.md
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter

from _common import ROOT, Transcript, fenced, write_results

PACKAGES = ("mallocgame", "solvers", "search", "hybrid", "hardware")
HEAVY = {"torch", "ray", "matplotlib", "ortools", "jax", "jaxlib", "executorch"}


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def inner_imports(fn: ast.AST):
    """The imports in ``fn``'s own body (nested functions are counted on their own)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=80)
    ap.add_argument("--out", default="code_measures.md")
    args = ap.parse_args()
    out = Transcript()
    long, kinds = [], Counter()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for fn in functions(tree):
                n = fn.end_lineno - fn.lineno + 1
                if n > args.lines:
                    long.append((n, f"{path.relative_to(ROOT)}:{fn.lineno}", fn.name))
                for imp in inner_imports(fn):
                    name = imp.names[0].name if isinstance(imp, ast.Import) else (imp.module or "")
                    top = name.split(".")[0]
                    kinds["heavy" if top in HEAVY else "ours" if top == "mallocgame" or getattr(imp, "level", 0)
                          else "other"] += 1
    out(f"functions over {args.lines} lines: {len(long)}")
    for n, where, name in sorted(long, reverse=True):
        out(f"  {n:4d}  {where}  {name}")
    out(f"imports inside functions: {sum(kinds.values())} (heavy optional dependencies {kinds['heavy']}, "
        f"mallocgame's own {kinds['ours']}, other {kinds['other']})")
    readme = (ROOT / "README.md").read_text().splitlines()
    out(f"README.md: {len(readme)} lines, longest {max(map(len, readme))} characters")
    write_results(args.out, "# Code-health numbers (issue 17)\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
