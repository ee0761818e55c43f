"""The ``mallocgame`` command line (click). Commands and flags here are a contract.

Exit codes: 0 a valid solution was produced (and written with ``-o``); 1 no solution was
found (nothing written); 2 bad input or usage. Bad input is one line on stderr.
Click's usage errors are one ``error:`` line too, and so is any exception a command does not
expect (exit 1; ``MALLOCGAME_TRACEBACK=1`` shows the traceback): no command prints a traceback.
Commands that live in other modules (``import``, ``play``, ``compare``, ...) are
attached lazily, so ``mallocgame solvers`` never pays for torch or OR-Tools. The rules
every command shares (``--capacity`` units, ``-o -``, ``--json`` stamps, solver options that
are never silently ignored) live in :mod:`mallocgame.cli.common`.
"""

from __future__ import annotations

import errno
import gc
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

import click

from mallocgame.bounds import critical_window_bound
from mallocgame.cli.common import (  # noqa: F401  (fail, problem_options and the codes are imported from here too)
    COUNT,
    EXIT_BAD_INPUT,
    EXIT_NO_SOLUTION,
    EXIT_OK,
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
    load_answer,
    load_prepared,
    offsets_by_id,
    one_stdout,
    problem_options,
    stamp,
    write_file,
    write_text,
)
from mallocgame.cli.schedule import reschedule_outputs
from mallocgame.comparison import parse_solver_options, split_option
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hybrid.reschedule import solve_with_reschedule
from mallocgame.inputs.load import oversized
from mallocgame.interrupts import interrupted, raise_on_signals
from mallocgame.intervals import components, max_live
from mallocgame.io import intervals_csv_text, problem_csv_text
from mallocgame.model import InputError, Problem
from mallocgame.prefetch_bound import RESIDENCY_SECONDS, start_residency
from mallocgame.registry import SolverLoadError, describe, load_solver, solver_entries, solver_modes
from mallocgame.runner import ChildCall, UnsupportedMode, call_in_child, problem_bound, shared_caches, with_bound
from mallocgame.solving import check_request, solve_with_warm_start
from mallocgame.verdict import judge

# name -> "module:attribute" of commands defined outside this file.
# Seconds the residency bound (prefetch mode) may take in `info`, before it answers (`solve` gives it
# mallocgame.prefetch_bound.RESIDENCY_SECONDS at most, beside the solver).
INFO_RESIDENCY_SECONDS = 10.0

LAZY_COMMANDS = {
    "import": "mallocgame.cli.importers:import_group",
    "play": "mallocgame.cli.play:play",
    "compare": "mallocgame.cli.compare:compare_command",
    "suites": "mallocgame.cli.suites:suites_command",
    "plot": "mallocgame.cli.plot:plot_command",
    "train": "mallocgame.cli.train:train",
    "check-solver": "mallocgame.cli.check_solver:check_solver",
    "schedule": "mallocgame.cli.schedule:schedule_command",
    "executorch": "mallocgame.cli.executorch:executorch_command",
}


