"""Memory-aware re-scheduling: re-order a workload's ops within their dependencies (docs/architecture.md, "Schedules").

The schedulers form a small registry (:data:`SCHEDULERS`, name -> ``module:class``), each in
its own module, loaded only when asked for:

* ``list`` (:mod:`.list`) -- memory-aware list scheduling, several priority rules;
* ``dp`` (:mod:`.dp`) -- Serenity-style dynamic programming over scheduled-op sets, exact on
  small graphs, a beam on larger ones;
* ``cpsat`` (:mod:`.cpsat`) -- CP-SAT on the order (objective ``peak``, half the time left);
* ``local`` (:mod:`.local`) -- local search on the order for the time that is left.

:func:`schedule` runs them in that order (``auto``) or the ones named, each offering orders to
one shared best, scored by the exact objective: ``peak`` (live bytes, pack mode's goal) or
``time`` (the estimated time of a greedy placement, map and prefetch modes). The original
order is always a candidate, so the answer is never worse than it. Deterministic for a seed.

Example:
    >>> from mallocgame.problem.model import Buffer, Op, Operand, Problem
    >>> ops = (Op("a", operands=(Operand("w", "read", 8), Operand("x", "write", 8))),
    ...        Op("b", operands=(Operand("w", "read", 8), Operand("y", "write", 8))),
    ...        Op("c", operands=(Operand("x", "read", 8), Operand("p", "write", 1))),
    ...        Op("d", operands=(Operand("y", "read", 8), Operand("q", "write", 1))))
    >>> bufs = (Buffer("w", 8, 0, 4, kind="input"), Buffer("x", 8, 0, 3), Buffer("y", 8, 1, 4),
    ...         Buffer("p", 1, 2, 4, kind="output"), Buffer("q", 1, 3, 4, kind="output"))
    >>> r = schedule(Problem("t", bufs, ops, mode="pack"), time_limit=1)
    >>> [op.id for op in r.problem.ops], r.original, r.value
    (['a', 'c', 'b', 'd'], 25.0, 18.0)
"""

from __future__ import annotations

import builtins
import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from mallocgame.algorithms.scheduling.base import OBJECTIVES, Context, Graph, make_objective, reorder
from mallocgame.problem.model import InputError, Problem

#: name -> "module:class" of every scheduler; ``auto`` runs them in this order.
SCHEDULERS = {
    "list": "mallocgame.algorithms.scheduling.list:ListScheduler",
    "dp": "mallocgame.algorithms.scheduling.dp:DPScheduler",
    "cpsat": "mallocgame.algorithms.scheduling.cpsat:CPSATOrder",
    "local": "mallocgame.algorithms.scheduling.local:LocalSearch",
}


def load_scheduler(name: str):
    if name not in SCHEDULERS:
        raise InputError(f"--scheduler: unknown scheduler {name!r} (one of auto, {', '.join(SCHEDULERS)})")
    module, attr = SCHEDULERS[name].split(":")
    return getattr(importlib.import_module(module), attr)()


@dataclass
class ScheduleResult:
    """The best order found: ``order`` (op indices of the input), the re-ordered ``problem``, values."""

    order: builtins.list[int]
    problem: Problem
    objective: str
    value: float       # the objective of the best order
    original: float    # the objective of the original order
    scheduler: str     # who found the best order ("original" when nothing beat it)
    wall_time: float
    history: builtins.list[tuple[float, float, str]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def improvement(self) -> float:
        """Fraction by which the objective fell: ``(original - value) / original``."""
        return (self.original - self.value) / self.original if self.original else 0.0


def default_objective(problem: Problem) -> str:
    return "peak" if problem.mode == "pack" or not problem.has_ops else "time"


def schedule(problem: Problem, *, objective: str | None = None, hardware=None, time_limit: float = 10.0,
             seed: int = 0, schedulers: Sequence[str] = ("auto",), start: Sequence[int] | None = None
             ) -> ScheduleResult:
    """Re-order ``problem``'s ops to minimise ``objective`` (``peak`` or ``time``; default by mode).

    ``hardware`` (a spec; default the problem's own) is needed for ``time``. ``start`` is an
    extra candidate order (op indices), e.g. the best of an earlier round. Raises
    :class:`InputError` on a problem without ops or a bad name.
    """
    t0 = time.monotonic()
    if not problem.has_ops:
        raise InputError(f"{problem.source or problem.name}: nothing to schedule: the workload has no ops")
    objective = objective or default_objective(problem)
    if objective not in OBJECTIVES:
        raise InputError(f"--objective: must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    # (``list`` is also the submodule mallocgame.algorithms.scheduling.list once loaded: builtins.list here)
    names = [*SCHEDULERS] if "auto" in schedulers or not schedulers else [*dict.fromkeys(schedulers)]
    runners = [load_scheduler(name) for name in names]
    fn = make_objective(problem, objective, hardware if hardware is not None else problem.hardware)
    graph = Graph.of(problem)
    ctx = Context(problem, graph, fn, deadline=t0 + time_limit, seed=seed, t0=t0)
    original = ctx.offer([*range(graph.n)], "original")
    if start is not None:
        start = builtins.list(start)
        if not graph.is_topological(start):
            raise InputError("schedule: the start order does not respect the op dependencies")
        ctx.offer(start, "start")
    stats: dict[str, Any] = {}
    for runner in runners:
        if ctx.time_left() <= 0 and runner.name != "list":
            stats[runner.name] = {"skipped": "no time left"}
            continue
        stats[runner.name] = runner.run(ctx)
    assert graph.is_topological(ctx.best_order), "a scheduler offered an invalid order"
    who = ctx.history[-1][2] if ctx.history else "original"
    return ScheduleResult(order=ctx.best_order, problem=reorder(problem, ctx.best_order), objective=objective,
                          value=ctx.best_value, original=original, scheduler=who,
                          wall_time=time.monotonic() - t0, history=ctx.history, stats=stats)


__all__ = ["SCHEDULERS", "ScheduleResult", "default_objective", "load_scheduler", "reorder", "schedule"]
