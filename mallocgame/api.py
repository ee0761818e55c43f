"""The Python API: load a problem, solve it, validate an answer, draw it, compare solvers, list them.

The same paths the command line takes (docs/architecture.md, "The doors"): every answer is
validated and scored by the runner; problems are prepared by `mallocgame.inputs.load.prepare`.

Examples:
    >>> import mallocgame
    >>> problem = mallocgame.load_problem("example:layered150")
    >>> result = mallocgame.solve(problem, "greedy-xla", time_limit=5)
    >>> result.status, result.solution.placed, bool(mallocgame.validate(problem, result.solution))
    ('FEASIBLE', 113, True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from mallocgame.algorithms.scheduling import schedule as run_schedule
from mallocgame.engine.comparison import run_comparison
from mallocgame.engine.protocol import bad_seed, bad_time_limit, options_of
from mallocgame.engine.registry import describe, load_solver, solver_entries, solver_modes
from mallocgame.engine.report import Report, answer, judge
from mallocgame.engine.solving import check_request, command_budget, solve_beside_bound
from mallocgame.formats.io import read_intervals_csv, read_solution_csv
from mallocgame.inputs.load import load_problem, prepare
from mallocgame.plots import plot_intervals, plot_solution
from mallocgame.problem.model import FastInterval, InputError, Problem, Solution, Status

__all__ = ["Result", "SolverInfo", "Verdict", "compare", "load_problem", "solve", "list_solvers", "validate", "plot"]


@dataclass(frozen=True)
class Result:
    """A validated, scored answer of [`solve`][mallocgame.api.solve].

    Attributes:
        solver: The registered name of the solver that ran.
        status: `"OPTIMAL"`, `"FEASIBLE"`, `"INFEASIBLE"` or `"UNKNOWN"` (a valid answer is at least
            `"FEASIBLE"`).
        valid: Whether the validator accepted the answer.
        solution: The answer: offsets (map and pack modes) or fast intervals (prefetch mode), as a
            [`Solution`][mallocgame.problem.model.Solution]; `None` when the solver found no valid answer.
        objective: Seconds saved against all-slow (map and prefetch modes, higher is better) or the
            peak address in bytes (pack mode, lower is better); `None` without a valid answer.
        bound: An upper bound on the saving (map and prefetch modes) or a lower bound on the peak
            (pack mode); `report.bound_kind` names it.
        gap: `(bound - objective) / bound` (map and prefetch) or `(objective - bound) / bound` (pack);
            0 means proven optimal.
        seconds: Wall-clock seconds of the solve.
        report: Everything else (speed-up, estimated time, peak, history, statistics): a
            [`Report`][mallocgame.engine.report.Report].
    """

    solver: str
    status: str
    valid: bool
    solution: Solution | None
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    report: Report | None = field(repr=False, default=None)


@dataclass(frozen=True)
class Verdict:
    """What [`validate`][mallocgame.api.validate] says: truthy when the answer is valid.

    Attributes:
        valid: Whether the answer obeys every rule of its mode.
        violation: The first rule the answer breaks (`None` when valid).
        placed: Buffers in fast memory (map, prefetch) or placed (pack); 0 when invalid.
        peak: The highest address in use, in bytes; 0 when invalid.
        value: Seconds saved against all-slow (map and prefetch modes); `None` in pack mode or when invalid.
        estimated_time: The program's estimated run time in seconds with this answer (map and prefetch
            modes); `None` in pack mode or when invalid.
    """

    valid: bool
    violation: str | None
    placed: int = 0
    peak: int = 0
    value: float | None = None
    estimated_time: float | None = None

    def __bool__(self) -> bool:
        return self.valid

    def __str__(self) -> str:
        return "ok" if self.valid else f"invalid: {self.violation}"


@dataclass(frozen=True)
class SolverInfo:
    """A registered solver, as [`list_solvers`][mallocgame.api.list_solvers] describes it.

    Attributes:
        name: The name `solve` and the command line take.
        description: The first line of the solver module's docstring.
        modes: The modes it solves (`"map"`, `"pack"`, `"prefetch"`).
        distribution: The installed distribution that registers it (`mallocgame` or a plugin's).
    """

    name: str
    description: str
    modes: tuple[str, ...]
    distribution: str


def _ready(problem: Problem | str | Path) -> Problem:
    """A loaded problem as it is, or a path / ``example:`` name loaded with defaults; either way it
    carries its hardware spec (``problem.hardware``), which every call below uses."""
    if isinstance(problem, Problem):
        return problem if problem.hardware is not None else prepare(problem, mode=problem.mode,
                                                                    capacity=problem.capacity)[0]
    return load_problem(problem)


def _offsets(problem: Problem, solution) -> tuple[int | None, ...]:
    if isinstance(solution, Solution):
        return tuple(solution.offsets)
    if isinstance(solution, (str, Path)):
        return tuple(read_solution_csv(str(solution), problem))
    if isinstance(solution, Mapping):  # {buffer id: offset or None}
        unknown = next((k for k in solution if k not in problem.index), None)
        if unknown is not None:
            raise InputError(f"solution: unknown buffer {unknown!r}")
        return tuple(solution.get(b.id) for b in problem.buffers)
    return tuple(None if o is None or (isinstance(o, (int, float)) and o < 0) else int(o) for o in solution)


def _intervals(problem: Problem, solution) -> tuple:
    """A prefetch answer's fast intervals: a Solution's, an interval CSV's, or the given FastIntervals."""
    if isinstance(solution, Solution):
        return tuple(solution.intervals)
    if isinstance(solution, (str, Path)):
        return tuple(read_intervals_csv(str(solution), problem))
    return tuple(solution)


def _answer(problem: Problem, solution, **fields) -> Solution:
    """``solution`` in any accepted form as a Solution of ``problem``'s mode."""
    if problem.mode == "prefetch":
        return Solution(offsets=(None,) * problem.n, mode=problem.mode, intervals=_intervals(problem, solution),
                        **fields)
    return Solution(offsets=_offsets(problem, solution), mode=problem.mode, **fields)


def validate(problem: Problem | str, solution) -> Verdict:
    """Check ``solution``: a [`Solution`][mallocgame.problem.model.Solution], offsets, ``{id: offset}`` or a solution CSV path
    (prefetch
    mode: a Solution, FastIntervals or an interval CSV path). A re-scheduled workload (one with
    ``original_order``) has its op order checked too, as ``mallocgame validate`` does."""
    problem = _ready(problem)
    if solution is None:
        return Verdict(False, "no solution")
    answer = _intervals(problem, solution) if problem.mode == "prefetch" else _offsets(problem, solution)
    found = judge(problem, problem.hardware, answer, schedule=True)  # as `mallocgame validate`
    if not found.valid:
        return Verdict(False, found.violation)
    return Verdict(True, None, found.placed, found.peak, found.value, found.estimated_time)


def plot(problem: Problem | str | Path, result: Result | Solution | Any, path: str | Path, *,
         title: str | None = None) -> Path:
    """Draw an answer of ``problem`` to a picture, in any mode (the picture of ``mallocgame plot``).

    Map and pack modes: each buffer in fast memory is a rectangle, time by address, coloured by its
    kind, with the capacity dashed and the slow buffers on tracks in a band below. Prefetch mode:
    each fast interval is a rectangle and the copy that brings it in is hatched.

    Args:
        problem: The problem answered: a loaded problem, a file path or ``example:NAME``.
        result: A [`Result`][mallocgame.api.Result] of [`solve`][mallocgame.api.solve], or an
            answer in any form [`validate`][mallocgame.api.validate] takes.
        path: The picture to write, `.png`, `.svg` or `.pdf` (the suffix picks the format); written
            to a temporary file, then renamed.
        title: The picture's title. Default: the problem, the solver, the buffers placed, the peak
            and the speed-up over all-slow; an invalid answer is drawn and its title says why.

    Returns:
        The path written.

    Raises:
        InputError: A result without a valid answer, or a path that is not `.png`, `.svg` or `.pdf`.

    Examples:
        >>> import mallocgame, tempfile, pathlib
        >>> problem = mallocgame.load_problem("example:pack40")
        >>> result = mallocgame.solve(problem, "pack-search", time_limit=5)
        >>> path = mallocgame.plot(problem, result, pathlib.Path(tempfile.mkdtemp()) / "pack40.svg")
        >>> path.read_text().startswith("<?xml")
        True
    """
    problem = _ready(problem)
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"path: expected a .png, .svg or .pdf file, got {str(path)!r}")
    solver = ""
    if isinstance(result, Result):
        if result.solution is None:
            raise InputError(f"result: {result.solver} found no valid answer to draw (status {result.status})")
        solver, result = result.solver, result.solution
    elif isinstance(result, Solution):
        solver = result.solver
    given = _intervals(problem, result) if problem.mode == "prefetch" else _offsets(problem, result)
    found = judge(problem, problem.hardware, given, schedule=True)
    if title is None:
        title = _plot_title(problem, solver, found)
    draw = plot_intervals if problem.mode == "prefetch" else plot_solution
    return draw(problem, given, path, title=title[:160])


