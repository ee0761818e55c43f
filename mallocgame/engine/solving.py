"""The one solve path of every door (``mallocgame solve``, :func:`mallocgame.solve`, ``compare``):
a request checked once, the solve session warmed, an optional warm start, the solver, its report.

:func:`check_request` reads and checks what a caller asks for (time limit, hint) and turns the
hint into an answer of the problem's mode: a map answer given for a prefetch problem is lifted
(:func:`mallocgame.formats.lift.lift_map_answer`), in the API as on the command line.
:func:`solve_with_warm_start` runs a first solver, gives its validated answer to the main solver
as a hint, and keeps the hint whenever the main answer is invalid or worse, so a warm-started
result is never worse than its hint (docs/architecture.md, "The solve session").
"""

from __future__ import annotations

import csv
import dataclasses
import time
from typing import Any

import numpy as np

from mallocgame.algorithms.placement import stacked_offsets
from mallocgame.engine.protocol import LIMIT_GRACE, bad_time_limit
from mallocgame.engine.registry import solver_entry, solver_modes
from mallocgame.engine.report import Report, answer, better, score, stopped_at_limit, with_bound
from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.engine.session import Session, session_for
from mallocgame.formats.io import read_intervals_csv, read_solution_csv
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.validator import validate, validate_intervals
from mallocgame.problem.model import FastInterval, InputError, Problem, Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import ChildCall
from mallocgame.runtime.incumbents import offer

# From this many buffers on, a solving child first sends the mode's trivial answer (`first_answer`): what it builds
# before a solver's first answer (overlap index, evaluators, a baseline) can take longer than a short limit there.
FIRST_ANSWER_BUFFERS = 100_000
# What the parent keeps back for judging and writing an answer (`answer_reserve`), in every mode: a fixed part and a
# part per buffer, sized from the measured cost of scoring and writing big answers with room for a loaded machine
# (docs/results.md).
RESERVE_SECONDS = 0.1
RESERVE_PER_BUFFER = 2e-6
# Seconds a solving child has at least before the parent stops it (`child_limits`): to send the answer it has, and
# per buffer, to build and send a big input's first answer (`first_answer`; 16 MB of offsets at 2M buffers).
CHILD_FLOOR = 0.5
FIRST_ANSWER_PER_BUFFER = 1e-6
JUDGE_POLL = 0.05  # seconds between the parent's looks for a newer answer to judge (`StopJudge.while_running`)
# Seconds an answer is the child's latest, and the child not scoring one, before the parent judges it ahead
# (`StopJudge.pending_in`): a solver that returns its last answer has the child's scoring of it (`incumbents.scoring`)
# on the pipe by then, and a child that has scored its final answer has said it returned.
JUDGE_SETTLE = 0.25
# Seconds an answer waits unjudged at most while newer ones keep coming (a search that improves more often than
# JUDGE_SETTLE still has its latest answer judged ahead of a stop).
JUDGE_WAIT = 1.0
WARM_START_SHARE = 0.2  # of a solve's time, the share its warm-start solver gets (the main solver gets the rest)

# ---------------------------------------------------------------------------- the request

def check_time_limit(time_limit: Any, what: str = "time_limit") -> float:
    """``time_limit`` as seconds (:func:`mallocgame.engine.protocol.bad_time_limit`), else :class:`InputError` naming ``what``."""
    reason = bad_time_limit(time_limit)
    if reason:
        raise InputError(f"{what}: {reason}")
    return float(time_limit)


