"""The heavy optional dependencies: the only imports that may sit inside a function.

Every other import is at the top of its module. An import inside a function keeps a dependency
that costs a large share of a second (or more) off the start-up of every command that does not
need it: ``mallocgame --help`` and ``mallocgame solvers`` never import torch, and ``import
mallocgame`` stays cheap. :data:`HEAVY` is the one declaration of those dependencies, read by
``tests/test_import_rule.py`` (which enforces the rule) and by ``experiments/measure_code.py``
(which counts the imports inside functions).

An import of one of our own modules is heavy too when that module imports a heavy dependency at
its top (``mallocgame.search.muzero.train`` imports torch): importing it inside a function is
importing torch there. :func:`heavy_backed` finds those modules from the sources, so no second
list is kept.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

# Top-level module -> seconds its import takes (``python -X importtime -c "import X"``, cumulative, of the
# submodule named beside it where that is what the product imports); the figures and the runs they come
# from: docs/results.md, "Import times of the heavy dependencies".
HEAVY_SECONDS = {
    "torch": 1.9,
    "jax": 2.3,
    "jaxlib": 0.01,  # the bare package; listed with jax, which brings its native parts in
    "executorch": 9.7,  # executorch.exir, torch with it
    "matplotlib": 0.95,  # matplotlib.figure, what the plots import
    "ray": 0.75,
    "ortools": 0.32,  # ortools.sat.python.cp_model
    # ``mallocgame --help`` imports every command and with them the bounds' modules:
    "scipy": 0.48,  # scipy.optimize
    # The interference graph's form for small problems (mallocgame.problem.graph); a solve never needs it:
    "networkx": 0.78,
}
HEAVY = frozenset(HEAVY_SECONDS)

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
ImportNode = ast.Import | ast.ImportFrom


def functions(tree: ast.AST) -> Iterator[FunctionNode]:
    """Every function and method of ``tree``, nested ones included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def inner_imports(fn: ast.AST) -> Iterator[ImportNode]:
    """The imports in ``fn``'s own body (those of nested functions belong to them)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def module_imports(tree: ast.Module) -> Iterator[ImportNode]:
    """The imports that run when the module is imported (not in functions, not under ``if TYPE_CHECKING``)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imported(node: ImportNode, here: str, modules: Mapping[str, object] = {}) -> list[str]:
    """The modules ``node`` (in module ``here``) imports: ``from a import b`` is ``a.b`` when that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative, from the package holding ``here`` (the package tree has none)
        base = ".".join(here.split(".")[: -node.level] + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]


def with_parents(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: importing a module runs its packages' ``__init__`` first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def heavy_backed(trees: Mapping[str, ast.Module]) -> set[str]:
    """The modules of ``trees`` (name -> parsed source) whose import imports a :data:`HEAVY` dependency."""
    edges = {name: {m for node in module_imports(tree) for target in imported(node, name, trees)
                    for m in with_parents(target)} for name, tree in trees.items()}
    backed = {name for name, targets in edges.items() if any(m.split(".")[0] in HEAVY for m in targets)}
    grown = True
    while grown:
        more = {name for name, targets in edges.items() if name not in backed and targets & backed}
        backed |= more
        grown = bool(more)
    return backed


def is_heavy(node: ImportNode, here: str, trees: Mapping[str, ast.Module], backed: set[str]) -> bool:
    """Whether the import ``node`` in module ``here`` imports a heavy dependency (directly or through our own module)."""
    targets = imported(node, here, trees)
    return any(t.split(".")[0] in HEAVY or t in backed for t in targets)
