"""The solver conformance suite: what every registered solver, built-in or plugin, must do.

``mallocgame check-solver NAME`` runs it from the installed package (no source tree, no
pytest), and ``tests/test_conformance.py`` runs it over every registered solver. Each
check is a plain function of a :class:`Subject` that raises :class:`CheckFailed` with a
one-line reason; :func:`check_solver` runs them all and returns one :class:`CheckResult`
per check. The problems are generated (:mod:`mallocgame.inputs.generate`), small enough
that a fast solver passes the whole suite in a few seconds; answers are validated and
scored by the runner (:func:`mallocgame.engine.report.score`), never trusted.

The checks:

* ``protocol`` -- ``name`` is the registered name, ``modes`` a non-empty subset of
  ``{"map", "pack", "prefetch"}``, ``solve`` takes one request and ``Options`` is a frozen dataclass of
  documented fields (:func:`mallocgame.engine.protocol.contract_error`), and the module has a docstring for
  ``mallocgame solvers``;
* ``valid-answers`` -- a valid answer on every problem of every supported mode (pack:
  every buffer placed; map: never slower than all-slow);
* ``capacity`` -- map answers fit tight capacities (and a capacity below every buffer
  leaves everything slow); a pack answer over its capacity is never claimed optimal;
* ``same-seed`` -- the same seed gives the same answer;
* ``time-limit`` -- a large problem returns a valid answer within about the time limit;
* ``hint`` -- a valid hint is accepted, and an answer is never worse than a hint the
  solver itself produced;
* ``statuses`` -- the answer is a :class:`~mallocgame.problem.model.Solution` with a
  :class:`~mallocgame.problem.model.Status` and the problem's mode; ``INFEASIBLE`` only when no
  answer exists, ``OPTIMAL`` never contradicted by a known better answer;
* ``never-below-greedy`` -- a search ends no worse than the greedy baseline of its mode
  (map: greedy-xla, pack: best-fit, prefetch: msa), run with the same time limit; skipped
  for a solver that declares itself a greedy (``greedy = True``: the baselines themselves);
* ``no-answer`` -- where no answer exists (pack mode, capacity below the max live bytes)
  the solver returns in time with no answer (e.g. ``Solution(offsets=(None,) * problem.n,
  status=Status.UNKNOWN, mode=problem.mode)``), never claimed optimal; an empty program
  is solved.

Example:
    >>> results = check_solver("greedy-xla", checks=["protocol", "valid-answers"])
    >>> [(r.name, r.passed) for r in results]
    [('protocol', True), ('valid-answers', True)]
"""

from __future__ import annotations

import functools
import gc
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from mallocgame.algorithms.placement import online_pack
from mallocgame.engine.protocol import contract_error
from mallocgame.engine.registry import describe, load_solver, solver_entries
from mallocgame.engine.report import Report, score
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.runner import preload
from mallocgame.engine.session import BASELINE_SOLVER, Session, held_baselines
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import peak, validate
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import MODES, Problem, Solution, Status
from mallocgame.problem.objective import at_least, better
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import ChildCall

DEFAULT_TIME_LIMIT = 1.0
HW = PRESETS["tpuv4i"]
UNIT = PRESETS["unit"]


