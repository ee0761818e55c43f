"""mallocgame: decide where the buffers of a compiled ML program live, so that it runs fast.

The public API (docs/architecture.md, "The doors")::

    import mallocgame
    problem = mallocgame.load_problem("example:layered150")          # or a CSV / JSON workload
    result = mallocgame.solve(problem, "greedy-xla", time_limit=5)   # validated and scored
    verdict = mallocgame.validate(problem, result.solution)          # truthy when valid
    mallocgame.plot(problem, result, "layered150.png")               # the answer drawn, in any mode
    rows = mallocgame.compare(["quick"], ["greedy-xla", "cpsat"], time_limit=2)
    names = [s.name for s in mallocgame.list_solvers()]

Names are loaded on first use, so ``import mallocgame.problem.model`` stays cheap and free of cycles.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_PUBLIC = {
    "load_problem": "mallocgame.api", "solve": "mallocgame.api", "validate": "mallocgame.api",
    "compare": "mallocgame.api", "list_solvers": "mallocgame.api", "schedule": "mallocgame.api", "Result": "mallocgame.api",
    "Verdict": "mallocgame.api", "SolverInfo": "mallocgame.api", "plot": "mallocgame.api", "Report": "mallocgame.engine.report",
    "Problem": "mallocgame.problem.model", "Buffer": "mallocgame.problem.model", "Op": "mallocgame.problem.model",
    "Operand": "mallocgame.problem.model", "Solution": "mallocgame.problem.model", "Status": "mallocgame.problem.model",
    "InputError": "mallocgame.problem.model", "Solver": "mallocgame.engine.protocol",
    "SolveRequest": "mallocgame.engine.request", "Budget": "mallocgame.runtime.budget", "Options": "mallocgame.engine.request",
    "option": "mallocgame.engine.request",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:  # pragma: no cover
    from mallocgame.api import Result, SolverInfo, Verdict, compare, list_solvers, load_problem, plot, schedule, solve, validate  # noqa: F401
    from mallocgame.engine.protocol import Solver  # noqa: F401
    from mallocgame.engine.report import Report  # noqa: F401
    from mallocgame.engine.request import Budget, Options, SolveRequest, option  # noqa: F401
    from mallocgame.problem.model import Buffer, InputError, Op, Operand, Problem, Solution, Status  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mallocgame' has no attribute {name!r}")

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