def hint_answer(problem: Problem, *, offsets=None, intervals=None) -> tuple[Solution, bool]:
    """A hint (map/pack offsets, or prefetch intervals) as an answer of ``problem``'s mode, checked.

    A map answer (``offsets``) given for a prefetch problem is lifted; returns ``(solution,
    lifted)``. Raises :class:`InputError` with the first violation when it is not a valid answer.
    """
    lifted = False
    if problem.mode == "prefetch":
        if intervals is None:
            offsets = tuple(offsets)
            violation = validate(problem.replace(mode="map"), offsets)
            if violation:
                raise InputError(f"hint is not a valid solution of {problem.name}: {violation}")

            intervals, lifted = lift_map_answer(problem, offsets), True
        intervals = tuple(intervals)
        violation = validate_intervals(problem, intervals)
        if violation:
            raise InputError(f"hint is not a valid solution of {problem.name}: {violation}")
        return Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, solver="hint",
                        intervals=intervals), lifted
    if offsets is None:
        raise InputError(f"hint: a {problem.mode}-mode problem takes offsets, not fast intervals")
    offsets = tuple(offsets)
    violation = validate(problem, offsets)
    if violation:
        raise InputError(f"hint is not a valid solution of {problem.name}: {violation}")
    return Solution(offsets=offsets, status=Status.FEASIBLE, mode=problem.mode, solver="hint"), False


def read_answer_file(path: str, problem: Problem) -> tuple[tuple | None, tuple[FastInterval, ...] | None]:
    """A solution CSV as ``(offsets, None)`` or an interval CSV as ``(None, intervals)``.

    In prefetch mode a file with the interval columns is read as intervals, any other as a map
    solution (to be lifted); in map and pack modes it is a solution CSV.
    """
    if problem.mode == "prefetch" and not _is_map_csv(path):
        return None, tuple(read_intervals_csv(path, problem))
    return tuple(read_solution_csv(path, problem)), None


def _is_map_csv(path: str) -> bool:
    """Does the CSV at ``path`` hold a map/pack solution (an ``offset`` column and no interval columns)?"""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # the interval reader says what is wrong with it
    names = {h.strip().lower() for h in header}
    return "offset" in names and not names & {"start", "end", "copy_start"}


def check_request(problem: Problem, *, time_limit: Any, hint_path: str | None = None,
                  hint: Solution | None = None) -> tuple[float, Solution | None, bool]:
    """Check a solve request once: ``(time limit, hint as an answer of the mode, whether it was lifted)``.

    ``hint_path`` is a solution CSV (prefetch mode: an interval CSV, or a map solution CSV that is
    lifted); ``hint`` a Solution (a map Solution for a prefetch problem is lifted). Raises
    :class:`InputError` (a file's errors name the file).
    """
    limit = check_time_limit(time_limit)
    if hint_path is not None:
        offsets, intervals = read_answer_file(hint_path, problem)
        try:
            return (limit, *hint_answer(problem, offsets=offsets, intervals=intervals))
        except InputError as exc:
            raise InputError(f"{hint_path}: {exc}") from None
    if hint is None:
        return limit, None, False
    if problem.mode == "prefetch" and not hint.intervals:
        return (limit, *hint_answer(problem, offsets=hint.offsets))
    if problem.mode == "prefetch":
        return (limit, *hint_answer(problem, intervals=hint.intervals))
    return (limit, *hint_answer(problem, offsets=hint.offsets))


# ---------------------------------------------------------------------------- the path

def _warm_start_run(name: str, problem: Problem, hardware, *, budget: Budget, seed: int, hint, options, bound,
                    facts: Session) -> Report:
    """Run the warm-start solver; in prefetch mode a map-only solver (greedy-xla, select-pack, muzero)
    solves the map problem and its answer is lifted (:func:`mallocgame.formats.lift.lift_map_answer`)."""
    modes = solver_modes(solver_entry(name)) if problem.mode == "prefetch" else ()
    if problem.mode != "prefetch" or "prefetch" in modes or "map" not in modes:
        return run_solver(name, problem, hardware, budget=budget, seed=seed, hint=hint, options=options,
                          bound=bound, facts=facts)

    mapped = run_solver(name, problem.replace(mode="map"), hardware, budget=budget, seed=seed, options=options)
    if not mapped.valid:
        return mapped
    lifted = Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, solver=name,
                      intervals=tuple(lift_map_answer(problem, mapped.offsets)))
    return score(problem, hardware, lifted, seconds=mapped.seconds, bound=bound, solver_name=name)