class CheckFailed(AssertionError):
    """A conformance check failed; the message is one line naming the problem and the reason."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    message: str
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Subject:
    """The solver under test: its registered name, supported modes and the per-solve time limit."""

    name: str
    modes: frozenset[str]
    time_limit: float

    def supports(self, mode: str) -> bool:
        return mode in self.modes

    def solve(self, problem: Problem, hardware, *, seed: int = 0, hint: Solution | None = None,
              time_limit: float | None = None) -> tuple[Solution, Report, float]:
        """Solve with a fresh instance (as the runner does); the raw answer, its scored report and the seconds."""
        solver = load_solver(self.name)
        limit = self.time_limit if time_limit is None else time_limit
        preload(solver)  # the heavy imports it declares, before the clock (as the runner does)
        # The heap so far frozen, as `mallocgame solve` freezes it before forking the solver: a collection on the
        # solver's clock then walks only the solver's own objects, not those of whatever ran in this process before
        # (a full collection of a 3M-object heap takes 0.4 s here, twice the short-limits check's 0.2 s limit).
        gc.freeze()  # not gc.collect() first: that would walk the whole heap at every solve of every check
        t0 = time.monotonic()
        try:
            solution = solver.solve(SolveRequest(problem, hardware, Budget.start(limit), seed, hint, solver.Options()))
        except Exception as exc:  # a solver may fail in any way; the check names it in one line
            raise CheckFailed(f"{_where(problem)}: solve raised {exc.__class__.__name__}: {exc}") from exc
        finally:
            gc.unfreeze()
        seconds = time.monotonic() - t0
        if not isinstance(solution, Solution):
            raise CheckFailed(f"{_where(problem)}: solve returned {type(solution).__name__}, not a mallocgame.Solution")
        try:
            report = score(problem, hardware, solution, seconds=seconds, bound=None, solver_name=self.name)
        except Exception as exc:  # e.g. offsets that are not integers
            raise CheckFailed(f"{_where(problem)}: the answer cannot be scored: {exc.__class__.__name__}: {exc}") from exc
        return solution, report, seconds


def _where(problem: Problem) -> str:
    cap = "no capacity" if problem.capacity is None else f"capacity {problem.capacity}"
    return f"{problem.name} ({problem.mode}, {problem.n} buffers, {cap})"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _worse(problem: Problem, hardware, a: Solution, b: Solution) -> bool:
    """Is answer ``a`` strictly worse than answer ``b`` (map, prefetch: lower value; pack: higher peak)?"""
    if problem.mode == "pack":
        return better("pack", peak(problem, b.offsets), peak(problem, a.offsets))
    if problem.mode == "prefetch":
        ev = PrefetchEvaluator.of(problem, hardware)
        va, vb = ev.value(a.intervals), ev.value(b.intervals)
    else:
        ev = Evaluator.of(problem, hardware)
        va, vb = ev.value(a.offsets), ev.value(b.offsets)
    return better(problem.mode, vb, va)


def _hint(offsets, mode: str, intervals=()) -> Solution:
    return Solution(offsets=tuple(offsets), status=Status.FEASIBLE, mode=mode, solver="hint", intervals=tuple(intervals))


def _answer_of(report: Report, problem: Problem) -> Solution:
    return Solution(offsets=report.offsets or (None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode,
                    intervals=tuple(report.intervals))


# ---------------------------------------------------------------- problems (generated, cached)

@functools.cache
def _map_problems() -> tuple[tuple[Problem, Any], ...]:
    return ((layered_network(60, seed=11), HW),
            (random_intervals(40, seed=3, with_benefit=True, name="random-40-benefit").replace(capacity=150), UNIT))


@functools.cache
def _packed(n: int, seed: int, capacity: int, horizon: int) -> tuple[Problem, tuple[int, ...]]:
    problem, offsets = packed_instance(n, seed=seed, capacity=capacity, horizon=horizon)
    return problem, tuple(offsets)


@functools.cache
def _pack_problems() -> tuple[tuple[Problem, Any], ...]:
    p, _ = _packed(25, 2, 64, 20)
    return ((p.replace(name="packed-25-loose", capacity=2 * 64), UNIT),  # loose: every packer must fit it
            (p.replace(name="packed-25-peak", capacity=None), UNIT))  # no capacity: minimise the peak


@functools.cache
def _layered(n: int, seed: int, capacity_fraction: float = 0.4) -> Problem:
    return layered_network(n, seed=seed, capacity_fraction=capacity_fraction)


@functools.cache
def _prefetch_problems() -> tuple[tuple[Problem, Any], ...]:
    return ((_layered(60, 11).replace(name="layered-60-prefetch", mode="prefetch"), HW),
            (_layered(40, 3, 0.2).replace(name="layered-40-prefetch-tight", mode="prefetch"), HW))


def _problems(subject: Subject) -> list[tuple[Problem, Any]]:
    out: list[tuple[Problem, Any]] = []
    if subject.supports("map"):
        out += _map_problems()
    if subject.supports("pack"):
        out += _pack_problems()
    if subject.supports("prefetch"):
        out += _prefetch_problems()
    return out


def _main_mode(subject: Subject) -> str:
    return next(m for m in ("map", "pack", "prefetch") if subject.supports(m)) if subject.modes else "map"


# ---------------------------------------------------------------- the checks

def check_protocol(subject: Subject) -> str:
    """Registered name, modes drawn from {map, pack, prefetch}, solve(request), documented Options, a docstring."""
    solver = load_solver(subject.name)
    declared = getattr(solver, "name", None)
    _require(declared == subject.name, f"the solver's name attribute is {declared!r}, registered as {subject.name!r}")
    modes = getattr(solver, "modes", None)
    _require(isinstance(modes, (set, frozenset)) and bool(modes) and set(modes) <= set(MODES),
             f"modes must be a non-empty set drawn from {set(MODES)}, got {modes!r}")
    broken = contract_error(solver)
    _require(broken is None, str(broken))
    text = describe(solver_entries()[subject.name])
    _require(bool(text) and not text.startswith("("),
             f"no one-line description for `mallocgame solvers` (module docstring): {text}")
    return f"modes {', '.join(sorted(modes))}"


def check_problem(subject: Subject, problem: Problem, hardware) -> Report:
    """One valid answer on ``problem`` (pack: every buffer placed; map: not slower than all-slow)."""
    _, report, _ = subject.solve(problem, hardware)
    _require(report.valid, f"{_where(problem)}: no valid answer: {report.violation}")
    if problem.mode == "pack":
        _require(report.placed == problem.n, f"{_where(problem)}: placed {report.placed} of {problem.n} buffers")
    else:  # map and prefetch: all-slow is always an answer, so never end below it
        _require(at_least(problem.mode, report.objective, 0.0),
                 f"{_where(problem)}: slower than all-slow (value {report.objective:.6g})")
    if problem.capacity is not None:
        _require(report.peak <= problem.capacity, f"{_where(problem)}: peak {report.peak} over capacity {problem.capacity}")
    return report


def check_valid_answers(subject: Subject) -> str:
    """A valid answer on every problem of every supported mode (pack: all placed; map: not slower than all-slow)."""
    problems = _problems(subject)
    for problem, hw in problems:
        check_problem(subject, problem, hw)
    return f"{len(problems)} problems"


def check_capacity(subject: Subject) -> str:
    """Map and prefetch answers fit tight capacities (nothing fits: all slow); pack answers over capacity are not optimal."""
    count = 0
    for mode in ("map", "prefetch"):
        if not subject.supports(mode):
            continue
        tight = _layered(60, 11, 0.15).replace(mode=mode)
        check_problem(subject, tight, HW)
        smallest = min(b.size for b in tight.buffers)
        nothing_fits = tight.replace(name="layered-nothing-fits", capacity=smallest - 1)
        _, report, _ = subject.solve(nothing_fits, HW)
        _require(report.valid and report.placed == 0,
                 f"{_where(nothing_fits)}: every buffer must stay slow, got "
                 f"{report.violation or f'{report.placed} placed'}")
        count += 2
    if subject.supports("pack"):
        problem, known = _packed(30, 8, 64, 24)
        problem = problem.replace(name="packed-30-tight", capacity=peak(problem, known))
        solution, report, _ = subject.solve(problem, UNIT)
        if not report.valid:
            _require(_status_of(problem, solution) is not Status.OPTIMAL,
                     f"{_where(problem)}: claims OPTIMAL for an invalid answer: {report.violation}")
        count += 1
    return f"{count} problems"


def check_same_seed(subject: Subject) -> str:
    """The same seed gives the same answer."""
    if _main_mode(subject) in ("map", "prefetch"):
        problem, hw = _layered(30, 5).replace(mode=_main_mode(subject)), HW
    else:
        problem, hw = _packed(15, 4, 64, 40)[0].replace(capacity=128), UNIT
    # Small enough that no solver should need its whole limit; anytime solvers that do must
    # still be reproducible (a deterministic work budget rather than wall-clock cut-offs).
    limit = 2 * subject.time_limit
    a, ra, _ = subject.solve(problem, hw, seed=7, time_limit=limit)
    b, _, _ = subject.solve(problem, hw, seed=7, time_limit=limit)
    _require(ra.valid, f"{_where(problem)}: no valid answer: {ra.violation}")
    if problem.mode == "prefetch" and sorted(a.intervals, key=_interval_key) != sorted(b.intervals, key=_interval_key):
        raise CheckFailed(f"{_where(problem)}: two runs with seed 7 give different intervals")
    if tuple(a.offsets) != tuple(b.offsets):
        diff = sum(x != y for x, y in zip(a.offsets, b.offsets)) + abs(len(a.offsets) - len(b.offsets))
        raise CheckFailed(f"{_where(problem)}: two runs with seed 7 differ on {diff} buffers")
    return "seed 7 twice"


def _interval_key(iv) -> tuple:
    return (iv.buffer, iv.start, iv.end, iv.offset, -2 if iv.copy_start is None else iv.copy_start)


def _allowed_seconds(limit: float) -> float:
    # Generous slack for model building and a busy machine; a solver that ignores the limit fails.
    return 2 * limit + 5


def check_time_limit(subject: Subject) -> str:
    """A large problem in each mode gets a valid answer within about the time limit."""
    limit = subject.time_limit
    worst = 0.0
    for mode in sorted(subject.modes & set(MODES)):
        if mode in ("map", "prefetch"):
            problem, hw = _layered(600, 9).replace(mode=mode), HW
        else:
            problem, hw = random_intervals(400, seed=9, name="random-400").replace(mode="pack"), UNIT
        t0 = time.monotonic()
        _, report, _ = subject.solve(problem, hw)
        elapsed = time.monotonic() - t0
        _require(elapsed <= _allowed_seconds(limit), f"{_where(problem)}: took {elapsed:.1f} s with a {limit:g} s limit")
        _require(report.valid, f"{_where(problem)}: no valid answer within the limit: {report.violation}")
        worst = max(worst, elapsed)
    return f"slowest {worst:.2f} s with a {limit:g} s limit"


def _external_hint(problem: Problem, hw) -> tuple[int | None, ...]:
    """A valid hint made without any solver: first fit in start order (map: within the capacity)."""
    placed: list[tuple[int, int, int, int]] = []  # start, end, offset, top
    out: list[int | None] = [None] * problem.n
    cap = problem.capacity if problem.mode == "map" else None
    for i in sorted(range(problem.n), key=lambda i: (problem.buffers[i].start, i)):
        b = problem.buffers[i]
        offset = 0
        for _, _, lo, hi in sorted((p for p in placed if p[0] < b.end and b.start < p[1]), key=lambda p: p[2]):
            if offset + b.size <= lo:
                break
            offset = max(offset, -(-hi // b.alignment) * b.alignment)
        if cap is None or offset + b.size <= cap:
            out[i] = offset
            placed.append((b.start, b.end, offset, offset + b.size))
    violation = validate(problem, out)
    if violation:  # a bug of this suite, not of the solver under test
        raise RuntimeError(f"conformance: the first-fit hint for {problem.name} is invalid: {violation}")
    return tuple(out)


def check_hint(subject: Subject) -> str:
    """Valid hints are accepted; the answer is never worse than a hint the solver itself produced."""
    count = 0
    for mode in sorted(subject.modes & set(MODES)):
        if mode == "map":
            problem, hw = _layered(50, 2), HW
            hints = {"first-fit": _hint(_external_hint(problem, hw), mode),
                     "all-slow": _hint((None,) * problem.n, mode)}
        elif mode == "prefetch":
            problem, hw = _layered(50, 2).replace(mode="prefetch"), HW
            lifted = lift_map_answer(problem, _external_hint(problem.replace(mode="map"), hw))
            hints = {"lifted first-fit": _hint((None,) * problem.n, mode, lifted),
                     "all-slow": _hint((None,) * problem.n, mode)}
        else:
            problem, known = _packed(20, 6, 64, 40)
            problem, hw = problem.replace(name="packed-20-peak", capacity=None), UNIT
            hints = {"first-fit": _hint(_external_hint(problem, hw), mode), "known packing": _hint(known, mode)}
        for label, hint in hints.items():
            _, report, _ = subject.solve(problem, hw, hint=hint)
            _require(report.valid, f"{_where(problem)}: no valid answer with the {label} hint: {report.violation}")
        _, own, _ = subject.solve(problem, hw)
        _require(own.valid, f"{_where(problem)}: no valid answer: {own.violation}")
        _, again, _ = subject.solve(problem, hw, hint=_answer_of(own, problem))
        _require(again.valid, f"{_where(problem)}: no valid answer with its own answer as hint: {again.violation}")
        _require(not _worse(problem, hw, _answer_of(again, problem), _answer_of(own, problem)),
                 f"{_where(problem)}: worse than the hint it was given (its own answer): "
                 f"{again.objective:.6g} vs {own.objective:.6g}")
        count += len(hints) + 1
    return f"{count} hints"


def _status_of(problem: Problem, solution: Solution) -> Status:
    try:
        status = Status(solution.status)
    except ValueError:
        raise CheckFailed(f"{_where(problem)}: status {solution.status!r} is not a mallocgame.problem.model.Status") from None
    _require(solution.mode == problem.mode, f"{_where(problem)}: the answer's mode is {solution.mode!r}, "
                                            f"the problem's {problem.mode!r} (pass mode=problem.mode)")
    _require(len(solution.offsets) in (0, problem.n),
             f"{_where(problem)}: {len(solution.offsets)} offsets for {problem.n} buffers")
    return status


def check_statuses(subject: Subject) -> str:
    """A Solution with a Status and the problem's mode; INFEASIBLE and OPTIMAL never contradicted."""
    count = 0
    if subject.supports("prefetch"):
        problem = _layered(60, 11).replace(name="layered-60-prefetch", mode="prefetch")
        solution, report, _ = subject.solve(problem, HW)
        status = _status_of(problem, solution)
        _require(status is not Status.INFEASIBLE, f"{_where(problem)}: claims INFEASIBLE, but all-slow is an answer")
        _require(report.valid or status is not Status.OPTIMAL,
                 f"{_where(problem)}: claims OPTIMAL for an invalid answer: {report.violation}")
        count += 1
    if subject.supports("map"):
        base = _layered(60, 11)
        roomy = base.replace(name="layered-everything-fits", capacity=int(sum(b.size for b in base.buffers)))
        best = Evaluator(roomy, HW).value([0] * roomy.n)  # everything fast (stacked) is optimal
        for problem in (base, roomy):
            solution, report, _ = subject.solve(problem, HW)
            status = _status_of(problem, solution)
            _require(status is not Status.INFEASIBLE, f"{_where(problem)}: claims INFEASIBLE, but all-slow is an answer")
            _require(report.valid or status is not Status.OPTIMAL,
                     f"{_where(problem)}: claims OPTIMAL for an invalid answer: {report.violation}")
            if problem is roomy and status is Status.OPTIMAL:
                _require(at_least(problem.mode, report.objective, best),
                         f"{_where(problem)}: claims OPTIMAL with value {report.objective:.6g}, "
                         f"but everything fits (value {best:.6g})")
            count += 1
    if subject.supports("pack"):
        problem, known = _packed(25, 3, 64, 20)
        known_peak = peak(problem, known)
        for p in (problem.replace(name="packed-25-peak", capacity=None),
                  problem.replace(name="packed-25-fits", capacity=known_peak)):
            solution, report, _ = subject.solve(p, UNIT)
            status = _status_of(p, solution)
            _require(status is not Status.INFEASIBLE, f"{_where(p)}: claims INFEASIBLE, but a packing with peak "
                                                      f"{known_peak} exists")
            _require(report.valid or status is not Status.OPTIMAL,
                     f"{_where(p)}: claims OPTIMAL for an invalid answer: {report.violation}")
            if status is Status.OPTIMAL:
                _require(report.peak <= known_peak,
                         f"{_where(p)}: claims OPTIMAL with peak {report.peak}, but peak {known_peak} is possible")
            count += 1
    return f"{count} problems"


