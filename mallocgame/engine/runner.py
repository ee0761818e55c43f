"""Run a solver: load it, import its heavy modules before it solves, solve, validate and score.

:func:`run_solver` is the one call that runs a solver in this process; its answer is validated and
scored (:func:`mallocgame.engine.report.score`), so whatever a solver claims, the report's ``valid``,
``objective``, ``peak`` and ``estimated_time`` come from the validator and the evaluators.
:func:`problem_bound` is the bound a report is scored against, built beside it.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from mallocgame.bounds.bounds import Bound
from mallocgame.engine.protocol import options_of
from mallocgame.engine.registry import load_solver
from mallocgame.engine.report import Report, score
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import Session, session_for
from mallocgame.problem.model import Problem, Solution
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import stdout_to_stderr


class UnsupportedMode(ValueError):
    """The solver asked for does not handle the problem's mode."""


def problem_bound(problem: Problem, hardware, *, tighten: float = 0.0) -> Bound:
    """The tightest bound known for the problem without waiting (:meth:`mallocgame.engine.session.Session.bound`:
    the instant bound or the cached one); ``tighten`` > 0 seconds compute the expensive bound too, once per
    problem (it is kept in the bound cache, :mod:`mallocgame.bounds.bound_cache`)."""
    with stdout_to_stderr():  # HiGHS may print; stdout may be a --json document
        return session_for(problem, hardware).bound(tighten=tighten)


def shared_caches(problem: Problem, hardware) -> None:
    """Build what every run of ``problem`` reads (arrays, overlap index, evaluator) once, here.

    Before a fork (``solve``'s :class:`~mallocgame.runtime.forking.ChildCall`) this is done once for both sides: the child
    solves and the parent computes the bound with the same evaluator, instead of each building
    its own from the problem's objects (on 100k buffers that doubled work and copy-on-write faults).
    """
    session_for(problem, hardware).warm()


def preload(solver: Any) -> None:
    """Import the heavy modules a solver declares (``preload = ("ortools.sat.python.cp_model",)``) before it solves
    (OR-Tools' first import takes 0.3-0.8 s): inside a budget handed down (a command's, whose limit counts every
    import: :func:`mallocgame.engine.solving.command_budget`), else before a ``time_limit`` budget starts."""
    for module in getattr(solver, "preload", ()) or ():
        try:
            importlib.import_module(module)
        except ImportError:  # the solver says what is missing when it runs
            pass


def run_solver(name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
               time_limit: float | None = None, hint: Solution | None = None, options: dict[str, Any] | None = None,
               bound: Bound | None = None, facts: Session | None = None) -> Report:
    """Load solver ``name``, solve, validate and score. Raises ``SolverLoadError`` for a bad name.

    ``budget``: the solver's time, a child budget its caller handed down (`Budget.share`); a door gives
    ``time_limit`` seconds instead, a budget starting once the solver's heavy modules are imported.
    ``facts``: the problem's derived facts the caller holds (`mallocgame.engine.session.Session`), handed on in the request
    (by default this process's of the problem). ``options``: ``{name: value}``; the solver receives those its
    ``Options`` has (options given to every solver of a run, such as ``workers``, reach only those that take them),
    each value checked."""
    if (budget is None) == (time_limit is None):
        raise TypeError("run_solver takes a budget or a time_limit, one of them")
    solver = load_solver(name)
    modes = getattr(solver, "modes", frozenset({"map", "pack"}))
    if problem.mode not in modes:
        raise UnsupportedMode(f"solver {name!r} does not support {problem.mode} mode (supports: {', '.join(sorted(modes))})")
    typed = options_of(solver).taken(dict(options or {}))
    preload(solver)
    request = SolveRequest(problem, hardware, Budget.start(time_limit) if budget is None else budget, seed, hint,
                           typed, facts)
    solution = solver.solve(request)
    seconds = time.monotonic() - request.budget.started
    return score(problem, hardware, solution, seconds=seconds, bound=bound, solver_name=name)
