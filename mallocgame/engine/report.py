"""An answer judged and scored: the one verdict on an answer (`judge`: valid or the first violation, placed,
peak, estimated time), the solver's `Report`, its status at the bound's gap, and which is better
(docs/architecture.md, "Scoring").

`judge` runs the [validator][mallocgame.hardware.validator] (the one judge of valid) and, for a valid answer
in map or prefetch mode, the evaluator of the (problem, hardware) (the one score). Every door that states these
facts reads them from here: `score`, ``mallocgame validate``, ``mallocgame plot`` and
[`mallocgame.validate`][mallocgame.api.validate].

Data flows one way (problem -> solver -> validator and evaluator -> report), so whatever a solver
claims, a report's ``valid``, ``objective``, ``peak`` and ``estimated_time`` come from `judge`; the bound
and the gap come from the caller (`with_bound`). `better` is the one comparison of two
reports (on objectives: `mallocgame.problem.objective.better`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Sequence

import numpy as np

from mallocgame.bounds.bounds import Bound
from mallocgame.engine.protocol import LIMIT_GRACE
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import Breakdown, PrefetchEvaluator
from mallocgame.hardware.validator import (
    AnswerTuple,
    answer_tuple,
    count_placed,
    interval_columns,
    interval_peak,
    peak,
    validate,
    validate_intervals,
    validate_schedule,
)
from mallocgame.problem.model import Problem, Solution, Status, offsets_tuple
from mallocgame.problem.objective import better as better_value
from mallocgame.problem.units import SAME, distinct, format_bytes, format_number, format_percent, format_seconds
from mallocgame.runtime import incumbents


@dataclass(frozen=True)
class Judgement:
    """What [`judge`][mallocgame.engine.report.judge] finds.

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


def _placed_and_peak(problem: Problem, intervals: Sequence) -> tuple[int, int]:
    """A prefetch answer's buffers with a fast interval and its highest address, read from its columns (the ones
    the validator read); ``(0, 0)`` when an interval's buffer is not one of the problem's."""
    cols = interval_columns(intervals)
    if cols is None:  # a field that is no int64 (an invalid answer): read one by one
        n = problem.n
        if not all(0 <= iv.buffer < n for iv in intervals):
            return 0, 0
        return len({iv.buffer for iv in intervals}), interval_peak(problem, intervals)
    buf = cols[:, 0]
    if not len(buf):
        return 0, 0
    if buf.min() < 0 or buf.max() >= problem.n:
        return 0, 0
    has_fast = np.zeros(problem.n, bool)
    has_fast[buf] = True
    return int(np.count_nonzero(has_fast)), int((cols[:, 1] + problem.arrays.size[buf]).max())


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
    if isinstance(answer, (list, tuple)):
        answer = answer_tuple(answer)  # its columns read once, for the validator and the evaluator alike
    if prefetch:
        if violation is None:
            violation = validate_intervals(problem, answer)
        placed, top = _placed_and_peak(problem, answer)
    else:
        found = violation is None
        if violation is None:
            violation = validate(problem, answer)
        readable = len(answer) == problem.n
        placed = count_placed(answer) if readable else 0
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