def check_no_answer(subject: Subject) -> str:
    """No answer where none exists (in time, not claimed optimal); an empty program is solved."""
    count = 0
    if subject.supports("pack"):
        problem, _ = _packed(25, 2, 64, 20)
        impossible = problem.replace(name="packed-25-impossible", capacity=max_live(problem) - 1)
        t0 = time.monotonic()
        solution, report, _ = subject.solve(impossible, UNIT)
        elapsed = time.monotonic() - t0
        status = _status_of(impossible, solution)
        _require(not report.valid, f"{_where(impossible)}: the validator accepted an answer to an impossible problem")
        _require(status is not Status.OPTIMAL, f"{_where(impossible)}: claims OPTIMAL where no answer exists")
        _require(elapsed <= _allowed_seconds(subject.time_limit),
                 f"{_where(impossible)}: took {elapsed:.1f} s with a {subject.time_limit:g} s limit")
        count += 1
    for mode in sorted(subject.modes & set(MODES)):
        empty = Problem(name="empty", buffers=(), capacity=64, mode=mode)
        solution, report, _ = subject.solve(empty, UNIT)
        _status_of(empty, solution)
        _require(report.valid, f"{_where(empty)}: an empty program has the empty answer, got: {report.violation}")
        count += 1
    return f"{count} problems"


