"""``mallocgame solvers [NAME]``: every registered solver with its modes and a one-line description; with a
NAME, that solver's options (name, type, default, values taken, one-line doc), read from its ``Options``.

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`); the list imports none of the
solvers, ``solvers NAME`` imports the one named.
"""

from __future__ import annotations

import click

from mallocgame.cli.common import fail
from mallocgame.engine.protocol import options_of
from mallocgame.engine.registry import SolverLoadError, describe, load_solver, solver_entries, solver_entry, solver_modes


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def option_lines(name: str) -> list[str]:
    """The lines of ``mallocgame solvers NAME``: the solver's modes and description, then one line per option."""
    try:
        solver = load_solver(name)
    except SolverLoadError as exc:
        fail(str(exc))
    entry = solver_entry(name)
    lines = [f"{name}  {','.join(solver_modes(entry)) or '?'}  {describe(entry)}", ""]
    infos = options_of(solver).described()
    if not infos:
        return lines + ["options: none"]
    rows = [(i.name, i.kind, _shown(i.default), i.allowed, i.doc) for i in infos]
    widths = [max(len(r[c]) for r in rows + [("option", "type", "default", "values", "")]) for c in range(4)]
    header = ("option", "type", "default", "values", "")
    for row in [header] + rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + ("  " + row[4] if row[4] else ""))
    return [line.rstrip() for line in lines]


@click.command()
@click.argument("name", required=False)
def solvers(name: str | None) -> None:
    """List every registered solver with its modes and a one-line description (imports none of them);
    with NAME, that solver's options (pass them as --solver-option KEY=VALUE)."""
    if name is not None:
        for line in option_lines(name):
            click.echo(line)
        return
    entries = solver_entries()
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        origin = "" if entry.distribution == "mallocgame" else f"  [plugin: {entry.distribution}]"
        shown = ",".join(solver_modes(entry)) or "?"
        click.echo(f"{name:<{width}}  {shown:<8}  {describe(entry)}{origin}")
