"""The solver protocol every built-in and plugin solver follows (docs/architecture.md, "Solvers").

A solver is a class with a ``name``, the ``modes`` it supports and a ``solve`` method::

    solve(problem, hardware, *, time_limit, seed, hint=None, **options) -> Solution

It is registered under the entry-point group ``mallocgame.solvers`` and instantiated with
no arguments. ``problem.mode`` is ``"map"`` or ``"pack"``; ``problem.capacity`` is the
fast-memory size (``None`` in pack mode means "minimise the peak"). ``hint`` is a
:class:`~mallocgame.model.Solution` already checked to belong to the problem. Extra keyword
options (``workers``, ``minimize_peak``, ``simulations``, ...) are passed only when the
solver's ``solve`` signature names them, so a solver declares what it understands simply
by naming it. Solvers must honour ``time_limit`` (seconds), take all randomness from
``seed``, and never print. The runner (:mod:`mallocgame.runner`) validates and scores whatever
they return.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from mallocgame.model import Problem, Solution


class Solver:
    """Base class for solvers; subclasses set ``name``/``modes`` and implement ``solve``."""

    name: ClassVar[str] = ""
    modes: ClassVar[frozenset[str]] = frozenset({"map", "pack"})

    def solve(self, problem: Problem, hardware: Any, *, time_limit: float, seed: int,
              hint: Solution | None = None, **options: Any) -> Solution:
        raise NotImplementedError


def accepted_options(solver: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that ``solver.solve`` names in its signature."""
    params = inspect.signature(solver.solve).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(options)
    return {k: v for k, v in options.items() if k in params}


STANDARD_PARAMETERS = frozenset({"self", "problem", "hardware", "time_limit", "seed", "hint"})


def solver_options(solver: Any) -> tuple[str, ...] | None:
    """The extra keyword options ``solver.solve`` names, sorted; ``None`` when it takes ``**options``."""
    params = inspect.signature(solver.solve).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return tuple(sorted(n for n, p in params.items()
                        if n not in STANDARD_PARAMETERS and p.kind is not inspect.Parameter.VAR_POSITIONAL))


def unknown_options(solver: Any, options: dict[str, Any]) -> str | None:
    """One line naming the options of ``options`` that ``solver`` does not take, else ``None``."""
    known = solver_options(solver)
    if known is None:
        return None
    bad = sorted(k for k in options if k not in known)
    if not bad:
        return None
    name = getattr(solver, "name", "") or type(solver).__name__
    takes = ", ".join(known) if known else "none"
    return f"solver {name!r} takes no option {', '.join(map(repr, bad))} (its options: {takes})"


MAX_SEED = 2**32 - 1  # every generator takes it (numpy, torch, CP-SAT after a modulo)
POSITIVE_INT_OPTIONS = ("workers", "simulations")  # options that only make sense as counts of at least 1
BOOL_OPTIONS = ("minimize_peak", "deterministic")  # options that are true or false


def bad_seed(seed: Any) -> str | None:
    """Why ``seed`` is not a seed (an integer from 0 to 2**32-1), else ``None``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        return f"must be an integer from 0 to {MAX_SEED}, got {seed!r}"
    return None


def bad_option_value(options: dict[str, Any]) -> tuple[str, str] | None:
    """``(option, reason)`` for a count option (``workers``, ``simulations``) below 1 or not an integer,
    or a switch (``minimize_peak``, ``deterministic``) that is not true or false."""
    for key in POSITIVE_INT_OPTIONS:
        value = options.get(key)
        if key in options and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return key, f"must be a positive integer, got {value!r}"
    for key in BOOL_OPTIONS:
        if key in options and not isinstance(options[key], bool):
            return key, f"must be true or false, got {options[key]!r}"
    return None


SAFETY = 0.05  # seconds every solver keeps back for reading its answer and building the Solution


def solver_deadline(t0: float, time_limit: float, n: int, *, extra: float = 0.0) -> float:
    """Monotonic time by which a solver stops searching, so that its answer is back within ``time_limit``.

    Keeps :data:`SAFETY` + ``extra`` seconds plus 20 µs per buffer for scoring and building the
    answer, but never less than half the limit for the search itself.
    """
    return t0 + max(time_limit - SAFETY - extra - 2e-5 * n, time_limit * 0.5)