class _StoppedBySignal(BaseException):
    """A ``KeyboardInterrupt`` (SIGINT, or SIGTERM through ``raise_on_signals``) carried past click's
    ``main``, which would print a blank stderr line before its ``Abort``."""

    def __init__(self, cause: KeyboardInterrupt):
        super().__init__(cause)
        self.cause = cause


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in LAZY_COMMANDS if self._available(n)})

    @staticmethod
    def _available(name: str) -> bool:
        try:
            return importlib.util.find_spec(LAZY_COMMANDS[name].split(":")[0]) is not None
        except ImportError:
            return False

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS and self._available(name):
            module, attr = LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's own ``main``, with every usage error as one ``error:`` line (exit 2)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)

        try:
            with raise_on_signals():  # SIGTERM, like Ctrl-C, unwinds (children killed, temp files removed)
                code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            text = " ".join(exc.format_message().split()).rstrip(".")
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx else ""
            click.echo(f"error: {text}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, KeyboardInterrupt):  # a command that had nothing finished to report
                stop = interrupted(cause)
                click.echo(f"interrupted by {stop.signal_name}", err=True)
                sys.exit(stop.exit_code)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except (KeyboardInterrupt, _StoppedBySignal) as exc:  # between click's own handlers, or in a command
            stop = interrupted(exc.cause if isinstance(exc, _StoppedBySignal) else exc)
            click.echo(f"interrupted by {stop.signal_name}", err=True)
            sys.exit(stop.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        """Run the command; an exception it does not expect is one ``error:`` line, not a traceback."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _StoppedBySignal(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except InputError as exc:  # bad input that escaped the command's own handling
            fail(str(exc))
        except OSError as exc:
            if exc.errno == errno.EPIPE or os.environ.get("MALLOCGAME_TRACEBACK"):
                raise  # click handles a closed stdout
            fail(f"{getattr(exc, 'filename', None) or 'system'}: {exc.strerror or exc}")
        except Exception as exc:
            if os.environ.get("MALLOCGAME_TRACEBACK"):
                raise
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            fail(f"unexpected {exc.__class__.__name__}{': ' + text if text else ''} "
                 "(MALLOCGAME_TRACEBACK=1 shows where)", EXIT_NO_SOLUTION)


@click.group(cls=LazyGroup)
@click.version_option(package_name="mallocgame")
def main() -> None:
    """mallocgame: place ML buffers in fast memory so programs run fast."""


def _info_facts(problem: Problem, spec, bound_time: float = 0.0) -> dict[str, Any]:
    a = problem.arrays
    live = max_live(problem)
    facts: dict[str, Any] = {
        "problem": problem.name, "source": problem.source, "mode": problem.mode, "buffers": problem.n,
        "ops": len(problem.ops),
        "horizon": [int(a.start.min()), int(a.end.max())] if problem.n else [0, 0],
        "components": len(components(problem)), "total_bytes": int(a.size.sum()), "max_live_bytes": live,
        "capacity": problem.capacity, "hardware": getattr(spec, "name", None),
        "max_live_over_capacity": live / problem.capacity if problem.capacity else None,
    }
    if problem.mode in ("map", "prefetch"):
        ev = Evaluator.of(problem, spec)
        bound = problem_bound(problem, spec, tighten=INFO_RESIDENCY_SECONDS)
        if bound.others:
            facts.update(bounds=dict(bound.others))
        facts.update(time_all_slow=ev.time_all_slow, time_all_fast=ev.time_all_fast, bound=bound.value,
                     bound_kind=f"no-fragmentation {bound.kind}" if problem.mode == "map" else
                     f"relaxation {bound.kind}, docs/prefetch.md",
                     max_speedup=ev.time_all_slow / max(ev.time_all_slow - bound.value, 1e-300))
    else:
        too_big = oversized(problem)
        largest = max(too_big, key=lambda k: problem.buffers[k].size) if too_big else None
        facts.update(bound=live, bound_kind="max live (lower bound on the peak)",
                     buffers_over_capacity=len(too_big),
                     largest_over_capacity=None if largest is None else
                     {"id": problem.buffers[largest].id, "size": problem.buffers[largest].size})
        lower = live, "max live"
        if too_big:
            pass  # no placement exists: the critical-window bound has nothing to pack
        elif bound_time > 0:  # mallocgame.bounds.critical_window_bound: the critical moments packed by CP-SAT
            b = critical_window_bound(problem, time_limit=bound_time)
            if b.kind == "window":
                lower = int(b.value), f"critical window, CP-SAT, {b.value / live - 1:+.3%} over max live"
            else:
                lower = live, f"max live; the critical-window bound found nothing higher in {bound_time:g} s"
        facts.update(lower_bound=lower[0], lower_bound_kind=lower[1])
    return facts


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of the lines.")
@click.option("--bound-time", type=SECONDS, default=None,
              help="Pack mode: seconds for a lower bound above max live (the critical moments packed by CP-SAT); "
                   "without it the lower bound is max live.")
def info(problem_path: str, mode: str | None, capacity: str | None, capacity_fraction: str | None,
         hardware: str | None, as_json: bool, bound_time: float | None) -> None:
    """Size, horizon, components, max live bytes and (map mode) the bound of PROBLEM."""
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity, capacity_fraction=capacity_fraction,
                                      hardware=hardware, oversized_ok=True)  # described below, not refused
    except InputError as exc:
        fail(str(exc))
    gc.freeze()  # the problem lives to the end: later collections need not walk its objects
    capacity_warning(problem)
    f = _info_facts(problem, spec, bound_time or 0.0)
    if as_json:
        click.echo(dump_json({**stamp(), **f}), nl=False)
        return
    lines = [
        f"problem: {f['problem']}",
        f"mode: {f['mode']}",
        f"buffers: {f['buffers']}",
        f"ops: {f['ops']}",
        f"horizon: [{f['horizon'][0]}, {f['horizon'][1]})",
        f"components: {f['components']}",
        f"total bytes: {f['total_bytes']}",
        f"max live bytes: {f['max_live_bytes']}",
        f"capacity: {f['capacity'] if f['capacity'] is not None else 'none (minimise the peak)'}",
    ]
    if f["capacity"] is not None:
        lines.append(f"max live / capacity: {f['max_live_over_capacity']:.3f}")
    if problem.mode in ("map", "prefetch"):
        lines.append(f"time all slow: {f['time_all_slow']:.6g}")
        lines.append(f"time all fast: {f['time_all_fast']:.6g}")
        lines.append(f"bound ({f['bound_kind']}): {f['bound']:.6g} (at best {f['max_speedup']:.4g}x faster)")
        if len(f.get("bounds", {})) > 1:  # prefetch: both bounds, the tighter one reported above
            lines.append("bounds: " + ", ".join(f"{kind} {value:.6g}" for kind, value in f["bounds"].items()))
    else:
        if f["buffers_over_capacity"]:
            big = f["largest_over_capacity"]
            lines.append(f"does not fit: {f['buffers_over_capacity']} buffer(s) larger than the capacity "
                         f"(largest {big['id']!r}, {big['size']} bytes): no pack placement exists at this capacity")
        lines.append(f"bound (max live, lower bound on peak): {f['bound']}")
        lines.append(f"lower bound: {f['lower_bound']} ({f['lower_bound_kind']})")
    click.echo("\n".join(lines))


def _check_hint(problem: Problem, hint_path: str, time_limit: float):
    """The request checked by the core (:func:`mallocgame.solving.check_request`): the ``--hint`` file as an
    answer of the problem's mode (a map solution is lifted in prefetch mode, and a note says so)."""
    _, hint, lifted = check_request(problem, time_limit=time_limit, hint_path=hint_path)
    if lifted:
        click.echo(f"note: {hint_path}: a map solution, lifted to prefetch mode (mallocgame.lift)", err=True)
    return hint


def _solve_options(names: list[str], items: tuple[str, ...], workers: int | None, simulations: int | None,
                   minimize_peak: bool) -> dict[str, Any]:
    """The options of ``solve`` (flags and ``--solver-option``), checked against the solvers that run.

    An option that neither --solver nor --warm-start takes (or, with a ``SOLVER:`` prefix, that
    solver) is bad input (exit 2); each solver receives the options its ``solve`` names.
    ``minimize_peak`` is passed only to a solver that names it, and is never an error: the
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
            per = parse_solver_options([item], names)
        except InputError as exc:
            fail(str(exc))
        target, _ = split_option(item)
        mine = [target] if target in per else names
        check_option_values(per[mine[0]], f"--solver-option {item}")
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
    return {"format": "mallocgame.report/1", **stamp(), "problem": problem.name, "source": problem.source,
            "capacity": problem.capacity, "hardware": getattr(spec, "name", None), "minimize_peak": minimize_peak,
            **report.as_json(), "offsets": offsets_by_id(problem, report.offsets if report.valid else None),
            **({"intervals": intervals_json(problem, report.intervals)} if problem.mode == "prefetch" else {})}


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@click.option("--solver", "solver_name", required=True, help="A registered solver (see `mallocgame solvers`).")
@problem_options
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
@click.option("--reschedule", is_flag=True,
              help="Also re-order the ops (mallocgame schedule) and alternate schedule and placement while the "
                   "time lasts; the best pair wins (the answer belongs to the re-scheduled workload).")
@click.option("--schedule-output", "schedule_output", default=None, metavar="W2.json",
              help="With --reschedule: write the re-scheduled workload here "
                   "(default: beside -o SOLUTION.csv as SOLUTION.workload.json).")
def solve(problem_path, solver_name, mode, capacity, capacity_fraction, hardware, time_limit, seed, hint_path,
          warm_start, workers, minimize_peak, simulations, solver_options, output, report_path, as_json,
          reschedule=False, schedule_output=None) -> None:
    """Solve PROBLEM with one solver; print one summary line."""
    outs = _SolveOutputs(output, report_path, as_json, schedule_output)
    names = list(dict.fromkeys([solver_name] + ([warm_start] if warm_start else [])))
    _check_solve_flags(outs, reschedule=reschedule, time_limit=time_limit, solvers=names)
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity, capacity_fraction=capacity_fraction,
                                      hardware=hardware, minimize_peak=minimize_peak)
        check_own_order(problem, problem_path)
        hint = _check_hint(problem, hint_path, time_limit) if hint_path else None
    except InputError as exc:
        fail(str(exc))
    gc.freeze()  # the problem lives to the end: collections (and a forked solver's pages) leave it alone
    options = _solve_options(names, solver_options, workers, simulations, minimize_peak)
    capacity_warning(problem)
    rescheduled = None
    try:
        # In a forked child (mallocgame.runner.call_in_child): Ctrl-C/SIGTERM stop any solver at
        # once, CP-SAT's native search included, and nothing it started is left running.
        if reschedule:  # schedule and placement alternated (hybrid.reschedule); the answer is the new order's
            rescheduled = call_in_child(solve_with_reschedule, solver_name, problem, spec, time_limit=time_limit,
                                        seed=seed, hint=hint, warm_start=warm_start, options=options)
            report, problem = rescheduled.report, rescheduled.problem
        else:
            report = _solve_beside_bound(solver_name, problem, spec, time_limit=time_limit, seed=seed, hint=hint,
                                         warm_start=warm_start, options=options)
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
    entries = solver_entries()
    for name in solvers:
        if name not in entries:
            fail(f"--solver: unknown solver {name!r} (registered: {', '.join(entries)})")


def _solve_beside_bound(solver_name: str, problem: Problem, spec, *, time_limit: float, seed: int, hint,
                        warm_start: str | None, options: dict[str, Any]):
    """The solver's report (:func:`mallocgame.solving.solve_with_warm_start`, in a forked child) with the
    problem's bound, computed here meanwhile: the solver keeps its whole time limit."""
    shared_caches(problem, spec)
    if problem.mode != "map":  # milliseconds: built before the fork, the solver's child inherits it
        problem_bound(problem, spec)
    run = ChildCall(solve_with_warm_start, solver_name, problem, spec, time_limit=time_limit, seed=seed,
                    hint=hint, warm_start=warm_start, options=options, compute_bound=False)
    pending = None
    try:
        if problem.mode == "prefetch":  # the residency bound, in a child of its own beside the solver
            pending = start_residency(problem, spec, seconds=min(time_limit, RESIDENCY_SECONDS))
        bound = problem_bound(problem, spec)
        result = run.result()
        if pending is not None:  # collected once the solver is done (waiting a few seconds at most)
            bound = problem_bound(problem, spec, pending=pending)
    except BaseException:
        run.cancel()
        if pending is not None:
            pending.cancel()
        raise
    return with_bound(result, bound)


def _solve_outputs(report, problem: Problem, spec, outs: _SolveOutputs, *, problem_path: str, minimize_peak: bool,
                   rescheduled) -> None:
    """Write the files, print the summary line (and the report on stdout), exit with solve's code.

    ``rescheduled``: the answer of ``--reschedule`` (its workload is written too), else ``None``.
    """
    output, report_path = outs.output, outs.report_path
    summary = report.summary()
    if problem.capacity is None:
        summary += " capacity=none" + (" (--minimize-peak: validated without a capacity)" if minimize_peak else "")
    document = _report_json(report, problem, spec, minimize_peak)
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


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@click.argument("solution_path", metavar="SOLUTION")
@problem_options
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as one JSON object on stdout.")
def validate(problem_path, solution_path, mode, capacity, capacity_fraction, hardware, as_json) -> None:
    """Check SOLUTION against PROBLEM: prints `ok ...` or the first violation (exit 0 / 1).

    A re-scheduled workload (one with ``original_order``) has its op order checked too.
    """
    problem, spec, given = load_answer(problem_path, solution_path, mode=mode, capacity=capacity,
                                       capacity_fraction=capacity_fraction, hardware=hardware)
    capacity_warning(problem)
    found = judge(problem, spec, given, schedule=True)
    violation, placed = found.violation, found.placed
    verdict: dict[str, Any] = {
        **stamp(), "problem": problem.name, "solution": solution_path, "mode": problem.mode,
        "valid": violation is None, "violation": violation, "placed": placed, "total": problem.n,
        "peak": found.peak, "capacity": problem.capacity, "value": None, "estimated_time": None,
    }
    if found.estimated_time is not None:
        verdict.update(value=found.value, estimated_time=found.estimated_time, time_all_slow=found.time_all_slow)
    if found.breakdown is not None:
        verdict.update(intervals=len(given), copies=len(found.breakdown.copies), stall=found.breakdown.stall)
    if as_json:
        click.echo(dump_json(verdict), nl=False)
    elif violation:
        click.echo(f"invalid: {violation}")
    else:
        msg = f"ok: {placed}/{problem.n} buffers in fast memory, peak {verdict['peak']}"
        if problem.capacity is not None:
            msg += f" of capacity {problem.capacity}"
        if problem.mode in ("map", "prefetch"):
            msg += f", value {verdict['value']:.6g}, estimated time {verdict['estimated_time']:.6g}"
        if problem.mode == "prefetch":
            msg += f" ({verdict['intervals']} intervals, {verdict['copies']} copies, stall {verdict['stall']:.6g})"
        click.echo(msg)
    if violation:
        sys.exit(EXIT_NO_SOLUTION)


@main.command()
def solvers() -> None:
    """List every registered solver with its modes and a one-line description (imports none of them)."""
    entries = solver_entries()
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        origin = "" if entry.distribution == "mallocgame" else f"  [plugin: {entry.distribution}]"
        shown = ",".join(solver_modes(entry)) or "?"
        click.echo(f"{name:<{width}}  {shown:<8}  {describe(entry)}{origin}")


if __name__ == "__main__":
    main(prog_name="mallocgame")
