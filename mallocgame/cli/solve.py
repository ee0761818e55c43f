"""``mallocgame solve PROBLEM --solver NAME``: solve a problem with one solver; print one summary line.

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`). Exit codes: 0 a valid
solution (written with ``-o``), 1 none found (nothing written), 2 bad input or usage.
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass
from typing import Any

import click

from mallocgame.cli.common import (
    COUNT,
    EXIT_BAD_INPUT,
    EXIT_NO_SOLUTION,
    SECONDS,
    SEED,
    capacity_warning,
    check_muzero_checkpoint,
    check_option_values,
    check_options,
    check_output,
    check_own_order,
    dump_json,
    fail,
    intervals_json,
    is_stdout,
    load_prepared,
    no_cache_option,
    offsets_by_id,
    one_stdout,
    problem_options,
    stamp,
    write_file,
    write_text,
)
from mallocgame.cli.exits import command_started
from mallocgame.cli.progress import SolveProgress
from mallocgame.cli.schedule import reschedule_outputs
from mallocgame.engine.protocol import option_kinds, parse_solver_options, split_option
from mallocgame.engine.registry import SolverLoadError, implied_mode, load_solver, solver_entries, solver_entry
from mallocgame.engine.runner import UnsupportedMode
from mallocgame.engine.solving import check_request, command_budget, solve_beside_bound
from mallocgame.formats.io import intervals_csv_text, problem_csv_text
from mallocgame.hybrid.reschedule import reschedule_beside_limit
from mallocgame.problem.model import InputError, Problem
from mallocgame.problem.suggest import did_you_mean


def _check_hint(problem: Problem, hint_path: str, time_limit: float):
    """The request checked by the core (:func:`mallocgame.engine.solving.check_request`): the ``--hint`` file as an
    answer of the problem's mode (a map solution is lifted in prefetch mode, and a note says so)."""
    _, hint, lifted = check_request(problem, time_limit=time_limit, hint_path=hint_path)
    if lifted:
        click.echo(f"note: {hint_path}: a map solution, lifted to prefetch mode (mallocgame.formats.lift)", err=True)
    return hint


def _solve_options(names: list[str], items: tuple[str, ...], workers: int | None, simulations: int | None,
                   minimize_peak: bool) -> dict[str, Any]:
    """The options of ``solve`` (flags and ``--solver-option``), checked against the solvers that run.

    An option that neither --solver nor --warm-start takes (or, with a ``SOLVER:`` prefix, that
    solver) is bad input (exit 2); each solver receives the options its ``Options`` has.
    ``minimize_peak`` is passed only to a solver that takes it, and is never an error: the
    problem has no capacity then, and every pack solver minimises the peak without one.
    """
    try:
        loaded = {name: load_solver(name) for name in names}
    except SolverLoadError as exc:
        fail(str(exc))
    options: dict[str, Any] = {}
    checks: list[tuple[dict[str, Any], list[str], str]] = []  # (options, solvers that may take them, flag)
    for item in items:
        try:
            per = parse_solver_options([item], names, option_kinds(list(loaded.values())))
        except InputError as exc:
            fail(str(exc))
        target, _ = split_option(item)
        mine = [target] if target in per else names
        check_option_values(per[mine[0]], f"--solver-option {item}", {name: loaded[name] for name in mine})
        checks.append((per[mine[0]], mine, f"--solver-option {item}"))
        options.update(per[mine[0]])
    for key, value, flag in (("workers", workers, "--workers"), ("simulations", simulations, "--simulations")):
        if value is not None:
            options[key] = value
            checks.append(({key: value}, names, flag))
    for opts, mine, flag in checks:
        check_options(opts, {name: loaded[name] for name in mine}, flags={key: flag for key in opts})
    if minimize_peak:
        options["minimize_peak"] = True
    check_muzero_checkpoint(names, options)
    return options


def _report_json(report, problem: Problem, spec, minimize_peak: bool) -> dict[str, Any]:
    return {"format": "mallocgame.engine.report/1", **stamp(), "problem": problem.name, "source": problem.source,
            "capacity": problem.capacity, "hardware": getattr(spec, "name", None), "minimize_peak": minimize_peak,
            **report.as_json(), "offsets": offsets_by_id(problem, report.offsets if report.valid else None),
            **({"intervals": intervals_json(problem, report.intervals)} if problem.mode == "prefetch" else {})}


