"""Schedule and placement together (``solve --reschedule``): alternate them while the time lasts.

Round 0 places the original order (the baseline, so the answer is never worse than not
re-scheduling); each later round re-schedules (:func:`mallocgame.algorithms.scheduling.schedule`, objective
``peak`` in pack mode and ``time`` in map and prefetch modes, starting from the best order so
far, seed ``seed + round``) and places the new order with the solver, warm-started by the best
placement so far adapted to the new live ranges (:func:`adapt_placement`: the old offsets that
still fit, the rest by best fit). The best valid (order, placement) pair wins, compared as
:func:`mallocgame.engine.report.better` does (value in map and prefetch modes, peak in pack mode);
every answer is validated against its own re-scheduled problem by the runner.

:func:`reschedule_beside_limit` (what ``solve --reschedule`` runs) keeps the limit as
:func:`mallocgame.engine.solving.solve_beside_bound` does: the rounds run in a forked child that sends each better
answer with its op order (:func:`mallocgame.runtime.incumbents.answering`); a child still running at the limit plus
:data:`mallocgame.engine.protocol.LIMIT_GRACE` is stopped and the best (order, answer) it sent is reported, validated
against its own order, FEASIBLE, "stopped at the limit".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame.algorithms.placement import greedy_place, xla_order
from mallocgame.algorithms.scheduling import reorder, schedule
from mallocgame.engine.report import Report, stopped_at_limit, with_bound
from mallocgame.engine.runner import problem_bound, shared_caches
from mallocgame.engine.solving import better, child_limits, command_budget, solve_with_warm_start
from mallocgame.hardware.validator import validate
from mallocgame.problem.intervals import overlap_index
from mallocgame.problem.model import InputError, Problem, Solution, Status, offsets_tuple
from mallocgame.runtime import incumbents
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import ChildCall

ROUNDS = 3
SCHEDULE_SHARE = 0.3  # of a round's time, for the scheduler


@dataclass
class RescheduleResult:
    report: Report           # the best pair's placement report (validated on ``problem``)
    problem: Problem         # the best pair's re-ordered problem (prepared)
    order: list[int]         # its op order (indices of the input's ops)
    original: Report         # the original order's report (round 0)
    rounds: list[dict[str, Any]] = field(default_factory=list)


def adapt_placement(problem: Problem, offsets: tuple[int | None, ...]) -> Solution | None:
    """A valid answer of ``problem`` close to ``offsets`` (a placement of the same buffers under other
    live ranges): the old offsets that do not collide, kept in order of address, the rest placed by
    best fit (pack mode: every buffer; map mode: within the capacity). ``None`` if that fails."""
    if len(offsets) != problem.n:
        return None
    a = problem.arrays
    index = overlap_index(problem)
    out = np.full(problem.n, -1, np.int64)
    cap = problem.capacity if problem.mode != "pack" else None
    old = np.array([-1 if o is None else o for o in offsets], np.int64)
    for i in np.argsort(old, kind="stable").tolist():
        o = int(old[i])
        if o < 0 or (cap is not None and o + a.size[i] > cap):
            continue
        near = index.query(int(a.start[i]), int(a.end[i]))
        near = near[(out[near] >= 0) & (near != i)]
        if np.any((out[near] < o + a.size[i]) & (o < out[near] + a.size[near])):
            continue
        out[i] = o
    benefits = a.benefit if not np.isnan(a.benefit).any() else a.size.astype(float)
    out = greedy_place(problem, xla_order(problem, benefits), cap, offsets=out)
    answer = offsets_tuple(out)
    if validate(problem, answer) is not None:
        return None
    return Solution(offsets=answer, status=Status.FEASIBLE, mode=problem.mode, solver="previous-order")


def solve_with_reschedule(name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
                          time_limit: float | None = None, hint: Solution | None = None,
                          warm_start: str | None = None, options: dict[str, Any] | None = None,
                          rounds: int = ROUNDS) -> RescheduleResult:
    """Alternate re-scheduling and placement (module docstring) within ``budget`` (or ``time_limit`` seconds from
    now): each round a child budget of an equal share of the time left, of which the scheduler takes
    ``SCHEDULE_SHARE``.

    ``hint`` (an answer of the original order) warm-starts round 0.
    """
    if not problem.has_ops:  # before any solver runs
        raise InputError(f"{problem.source or problem.name}: --reschedule: nothing to schedule: the workload has no ops")
    if (budget is None) == (time_limit is None):
        raise TypeError("solve_with_reschedule takes a budget or a time_limit, one of them")
    budget = Budget.start(time_limit) if budget is None else budget
    objective = "peak" if problem.mode == "pack" else "time"
    n_ops = len(problem.ops)
    # Each order has its own bound; only the winner's is reported, so it alone is computed, at the end.
    original = solve_with_warm_start(name, problem, hardware, budget=budget.share(1 / max(rounds, 1)), seed=seed,
                                     hint=hint, warm_start=warm_start, options=options, compute_bound=False)
    _offer(original, problem, "round 0 (original order)")
    best = RescheduleResult(original, problem, list(range(n_ops)), original,
                            [{"round": 0, "order": "original", "valid": original.valid,
                              "objective": original.objective}])
    for r in range(1, rounds):
        if budget.left() <= 0.05:
            break
        scheduling = budget.share(SCHEDULE_SHARE / (rounds - r))
        sched = schedule(problem, objective=objective, hardware=hardware,
                         time_limit=max(scheduling.seconds, 0.01), seed=seed + r, start=best.order)
        reordered = reorder(problem, sched.order)
        incumbents.answering(reordered, sched.order)  # in a solving child: what the solver offers is of this order
        hint = None
        if best.report.valid and problem.mode != "prefetch":
            hint = adapt_placement(reordered, best.report.offsets)
        elif best.report.valid and sched.order == best.order:
            hint = Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, solver="previous-order",
                            intervals=tuple(best.report.intervals))
        report = solve_with_warm_start(name, reordered, hardware, budget=budget.share(1 / (rounds - r)),
                                       seed=seed + r, hint=hint, warm_start=warm_start, options=options,
                                       compute_bound=False)
        _offer(report, reordered, f"round {r} ({sched.scheduler} order)")
        best.rounds.append({"round": r, "order": sched.scheduler, "schedule_objective": objective,
                            "schedule_value": sched.value, "schedule_original": sched.original,
                            "valid": report.valid, "objective": report.objective, "hinted": hint is not None})
        if better(report, best.report):
            best.report, best.problem, best.order = report, reordered, sched.order
    best.report = with_bound(best.report, problem_bound(best.problem, hardware))
    return best


def _offer(report: Report, problem: Problem, source: str) -> None:
    """A round's validated answer to the parent (a solver need not offer its final answer itself)."""
    if report.valid and report.objective is not None:
        incumbents.offer(value=report.objective, source=source, problem=problem,
                         **({"intervals": report.intervals} if problem.mode == "prefetch" else
                            {"offsets": report.offsets}))