def solve_with_warm_start(name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
                          time_limit: float | None = None, hint: Solution | None = None,
                          warm_start: str | None = None, options: dict[str, Any] | None = None,
                          compute_bound: bool = True, bound=None, keep_hint: bool = True,
                          facts: Session | None = None) -> Report:
    """Run ``name`` (after ``warm_start``'s run, whose answer becomes the hint) and report the better answer.

    ``budget``: the time of both runs, handed down (a door gives ``time_limit`` seconds from now instead);
    ``facts``: the problem's derived facts the caller holds (by default this process's), warmed here and handed to
    the solvers in their requests. The bound is the facts' (:meth:`mallocgame.engine.session.Session.bound`: the tightest
    known without waiting, the cached one if any) unless ``compute_bound=False``, when the caller adds it
    with :func:`mallocgame.engine.report.with_bound`, or gives it as ``bound``. ``keep_hint=False``: the hint
    is handed on but not scored as a fallback (a portfolio's members: the portfolio holds the hint's
    report already).
    """
    if (budget is None) == (time_limit is None):
        raise TypeError("solve_with_warm_start takes a budget or a time_limit, one of them")
    budget = Budget.start(time_limit) if budget is None else budget
    facts = session_for(problem, hardware) if facts is None else facts
    facts.warm()
    if bound is None and compute_bound:
        bound = problem_bound(problem, hardware)
    return _solve(name, problem, hardware, budget=budget, seed=seed, hint=hint, warm_start=warm_start,
                  options=options, bound=bound, keep_hint=keep_hint, facts=facts)


def command_budget(time_limit: float, *, started: float | None = None, loading: float = 0.0) -> Budget:
    """The time of one solve as its caller promises it: ``time_limit`` seconds plus the ``loading`` seconds its
    inputs took to read, from the instant ``started``.

    A command counts from its start (:func:`mallocgame.cli.exits.command_started`: run as its process, the
    process's start) and adds the time it took to load its input files; the API (a call of :func:`mallocgame.solve`)
    and a ``compare`` run count from their own start (``started`` ``None``: now). Everything the solve does is inside
    it: imports, the bound, the fork, the solver's imports and set-up, its answer validated and written
    (:func:`answer_reserve`); the solver's
    budget is what is left (:func:`solve_beside_bound`).

    Examples:
        >>> command_budget(5.0, started=100.0, loading=2.5)
        Budget(seconds=7.5, started=100.0)
    """
    return Budget(float(time_limit) + max(float(loading), 0.0), time.monotonic() if started is None else started)


def answer_reserve(n: int) -> float:
    """Seconds the parent keeps back at the end of a solve of ``n`` buffers for judging the answer it holds and
    writing the outputs (the solution CSV and the report), the same in every mode (a map or pack answer's offsets
    and a prefetch answer's intervals are validated, carried and written by compiled paths alike):
    :data:`RESERVE_SECONDS` plus :data:`RESERVE_PER_BUFFER` per buffer (:func:`child_limits`).

    Examples:
        >>> answer_reserve(0), round(answer_reserve(200_000), 3), round(answer_reserve(2_000_000), 3)
        (0.1, 0.5, 4.1)
    """
    return RESERVE_SECONDS + RESERVE_PER_BUFFER * n


