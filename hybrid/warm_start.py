"""Combinations of solvers that the runner applies around any solver: warm start and fallback.

``solve_with_warm_start`` runs a first solver, gives its validated answer to the main
solver as a hint, and keeps the hint whenever the main answer is invalid or worse, so a
warm-started result is never worse than its hint (docs/architecture.md, "Solvers").
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from mallocgame.model import Problem, Solution, Status
from mallocgame.runner import Report, answer, problem_bound, run_solver, score


def better(a: Report, b: Report) -> bool:
    """Is ``a`` strictly better than ``b``? Valid beats invalid; then value (map) or peak (pack)."""
    if a.valid != b.valid:
        return a.valid
    if not a.valid:
        return False
    if a.mode in ("map", "prefetch"):  # a time saved: higher is better
        return a.objective > b.objective + 1e-12 * max(1.0, abs(b.objective))
    return a.objective < b.objective


def _warm_start_run(name: str, problem: Problem, hardware, *, time_limit: float, seed: int, hint, options, bound) -> Report:
    """Run the warm-start solver; in prefetch mode a map-only solver (greedy-xla, select-pack, muzero)
    solves the map problem and its answer is lifted (:func:`mallocgame.lift.lift_map_answer`)."""
    from mallocgame.registry import solver_entries, solver_modes

    modes = solver_modes(solver_entries()[name]) if problem.mode == "prefetch" else ()
    if problem.mode != "prefetch" or "prefetch" in modes or "map" not in modes:
        return run_solver(name, problem, hardware, time_limit=time_limit, seed=seed, hint=hint, options=options,
                          bound=bound)
    from mallocgame.lift import lift_map_answer

    mapped = run_solver(name, problem.replace(mode="map"), hardware, time_limit=time_limit, seed=seed,
                        options=options)
    if not mapped.valid:
        return mapped
    lifted = Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, solver=name,
                      intervals=tuple(lift_map_answer(problem, mapped.offsets)))
    return score(problem, hardware, lifted, seconds=mapped.seconds, bound=bound, solver_name=name)


def solve_with_warm_start(name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
                          hint: Solution | None = None, warm_start: str | None = None,
                          options: dict[str, Any] | None = None, compute_bound: bool = True) -> Report:
    """Run ``name`` (after ``warm_start``'s run, whose answer becomes the hint) and report the better answer.

    ``compute_bound=False`` leaves the bound and gap out (the caller computes the bound beside
    the run and adds it with :func:`mallocgame.runner.with_bound`).
    """
    t0 = time.monotonic()
    bound = problem_bound(problem, hardware) if compute_bound else None
    fallback: Report | None = None
    if hint is not None:
        fallback = score(problem, hardware, hint, seconds=0.0, bound=bound, solver_name="hint")
    if warm_start:
        first = _warm_start_run(warm_start, problem, hardware, time_limit=max(time_limit * 0.2, 1e-3), seed=seed,
                                hint=hint, options=options, bound=bound)
        if first.valid and (fallback is None or better(first, fallback)):
            fallback = first
            hint = answer(first, problem)
    remaining = max(time_limit - (time.monotonic() - t0), 1e-3)
    report = run_solver(name, problem, hardware, time_limit=remaining, seed=seed, hint=hint,
                        options=options, bound=bound)
    if fallback is not None and better(fallback, report):
        stats = dict(report.stats) | {"fallback": f"kept the hint from {fallback.solver}",
                                      "main_status": report.status}
        return dataclasses.replace(fallback, solver=name, seconds=report.seconds + fallback.seconds, stats=stats)
    if warm_start and fallback is not None:
        return dataclasses.replace(report, seconds=report.seconds + fallback.seconds,
                                   stats=dict(report.stats) | {"warm_start": warm_start})
    return report