@dataclass(frozen=True)
class Report:
    """One solver's validated, scored answer (the report JSON of ``mallocgame solve --json``).

    The fields are attributes (`report.speedup`); `report["speedup"]` reads the same field by its name
    (the JSON report's keys), and [`as_json`][mallocgame.engine.report.Report.as_json] gives them as a dict.

    Attributes:
        solver: The registered name of the solver that ran.
        mode: The problem's mode: `"map"`, `"pack"` or `"prefetch"`.
        status: `"OPTIMAL"`, `"FEASIBLE"`, `"INFEASIBLE"` or `"UNKNOWN"` (a valid answer is at least
            `"FEASIBLE"`, an invalid one never).
        valid: Whether the validator accepted the answer.
        objective: Seconds saved against all-slow (map and prefetch modes) or the peak address in
            bytes (pack mode); `None` without a valid answer.
        bound: An upper bound on the saving (map and prefetch modes) or a lower bound on the peak
            (pack mode).
        bound_kind: Which bound `bound` is (`"max-live"`, `"lp"`, `"mip"`, `"per-op"`, `"residency"`, ...).
        gap: `(bound - objective) / bound` (map and prefetch) or `(objective - bound) / bound` (pack).
        placed: Buffers in fast memory (map, prefetch) or placed (pack).
        total: Buffers in the problem.
        peak: The highest address in use, in bytes.
        seconds: Wall-clock seconds of the solve.
        estimated_time: The program's estimated run time in seconds with this answer (map and
            prefetch modes).
        time_all_slow: The program's estimated run time in seconds with every buffer in slow memory.
        speedup: `time_all_slow / estimated_time` (map and prefetch modes).
        violation: The first rule an invalid answer breaks (`None` when valid).
        history: The incumbents as `(seconds, objective)` pairs, for anytime curves.
        stats: The solver's own statistics (nodes, iterations, what it fell back to, ...).
        offsets: The validated offsets (map and pack modes; `None` is slow memory); empty when invalid.
        intervals: The validated fast intervals (prefetch mode); empty otherwise.
        bounds: Every bound computed for the problem, by kind (prefetch mode: per-op and residency).
    """

    solver: str
    mode: str
    status: str
    valid: bool
    objective: float | None
    bound: float | None
    bound_kind: str | None
    gap: float | None
    placed: int
    total: int
    peak: int
    seconds: float
    estimated_time: float | None
    time_all_slow: float | None
    speedup: float | None
    violation: str | None = None
    history: list[tuple[float, float]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    offsets: tuple[int | None, ...] = ()
    intervals: tuple = ()  # prefetch mode: the validated FastIntervals
    bounds: dict[str, float] = field(default_factory=dict)  # every bound computed, by kind (prefetch: per-op, residency)

    def __getitem__(self, name: str) -> Any:
        """The field ``name`` (a key of the JSON report), as ``report.name``."""
        if name not in self.__dataclass_fields__:
            raise KeyError(f"{name!r}: a Report has {', '.join(self.__dataclass_fields__)}")
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self.__dataclass_fields__

    def __reduce__(self):
        """Pickled with its intervals as int64 columns (a solving child's report goes to its parent by pickle; an
        object per interval cost a second each way at 200k intervals)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.intervals:
            cols = interval_columns(self.intervals)  # those the judge read, when score made the report
            values["intervals"] = incumbents.columns_of_intervals(self.intervals) if cols is None else \
                cols[:, [0, 1, 2, 3, 5, 4]]  # in the order columns_of_intervals gives
        return _unpickle_report, (values,)

    def as_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (the report of ``mallocgame solve --json``), without the offsets and intervals."""
        d = asdict(replace(self, offsets=(), intervals=()))  # not a deep copy of 100k offsets to drop
        d.pop("offsets")
        d.pop("intervals")
        d["history"] = [list(h) for h in self.history]
        return d

    def summary(self, *, has_ops: bool = True) -> str:
        """The one line ``solve`` prints, in units a person reads (:mod:`mallocgame.problem.units`): the objective
        and bound as times (map and prefetch modes; plain numbers for a map problem without ops,
        ``has_ops=False``) or bytes (pack mode), the peak in bytes, the solver's wall time.

        >>> r = Report("best-fit", "pack", "FEASIBLE", True, 80.0, 64.0, "max-live", 0.25, 40, 40, 80, 0.0123,
        ...            None, None, None)
        >>> r.summary()
        'best-fit: FEASIBLE objective=80B bound=64B (max-live) gap=25.00% placed=40/40 peak=80B wall=12.3ms'
        """
        pack = self.mode == "pack"
        if pack:
            obj, bound, peak_ = distinct(format_bytes, [None if v is None else int(v)  # byte counts: exact
                                                        for v in (self.objective, self.bound, self.peak)])
        else:
            obj, bound = distinct(format_seconds if has_ops else format_number, [self.objective, self.bound])
            peak_ = format_bytes(self.peak)
        bound = "" if self.bound is None else f" bound={bound}" + (f" ({self.bound_kind})" if self.bound_kind else "")
        gap = "" if self.gap is None else f" gap={format_percent(self.gap)}"
        wall = format_seconds(self.seconds)
        if self.status == str(Status.DOES_NOT_FIT):  # its own status: the peak above the capacity says it all
            return f"{self.solver}: {self.violation}{bound} placed={self.placed}/{self.total} wall={wall}"
        extra = "" if self.valid else f" INVALID: {self.violation}" if self.violation else ""
        if self.stats.get("cut_short"):  # a solver whose time limit left part of the problem undecided says so
            extra += " WARNING: cut short by the time limit (undecided buffers left slow; a longer limit may do better)"
        if self.stats.get("fallback"):  # a solver that left its own method for part of the problem says what it did
            extra += f" NOTE: {self.stats['fallback']}"
        if self.stats.get("stopped_at_limit") and self.valid:  # the parent stopped a solver past its limit
            extra += f" NOTE: {self.stats['stopped_at_limit']}"
        source = self.stats.get("winner") or self.stats.get("source")  # a portfolio's winning member, say
        won = f" source={source}" if self.valid and source else ""
        return (f"{self.solver}: {self.status} objective={obj}{bound}{gap} placed={self.placed}/{self.total} "
                f"peak={peak_} wall={wall}{won}{extra}")



def better(a: Report, b: Report) -> bool:
    """Is ``a`` strictly better than ``b``? Valid beats invalid; then the objective
    (:func:`mallocgame.problem.objective.better`: a higher saving in map and prefetch modes, a lower peak in pack mode)."""
    if a.valid != b.valid:
        return a.valid
    if not a.valid:
        return False
    return better_value(a.mode, a.objective, b.objective)


def status_at_gap(status: str, gap: float | None, stats: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """OPTIMAL only at gap 0: ``(status, stats)`` of a report whose gap to the reported bound is ``gap``.

    A solver's OPTIMAL (proven for its own model) with a positive gap is reported FEASIBLE, its claim
    kept in ``stats["solver_status"]``; that claim is OPTIMAL again under a bound that closes the gap.

    >>> status_at_gap("OPTIMAL", 0.0262, {})
    ('FEASIBLE', {'solver_status': 'OPTIMAL'})
    >>> status_at_gap("FEASIBLE", 0.0, {'solver_status': 'OPTIMAL'}), status_at_gap("OPTIMAL", None, {})
    (('OPTIMAL', {'solver_status': 'OPTIMAL'}), ('OPTIMAL', {}))
    """
    optimal = str(Status.OPTIMAL)
    if status != optimal and not (status == str(Status.FEASIBLE) and stats.get("solver_status") == optimal):
        return status, stats
    if gap is None or gap == 0:
        return optimal, stats
    return str(Status.FEASIBLE), {**stats, "solver_status": optimal}


def reported_status(status: Status, valid: bool) -> Status:
    """The status a report shows: a valid answer is at least FEASIBLE, an invalid one never OPTIMAL/FEASIBLE."""
    if valid and status in (Status.UNKNOWN, Status.INFEASIBLE):
        return Status.FEASIBLE
    if not valid and status in (Status.OPTIMAL, Status.FEASIBLE):
        return Status.UNKNOWN
    return status


def answer(report: Report, problem: Problem) -> Solution:
    """The validated answer of a report as a Solution (to hand on as a hint)."""
    return Solution(offsets=report.offsets if report.offsets else (None,) * problem.n, status=Status.FEASIBLE,
                    mode=problem.mode, solver=report.solver, intervals=tuple(report.intervals))


def _refusal(problem: Problem, solution: Solution) -> str | None:
    """Why ``solution`` is no answer before any check: proven infeasible, offsets of the wrong length, or
    (pack mode) nothing placed; ``None`` when it goes to the validator."""
    if solution.status is Status.INFEASIBLE:
        return "proven infeasible"
    if problem.mode == "prefetch":
        return None
    offsets = solution.offsets
    complete = len(offsets) == problem.n
    has_answer = complete and (problem.n == 0 or any(o is not None for o in offsets) or problem.mode == "map")
    return None if has_answer else "no solution"


def score(problem: Problem, hardware, solution: Solution, *, seconds: float, bound: Bound | None,
          solver_name: str) -> Report:
    """Validate and score ``solution``; invalid or empty answers yield ``valid=False``.

    Map and prefetch modes report the time saved against all-slow, pack mode the peak.
    """
    prefetch = problem.mode == "prefetch"
    # its columns read once: validated, scored and (a child's report) pickled from one reading
    answer_ = AnswerTuple(solution.intervals if prefetch else solution.offsets)
    with incumbents.scoring():  # in a solving child, the parent's clock of the limit stops meanwhile
        verdict = judge(problem, hardware, answer_, violation=_refusal(problem, solution), copies=False)
    valid, violation, placed, pk = verdict.valid, verdict.violation, verdict.placed, verdict.peak
    est, slow = verdict.estimated_time, verdict.time_all_slow
    speedup = objective = None
    if valid and est is not None:
        objective = verdict.value
        speedup = slow / est if est > 0 else None
    elif valid:
        objective = float(pk)
    gap = _gap(objective, bound, saving=est is not None)
    status, stats = status_at_gap(str(reported_status(solution.status, valid)), gap, dict(solution.stats))
    if verdict.does_not_fit:
        status = str(Status.DOES_NOT_FIT)
    return Report(
        solver=solver_name, mode=problem.mode, status=status, valid=valid,
        objective=objective, bound=None if bound is None else bound.value,
        bound_kind=None if bound is None else bound.kind, gap=gap, placed=placed, total=problem.n, peak=pk,
        seconds=seconds, estimated_time=est, time_all_slow=slow, speedup=speedup, violation=violation,
        history=[(float(t), float(v)) for t, v in solution.history], stats=stats,
        offsets=answer_ if valid and not prefetch else (), intervals=answer_ if valid and prefetch else (),
        bounds=_bounds_of(bound),
    )


def _unpickle_report(values: dict[str, Any]) -> Report:
    if not isinstance(values["intervals"], tuple):
        values["intervals"] = incumbents.intervals_of_columns(values["intervals"])
    return Report(**values)


def _gap(objective: float | None, bound: Bound | None, *, saving: bool) -> float | None:
    """``(bound - saving) / bound`` for a time saving (map, prefetch), ``(peak - bound) / bound`` for a peak.

    A saving within :data:`mallocgame.problem.units.SAME` (relative) of its bound is at it (gap 0): the two are
    sums of the same float terms in another order, so they may differ in the last bits.
    """
    if objective is None or bound is None or not bound.value > 0:
        return None
    if saving:
        gap = (bound.value - objective) / bound.value
        return 0.0 if gap <= SAME else gap
    return (objective - bound.value) / bound.value


def _bounds_of(bound: Bound | None) -> dict[str, float]:
    return {} if bound is None else dict(bound.others) or {bound.kind: bound.value}


def with_bound(report: Report, bound: Bound | None) -> Report:
    """``report`` with ``bound`` and the gap it gives (for a bound computed beside the solver)."""
    gap = _gap(report.objective, bound, saving=report.estimated_time is not None)
    status, stats = status_at_gap(report.status, gap, report.stats)
    return replace(report, bound=None if bound is None else bound.value,
                   bound_kind=None if bound is None else bound.kind, bounds=_bounds_of(bound), gap=gap,
                   status=status, stats=stats)


def stopped_at_limit(problem: Problem, hardware, incumbent: incumbents.Incumbent | None, *, solver_name: str,
                     seconds: float, time_limit: float, bound: Bound | None = None, hint: Solution | None = None,
                     improvements: tuple = (), judged: tuple[incumbents.Incumbent, Report] | None = None) -> Report:
    """The report of a solver its parent stopped at ``time_limit`` + :data:`~mallocgame.engine.protocol.LIMIT_GRACE`:
    the best answer it sent (``incumbent``, or the ``hint`` it was given if better), validated and scored,
    FEASIBLE, with the note "stopped at the limit" (``stats["stopped_at_limit"]``, its source in
    ``stats["source"]``); with neither, an invalid report that says the solver sent no answer. ``judged``: an
    answer the parent validated and scored (against the same ``bound``) while the solver ran, with its report; when it
    is ``incumbent`` its report is taken as it is (only its time and history are this call's)."""
    note = f"stopped at the limit: still running at {time_limit:g} s + {LIMIT_GRACE:g} s grace"
    history = tuple((float(e.seconds), float(e.value)) for e in improvements)
    scored = []
    if incumbent is not None and judged is not None and judged[0] is incumbent:
        scored.append((replace(judged[1], seconds=seconds, history=list(history)), incumbent.improvement.source))
    elif incumbent is not None:
        offsets = (None,) * problem.n if incumbent.offsets is None else offsets_tuple(incumbent.offsets)
        solution = Solution(offsets=offsets, status=Status.FEASIBLE, mode=problem.mode, history=history,
                            solver=solver_name, intervals=tuple(incumbent.intervals))
        scored.append((score(problem, hardware, solution, seconds=seconds, bound=bound, solver_name=solver_name),
                       incumbent.improvement.source))
    if hint is not None:
        scored.append((score(problem, hardware, hint.replace(history=history), seconds=seconds, bound=bound,
                             solver_name=solver_name), "hint"))
    best = None
    for report, source in scored:
        report = replace(report, stats={"stopped_at_limit": note, "source": source})
        if best is None or better(report, best):
            best = report
    if best is not None:
        return best
    return Report(solver=solver_name, mode=problem.mode, status=str(Status.UNKNOWN), valid=False, objective=None,
                  bound=None if bound is None else bound.value, bound_kind=None if bound is None else bound.kind,
                  gap=None, placed=0, total=problem.n, peak=0, seconds=seconds, estimated_time=None,
                  time_all_slow=None, speedup=None, violation=f"{note}, and it sent no answer",
                  history=list(history), stats={"stopped_at_limit": note}, bounds=_bounds_of(bound))