def child_limits(budget: Budget, n: int) -> tuple[Budget, float]:
    """A forked solve of ``n`` buffers within the whole solve's ``budget`` (:func:`command_budget`), its child
    started now: the solver's budget (from now until :func:`answer_reserve` before the deadline) and the monotonic
    instant the parent stops a child still running: :data:`~mallocgame.engine.protocol.LIMIT_GRACE` past the
    deadline less the reserve (before the deadline when judging and writing an answer of ``n`` buffers takes more
    than the grace: a big input's child sends its first answer at once), but never before the child has had
    :data:`CHILD_FLOOR` seconds, and :data:`FIRST_ANSWER_PER_BUFFER` more per buffer to send its first answer (a
    command whose start took its whole limit ends that much late with an answer, not on time without one).

    Examples:
        >>> whole = Budget(10.0, time.monotonic())
        >>> solver, stop = child_limits(whole, 0)
        >>> solver.deadline == whole.deadline - 0.1, round(stop - whole.deadline, 6)
        (True, 0.9)
        >>> round(child_limits(whole, 500_000)[1] - whole.deadline, 6)  # reserve 1.1 s: stopped 0.1 s before
        -0.1
        >>> spent = Budget(1.0, time.monotonic() - 5.0)
        >>> child_limits(spent, 0)[1] - time.monotonic() > CHILD_FLOOR - 0.1
        True
    """
    reserve = answer_reserve(n)
    stop = max(budget.deadline + LIMIT_GRACE - reserve, time.monotonic() + CHILD_FLOOR + FIRST_ANSWER_PER_BUFFER * n)
    return Budget.until(budget.deadline - reserve), stop


def solve_beside_bound(name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
                       hint: Solution | None = None, warm_start: str | None = None,
                       options: dict[str, Any] | None = None, on_improvement=None, on_bound=None,
                       budget: Budget | None = None) -> Report:
    """`solve_with_warm_start` in a forked child, with the problem's bound and the limit kept here: what
    ``mallocgame solve`` and `mallocgame.solve` run.

    ``budget``: the whole solve's time (:func:`command_budget`: a command's from its start, load time added); by
    default ``time_limit`` seconds from now. The child's solver gets what is left of it less
    :func:`answer_reserve` (:func:`child_limits`); the bound is the tightest known without waiting (the instant
    bound or the cached one, `mallocgame.engine.session.Session.bound`), built here while the child solves. The
    child sends each better answer as found (`mallocgame.runtime.incumbents`; ``on_improvement`` is called with
    each `mallocgame.runtime.incumbents.Improvement`, ``on_bound`` with the bound); a child still running at the
    instant :func:`child_limits` gives (the deadline + `mallocgame.engine.protocol.LIMIT_GRACE` less the reserve)
    is stopped and the best answer it sent (or the hint, if better) is reported, validated, FEASIBLE, with the
    note "stopped at the limit"
    (`mallocgame.engine.report.stopped_at_limit`).
    """
    solver_budget, stop_at = child_limits(command_budget(time_limit) if budget is None else budget, problem.n)
    # the child imports its solvers (runner.preload) and builds what its runs read (overlap index, evaluators:
    # seconds at 2M buffers) on this clock, after its first answer (solve_in_child), while the bound is built here
    # (hashing the problem for the bound cache and the instant bound: seconds at 2M buffers)
    facts = session_for(problem, hardware)
    run = ChildCall.start(solve_in_child, (name, problem, hardware),
                          dict(budget=solver_budget, seed=seed, hint=hint, warm_start=warm_start, options=options,
                               compute_bound=False, facts=facts),
                          channel=(problem, name))
    # a thread reads the child's answers and stops it at the limit, whatever this process does meanwhile
    run.keep_limit(stop_at, on_improvement)
    try:
        bound = problem_bound(problem, hardware)
        if on_bound is not None:
            on_bound(bound)
        # judged without the bound (built above meanwhile): the result gets it below
        judge = StopJudge(run, problem, hardware, name=name, time_limit=time_limit)
        judge.while_running()
        try:
            result = run.result()
        except TimeoutError:
            result = judge.report(run.stopped - run.started, hint=hint)
    except BaseException:
        run.cancel()
        raise
    return with_bound(result, bound)