# The greedy baseline of each mode (the one table, mallocgame.engine.session.BASELINE_SOLVER): a search
# solver builds it first and never ends below it.
GREEDY_BASELINE = BASELINE_SOLVER


def is_greedy(solver: Any) -> bool:
    """Does the solver declare itself a one-pass greedy (``greedy = True``: greedy-xla, best-fit, msa)?

    The greedies are the baselines (or, like best-fit in map mode, another heuristic that may end
    below greedy-xla by design); every other solver is a search and is held to
    :func:`check_never_below_greedy`.
    """
    return getattr(solver, "greedy", False) is True


@functools.cache
def _never_below_problems(mode: str) -> tuple[tuple[Problem, Any], ...]:
    if mode == "map":
        return _map_problems()
    if mode == "prefetch":  # where the searches ended below msa before they built its answer first
        return ((_layered(60, 11, 0.15).replace(name="layered-60-prefetch-tight", mode="prefetch"), HW),
                (_layered(200, 4, 0.25).replace(name="layered-200-prefetch", mode="prefetch"), HW))
    return _pack_problems()


def check_never_below_greedy(subject: Subject) -> str:
    """Ends no worse than the greedy baseline of its mode (map: greedy-xla, pack: best-fit, prefetch: msa).

    Skipped for the greedies themselves (``greedy = True``). The baseline runs with the same time
    limit; a search must build it first (it takes milliseconds) and end at or above it: a
    higher value in map and prefetch mode, and in pack mode a packing whenever the baseline's
    fits, with a peak no higher when minimising it.
    """
    if is_greedy(load_solver(subject.name)):
        return "skipped: a greedy (a baseline itself)"
    count = 0
    for mode in sorted(subject.modes & set(GREEDY_BASELINE)):
        baseline = Subject(GREEDY_BASELINE[mode], frozenset({mode}), subject.time_limit)
        for problem, hw in _never_below_problems(mode):
            _, base_report, _ = baseline.solve(problem, hw)
            if not base_report.valid:
                continue  # nothing to hold the search to (a pack baseline over the capacity)
            _, report, _ = subject.solve(problem, hw)
            _require(report.valid, f"{_where(problem)}: no valid answer where {baseline.name} has one "
                                   f"({report.violation})")
            feasibility = mode == "pack" and problem.capacity is not None  # any packing within it will do
            _require(feasibility or not _worse(problem, hw, _answer_of(report, problem), _answer_of(base_report, problem)),
                     f"{_where(problem)}: ends below the greedy baseline {baseline.name}: "
                     f"{report.objective:.6g} vs {base_report.objective:.6g}")
            count += 1
    return f"{count} problems"


