"""The CLI's exit codes, its one-line error and the instant its command started, apart from
:mod:`mallocgame.cli.common` so that the group (:mod:`mallocgame.cli.main`) can use them without importing what the
commands need."""

from __future__ import annotations

import sys
import time

import click

from mallocgame.runtime.budget import process_started

_started: float | None = None  # set by the group for each command it runs (`command_starts`)

EXIT_OK, EXIT_NO_SOLUTION, EXIT_BAD_INPUT = 0, 1, 2


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """One ``error:`` line on stderr, then exit (2 = bad input or usage)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def command_starts(own_process: bool) -> None:
    """A command starts now: run as its process (``own_process``: the console script, ``python -m``) it counts from
    the process's start (:func:`mallocgame.runtime.budget.process_started`: the interpreter and every import
    included), called in a running process (click's test runner) from now."""
    global _started
    _started = process_started() if own_process else time.monotonic()


def command_started() -> float:
    """The monotonic instant the running command started (`command_starts`; now when no group ran it)."""
    return time.monotonic() if _started is None else _started
