"""One call in a forked child that the parent can abandon: for native code that ignores the clock and signals.

HiGHS's presolve never looks at its time limit on some models and holds the GIL-free C++ stack
against SIGINT for minutes; a bound computed that way must not hold the command up.
:func:`call_forked` runs ``fn(*args)`` in a forked child and waits in Python (half-second polls),
so SIGINT/SIGTERM reach the parent at once; on any exit -- the answer, the timeout, an interrupt
-- the child is killed and reaped. The child's file descriptor 1 points at stderr: native code may
print, and stdout may carry a ``--json`` document. (The solvers' own children are
:class:`mallocgame.runner.ChildCall`, which also streams progress; this is the small version the
core's bounds use, since the core may not import the runner.)

Example:
    >>> call_forked(pow, 2, 10, timeout=30)
    1024
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any, Callable


def _child(conn, fn: Callable, args: tuple, kwargs: dict) -> None:
    try:
        os.dup2(2, 1)
        conn.send(("ok", fn(*args, **kwargs)))
    except BaseException as exc:  # noqa: BLE001  (any failure goes back to the parent as text)
        conn.send(("error", f"{exc.__class__.__name__}: {exc}"))
    finally:
        conn.close()


class ForkedCall:
    """``fn(*args, **kwargs)`` started at once in a forked child; :meth:`result` collects it."""

    def __init__(self, fn: Callable, *args: Any, **kwargs: Any):
        self.name = getattr(fn, "__name__", "the call")
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=False)
        self._proc.start()
        send.close()

    def result(self, timeout: float) -> Any:
        """The answer; ``None`` when none came within ``timeout`` seconds (or the child died); RuntimeError
        (with the child's exception as text) when it raised. The child is gone afterwards either way."""
        until = time.monotonic() + timeout
        try:
            while not self._recv.poll(max(min(0.5, until - time.monotonic()), 0)):
                if time.monotonic() >= until or not self._proc.is_alive():
                    if self._recv.poll():
                        break
                    return None
            try:
                kind, payload = self._recv.recv()
            except (EOFError, OSError):
                return None
            if kind != "ok":
                raise RuntimeError(f"{self.name} failed in its child: {payload}")
            return payload
        finally:
            self.cancel()

    def cancel(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(5)
        self._recv.close()


def call_forked(fn: Callable, *args: Any, timeout: float, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a forked child; ``None`` when it has not answered within ``timeout``
    seconds (or died); RuntimeError (with the child's exception as text) when it raised."""
    return ForkedCall(fn, *args, **kwargs).result(timeout)
