"""Pack-mode exact search (MiniMalloc-style canonical DFS + CP-SAT thread): fits a capacity or minimises the peak.

Wraps :func:`mallocgame.solvers.pack_search.search.pack` in the solver protocol (:mod:`mallocgame.engine.protocol`).
With a capacity (and ``minimize_peak=False``) it looks for a packing within it: status
OPTIMAL when found, INFEASIBLE when proven impossible, UNKNOWN when time ran out (then
every offset is ``None``). With ``problem.capacity is None`` or ``minimize_peak=True`` it
minimises the peak address: OPTIMAL when the peak equals a proven lower bound, FEASIBLE
otherwise; the objective is the peak and ``bound`` the proven lower bound. A ``hint``
(complete and valid) is a first incumbent; partial hints order the first search run.
Alignments from the problem are honoured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.session import held_baselines, no_worse_than_held
from mallocgame.problem.model import Solution, Status, offsets_array, offsets_tuple
from mallocgame.solvers.pack_search.search import pack

_STATUS = {
    "OPTIMAL": Status.OPTIMAL,
    "FEASIBLE": Status.FEASIBLE,
    "INFEASIBLE": Status.INFEASIBLE,
    "UNKNOWN": Status.UNKNOWN,
}


@dataclass(frozen=True)
class PackSearchOptions(Options):
    """The options of the ``pack-search`` solver."""

    minimize_peak: bool = option(False, "minimise the peak address, not only fit the capacity")


class PackSearch(Solver):
    name = "pack-search"
    modes = frozenset({"pack"})
    preload = ("ortools.sat.python.cp_model",)  # imported before the clock starts (mallocgame.engine.runner.preload)
    Options = PackSearchOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, hardware, seed, hint = request.problem, request.hardware, request.seed, request.hint
        minimize_peak = request.options.minimize_peak
        t0 = time.monotonic()
        # The baselines this search is held to, each to its end, before it spends its own time: never below them.
        held = held_baselines(request.facts, request.budget.seconds)
        a = problem.arrays
        capacity = None if (minimize_peak or problem.capacity is None) else int(problem.capacity)
        hint_arr = None
        base = None
        if hint is not None and len(hint.offsets) == problem.n:
            hint_arr = offsets_array(hint.offsets)
        elif problem.n:  # never above the pack baseline (best fit): it is the incumbent (and within a capacity, the answer)
            base = request.facts.baseline("best-fit", request.budget.part(0.2).deadline)
            hint_arr = np.asarray(base.offsets)
        # keep time back for building the answer (a tuple of n offsets)
        search = request.budget.search_part(n=problem.n, per_buffer=2e-6)
        res = pack(a.size, a.start, a.end, capacity=capacity, alignment=a.alignment,
                   budget=search, seed=int(seed), hint=hint_arr)
        status = _STATUS[res.status]
        complete = problem.n == 0 or bool((res.offsets >= 0).all())
        if status in (Status.OPTIMAL, Status.FEASIBLE) and complete:
            offsets = offsets_tuple(res.offsets)
            objective = float(res.peak) if res.peak is not None else None
        else:
            offsets = (None,) * problem.n
            objective = None
        stats = dict(res.stats)
        stats["lower_bound"] = res.lower_bound
        if base is not None:
            stats["best_fit_peak"] = int(base.objective)
            stats["best_fit_complete"] = bool(base.complete)
        if not stats.get("fallback"):
            stats.pop("fallback", None)  # only said when it happened (the run summary prints it)
        answer = Solution(
            offsets=offsets,
            status=status,
            mode="pack",
            objective=objective,
            bound=float(res.lower_bound),
            wall_time=time.monotonic() - t0,
            history=tuple((float(s), float(p)) for s, p in res.history),
            stats=stats,
            solver=self.name,
        )
        return no_worse_than_held(problem, hardware, answer, held, answer_from=self.name)


__all__ = ["PackSearch"]
