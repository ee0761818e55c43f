"""``mallocgame check-solver NAME``: run the conformance suite on one registered solver (plugins included).

One line per check (``ok NAME (0.3 s)`` or ``FAIL NAME: reason``) as it finishes, then a
summary line; ``--json`` prints one JSON document instead. Exit 0 when every check
passes, 1 when any fails, 2 (one line on stderr) for an unknown solver, a plugin that
fails to load, or bad options. Needs neither the source tree nor pytest: the suite is
:mod:`mallocgame.engine.conformance`, with generated problems.
"""

from __future__ import annotations

import json
import sys
import time

import click

from mallocgame.cli.common import EXIT_BAD_INPUT, EXIT_NO_SOLUTION, EXIT_OK, SECONDS, fail
from mallocgame.engine import conformance
from mallocgame.engine.registry import SolverLoadError
from mallocgame.problem.suggest import did_you_mean
from mallocgame.problem.units import format_seconds


@click.command("check-solver")
@click.argument("name", metavar="NAME", required=False)
@click.option("--time-limit", type=SECONDS, default=1.0, show_default=True, help="Seconds per solve.")
@click.option("--check", "checks", multiple=True, metavar="CHECK",
              help="Run only this check (repeatable; default: all, see --list).")
@click.option("--list", "list_checks", is_flag=True, help="List the checks and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
def check_solver(name: str | None, time_limit: float, checks: tuple[str, ...], list_checks: bool, as_json: bool) -> None:
    """Run the conformance checks on solver NAME (exit 0 all pass, 1 some fail, 2 unknown or broken)."""
    if list_checks:
        for check, func in conformance.CHECKS.items():
            doc = (func.__doc__ or "").strip()
            click.echo(f"{check:<14} {doc.splitlines()[0] if doc else ''}".rstrip())
        return
    if not name:
        fail("missing argument NAME: a registered solver (see `mallocgame solvers`)")
    if time_limit <= 0:
        fail(f"--time-limit: must be positive, got {time_limit}")
    unknown = [c for c in checks if c not in conformance.CHECKS]
    if unknown:
        fail(f"--check: unknown check {unknown[0]!r} (known: {', '.join(conformance.CHECKS)})"
             f"{did_you_mean(unknown[0], conformance.CHECKS)}")

    def show(result) -> None:
        if result.passed:
            click.echo(f"ok {result.name} ({format_seconds(result.seconds)})")
        else:
            click.echo(f"FAIL {result.name}: {result.message}")

    t0 = time.monotonic()
    try:
        results = conformance.check_solver(name, time_limit=time_limit, checks=checks or None,
                                           progress=None if as_json else show)
    except SolverLoadError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    seconds = time.monotonic() - t0
    failed = [r.name for r in results if not r.passed]
    if as_json:
        doc = {"solver": name, "passed": not failed, "time_limit": time_limit, "seconds": round(seconds, 3),
               "checks": [r.as_json() | {"seconds": round(r.seconds, 3)} for r in results]}
        click.echo(json.dumps(doc, indent=1))
    elif failed:
        click.echo(f"{name}: {len(failed)} of {len(results)} checks failed ({', '.join(failed)}) in "
                   f"{format_seconds(seconds)} (time limit {format_seconds(time_limit)})")
    else:
        click.echo(f"{name}: all {len(results)} checks passed in {format_seconds(seconds)} "
                   f"(time limit {format_seconds(time_limit)})")
    sys.exit(EXIT_NO_SOLUTION if failed else EXIT_OK)