def reschedule_beside_limit(name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
                            hint: Solution | None = None, warm_start: str | None = None,
                            options: dict[str, Any] | None = None, budget: Budget | None = None) -> RescheduleResult:
    """:func:`solve_with_reschedule` in a forked child, the limit kept here (module docstring): what
    ``mallocgame solve --reschedule`` runs. ``budget``: the whole solve's time, as
    :func:`mallocgame.engine.solving.solve_beside_bound` takes it (by default ``time_limit`` seconds from now)."""
    solver_budget, stop_at = child_limits(command_budget(time_limit) if budget is None else budget, problem.n)
    # as in solve_beside_bound, the child imports its solvers (runner.preload, in each run) on this clock
    shared_caches(problem, hardware)
    run = ChildCall.start(solve_with_reschedule, (name, problem, hardware),
                          dict(budget=solver_budget, seed=seed, hint=hint, warm_start=warm_start, options=options),
                          channel=(problem, name))
    run.keep_limit(stop_at)
    try:
        try:
            return run.result()
        except TimeoutError:
            return _stopped(name, problem, hardware, run, time_limit=time_limit, hint=hint)
    except BaseException:
        run.cancel()
        raise


def _stopped(name: str, problem: Problem, hardware, run: ChildCall, *, time_limit: float,
             hint: Solution | None) -> RescheduleResult:
    """The result of a child stopped at the limit: the best answer it sent, validated against its own order (the
    original order's best, or the ``hint``, when that is better)."""
    common = {"solver_name": name, "seconds": run.stopped - run.started, "time_limit": time_limit,
              "improvements": tuple(run.improvements)}
    original = stopped_at_limit(problem, hardware, run.sent.own, hint=hint, **common)
    best, best_problem, order = original, problem, list(range(len(problem.ops)))
    sent = run.incumbent
    if sent is not None and sent.order is not None:
        reordered = reorder(problem, sent.order)
        report = stopped_at_limit(reordered, hardware, sent, **common)
        if better(report, original):
            best, best_problem, order = report, reordered, list(sent.order)
    rounds = [{"stopped_at_limit": best.stats["stopped_at_limit"], "order": "original" if best is original else
               "re-scheduled", "valid": best.valid, "objective": best.objective}]
    return RescheduleResult(with_bound(best, problem_bound(best_problem, hardware)), best_problem, order,
                            original, rounds)


__all__ = ["RescheduleResult", "adapt_placement", "reschedule_beside_limit", "solve_with_reschedule"]
