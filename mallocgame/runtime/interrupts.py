"""SIGINT and SIGTERM as an exception: commands stop cleanly, say what finished, and exit 128 + signal.

Python turns SIGINT into ``KeyboardInterrupt`` but lets SIGTERM end the process at once, with
no ``finally``: forked solver runs would be orphaned and finished work not reported. Inside
:class:`raise_on_signals` both raise :class:`Interrupted` (a ``KeyboardInterrupt``), so every
``finally`` runs (a pool kills its children, an atomic write removes its temp file), and the
command that catches it exits with :attr:`Interrupted.exit_code` (130 SIGINT, 143 SIGTERM).
Light on purpose (no numpy): the CLI's entry point installs it for every command.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (:func:`raise_on_signals`); ``signum`` says which, ``exit_code`` is 128 + it.

    A :class:`KeyboardInterrupt`, so every ``finally`` runs on the way out (a pool kills its
    children, an atomic write removes its temp file). ``partial`` carries what finished, for
    callers that have something to report (``compare``: the finished rows).
    """

    def __init__(self, signum: int, partial: Any = None):
        super().__init__(signum)
        self.signum = signum
        self.partial = partial

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


def interrupted(exc: BaseException) -> Interrupted:
    """An :class:`Interrupted` for any ``KeyboardInterrupt`` (a plain one is SIGINT)."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


class raise_on_signals:
    """``with raise_on_signals():`` SIGINT and SIGTERM raise :class:`Interrupted` in the main thread.

    Without it SIGTERM ends Python at once: no ``finally``, so forked solver runs would be
    orphaned and a run's finished rows not reported. The old handlers come back on exit.
    """

    def __enter__(self) -> "raise_on_signals":
        def handler(signum, frame):
            raise Interrupted(signum)

        self._old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


class defer_signals:
    """``with defer_signals():`` SIGINT and SIGTERM wait until the block ends, then act as before.

    For writes a signal must not cut in half: ``torch.save`` interrupted mid-record has its zip
    writer's ``__exit__`` raise a ``RuntimeError`` ("unexpected pos ...") over the
    :class:`Interrupted`, which then exits 1 instead of 143. A
    signal that arrives inside is re-delivered to the process on exit, so whatever handler was
    in place (:class:`raise_on_signals`, the default) sees it right after the write. Outside the
    main thread it does nothing.
    """

    def __enter__(self) -> "defer_signals":
        self._pending: list[int] = []
        self._old: dict = {}
        if threading.current_thread() is not threading.main_thread():
            return self

        def hold(signum, frame):
            self._pending.append(signum)

        self._old = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        for signum in dict.fromkeys(self._pending):  # once each, in arrival order
            os.kill(os.getpid(), signum)


def ignore_signals() -> None:
    """SIGINT and SIGTERM ignored from here on (while the last rows of an interrupted run are written)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


def child_signals() -> None:
    """A forked run's signals as Python's defaults: the parent's handlers would report its interrupt twice."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