AT_SCALE = 5000  # buffers of the at-scale check's input
AT_SCALE_SLACK = 1.0  # seconds past the limit the at-scale check allows (start-up aside)


@functools.cache
def _at_scale_problem(mode: str) -> tuple[Problem, Any]:
    base = _layered(AT_SCALE, 1, 0.25)
    return base.replace(name=f"layered-{AT_SCALE}-{mode}", mode=mode, capacity=None if mode == "pack" else base.capacity), HW


def _reference(problem: Problem, hardware, limit: float) -> tuple[str, float]:
    """The best baseline answer a solver of ``limit`` seconds must reach: ``(name, objective)``.

    The baselines a search of that limit holds (:func:`mallocgame.engine.session.held_names`: chosen by the problem's
    size and the limit, never by a clock, so the same at any load), each built to its end on a copy of the
    problem (a fresh solve session, nothing shared with the solver's run). All-slow (0) is the floor in map and
    prefetch modes; in pack mode best fit if held, else the online allocator (which pack_start holds).
    """
    copy = problem.replace(name=problem.name + "-reference")  # held here: its facts hold it weakly
    found = held_baselines(Session(copy, hardware), limit)
    if problem.mode == "pack":
        if found:
            return found[0].name, found[0].objective

        offsets = online_pack(problem)
        return "online allocator", float((offsets + problem.arrays.size).max())
    return max([("all-slow", 0.0)] + [(b.name, b.objective) for b in found], key=lambda x: x[1])


