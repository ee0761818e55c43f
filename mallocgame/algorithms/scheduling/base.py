"""What every scheduler shares: the dependency graph, re-ordering a problem, the objectives.

A schedule is a permutation ``order`` of the op indices of a problem (``order[k]`` = the op
run at step ``k``); it is valid when it is a topological order of
:meth:`mallocgame.problem.model.Problem.dependencies` (docs/architecture.md, "Schedules").

**Lifetimes under a new order** (:func:`reorder`, :class:`Lifetimes`): every buffer keeps its
relation to the ops that touch it. A buffer never written by an op and live from step 0 (a
parameter, a constant) stays live from 0; an output, or a parameter live to the end, stays
live to the end; otherwise a buffer starts ``slack_before`` steps before its first touch
(0 for imported programs; a generated weight's prefetch window) and ends ``slack_after``
steps after its last touch + 1, both as in the original order, clipped to ``[0, T]``.
Buffers no op touches keep their range.

**The touch model** (what the list and DP schedulers reason with): buffer ``b`` is live
during step ``t`` when (pinned at the start, or touched at or before ``t``) and (pinned at
the end, or touched at or after ``t``). With zero slacks it is exactly the re-ordered
problem's live bytes; the chosen order is always scored exactly (:class:`PeakObjective`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from mallocgame.algorithms.placement import greedy_place, xla_order
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate, validate_intervals
from mallocgame.problem.intervals import live_profile_of, max_live_of
from mallocgame.problem.model import Buffer, InputError, Problem

OBJECTIVES = ("peak", "time")


@dataclass(frozen=True)
class Graph:
    """The op dependency graph: ``preds[v]`` / ``succs[v]`` as lists of op indices."""

    n: int
    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, problem: Problem) -> "Graph":
        n = len(problem.ops)
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for u, v in problem.dependencies():
            preds[v].append(u)
            succs[u].append(v)
        return cls(n, tuple(map(tuple, preds)), tuple(map(tuple, succs)))

    def is_topological(self, order: Sequence[int]) -> bool:
        if sorted(order) != list(range(self.n)):
            return False
        pos = np.empty(self.n, np.int64)
        pos[np.asarray(order, np.int64)] = np.arange(self.n)
        return all(pos[u] < pos[v] for v in range(self.n) for u in self.preds[v])


class Lifetimes:
    """Buffer live ranges as a function of the op order (module docstring), vectorised."""

    def __init__(self, problem: Problem):
        self.problem = problem
        T = len(problem.ops)
        self.T = T
        tc = problem.touches
        n = problem.n
        a = problem.arrays
        counts = np.diff(tc.ptr)
        self.touched = counts > 0
        self.owner = np.repeat(np.arange(n), counts)  # buffer of each touch
        self.touch_ops = tc.ops
        self.seg = tc.ptr[:-1][self.touched]  # reduceat starts over touched buffers
        written = np.zeros(n, bool)
        np.logical_or.at(written, self.owner, tc.writes)
        first = np.full(n, -1, np.int64)
        last = np.full(n, -1, np.int64)
        if len(tc.ops):
            first[self.touched] = np.minimum.reduceat(tc.ops, self.seg)
            last[self.touched] = np.maximum.reduceat(tc.ops, self.seg)
        kinds = np.array([b.kind for b in problem.buffers]) if n else np.array([], str)
        param = ~written
        self.pin_start = self.touched & (a.start == 0) & param
        self.pin_end = self.touched & (a.end == T) & ((kinds == "output") | (param & (a.start == 0)))
        self.slack_before = np.where(self.touched, np.maximum(first - a.start, 0), 0)
        self.slack_after = np.where(self.touched, np.maximum(a.end - (last + 1), 0), 0)
        self.size = a.size
        self.start0, self.end0 = a.start, a.end

    def ranges(self, order: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)`` int64 ``[n]`` of every buffer when the ops run in ``order``."""
        pos = np.empty(self.T, np.int64)
        pos[np.asarray(order, np.int64)] = np.arange(self.T)
        start, end = self.start0.copy(), self.end0.copy()
        if len(self.touch_ops):
            p = pos[self.touch_ops]
            first = np.minimum.reduceat(p, self.seg)
            last = np.maximum.reduceat(p, self.seg)
            t = self.touched
            start[t] = np.where(self.pin_start[t], 0, np.maximum(first - self.slack_before[t], 0))
            end[t] = np.where(self.pin_end[t], self.T, np.minimum(last + 1 + self.slack_after[t], self.T))
        return start, end

    def peak(self, order: Sequence[int]) -> int:
        start, end = self.ranges(order)
        return max_live_of(self.size, start, end)

    def profile(self, order: Sequence[int]) -> np.ndarray:
        """Live bytes during each step ``[T]`` under ``order``."""
        start, end = self.ranges(order)
        times, live = live_profile_of(start, end, self.size)
        out = np.zeros(self.T, np.int64)
        if len(times):
            idx = np.searchsorted(times, np.arange(self.T), side="right") - 1
            out = np.where(idx >= 0, live[np.maximum(idx, 0)], 0)
        return out


