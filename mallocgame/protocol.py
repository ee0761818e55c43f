"""The solver protocol every built-in and plugin solver follows (docs/architecture.md, "Solvers").

A solver is a class with a ``name``, the ``modes`` it supports and a ``solve`` method:

    solve(problem, hardware, *, time_limit, seed, hint=None, **options) -> Solution

It is registered under the entry-point group ``mallocgame.solvers`` and instantiated with
no arguments. ``problem.mode`` is ``"map"``, ``"pack"`` or ``"prefetch"`` (where the answer is
fast intervals, docs/prefetch.md); ``problem.capacity`` is the fast-memory size (``None`` in pack
mode means "minimise the peak"). ``hint`` is a
[`Solution`][mallocgame.model.Solution] already checked to belong to the problem. Extra keyword
options (``workers``, ``minimize_peak``, ``simulations``, ...) are passed only when the
solver's ``solve`` signature names them, so a solver declares what it understands simply
by naming it. Solvers must honour ``time_limit`` (seconds), take all randomness from
``seed``, and never print. A solver may name heavy modules it imports in a class attribute
``preload`` (a tuple of module names): the runner imports them before its clock starts. The
runner (`mallocgame.runner`) validates and scores whatever they return. A solver should send
each better answer as it finds it (`mallocgame.incumbents.offer`): one still running
`LIMIT_GRACE` seconds after ``time_limit`` is stopped, and the best answer it sent is reported.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar, Sequence

from mallocgame.model import InputError, Problem, Solution


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


# Seconds past its ``time_limit`` a solver may run before the parent stops its child and reports the best
# answer the solver sent (mallocgame.incumbents), validated, as FEASIBLE with the note "stopped at the limit":
# a solver that never reads its clock still ends on time (``solve``, ``compare``, the API, a portfolio's members).
LIMIT_GRACE = 1.0

# The longest time limit taken (seconds, about 11.6 days): beyond it the OS's waits (poll() in
# milliseconds as a C int, timers) overflow; refused at the door (the CLI's SECONDS type, the API).
MAX_TIME_LIMIT = 1e6


def bad_time_limit(seconds: Any) -> str | None:
    """Why ``seconds`` is not a time limit (a finite number in (0, `MAX_TIME_LIMIT`]), else ``None``."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or not seconds > 0:
        return f"must be a positive number of seconds, got {seconds!r}"
    if seconds > MAX_TIME_LIMIT:
        return f"must be at most {MAX_TIME_LIMIT:g} seconds (about 11.6 days), got {seconds!r}"
    return None


MAX_SEED = 2**32 - 1  # every generator takes it (numpy, torch, CP-SAT after a modulo)
POSITIVE_INT_OPTIONS = ("workers", "simulations")  # options that only make sense as counts of at least 1
BOOL_OPTIONS = ("minimize_peak", "deterministic")  # options that are true or false