@click.command()
@click.argument("problem_path", metavar="PROBLEM")
@click.option("--solver", "solver_name", required=True, help="A registered solver (see `mallocgame solvers`).")
@problem_options
@no_cache_option
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True, help="Seconds.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--hint", "hint_path", default=None, metavar="SOLUTION.csv", help="Warm start from this solution.")
@click.option("--warm-start", "warm_start", default=None, metavar="SOLVER",
              help="Run SOLVER first and give its answer to --solver as a hint (and fallback).")
@click.option("--workers", type=COUNT, default=None, help="Parallel workers (only for solvers that take them).")
@click.option("--minimize-peak", is_flag=True,
              help="Pack mode without a capacity: minimise the peak address (ignores the file's or hardware's).")
@click.option("--simulations", type=COUNT, default=None, help="Tree-search simulations per move (mcts, muzero).")
@click.option("--solver-option", "solver_options", multiple=True, metavar="KEY=VALUE",
              help="Option for the solver's solve() (repeatable); one it does not take is an error.")
@click.option("-o", "--output", default=None, metavar="SOLUTION.csv",
              help="Write the solution here ('-': stdout, the summary line then goes to stderr).")
@click.option("--report", "report_path", default=None, metavar="REPORT.json",
              help="Write a JSON report here ('-': stdout).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.option("--log", "log", is_flag=True,
              help="Print one line per better answer on stderr (time, objective, bound, gap, source).")
@click.option("--quiet", "quiet", is_flag=True, help="No progress on stderr (by default a status line on a terminal).")
@click.option("--reschedule", is_flag=True,
              help="Also re-order the ops (mallocgame schedule) and alternate schedule and placement while the "
                   "time lasts; the best pair wins (the answer belongs to the re-scheduled workload).")
@click.option("--schedule-output", "schedule_output", default=None, metavar="W2.json",
              help="With --reschedule: write the re-scheduled workload here "
                   "(default: beside -o SOLUTION.csv as SOLUTION.workload.json).")
def solve(problem_path, solver_name, mode, capacity, capacity_fraction, hardware, time_limit, seed, hint_path,
          warm_start, workers, minimize_peak, simulations, solver_options, output, report_path, as_json,
          log=False, quiet=False, reschedule=False, schedule_output=None) -> None:
    """Solve PROBLEM with one solver; print one summary line."""
    outs = _SolveOutputs(output, report_path, as_json, schedule_output)
    names = list(dict.fromkeys([solver_name] + ([warm_start] if warm_start else [])))
    _check_solve_flags(outs, reschedule=reschedule, time_limit=time_limit, solvers=names)
    if log and quiet:
        fail("--log and --quiet: choose one")
    if mode is None and not minimize_peak:  # a solver with one mode implies it (msa: prefetch)
        mode = implied_mode([solver_name])
    loading = time.monotonic()
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity, capacity_fraction=capacity_fraction,
                                      hardware=hardware, minimize_peak=minimize_peak)
        check_own_order(problem, problem_path)
        hint = _check_hint(problem, hint_path, time_limit) if hint_path else None
    except InputError as exc:
        fail(str(exc))
    # the limit counts from the command's start with the inputs' load added: everything else is inside it
    budget = command_budget(time_limit, started=command_started(), loading=time.monotonic() - loading)
    gc.freeze()  # the problem lives to the end: collections (and a forked solver's pages) leave it alone
    options = _solve_options(names, solver_options, workers, simulations, minimize_peak)
    capacity_warning(problem)
    rescheduled = None
    try:
        # In a forked child (mallocgame.runtime.forking.ChildCall): Ctrl-C/SIGTERM stop any solver at once, CP-SAT's
        # native search included, nothing it started is left running, and the limit is kept here.
        if reschedule:  # schedule and placement alternated (hybrid.reschedule); the answer is the new order's
            rescheduled = reschedule_beside_limit(solver_name, problem, spec, time_limit=time_limit, budget=budget,
                                                  seed=seed, hint=hint, warm_start=warm_start, options=options)
            report, problem = rescheduled.report, rescheduled.problem
        else:
            progress = SolveProgress(solver_name, problem.mode, time_limit, log=log, quiet=quiet)
            try:
                report = solve_beside_bound(solver_name, problem, spec, time_limit=time_limit, seed=seed, hint=hint,
                                            warm_start=warm_start, options=options, budget=budget,
                                            on_improvement=progress.improved if progress.shows else None,
                                            on_bound=progress.bound if progress.shows else None)
            finally:
                progress.close()
    except (SolverLoadError, UnsupportedMode, InputError) as exc:  # InputError: a bad option value, say
        fail(str(exc))
    except Exception as exc:  # a solver's own failure: one line, no solution
        fail(f"solver {solver_name!r} failed: {exc.__class__.__name__}: {exc}", EXIT_NO_SOLUTION)
    _solve_outputs(report, problem, spec, outs, problem_path=problem_path, minimize_peak=minimize_peak,
                   rescheduled=rescheduled)