def reorder(problem: Problem, order: Sequence[int]) -> Problem:
    """``problem`` with its ops run in ``order`` (op indices): same ops and ids, lifetimes recomputed.

    ``original_order`` records the op ids in the order before the first re-scheduling (an
    already re-scheduled problem keeps its own record). Raises :class:`InputError` when
    ``order`` is not a topological order of the problem's dependencies.
    """
    order = [int(t) for t in order]
    if not Graph.of(problem).is_topological(order):
        raise InputError(f"{problem.source or problem.name}: the order does not respect the op dependencies")
    start, end = Lifetimes(problem).ranges(order)
    buffers = tuple(Buffer(b.id, b.size, int(s), int(e), b.benefit, b.alignment, b.kind)
                    for b, s, e in zip(problem.buffers, start.tolist(), end.tolist()))
    original = problem.original_order or tuple(op.id for op in problem.ops)
    return problem.replace(buffers=buffers, ops=tuple(problem.ops[t] for t in order), original_order=original)


# ------------------------------------------------------------------------------ objectives

class PeakObjective:
    """Peak live bytes of the re-ordered problem (lower is better), exact."""

    name = "peak"

    def __init__(self, problem: Problem):
        self.lifetimes = Lifetimes(problem)

    def __call__(self, order: Sequence[int]) -> float:
        return float(self.lifetimes.peak(order))


class TimeObjective:
    """Estimated program time of a fast placement of the re-ordered problem (lower is better).

    The placement is XLA's greedy (``placement.xla_order`` + ``greedy_place``) within the
    problem's capacity; in prefetch mode it is lifted to intervals
    (``prefetch.lift_map_answer``) and scored by the prefetch evaluator. Every answer it scores
    is checked by the validator.
    """

    name = "time"

    def __init__(self, problem: Problem, hardware):
        if problem.mode not in ("map", "prefetch"):
            raise InputError(f"--objective time: needs map or prefetch mode, not {problem.mode}")
        if not problem.has_ops:
            raise InputError(f"{problem.source or problem.name}: --objective time needs a workload with ops")
        self.problem, self.hardware = problem, hardware
        self.lifetimes = Lifetimes(problem)

    def placement(self, reordered: Problem):
        """``(time, offsets, intervals)`` of the greedy placement of ``reordered``."""
        ev = Evaluator.of(reordered, self.hardware)
        offsets = greedy_place(reordered, xla_order(reordered, ev.benefits), reordered.capacity)
        violation = validate(reordered, offsets, mode="map")
        if violation:  # never expected: the greedy places within the capacity
            raise RuntimeError(f"greedy placement invalid: {violation}")
        if reordered.mode == "prefetch":
            intervals = lift_map_answer(reordered, offsets)
            violation = validate_intervals(reordered, intervals)
            if violation:
                raise RuntimeError(f"lifted placement invalid: {violation}")
            return PrefetchEvaluator.of(reordered, self.hardware).time(intervals), offsets, intervals
        return ev.time(offsets), offsets, None

    def __call__(self, order: Sequence[int]) -> float:
        start, end = self.lifetimes.ranges(order)
        p = self.problem
        buffers = tuple(Buffer(b.id, b.size, int(s), int(e), b.benefit, b.alignment, b.kind)
                        for b, s, e in zip(p.buffers, start.tolist(), end.tolist()))
        reordered = p.replace(buffers=buffers, ops=tuple(p.ops[t] for t in order))
        return float(self.placement(reordered)[0])


def make_objective(problem: Problem, objective: str, hardware=None) -> Callable[[Sequence[int]], float]:
    if objective == "peak":
        return PeakObjective(problem)
    if objective == "time":
        return TimeObjective(problem, hardware)
    raise InputError(f"--objective: must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


# ------------------------------------------------------------------------------ schedulers

@dataclass
class Context:
    """What a scheduler gets: the problem, its graph, the objective, a deadline and the best so far."""

    problem: Problem
    graph: Graph
    objective: Callable[[Sequence[int]], float]
    deadline: float
    seed: int = 0
    best_order: list[int] = field(default_factory=list)
    best_value: float = float("inf")
    history: list[tuple[float, float, str]] = field(default_factory=list)  # (seconds, value, scheduler)
    t0: float = field(default_factory=time.monotonic)

    def offer(self, order: Sequence[int], who: str, value: float | None = None) -> float:
        """Score ``order`` (unless its ``value`` is given); keep it when it beats the best. Returns its value."""
        value = self.objective(order) if value is None else value
        if value < self.best_value:
            self.best_value, self.best_order = value, list(order)
            self.history.append((time.monotonic() - self.t0, value, who))
        return value

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


class Scheduler:
    """A scheduler: ``run(ctx)`` offers orders to ``ctx`` (it never returns an invalid one)."""

    name = ""

    def run(self, ctx: Context) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError


class TouchModel:
    """Per-buffer facts of the touch model (module docstring) for the list and DP schedulers."""

    def __init__(self, problem: Problem):
        lt = Lifetimes(problem)
        self.size = lt.size.tolist()
        self.pin_start = lt.pin_start.tolist()
        self.pin_end = lt.pin_end.tolist()
        index = problem.index
        self.op_buffers: list[list[int]] = []
        for op in problem.ops:
            self.op_buffers.append(sorted({index[o.buffer] for o in op.operands}))
        self.touchers = [0] * problem.n
        for bufs in self.op_buffers:
            for b in bufs:
                self.touchers[b] += 1


__all__ = ["Context", "Graph", "Lifetimes", "OBJECTIVES", "PeakObjective", "Scheduler", "TimeObjective",
           "TouchModel", "make_objective", "reorder"]