def check_at_scale(subject: Subject) -> str:
    """On a 5,000-buffer input with the short limit: ends within the limit + 1 s and not below the best baseline.

    Per supported mode (map, pack without a capacity, prefetch) on a generated layered network: the
    solver's wall time (after one small warm-up solve, so imports are start-up) is at most the limit
    plus :data:`AT_SCALE_SLACK`, and its answer is valid and at least the best baseline of the mode a search
    of that limit holds (:func:`_reference`, :func:`mallocgame.engine.session.held_names`: greedy-xla; best fit; the
    lifted greedy-xla answer, then msa's runs); the greedies (``greedy = True``) are held to the time and
    validity only.
    """
    limit = subject.time_limit
    greedy = is_greedy(load_solver(subject.name))
    done = []
    for mode in ("map", "pack", "prefetch"):
        if not subject.supports(mode):
            continue
        problem, hw = _at_scale_problem(mode)
        subject.solve(_layered(30, 5).replace(mode=mode, capacity=None if mode == "pack" else 10**9), hw)
        _, report, seconds = subject.solve(problem, hw)
        _require(seconds <= limit + AT_SCALE_SLACK,
                 f"{_where(problem)}: took {seconds:.2f} s with a {limit:g} s limit (allowed {limit + AT_SCALE_SLACK:g} s)")
        _require(report.valid, f"{_where(problem)}: no valid answer ({report.violation})")
        if greedy:
            done.append(f"{mode} {seconds:.2f} s")
            continue
        name, objective = _reference(problem, hw, limit)
        _require(at_least(mode, report.objective, objective),
                 f"{_where(problem)}: ends below the baseline {name}: {report.objective:.6g} vs {objective:.6g}")
        done.append(f"{mode} {seconds:.2f} s")
    return ", ".join(done) or "skipped: no mode of map, pack, prefetch"