class StopJudge:
    """The parent's side of one forked solving run (:class:`~mallocgame.runtime.forking.ChildCall` ``call``, solver
    ``name`` on ``problem`` with ``time_limit`` seconds, scored against ``bound``) for the report of its stop at the
    limit: on a big input (:data:`FIRST_ANSWER_BUFFERS`) the parent validates and scores the latest answer the child
    sent while it waits (:meth:`judge`), so a run stopped at its limit leaves only the writing of that answer after
    the stop (the parent is idle meanwhile; a loaded machine multiplies what judging a big answer costs);
    :meth:`report` is the stop's report (:func:`mallocgame.engine.report.stopped_at_limit`), the judged one when
    the answer is the same. Every path that waits on a forked solving run uses it: `solve_beside_bound`, a pool's
    runs (:mod:`mallocgame.engine.pools`: ``compare``'s, a portfolio's members) and a Ray task's run."""

    def __init__(self, call: ChildCall, problem: Problem, hardware, *, name: str, time_limit: float, bound=None):
        self.call, self.problem, self.hardware = call, problem, hardware
        self.name, self.time_limit, self.bound = name, time_limit, bound
        self.judged = None  # (incumbent, its report) of the last answer judged
        self.unjudged_since: float | None = None  # when the answer first seen unjudged (since the last judgement) came
        self.ahead = problem.n >= FIRST_ANSWER_BUFFERS

    def pending(self) -> bool:
        """Is there an answer of a big input the child sent to judge now (:meth:`pending_in` is 0)?"""
        return self.pending_in() == 0.0

    def pending_in(self) -> float | None:
        """Seconds until the latest answer of a big input the child sent is to be judged; ``None`` when there is none
        not judged yet, or the child has returned (its report, judged there, comes next). The child judges its final
        answer itself, so the parent does not judge while the child scores an answer (:data:`JUDGE_POLL`: the time to
        look again), nor before the answer has been the latest, and the child's scoring over, for
        :data:`JUDGE_SETTLE` seconds: a child that goes on solving after it scored has its answer judged then. While
        newer answers keep coming, the latest is judged once the first of them has waited :data:`JUDGE_WAIT`."""
        incumbent, sent = self.call.incumbent, self.call.sent
        if not self.ahead or incumbent is None or sent.returned or (
                self.judged is not None and self.judged[0] is incumbent):
            return None
        if self.unjudged_since is None:
            self.unjudged_since = sent.incumbent_at
        if sent.scoring:
            return JUDGE_POLL
        settled = min(sent.incumbent_at + JUDGE_SETTLE, self.unjudged_since + JUDGE_WAIT)
        return max(max(settled, sent.scored_at + JUDGE_SETTLE) - time.monotonic(), 0.0)

    def judge(self) -> None:
        """Validate and score the latest answer the child sent (as the stop's report would, no time yet)."""
        incumbent = self.call.incumbent
        if incumbent is not None:
            self.unjudged_since = None
            self.judged = (incumbent, stopped_at_limit(self.problem, self.hardware, incumbent, solver_name=self.name,
                                                       seconds=0.0, time_limit=self.time_limit, bound=self.bound))

    def while_running(self) -> None:
        """Judge each newer answer until the child has finished or was stopped (its reader thread keeps the limit:
        :meth:`~mallocgame.runtime.forking.ChildCall.keep_limit`)."""
        if not self.ahead:
            return
        while not self.call.ready():
            wait = self.pending_in()
            if wait == 0.0:
                self.judge()
            else:
                self.call.wait(JUDGE_POLL if wait is None else min(wait, JUDGE_POLL))

    def report(self, seconds: float, hint: Solution | None = None) -> Report:
        """The report of the run stopped at its limit after ``seconds``: the best answer it sent (or ``hint``, if
        better), validated and scored, "stopped at the limit"; an answer judged ahead is not judged again."""
        call = self.call
        return stopped_at_limit(self.problem, self.hardware, call.incumbent, solver_name=self.name, seconds=seconds,
                                time_limit=self.time_limit, bound=self.bound, hint=hint,
                                improvements=tuple(call.improvements), judged=self.judged)


