"""The solver protocol every built-in and plugin solver follows (docs/architecture.md, "Solvers").

A solver is a subclass of `Solver` with a ``name``, the ``modes`` it supports, its ``Options`` (a frozen
dataclass of `mallocgame.engine.request.option` fields: type, default, range and a one-line doc each) and a
``solve`` method:

    solve(self, request: SolveRequest) -> Solution

It is registered under the entry-point group ``mallocgame.solvers`` and instantiated with no arguments. The
[`SolveRequest`][mallocgame.engine.request.SolveRequest] carries the problem (``request.problem.mode`` is ``"map"``,
``"pack"`` or ``"prefetch"``, where the answer is fast intervals, docs/prefetch.md; ``problem.capacity`` is the
fast-memory size, ``None`` in pack mode meaning "minimise the peak"), the hardware, the
[`Budget`][mallocgame.runtime.budget.Budget] of time, the seed, the hint (a
[`Solution`][mallocgame.problem.model.Solution] already checked to belong to the problem, or ``None``), the solver's
options (an instance of its ``Options``, every value checked) and the facts (the solve session:
evaluators, overlap index, bounds, the mode's baselines, built once). The command line's
``--solver-option KEY=VALUE``, the API's keywords and ``mallocgame solvers NAME`` all read ``Options``.

Solvers must end within the budget (``request.budget.search_part(n=...).deadline`` is the instant to stop searching),
take all randomness from ``request.seed``, and never print. A solver may name heavy modules it imports in a
class attribute ``preload`` (a tuple of module names): the runner imports them before its clock starts. The
runner (`mallocgame.engine.runner`) validates and scores whatever they return. A solver should send each better answer
as it finds it (`mallocgame.runtime.incumbents.offer`): one still running `LIMIT_GRACE` seconds after its time limit is
stopped, and the best answer it sent is reported.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar, Mapping, Sequence

from mallocgame.engine.request import Options, SolveRequest, check_options_class
from mallocgame.problem.model import InputError, Problem, Solution
from mallocgame.runtime.budget import Budget

CONTRACT = "solve(self, request: mallocgame.SolveRequest) -> mallocgame.Solution"


class Solver:
    """Base class for solvers; subclasses set ``name``/``modes``, declare ``Options`` and implement ``solve``."""

    name: ClassVar[str] = ""
    modes: ClassVar[frozenset[str]] = frozenset({"map", "pack"})
    Options: ClassVar[type[Options]] = Options

    def solve(self, request: SolveRequest) -> Solution:
        raise NotImplementedError

    @classmethod
    def options(cls, raw: Mapping[str, Any] | None = None) -> Options:
        """This solver's options from ``{name: value}``; `InputError` (one line) for an unknown name or a
        bad value."""
        return cls.Options.parse(dict(raw or {}), owner=cls.name or cls.__name__)

    @classmethod
    def request(cls, problem: Problem, hardware: Any = None, *, time_limit: float, seed: int = 0,
                hint: Solution | None = None, **options: Any) -> SolveRequest:
        """A request to this solver whose budget starts now, ``options`` checked by its ``Options``.

        Examples:
            >>> from mallocgame.inputs.load import load_problem
            >>> from mallocgame.solvers.greedy_xla import GreedyXLA
            >>> p = load_problem("example:layered150")
            >>> GreedyXLA().solve(GreedyXLA.request(p, time_limit=1.0)).mode
            'map'
        """
        return SolveRequest(problem, problem.hardware if hardware is None else hardware, Budget.start(time_limit),
                            seed, hint, cls.options(options))


def options_of(solver: Any) -> type[Options]:
    """The ``Options`` class of ``solver`` (an instance or a class)."""
    return getattr(solver, "Options", Options)


def contract_error(solver: Any) -> str | None:
    """Why ``solver`` does not follow the contract (a `Solver` whose ``solve`` takes one request and whose
    ``Options`` is a frozen dataclass of documented `option` fields), else ``None``."""
    if not isinstance(solver, Solver):
        return f"{type(solver).__name__} is not a subclass of mallocgame.Solver (the contract: {CONTRACT})"
    try:
        params = list(inspect.signature(solver.solve).parameters.values())
    except (TypeError, ValueError):
        return f"solve has no inspectable signature (the contract: {CONTRACT})"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required_rest = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(positional) != 1 or required_rest or any(p.default is not p.empty for p in positional[:1]):
        shown = ", ".join(p.name for p in params)
        return f"solve({shown}) does not take one request (the contract: {CONTRACT})"
    return check_options_class(options_of(solver))


# Seconds past its ``time_limit`` a solver may run before the parent stops its child and reports the best
# answer the solver sent (mallocgame.runtime.incumbents), validated, as FEASIBLE with the note "stopped at the limit":
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


def bad_seed(seed: Any) -> str | None:
    """Why ``seed`` is not a seed (an integer from 0 to 2**32-1), else ``None``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        return f"must be an integer from 0 to {MAX_SEED}, got {seed!r}"
    return None


# ---------------------------------------------------------------------------- options from the command line

def split_option(item: str) -> tuple[str | None, str]:
    """``("mcts", "k=1")`` for ``mcts:k=1``; ``(None, "k=1")`` without a ``SOLVER:`` prefix."""
    target, sep, rest = item.partition(":")
    if not sep or "=" in target:
        return None, item
    return target, rest


def option_kinds(solvers: Sequence[Any]) -> dict[str, str]:
    """The kind of each option of the loaded ``solvers`` (``{"order": "text", "windows": "int", ...}``)."""
    return {info.name: info.kind for solver in solvers for info in options_of(solver).described()}


def parse_solver_options(items: Sequence[str], solvers: Sequence[str],
                         kinds: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """``KEY=VALUE`` (every solver) or ``SOLVER:KEY=VALUE`` (one solver) -> options per solver.

    A value is kept as text where ``kinds`` (`option_kinds`) says the option is text or solver names;
    otherwise it is read as int, float, true/false, else kept as text. A solver receives only
    the options its ``Options`` has ([`Options.taken`][mallocgame.engine.request.Options.taken]).
    """
    kinds = kinds or {}
    per: dict[str, dict[str, Any]] = {s: {} for s in solvers}
    for item in items:
        target, rest = split_option(item)
        key, eq, raw = rest.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key.isidentifier():
            raise InputError(f"--solver-option: expected KEY=VALUE or SOLVER:KEY=VALUE, got {item!r}")
        if target is not None and target not in per:
            raise InputError(f"--solver-option {item!r}: solver {target!r} is not in --solvers")
        value = raw.strip() if kinds.get(key) in ("text", "names") else _parse_value(raw.strip())
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
