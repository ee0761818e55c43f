"""The ``mallocgame`` command line (click). Commands and flags here are a contract.

Exit codes: 0 a valid solution was produced (and written with ``-o``); 1 no solution was
found (nothing written); 2 bad input or usage. Bad input is one line on stderr.
Commands that live in other modules (``import``, ``play``, ``compare``, ...) are
attached lazily, so ``mallocgame solvers`` never pays for torch or OR-Tools.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from mallocgame.inputs.load import prepare, read_problem
from mallocgame.model import InputError, Problem

EXIT_OK, EXIT_NO_SOLUTION, EXIT_BAD_INPUT = 0, 1, 2

# name -> "module:attribute" of commands defined outside this file.
LAZY_COMMANDS = {
    "import": "mallocgame.cli.importers:import_group",
    "play": "mallocgame.cli.play:play",
    "compare": "mallocgame.cli.compare:compare_command",
    "suites": "mallocgame.cli.suites:suites_command",
    "plot": "mallocgame.cli.plot:plot_command",
    "train": "mallocgame.cli.train:train",
    "check-solver": "mallocgame.cli.check_solver:check_solver",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in LAZY_COMMANDS if self._available(n)})

    @staticmethod
    def _available(name: str) -> bool:
        import importlib.util

        try:
            return importlib.util.find_spec(LAZY_COMMANDS[name].split(":")[0]) is not None
        except ImportError:
            return False

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS and self._available(name):
            module, attr = LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def problem_options(func):
    func = click.option("--hardware", "hardware", default=None, metavar="PRESET_OR_FILE",
                        help="Hardware preset (tpuv4i, test, unit) or a .toml/.json file.")(func)
    func = click.option("--capacity", type=int, default=None, metavar="B",
                        help="Fast-memory capacity in bytes (overrides the hardware's).")(func)
    func = click.option("--mode", type=click.Choice(["map", "pack"]), default=None,
                        help="map: choose fast vs slow to save time; pack: place every buffer. "
                             "Default: pack for plain CSV, map otherwise.")(func)
    return func


@click.group(cls=LazyGroup)
@click.version_option(package_name="mallocgame")
def main() -> None:
    """mallocgame: place ML buffers in fast memory so programs run fast."""


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
def info(problem_path: str, mode: str | None, capacity: int | None, hardware: str | None) -> None:
    """Size, horizon, components, max live bytes and (map mode) the bound of PROBLEM."""
    from mallocgame.intervals import components, max_live

    try:
        problem, spec = prepare(read_problem(problem_path), mode=mode, capacity=capacity, hardware=hardware)
    except InputError as exc:
        fail(str(exc))
    a = problem.arrays
    live = max_live(problem)
    lines = [
        f"problem: {problem.name}",
        f"mode: {problem.mode}",
        f"buffers: {problem.n}",
        f"ops: {len(problem.ops)}",
        f"horizon: [{int(a.start.min())}, {int(a.end.max())})",
        f"components: {len(components(problem))}",
        f"total bytes: {int(a.size.sum())}",
        f"max live bytes: {live}",
        f"capacity: {problem.capacity if problem.capacity is not None else 'none (minimise the peak)'}",
    ]
    if problem.capacity is not None:
        lines.append(f"max live / capacity: {live / problem.capacity:.3f}")
    if problem.mode == "map":
        from hardware.evaluator import Evaluator
        from mallocgame.bounds import map_upper_bound

        ev = Evaluator(problem, spec)
        bound = map_upper_bound(problem, spec)
        lines.append(f"time all slow: {ev.time_all_slow:.6g}")
        lines.append(f"time all fast: {ev.time_all_fast:.6g}")
        lines.append(f"bound (no-fragmentation {bound.kind}): {bound.value:.6g} "
                     f"(at best {ev.time_all_slow / max(ev.time_all_slow - bound.value, 1e-300):.4g}x faster)")
    else:
        lines.append(f"bound (max live, lower bound on peak): {live}")
    click.echo("\n".join(lines))


def _check_hint(problem: Problem, hint_path: str):
    from hardware.validator import validate
    from mallocgame.io import read_solution_csv
    from mallocgame.model import Solution, Status

    offsets = read_solution_csv(hint_path, problem)
    violation = validate(problem, offsets)
    if violation:
        raise InputError(f"{hint_path}: hint is not a valid solution of {problem.name}: {violation}")
    return Solution(offsets=tuple(offsets), status=Status.FEASIBLE, mode=problem.mode, solver="hint")


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@click.option("--solver", "solver_name", required=True, help="A registered solver (see `mallocgame solvers`).")
@problem_options
@click.option("--time-limit", type=float, default=10.0, show_default=True, help="Seconds.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--hint", "hint_path", default=None, metavar="SOLUTION.csv", help="Warm start from this solution.")
@click.option("--warm-start", "warm_start", default=None, metavar="SOLVER",
              help="Run SOLVER first and give its answer to --solver as a hint (and fallback).")
@click.option("--workers", type=int, default=None, help="Parallel workers, for solvers that use them.")
@click.option("--minimize-peak", is_flag=True, help="Pack mode: minimise the peak address.")
@click.option("--simulations", type=int, default=None, help="Tree-search simulations per move.")
@click.option("-o", "--output", default=None, metavar="SOLUTION.csv", help="Write the solution here.")
@click.option("--report", "report_path", default=None, metavar="REPORT.json", help="Write a JSON report here.")
def solve(problem_path, solver_name, mode, capacity, hardware, time_limit, seed, hint_path, warm_start,
          workers, minimize_peak, simulations, output, report_path) -> None:
    """Solve PROBLEM with one solver; print one summary line."""
    from hybrid.warm_start import solve_with_warm_start
    from mallocgame.io import atomic_write_text, write_solution_csv
    from mallocgame.registry import SolverLoadError, solver_entries
    from mallocgame.runner import UnsupportedMode

    if time_limit <= 0:
        fail(f"--time-limit: must be positive, got {time_limit}")
    entries = solver_entries()
    for name in [solver_name] + ([warm_start] if warm_start else []):
        if name not in entries:
            fail(f"--solver: unknown solver {name!r} (registered: {', '.join(entries)})")
    try:
        problem, spec = prepare(read_problem(problem_path), mode=mode, capacity=capacity, hardware=hardware)
        hint = _check_hint(problem, hint_path) if hint_path else None
    except InputError as exc:
        fail(str(exc))
    options: dict[str, Any] = {"minimize_peak": minimize_peak}
    if workers is not None:
        options["workers"] = workers
    if simulations is not None:
        options["simulations"] = simulations
    try:
        report = solve_with_warm_start(solver_name, problem, spec, time_limit=time_limit, seed=seed, hint=hint,
                                       warm_start=warm_start, options=options)
    except (SolverLoadError, UnsupportedMode) as exc:
        fail(str(exc))
    except Exception as exc:  # a solver's own failure: one line, no solution
        fail(f"solver {solver_name!r} failed: {exc.__class__.__name__}: {exc}", EXIT_NO_SOLUTION)
    click.echo(report.summary())
    if not report.valid:
        sys.exit(EXIT_NO_SOLUTION)
    if output:
        from mallocgame.model import Solution, Status

        write_solution_csv(output, problem, Solution(offsets=report.offsets, status=Status(report.status)))
    if report_path:
        atomic_write_text(report_path, json.dumps(report.as_json(), indent=1) + "\n")


@main.command()
@click.argument("problem_path", metavar="PROBLEM")
@click.argument("solution_path", metavar="SOLUTION")
@problem_options
def validate(problem_path, solution_path, mode, capacity, hardware) -> None:
    """Check SOLUTION against PROBLEM: prints `ok ...` or the first violation (exit 0 / 1)."""
    from hardware.validator import peak
    from hardware.validator import validate as check
    from mallocgame.io import read_solution_csv

    try:
        problem, spec = prepare(read_problem(problem_path), mode=mode, capacity=capacity, hardware=hardware)
        offsets = read_solution_csv(solution_path, problem)
    except InputError as exc:
        fail(str(exc))
    violation = check(problem, offsets)
    if violation:
        click.echo(f"invalid: {violation}")
        sys.exit(EXIT_NO_SOLUTION)
    placed = sum(o is not None for o in offsets)
    msg = f"ok: {placed}/{problem.n} buffers in fast memory, peak {peak(problem, offsets)}"
    if problem.capacity is not None:
        msg += f" of capacity {problem.capacity}"
    if problem.mode == "map":
        from hardware.evaluator import Evaluator

        ev = Evaluator(problem, spec)
        msg += f", value {ev.value(offsets):.6g}, estimated time {ev.time(offsets):.6g}"
    click.echo(msg)


@main.command()
def solvers() -> None:
    """List every registered solver with a one-line description (imports none of them)."""
    from mallocgame.registry import describe, solver_entries

    entries = solver_entries()
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        origin = "" if entry.distribution == "mallocgame" else f"  [plugin: {entry.distribution}]"
        click.echo(f"{name:<{width}}  {describe(entry)}{origin}")


if __name__ == "__main__":
    main()