def _plot_title(problem: Problem, solver: str, found) -> str:
    """The default title of [`plot`][mallocgame.api.plot]: what the answer is and what it achieves."""
    title = f"{problem.name}: {solver + ': ' if solver else ''}{found.placed}/{problem.n} buffers "
    title += f"{'placed' if problem.mode == 'pack' else 'fast'}, peak {found.peak} bytes"
    if not found.valid:
        return title + f" - INVALID: {found.violation}"
    if found.estimated_time:
        title += f", {found.time_all_slow / found.estimated_time:.3f}x faster than all-slow"
    return title


def _hint_request(problem: Problem, hint) -> dict[str, Any]:
    """A hint in any form `validate` takes as `mallocgame.engine.solving.check_request`'s arguments
    (in prefetch mode a map answer in any form is lifted)."""
    if hint is None:
        return {}
    if isinstance(hint, (str, Path)):
        return {"hint_path": str(hint)}
    if isinstance(hint, Solution):
        return {"hint": hint}
    if problem.mode == "prefetch" and not isinstance(hint, Mapping):
        items = tuple(hint)
        if items and all(isinstance(iv, FastInterval) for iv in items):
            return {"hint": Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, intervals=items)}
        hint = items
    return {"hint": Solution(offsets=_offsets(problem, hint), status=Status.FEASIBLE, mode="map")}


