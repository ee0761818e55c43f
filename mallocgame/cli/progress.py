"""What a command shows on stderr while it runs: a status line on a terminal, or ``--log`` lines.

Modelled on OR-Tools' search log. :class:`StatusLine` is one line redrawn in place (by tqdm) with
what is running and the elapsed time, refreshed by a thread of its own; it is shown only when stderr
is a terminal, never on a pipe or with ``--quiet``. :class:`SolveProgress` is what ``solve`` shows:
with ``--log`` one line per better answer the solver sends (``#N TIME objective=... bound=...
gap=... source=...``, in the order found), else the status line with the incumbent, the bound and
the gap. Nothing here writes to stdout, so ``--json`` stays one JSON document.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import click
from tqdm import tqdm

from mallocgame.problem.units import distinct, format_bytes, format_percent, format_seconds

REFRESH = 0.25  # seconds between two redraws of the status line (its elapsed time moves on its own)

# Held while the status line is drawn: a fork (the solver's child, the bound's) waits for a redraw to end,
# so no child starts with stderr's lock taken by the drawing thread (which a child does not have).
_DRAWING = threading.Lock()
os.register_at_fork(before=_DRAWING.acquire, after_in_parent=_DRAWING.release,
                    after_in_child=_DRAWING.release)


def status_line_wanted(quiet: bool, log: bool = False) -> bool:
    """Is a status line to be shown: stderr a terminal, and neither ``--quiet`` nor ``--log``?"""
    try:
        return not quiet and not log and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class StatusLine:
    """One line on stderr, redrawn in place every :data:`REFRESH` seconds: ``text`` and the elapsed time."""

    def __init__(self, text: str):
        self.t0 = time.monotonic()
        self._bar = tqdm(total=None, bar_format="{desc}", desc=text, file=sys.stderr, leave=False,
                         dynamic_ncols=True)
        self._text = text
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mallocgame-status", daemon=True)
        self._thread.start()

    def set(self, text: str) -> None:
        """Show ``text`` (the elapsed time is added)."""
        self._text = text

    def _run(self) -> None:
        while not self._stop.wait(REFRESH):
            with _DRAWING:
                if self._stop.is_set():
                    return
                self._bar.set_description_str(f"{self._text} [{elapsed(time.monotonic() - self.t0)}]")

    def echo(self, text: str) -> None:
        """Print ``text`` on stdout above the status line (the line is cleared first and redrawn after)."""
        with _DRAWING:
            tqdm.write(text, file=sys.stdout)

    def close(self) -> None:
        """Erase the line (the command's own output follows)."""
        self._stop.set()
        self._thread.join()
        with _DRAWING:
            self._bar.close()

    def __enter__(self) -> "StatusLine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NoStatus:
    """The status line's stand-in where none is shown (a pipe, ``--quiet``)."""

    def set(self, text: str) -> None:
        pass

    def echo(self, text: str) -> None:
        """Print ``text`` on stdout."""
        click.echo(text)

    def close(self) -> None:
        pass

    def __enter__(self) -> "NoStatus":
        return self

    def __exit__(self, *exc) -> None:
        pass


def status(text: str, *, quiet: bool = False):
    """A :class:`StatusLine` showing ``text`` on a terminal, else a :class:`NoStatus`: ``with status(...):``."""
    return StatusLine(text) if status_line_wanted(quiet) else NoStatus()


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


class SolveProgress:
    """What ``solve`` shows while its solver runs: ``--log`` lines, or a status line on a terminal, or nothing.

    :meth:`improved` takes each :class:`~mallocgame.runtime.incumbents.Improvement` the solving child sends,
    :meth:`bound` the problem's bound once known (for the gap).
    """

    def __init__(self, solver: str, mode: str, time_limit: float, *, log: bool, quiet: bool):
        self.solver, self.mode, self.time_limit, self.log = solver, mode, time_limit, log and not quiet
        self.count = 0
        self.best: Any = None
        self.previous: float | None = None  # the value of the answer before the best
        self.bound_value: float | None = None
        self.line = StatusLine(self._status()) if status_line_wanted(quiet, log) else NoStatus()
        if self.log:
            click.echo(f"solving with {solver} ({mode} mode, time limit {time_limit:g} s): "
                       "#improvement time objective bound gap source", err=True)

    @property
    def shows(self) -> bool:
        """Does it show anything (``--log`` lines or a status line)? A solve whose progress shows nothing hands the
        solve path no callbacks."""
        return self.log or not isinstance(self.line, NoStatus)

    def bound(self, bound) -> None:
        self.bound_value = None if bound is None else float(bound.value)
        self.line.set(self._status())

    def improved(self, event) -> None:
        self.count += 1
        self.previous = None if self.best is None else self.best.value
        self.best = event
        if self.log:
            click.echo(f"#{self.count} {event.seconds:.2f}s {self._objective_bound_gap()} source={event.source}",
                       err=True)
        self.line.set(self._status())

    def _gap(self) -> float | None:
        b = self.bound_value
        if self.best is None or b is None or not b > 0:
            return None
        v = self.best.value
        return max(0.0, (b - v) / b) if self.mode != "pack" else (v - b) / b

    def _objective_bound_gap(self) -> str:
        """``objective=... bound=... gap=...`` in a person's units (`mallocgame.problem.units`): bytes in pack mode,
        else seconds; the two numbers never print alike when they differ."""
        fmt = format_bytes if self.mode == "pack" else format_seconds
        # the answer before it in the list too: two better answers in a row never print alike
        _, objective, bound = distinct(fmt, [self.previous, self.best.value, self.bound_value])
        gap = self._gap()
        return (f"objective={objective} bound={'-' if self.bound_value is None else bound} "
                f"gap={'-' if gap is None else format_percent(gap)}")

    def _status(self) -> str:
        head = f"{self.solver}: solving ({self.mode}, limit {self.time_limit:g}s)"
        if self.best is None:
            return f"{head} no answer yet"
        return f"{head} {self._objective_bound_gap()} source={self.best.source} #{self.count}"

    def close(self) -> None:
        self.line.close()
