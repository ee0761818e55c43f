"""Which implementation of the hot loops runs: ``MALLOCGAME_ENGINE`` (read here and nowhere else).

``native`` (the default) runs the compiled modules; ``python`` runs the pure-Python code they are checked
against (the reference: both must give identical answers). Callers ask :func:`engine` when they build the
object that holds the loop (e.g. a game), so a test can switch engines with ``monkeypatch.setenv``.

Example:
    >>> engine() in ENGINES
    True
"""

from __future__ import annotations

import os

from mallocgame.problem.model import InputError

ENGINE_ENV = "MALLOCGAME_ENGINE"
ENGINES = ("native", "python")


def engine() -> str:
    """``"native"`` or ``"python"``: the value of ``MALLOCGAME_ENGINE`` (unset or empty: ``native``).

    Raises :class:`mallocgame.problem.model.InputError` (one line) on any other value.
    """
    value = os.environ.get(ENGINE_ENV, "").strip().lower() or "native"
    if value not in ENGINES:
        raise InputError(f"{ENGINE_ENV}={os.environ[ENGINE_ENV]!r}: unknown engine (known: {', '.join(ENGINES)})")
    return value