@dataclass(frozen=True)
class _SolveOutputs:
    """Where ``solve`` writes: the answer (``-o``), the report (``--report``), ``--json``, the
    re-scheduled workload (``--schedule-output``)."""

    output: str | None
    report_path: str | None
    as_json: bool
    schedule_output: str | None

    @property
    def to_stdout(self) -> bool:
        """Does stdout carry the answer or the report (the summary line then goes to stderr)?"""
        return is_stdout(self.output) or is_stdout(self.report_path) or self.as_json


def _check_solve_flags(outs: _SolveOutputs, *, reschedule: bool, time_limit: float, solvers: list[str]) -> None:
    """Exit 2 for outputs that cannot be written or clash, a bad time limit or an unknown solver."""
    one_stdout(**{"-o -": is_stdout(outs.output), "--report -": is_stdout(outs.report_path), "--json": outs.as_json})
    check_output(outs.output, "-o")
    check_output(outs.report_path, "--report")
    check_output(outs.schedule_output, "--schedule-output")
    if outs.schedule_output and not reschedule:
        fail("--schedule-output: only with --reschedule")
    if not time_limit > 0:
        fail(f"--time-limit: must be positive, got {time_limit}")
    for name in solvers:
        if solver_entry(name) is None:
            entries = solver_entries()
            fail(f"--solver: unknown solver {name!r} (registered: {', '.join(entries)}){did_you_mean(name, entries)}")


def _solve_outputs(report, problem: Problem, spec, outs: _SolveOutputs, *, problem_path: str, minimize_peak: bool,
                   rescheduled) -> None:
    """Write the files, print the summary line (and the report on stdout), exit with solve's code.

    ``rescheduled``: the answer of ``--reschedule`` (its workload is written too), else ``None``.
    """
    output, report_path = outs.output, outs.report_path
    summary = report.summary(has_ops=problem.has_ops)
    if problem.capacity is None:
        summary += " capacity=none" + (" (--minimize-peak: validated without a capacity)" if minimize_peak else "")
    # the JSON report only when something prints or writes it (its offsets, one per buffer, cost seconds on big inputs)
    wanted = bool(report_path or outs.as_json or rescheduled is not None)
    document = _report_json(report, problem, spec, minimize_peak) if wanted else {}
    answer = None
    if report.valid and output:
        answer = (intervals_csv_text(problem, report.intervals) if problem.mode == "prefetch"
                  else problem_csv_text(problem, report.offsets))
    schedule_path = None
    if rescheduled is not None:  # the report gets its schedule entry before it is written
        summary, schedule_path, schedule_text = reschedule_outputs(problem_path, rescheduled, summary, document,
                                                                  output, outs.schedule_output, spec)
    # Files first (no file is written without a valid solution): one that cannot be written is
    # said before anything else, and the summary and --json still follow.
    files = [(output, answer), (report_path, dump_json(document) if report_path else None)]
    if schedule_path:
        files.insert(0, (schedule_path, schedule_text))
    unwritten: list[str] = []
    for path, text in files:
        if report.valid and path and not is_stdout(path):
            unwritten += filter(None, [write_file(path, text)])
    for line in unwritten:
        click.echo(f"error: {line}", err=True)
    click.echo(summary, err=outs.to_stdout)
    if outs.as_json or is_stdout(report_path):  # stdout gets the report even without a solution
        click.echo(dump_json(document), nl=False)
    if not report.valid:
        sys.exit(EXIT_NO_SOLUTION)
    if is_stdout(output):
        write_text(output, answer)
    if unwritten:
        sys.exit(EXIT_BAD_INPUT)