def bad_seed(seed: Any) -> str | None:
    """Why ``seed`` is not a seed (an integer from 0 to 2**32-1), else ``None``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        return f"must be an integer from 0 to {MAX_SEED}, got {seed!r}"
    return None


# The one declaration of the built-in solvers' option values, by option name: (kind, low, high).
# kind "int": an integer (not a bool) in [low, high]; "float": a finite number (int or float, not a
# bool) in [low, high]; "bool": true or false; "text": a string; "names": a comma-separated string
# or a list of strings. ``None`` is accepted where the solver's default is ``None`` ("its default").
# A solver's signature says which of these it takes; this table says what each value may be.
OPTION_RULES: dict[str, tuple[str, float | None, float | None]] = {
    "workers": ("int", 1, None), "simulations": ("int", 1, None), "windows": ("int", 1, 3),
    "k": ("int", 1, None), "max_retries": ("int", 1, None), "rollout_depth": ("int", 0, None),
    "minimize_peak": ("bool", None, None), "deterministic": ("bool", None, None),
    "exploration": ("float", 0.0, None), "c_scale": ("float", 0.0, None), "epsilon": ("float", 0.0, 1.0),
    "variant": ("text", None, None), "order": ("text", None, None), "rollout": ("text", None, None),
    "commit": ("text", None, None), "prior": ("text", None, None), "method": ("text", None, None),
    "model": ("text", None, None), "search_model": ("text", None, None), "checkpoint": ("text", None, None),
    "max_overlap": ("text", None, None), "solvers": ("names", None, None),
}
NONE_OK = frozenset({"simulations", "k", "rollout_depth", "exploration", "c_scale", "variant", "order", "commit",
                     "model", "search_model", "checkpoint", "solvers"})


def _range_text(low, high) -> str:
    return f">= {low}" if high is None else f"from {low} to {high}"


def bad_option_value(options: dict[str, Any]) -> tuple[str, str] | None:
    """``(option, reason)`` for the first value `OPTION_RULES` refuses (``workers=0``,
    ``exploration=nan``, ``rollout_depth=abc``, ``solvers=123``), else ``None``.

    Options the table does not name (a plugin's own) are left to their solver.
    """
    for key, value in options.items():
        rule = OPTION_RULES.get(key)
        if rule is None or (value is None and key in NONE_OK):
            continue
        kind, low, high = rule
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
                if low == 1 and high is None:
                    return key, f"must be a positive integer, got {value!r}"
                return key, f"must be an integer {_range_text(low, high)}, got {value!r}"
        elif kind == "float":
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            if not number or not math.isfinite(value) or value < low or (high is not None and value > high):
                return key, f"must be a finite number {_range_text(low, high)}, got {value!r}"
        elif kind == "bool":
            if not isinstance(value, bool):
                return key, f"must be true or false, got {value!r}"
        elif kind == "text":
            if not isinstance(value, str):
                return key, f"must be text, got {value!r}"
        elif kind == "names":
            ok = isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
            if not ok:
                return key, f"must be solver names separated by commas, got {value!r}"
    return None


# ---------------------------------------------------------------------------- options from the command line

def split_option(item: str) -> tuple[str | None, str]:
    """``("mcts", "k=1")`` for ``mcts:k=1``; ``(None, "k=1")`` without a ``SOLVER:`` prefix."""
    target, sep, rest = item.partition(":")
    if not sep or "=" in target:
        return None, item
    return target, rest


def parse_solver_options(items: Sequence[str], solvers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``KEY=VALUE`` (every solver) or ``SOLVER:KEY=VALUE`` (one solver) -> options per solver.

    Values are read as int, float, true/false, else kept as text. A solver receives only
    the options its ``solve`` names ([`accepted_options`][mallocgame.protocol.accepted_options]).
    """
    per: dict[str, dict[str, Any]] = {s: {} for s in solvers}
    for item in items:
        target, rest = split_option(item)
        key, eq, raw = rest.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key.isidentifier():
            raise InputError(f"--solver-option: expected KEY=VALUE or SOLVER:KEY=VALUE, got {item!r}")
        if target is not None and target not in per:
            raise InputError(f"--solver-option {item!r}: solver {target!r} is not in --solvers")
        value = _parse_value(raw.strip())
        for s in ([target] if target else solvers):
            per[s][key] = value
    return per


def _parse_value(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


SAFETY = 0.05  # seconds every solver keeps back for reading its answer and building the Solution


def solver_deadline(t0: float, time_limit: float, n: int, *, extra: float = 0.0,
                    per_buffer: float = 2e-5) -> float:
    """Monotonic time by which a solver stops searching, so that its answer is back within ``time_limit``.

    Keeps `SAFETY` + ``extra`` seconds plus ``per_buffer`` seconds per buffer (20 µs: a search's
    scoring and building the answer) for the end, but never less than half the limit for the search itself.
    """
    return t0 + max(time_limit - SAFETY - extra - per_buffer * n, time_limit * 0.5)
