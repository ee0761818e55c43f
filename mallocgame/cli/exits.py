"""The CLI's exit codes and its one-line error, apart from :mod:`mallocgame.cli.common` so that the
group (:mod:`mallocgame.cli.main`) can use them without importing what the commands need."""

from __future__ import annotations

import sys

import click

EXIT_OK, EXIT_NO_SOLUTION, EXIT_BAD_INPUT = 0, 1, 2


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """One ``error:`` line on stderr, then exit (2 = bad input or usage)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
