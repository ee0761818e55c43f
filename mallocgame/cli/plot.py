"""``mallocgame plot``: draw one answer of one problem."""

from __future__ import annotations

import sys

import click

from mallocgame.model import InputError
from mallocgame.plots import plot_solution


@click.command("plot")
@click.argument("problem_path", metavar="PROBLEM")
@click.argument("solution_path", metavar="SOLUTION")
@click.option("-o", "--output", required=True, metavar="FILE.png", help="Picture to write (.png, .pdf or .svg).")
@click.option("--hardware", default=None, metavar="PRESET_OR_FILE", help="Hardware preset or file (for the score).")
@click.option("--capacity", type=int, default=None, metavar="B", help="Fast-memory capacity in bytes.")
@click.option("--mode", type=click.Choice(["map", "pack"]), default=None, help="Default: as `mallocgame solve`.")
@click.option("--title", default=None, help="Title (default: problem, value and speed-up).")
def plot_command(problem_path: str, solution_path: str, output: str, hardware: str | None, capacity: int | None,
                 mode: str | None, title: str | None) -> None:
    """Draw one answer: time x address rectangles by buffer kind, slow buffers in a band below."""
    from hardware.validator import peak, validate
    from mallocgame.inputs.load import prepare, read_problem
    from mallocgame.io import read_solution_csv

    def fail(msg: str) -> None:
        click.echo(f"error: {msg}", err=True)
        sys.exit(2)

    if not output.lower().endswith((".png", ".pdf", ".svg")):
        fail(f"-o: expected a .png, .pdf or .svg file, got {output!r}")
    try:
        problem, spec = prepare(read_problem(problem_path), mode=mode, capacity=capacity, hardware=hardware)
        offsets = read_solution_csv(solution_path, problem)
    except InputError as exc:
        fail(str(exc))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail("matplotlib is not installed (pip install matplotlib)")
    violation = validate(problem, offsets)
    placed = sum(o is not None for o in offsets)
    if title is None:
        title = f"{problem.name}: {placed}/{problem.n} buffers fast, peak {peak(problem, offsets)}"
        if violation:
            title += f" - INVALID: {violation}"
        elif problem.mode == "map":
            from hardware.evaluator import Evaluator

            ev = Evaluator(problem, spec)
            t = ev.time(offsets)
            title += f", {ev.time_all_slow / t:.3f}x faster than all-slow" if t > 0 else ""
    path = plot_solution(problem, offsets, output, title=title[:160])
    click.echo(f"wrote {path}" + (f" (the solution is not valid: {violation})" if violation else ""))