def solve_in_child(name: str, problem: Problem, hardware, **kwargs: Any) -> Report:
    """`solve_with_warm_start` as every forked solving run starts it (`solve_beside_bound`'s child, a pool's run:
    `run_one`): on a big input (:data:`FIRST_ANSWER_BUFFERS`) the mode's trivial answer goes to the parent first
    (:func:`first_answer`), so a run stopped at its limit has a valid answer whatever its solver did."""
    if problem.n >= FIRST_ANSWER_BUFFERS:
        first_answer(problem)
    return solve_with_warm_start(name, problem, hardware, **kwargs)


def first_answer(problem: Problem) -> None:
    """Send the mode's trivial valid answer to the parent (`mallocgame.runtime.incumbents.offer`): every buffer slow
    (map, prefetch) or every buffer stacked (pack; only when that fits the capacity, if any). O(n), numpy only."""
    if problem.mode == "map":
        offer(value=0.0, source="all-slow (first answer)", offsets=np.full(problem.n, -1, np.int64), problem=problem)
    elif problem.mode == "prefetch":
        offer(value=0.0, source="all-slow (first answer)", intervals=(), problem=problem)
    elif problem.n:
        a = problem.arrays
        offsets = stacked_offsets(a.size, a.alignment, 0)
        offer(value=float((offsets + a.size).max()), source="every buffer stacked (first answer)", offsets=offsets,
              problem=problem)


def _solve(name: str, problem: Problem, hardware, *, budget: Budget, seed: int, hint, warm_start, options, bound,
           keep_hint: bool, facts: Session) -> Report:
    fallback: Report | None = None
    if hint is not None and keep_hint:
        fallback = score(problem, hardware, hint, seconds=0.0, bound=bound, solver_name="hint")
    if warm_start:
        first = _warm_start_run(warm_start, problem, hardware, budget=budget.share(WARM_START_SHARE), seed=seed,
                                hint=hint, options=options, bound=bound, facts=facts)
        if first.valid and (fallback is None or better(first, fallback)):
            fallback = first
            hint = answer(first, problem)
    report = run_solver(name, problem, hardware, budget=budget.share(1.0), seed=seed, hint=hint,
                        options=options, bound=bound, facts=facts)
    if fallback is not None and better(fallback, report):
        stats = dict(report.stats) | {"fallback": f"kept the hint from {fallback.solver}",
                                      "main_status": report.status}
        return dataclasses.replace(fallback, solver=name, seconds=report.seconds + fallback.seconds, stats=stats)
    if warm_start and fallback is not None:
        return dataclasses.replace(report, seconds=report.seconds + fallback.seconds,
                                   stats=dict(report.stats) | {"warm_start": warm_start})
    return report


def run_one(name: str, problem: Problem, hardware, budget: Budget, seed: int, hint: Solution | None,
            options: dict[str, Any], bound, facts: Session | None = None) -> tuple[str, Any]:
    """One run of a pool (:mod:`mallocgame.engine.pools`: ``compare``'s, a portfolio's member): the solve path
    (:func:`solve_in_child`: a big input's first answer first) within ``budget`` against ``bound``, with the
    ``facts`` its caller holds, the hint handed on but not kept; ``("ok", Report)`` or ``("error", one line)``, never
    an exception."""
    try:
        return "ok", solve_in_child(name, problem, hardware, budget=budget, seed=seed, hint=hint, options=options,
                                    compute_bound=False, bound=bound, keep_hint=False, facts=facts)
    except BaseException as exc:  # any failure of a solver is its run's error, never a traceback
        text = " ".join(str(exc).split())
        return "error", f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__
