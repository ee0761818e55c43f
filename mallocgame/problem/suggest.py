"""The ``did you mean 'NAME'?`` ending of a message about an unknown name (solver, suite, entry,
example, option, check, command).

Example:
    >>> did_you_mean("gredy-xla", ["best-fit", "greedy-xla", "msa"])
    "; did you mean 'greedy-xla'?"
    >>> did_you_mean("zzz", ["best-fit", "greedy-xla"])
    ''
"""

from __future__ import annotations

import difflib
from typing import Iterable


def close_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (:func:`difflib.get_close_matches`), or ``None`` when none is close."""
    found = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'NAME'?"`` to end a message about the unknown ``name``, or ``""`` when no known name is close."""
    close = close_name(name, known)
    return "" if close is None else f"; did you mean {close!r}?"


__all__ = ["close_name", "did_you_mean"]
