"""The one verdict on an answer: valid or the first violation, placed, peak, estimated time (docs/architecture.md, "Scoring").

[`judge`][mallocgame.engine.verdict.judge] runs the [validator][mallocgame.hardware.validator] (the one judge of valid) and,
for a valid answer in map or prefetch mode, the evaluator of the (problem, hardware) (the one score). Every door
that states these facts reads them from here: the runner's `score`,
``mallocgame validate``, ``mallocgame plot`` and [`mallocgame.validate`][mallocgame.api.validate].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import Breakdown, PrefetchEvaluator
from mallocgame.hardware.validator import interval_peak, peak, validate, validate_intervals, validate_schedule
from mallocgame.problem.model import Problem
from mallocgame.problem.units import distinct, format_bytes

if TYPE_CHECKING:
    from mallocgame.hardware.prefetch_cost import Breakdown


@dataclass(frozen=True)
class Judgement:
    """What [`judge`][mallocgame.engine.verdict.judge] finds.

    ``placed`` and ``peak`` are those of the answer as given, valid or not (0 when it cannot be
    read: offsets of the wrong length, an interval of an unknown buffer). ``estimated_time`` and
    ``time_all_slow`` are set for a valid map or prefetch answer; ``breakdown`` (the copies and
    their stalls, `mallocgame.hardware.prefetch_cost.Breakdown`) for a valid prefetch answer.
    """

    violation: str | None
    placed: int
    peak: int
    estimated_time: float | None = None
    time_all_slow: float | None = None
    breakdown: Breakdown | None = None
    does_not_fit: bool = False  # pack mode: a placement of every buffer, valid but for its peak above the capacity

    @property
    def valid(self) -> bool:
        return self.violation is None

    @property
    def value(self) -> float | None:
        """Time saved against all-slow (map and prefetch modes), ``None`` when not scored."""
        return None if self.estimated_time is None else self.time_all_slow - self.estimated_time


def does_not_fit(peak_bytes: int, capacity: int) -> str:
    """The violation of a pack answer that places every buffer but peaks above the capacity.

    Examples:
        >>> does_not_fit(79, 64), does_not_fit(10105345, 10105344)
        ('does not fit: peak 79B > capacity 64B', 'does not fit: peak 9.637208MiB > capacity 9.637207MiB')
    """
    peak_text, capacity_text = distinct(format_bytes, [peak_bytes, capacity])
    return f"does not fit: peak {peak_text} > capacity {capacity_text}"


def _only_too_high(problem: Problem, offsets: Sequence, placed: int, top: int) -> bool:
    """Is ``offsets`` (pack mode) a placement of every buffer that is valid but for its peak above the capacity?"""
    capacity = problem.capacity
    if problem.mode != "pack" or capacity is None or placed != problem.n or top <= capacity:
        return False
    return validate(problem, offsets, capacity=top) is None


def judge(problem: Problem, hardware, answer: Sequence, *, violation: str | None = None,
          schedule: bool = False, copies: bool = True) -> Judgement:
    """Validate and score ``answer``: a sequence of offsets (``None`` = slow; map, pack) or of
    FastIntervals (prefetch mode).

    ``violation``: one found before (a proven-infeasible status, no answer at all); the answer is
    then not validated nor scored, only counted. ``schedule``: a re-scheduled workload (one with
    ``original_order``) has its op order checked too, and that violation comes first. ``copies=False``
    (prefetch mode): the same time, without the breakdown's object per copy (``breakdown`` is ``None``).
    """
    prefetch = problem.mode == "prefetch"
    if prefetch:
        if violation is None:
            violation = validate_intervals(problem, answer)
        n = problem.n
        readable = all(0 <= iv.buffer < n for iv in answer)
        placed = len({iv.buffer for iv in answer}) if readable else 0
        top = interval_peak(problem, answer) if readable else 0
    else:
        found = violation is None
        if violation is None:
            violation = validate(problem, answer)
        readable = len(answer) == problem.n
        placed = sum(o is not None for o in answer) if readable else 0
        top = peak(problem, answer) if readable else 0
        if found and violation is not None and readable and _only_too_high(problem, answer, placed, top):
            violation = does_not_fit(top, problem.capacity)
            return Judgement(violation, placed, top, does_not_fit=True)
    if schedule and problem.original_order:
        violation = validate_schedule(problem) or violation
    if violation is not None or problem.mode == "pack":
        return Judgement(violation, placed, top)
    if not prefetch:
        ev = Evaluator.of(problem, hardware)
        return Judgement(None, placed, top, ev.time(answer), ev.time_all_slow)

    if not problem.has_ops:  # an empty program: nothing to save
        return Judgement(None, placed, top, 0.0, 0.0, Breakdown(np.zeros(0), ()))
    pev = PrefetchEvaluator.of(problem, hardware)
    if not copies:
        return Judgement(None, placed, top, pev.breakdown_time(answer), pev.time_all_slow)
    breakdown = pev.breakdown(answer)
    return Judgement(None, placed, top, breakdown.time, pev.time_all_slow, breakdown)