def solve(problem: Problem | str, solver: str = "greedy-xla", *, time_limit: float = 10, seed: int = 0,
          hint=None, warm_start: str | None = None, **options: Any) -> Result:
    """Solve ``problem`` with the registered ``solver``; the answer is validated and scored.

    ``hint`` is a valid answer to start from (any form [`validate`][mallocgame.api.validate] takes); the result
    is never worse than it. ``warm_start`` names a solver run first whose answer becomes the
    hint. ``options`` are the solver's own (``workers``, ``simulations``, ...): one it does
    not take raises [`InputError`][mallocgame.problem.model.InputError] naming the ones it does.
    """
    started = time.monotonic()  # the limit counts from the call, with a problem's load (a path given) added
    problem = _ready(problem)
    loading = time.monotonic() - started
    # the request checked once, by the core (time limit; hint, a map answer lifted in prefetch mode)
    time_limit, hint_solution, _ = check_request(problem, time_limit=time_limit, **_hint_request(problem, hint))
    if bad_seed(seed):
        raise InputError(f"seed: {bad_seed(seed)}")
    options_of(load_solver(solver)).parse(options, owner=solver)  # an unknown name or a bad value: one line
    # in a forked child, the limit kept here: a solver still running at time_limit + LIMIT_GRACE is stopped and
    # the best answer it sent is the result ("stopped at the limit")
    report = solve_beside_bound(solver, problem, problem.hardware, time_limit=time_limit, seed=seed,
                                hint=hint_solution, warm_start=warm_start, options=options,
                                budget=command_budget(time_limit, started=started, loading=loading))
    solution = (answer(report, problem).replace(status=Status(report.status), objective=report.objective,
                                                bound=report.bound, wall_time=report.seconds,
                                                history=tuple(report.history), stats=report.stats, solver=solver)
                if report.valid else None)
    return Result(solver=solver, status=report.status, valid=report.valid, solution=solution,
                  objective=report.objective, bound=report.bound, gap=report.gap, seconds=report.seconds,
                  report=report)


def compare(inputs: str | Sequence[str], solvers: str | Sequence[str], **settings: Any) -> list[dict[str, Any]]:
    """Every solver on every input (suite names, ``SUITE:ENTRY``, ``example:NAME`` or files).

    ``settings`` are those of ``mallocgame compare``: ``time_limit``, ``seed``, ``jobs``,
    ``hardware``, ``capacity``, ``capacity_fraction``, ``mode``, ``solver_options``,
    ``benchmarks``. Returns one dict per (input, solver) with the CSV columns (``input``,
    ``solver``, ``status``, ``valid``, ``value``, ``bound``, ``gap``, ``speedup_vs_greedy``, ...).
    """
    if bad_seed(settings.get("seed", 0)):
        raise InputError(f"seed: {bad_seed(settings['seed'])}")
    options = settings.get("solver_options")
    for name, values in (options.items() if isinstance(options, dict) else ()):
        if isinstance(values, dict) and name in solver_entries():
            try:
                options_of(load_solver(name)).taken(values)
            except InputError as exc:
                raise InputError(f"solver_options {exc}") from None
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    solvers = solvers.split(",") if isinstance(solvers, str) else list(solvers)
    return run_comparison(inputs, solvers, **settings).records()


def list_solvers() -> list[SolverInfo]:
    """Every registered solver, plugins included, without importing any of them."""
    return [SolverInfo(name, describe(entry), solver_modes(entry), entry.distribution)
            for name, entry in solver_entries().items()]


def schedule(problem: Problem | str, *, objective: str | None = None, time_limit: float = 10, seed: int = 0,
             schedulers: Sequence[str] = ("auto",)):
    """Re-order the problem's ops within their dependencies (``mallocgame schedule``).

    ``objective``: ``"peak"`` (live bytes; default in pack mode) or ``"time"`` (estimated time of a
    greedy placement; default in map and prefetch modes). Returns a
    `mallocgame.algorithms.scheduling.ScheduleResult`: ``.problem`` is the re-scheduled problem (same ops,
    new order, lifetimes recomputed, ``original_order`` recorded), ``.value`` / ``.original`` the
    objective after and before. Raises [`InputError`][mallocgame.problem.model.InputError] on bad input.
    """
    problem = _ready(problem)
    if bad_time_limit(time_limit):
        raise InputError(f"time_limit: {bad_time_limit(time_limit)}")
    if bad_seed(seed):
        raise InputError(f"seed: {bad_seed(seed)}")
    return run_schedule(problem, objective=objective, hardware=problem.hardware, time_limit=time_limit, seed=seed,
                        schedulers=schedulers)
