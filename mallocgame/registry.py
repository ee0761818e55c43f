"""The solver registry: solvers are found by entry point, never by import (DESIGN.md section 5).

Built-ins and third-party plugins alike register under the entry-point group
``mallocgame.solvers`` as ``name = "module:Class"``. Listing reads each module's
docstring from its source without importing it; :func:`load_solver` imports only the
solver asked for, and turns any failure into one :class:`SolverLoadError` line naming
the plugin.

Example:
    >>> "greedy-xla" in solver_entries()
    True
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

GROUP = "mallocgame.solvers"


class SolverLoadError(Exception):
    """A solver name that is unknown, or a plugin that fails to load."""


@dataclass(frozen=True)
class SolverEntry:
    name: str
    target: str  # "module:attr"
    distribution: str

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]


def solver_entries() -> dict[str, SolverEntry]:
    """Every registered solver by name (first registration of a name wins)."""
    found: dict[str, SolverEntry] = {}
    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else "?"
        found.setdefault(ep.name, SolverEntry(ep.name, ep.value, dist_name))
    return dict(sorted(found.items()))


def describe(entry: SolverEntry) -> str:
    """First line of the solver module's docstring, read from source without importing it."""
    try:
        spec = importlib.util.find_spec(entry.module)
    except (ImportError, ValueError) as exc:
        return f"(unavailable: {exc})"
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return "(unavailable: module not found)" if spec is None else "(no description)"
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            doc = ast.get_docstring(ast.parse(fh.read()))
    except (OSError, SyntaxError) as exc:
        return f"(unavailable: {exc.__class__.__name__})"
    return doc.strip().splitlines()[0] if doc else "(no description)"


def load_solver(name: str) -> Any:
    """Import and instantiate the solver registered as ``name``."""
    entries = solver_entries()
    if name not in entries:
        known = ", ".join(entries) or "none"
        raise SolverLoadError(f"unknown solver {name!r} (registered: {known})")
    entry = entries[name]
    module_name, _, attr = entry.target.partition(":")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
        solver = obj() if isinstance(obj, type) else obj
    except Exception as exc:  # a plugin may fail in any way; report it in one line
        raise SolverLoadError(
            f"solver {name!r} from {entry.distribution} ({entry.target}) failed to load: "
            f"{exc.__class__.__name__}: {exc}") from None
    if not callable(getattr(solver, "solve", None)):
        raise SolverLoadError(f"solver {name!r} from {entry.distribution} ({entry.target}) has no solve() method")
    return solver


def solver_modes(entry: SolverEntry) -> tuple[str, ...]:
    """The modes a solver supports, read from its class's ``modes = frozenset({...})`` in source
    (so listing imports nothing); imports the solver only when the source does not say."""
    attr = entry.target.partition(":")[2].split(".")[-1]
    try:
        spec = importlib.util.find_spec(entry.module)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            with open(spec.origin, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name == attr:
                    for stmt in node.body:
                        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "modes" for t in stmt.targets):
                            value = stmt.value
                            if isinstance(value, ast.Call) and value.args:  # frozenset({...})
                                value = value.args[0]
                            return tuple(sorted(ast.literal_eval(value)))
    except (ImportError, ValueError, OSError, SyntaxError):
        pass
    try:
        return tuple(sorted(getattr(load_solver(entry.name), "modes", ("map", "pack"))))
    except SolverLoadError:
        return ()
