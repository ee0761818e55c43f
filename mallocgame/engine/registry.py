"""The solver registry: solvers are found by entry point, never by import (docs/architecture.md, "Solvers").

Built-ins and third-party plugins alike register under the entry-point group
``mallocgame.solvers`` as ``name = "module:Class"``. Listing reads each module's
docstring from its source without importing it; [`load_solver`][mallocgame.engine.registry.load_solver] imports only the
solver asked for, and turns any failure into one [`SolverLoadError`][mallocgame.engine.registry.SolverLoadError] line naming
the plugin.

Examples:
    >>> "greedy-xla" in solver_entries()
    True
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from typing import Any

from mallocgame.engine.protocol import contract_error
from mallocgame.problem.suggest import did_you_mean

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


_ENTRIES: dict[tuple[str, ...], dict[str, SolverEntry]] = {}
_OWN: dict[tuple[str, ...], dict[str, SolverEntry]] = {}
OWN_DISTRIBUTION = "mallocgame"


def _own_entries() -> dict[str, SolverEntry]:
    """The built-in solvers: the entry points of the mallocgame distribution alone (one distribution's
    metadata is read, not every installed one's), once per value of ``sys.path``; empty when it is not
    installed."""
    key = tuple(sys.path)
    if key not in _OWN:
        try:
            points = distribution(OWN_DISTRIBUTION).entry_points.select(group=GROUP)
        except PackageNotFoundError:
            points = ()
        _OWN[key] = {ep.name: SolverEntry(ep.name, ep.value, OWN_DISTRIBUTION) for ep in points}
    return _OWN[key]


def solver_entries() -> dict[str, SolverEntry]:
    """Every registered solver by name: the built-ins, then the plugins (the first registration of a
    name wins, and a plugin never takes a built-in's name).

    Read from the distributions on ``sys.path`` once per value of ``sys.path``: a scan of every
    installed distribution's metadata costs 0.05-0.15 s (more on a busy machine), and a portfolio
    asks for its members' entries several times within limits of 0.2 s. A plugin put on the path
    (``sys.path`` changed) is seen at the next call.
    """
    key = tuple(sys.path)
    if key not in _ENTRIES:
        found: dict[str, SolverEntry] = dict(_own_entries())
        for ep in entry_points(group=GROUP):
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else "?"
            found.setdefault(ep.name, SolverEntry(ep.name, ep.value, dist_name))
        _ENTRIES[key] = dict(sorted(found.items()))
    return dict(_ENTRIES[key])


def solver_entry(name: str) -> SolverEntry | None:
    """The solver registered as ``name``, or ``None``: a built-in is found without the scan of every
    installed distribution that `solver_entries` makes (a plugin's name still needs it)."""
    own = _own_entries()
    return own[name] if name in own else solver_entries().get(name)


def describe(entry: SolverEntry) -> str:
    """First line of the solver module's docstring, read from source without importing it."""
    parsed = _parse(entry.module)
    if isinstance(parsed, str):
        return parsed
    doc = ast.get_docstring(parsed[0])
    return doc.strip().splitlines()[0] if doc else "(no description)"


def load_solver(name: str) -> Any:
    """Import and instantiate the solver registered as ``name``."""
    entry = solver_entry(name)
    if entry is None:
        known = ", ".join(solver_entries()) or "none"
        raise SolverLoadError(f"unknown solver {name!r} (registered: {known}){did_you_mean(name, solver_entries())}")
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
    broken = contract_error(solver)
    if broken:
        raise SolverLoadError(f"solver {name!r} from {entry.distribution} ({entry.target}): {broken}")
    return solver


def solver_modes(entry: SolverEntry) -> tuple[str, ...]:
    """The modes a solver supports, read from its class's ``modes = frozenset({...})`` in source
    (so listing imports nothing), following its bases through ``from X import Y`` (a class that
    inherits ``modes``); imports the solver only when the source does not say."""
    module, _, attr = entry.target.partition(":")
    if attr and "." not in attr:
        modes = _class_modes(module, attr, 0)
        if modes is not None:
            return tuple(sorted(modes))
    try:
        return tuple(sorted(getattr(load_solver(entry.name), "modes", ("map", "pack"))))
    except SolverLoadError:
        return ()


def implied_mode(names) -> str | None:
    """The mode of solvers that have one mode, the same (``msa``: prefetch; ``pack-search``: pack); ``None``
    when one of ``names`` has several (or none is registered). A command without ``--mode`` uses it:
    ``solve`` for its ``--solver``, ``compare`` for all its solvers (a solver with several modes keeps
    each input's own, and the others show n/a where they do not apply).

    Examples:
        >>> implied_mode(["msa"]), implied_mode(["pack-search"]), implied_mode(["pack-search", "cpsat"])
        ('prefetch', 'pack', None)
    """
    entries = solver_entries()
    if not names or any(name not in entries for name in names):
        return None
    modes = {solver_modes(entries[name]) for name in names}
    return modes.pop()[0] if len(modes) == 1 and len(next(iter(modes))) == 1 else None


_ALL_MODES = frozenset({"map", "pack"})
_PARSED: dict[str, tuple[ast.Module, bool] | str] = {}


def _parse(module: str) -> tuple[ast.Module, bool] | str:
    """``(tree, is_package)`` of a module's source, read once; else why it cannot be read (for :func:`describe`)."""
    if module not in _PARSED:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            _PARSED[module] = f"(unavailable: {exc})"
            return _PARSED[module]
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            _PARSED[module] = "(unavailable: module not found)" if spec is None else "(no description)"
            return _PARSED[module]
        try:
            with open(spec.origin, encoding="utf-8") as fh:
                _PARSED[module] = (ast.parse(fh.read()), spec.submodule_search_locations is not None)
        except (OSError, SyntaxError) as exc:
            _PARSED[module] = f"(unavailable: {exc.__class__.__name__})"
    return _PARSED[module]


def _class_modes(module: str, name: str, depth: int) -> frozenset[str] | None:
    """``modes`` of class ``name`` in ``module`` from source; ``None`` when the source does not say."""
    parsed = _parse(module) if depth < 8 else None
    if not isinstance(parsed, tuple):
        return None
    tree, is_package = parsed
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:  # imported into this module: follow the import
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        package = module if is_package else module.rpartition(".")[0]
                        try:
                            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                                if node.level else node.module
                        except (ImportError, ValueError):
                            return None
                        return _class_modes(source, alias.name, depth + 1) if source else None
        return None
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "modes" for t in stmt.targets):
            return _literal_modes(stmt.value)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "modes":
            return _literal_modes(stmt.value)
    bases = [b for b in cls.bases if not (isinstance(b, ast.Name) and b.id == "object")]
    if not bases:
        return _ALL_MODES  # no modes attribute anywhere: the runner's default
    for base in bases:
        if not isinstance(base, ast.Name):
            return None
        modes = _class_modes(module, base.id, depth + 1)
        if modes is not None:
            return modes
    return None


def _literal_modes(node: ast.expr | None) -> frozenset[str] | None:
    """``frozenset({"map"})``, ``{"map", "pack"}``, ``("pack",)``... as a frozenset; else ``None``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set") \
            and not node.keywords and len(node.args) <= 1:
        if not node.args:
            return frozenset()
        node = node.args[0]
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    if not isinstance(value, (set, frozenset, list, tuple)) or not all(isinstance(v, str) for v in value):
        return None
    return frozenset(value)
