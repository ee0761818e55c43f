"""``mallocgame solvers``: every registered solver with its modes and a one-line description.

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`); imports none of the solvers.
"""

from __future__ import annotations

import click

from mallocgame.registry import describe, solver_entries, solver_modes


@click.command()
def solvers() -> None:
    """List every registered solver with its modes and a one-line description (imports none of them)."""
    entries = solver_entries()
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        origin = "" if entry.distribution == "mallocgame" else f"  [plugin: {entry.distribution}]"
        shown = ",".join(solver_modes(entry)) or "?"
        click.echo(f"{name:<{width}}  {shown:<8}  {describe(entry)}{origin}")