SHORT_LIMITS = (0.2, 1.0)  # seconds: the short-limits check's limits


def _busy(until: float) -> None:
    while time.monotonic() < until:
        pass


class _CpuLoad:
    """One busy process per core while the block runs (the parallel load of a shared machine)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.calls: list[ChildCall] = []

    def __enter__(self):
        until = time.monotonic() + self.seconds
        self.calls = [ChildCall(_busy, until) for _ in range(os.cpu_count() or 1)]
        return self

    def __exit__(self, *exc):
        for call in self.calls:
            call.cancel()


def check_short_limits(subject: Subject) -> str:
    """At 0.2 s and at 1 s, under a busy process per core: a valid answer, never below the best baseline a
    search of that limit holds (:func:`_reference`: the same baselines at any load), within the limit + 1 s.

    Per supported mode, on a 150-buffer layered network (map and prefetch at 25% of max live, pack
    without a capacity). Importing a heavy library on the solver's clock, or handing the fallback an
    expired deadline, shows here: a search that ends all-slow where greedy-xla places most buffers in
    milliseconds fails. The greedies are held to the time and validity only.
    """
    greedy = is_greedy(load_solver(subject.name))
    done = []
    for mode in ("map", "pack", "prefetch"):
        if not subject.supports(mode):
            continue
        base = _layered(150, 2, 0.25)
        problem = base.replace(name=f"layered-150-{mode}", mode=mode, capacity=None if mode == "pack" else base.capacity)
        for limit in SHORT_LIMITS:
            with _CpuLoad(limit + AT_SCALE_SLACK + 1.0):
                _, report, seconds = subject.solve(problem, HW, time_limit=limit)
            reference = None if greedy else _reference(problem, HW, limit)
            _require(seconds <= limit + AT_SCALE_SLACK,
                     f"{_where(problem)}: took {seconds:.2f} s with a {limit:g} s limit under load")
            _require(report.valid, f"{_where(problem)}: no valid answer at {limit:g} s ({report.violation})")
            if reference is not None:
                name, objective = reference
                _require(at_least(mode, report.objective, objective),
                         f"{_where(problem)}: at {limit:g} s ends below the baseline {name}: "
                         f"{report.objective:.6g} vs {objective:.6g}")
            done.append(f"{mode}@{limit:g}s {seconds:.2f} s")
    return ", ".join(done) or "skipped: no mode of map, pack, prefetch"


CHECKS: dict[str, Callable[[Subject], str]] = {
    "protocol": check_protocol,
    "valid-answers": check_valid_answers,
    "capacity": check_capacity,
    "same-seed": check_same_seed,
    "time-limit": check_time_limit,
    "hint": check_hint,
    "statuses": check_statuses,
    "no-answer": check_no_answer,
    "never-below-greedy": check_never_below_greedy,
    "at-scale": check_at_scale,
    "short-limits": check_short_limits,
}


def subject_of(name: str, *, time_limit: float = DEFAULT_TIME_LIMIT) -> Subject:
    """The solver registered as ``name``; raises ``SolverLoadError`` if unknown or it fails to load."""
    solver = load_solver(name)
    modes = getattr(solver, "modes", frozenset(MODES))
    try:
        modes = frozenset(modes)
    except TypeError:
        modes = frozenset()
    return Subject(name, modes, time_limit)


def run_check(subject: Subject, check: str) -> CheckResult:
    """Run one check; a failure (or a crash of the solver or of the check) is a failed result, never an exception."""
    t0 = time.monotonic()
    try:
        passed, message = True, CHECKS[check](subject) or ""
    except CheckFailed as exc:
        passed, message = False, str(exc)
    except Exception as exc:
        passed, message = False, f"{exc.__class__.__name__}: {exc}"
    return CheckResult(check, passed, " ".join(message.split()), time.monotonic() - t0)


def check_solver(name: str, *, time_limit: float = DEFAULT_TIME_LIMIT, checks: Iterable[str] | None = None,
                 progress: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run the conformance checks (all, or those named) on solver ``name``; one result per check, in order.

    ``time_limit`` is the limit of each solve. ``progress`` is called with each result as
    soon as it is known. Raises ``SolverLoadError`` for an unknown solver or a plugin that
    fails to load, ``KeyError`` for an unknown check name.
    """
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [c for c in names if c not in CHECKS]
    if unknown:
        raise KeyError(f"unknown check(s) {', '.join(unknown)} (known: {', '.join(CHECKS)})")
    subject = subject_of(name, time_limit=time_limit)
    results = []
    for check in names:
        result = run_check(subject, check)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


__all__ = ["CHECKS", "CheckFailed", "CheckResult", "Subject", "check_problem", "check_solver", "run_check",
           "subject_of"]
