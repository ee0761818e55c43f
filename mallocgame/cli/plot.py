"""``mallocgame plot``: draw one answer of one problem."""

from __future__ import annotations

import click

from mallocgame.cli.common import STDOUT, capacity_options, capacity_warning, check_output, fail, load_answer
from mallocgame.engine.report import judge
from mallocgame.plots import plot_intervals, plot_solution
from mallocgame.problem.units import format_bytes, format_seconds


@click.command("plot")
@click.argument("problem_path", metavar="PROBLEM")
@click.argument("solution_path", metavar="SOLUTION")
@click.option("-o", "--output", required=True, metavar="FILE.png", help="Picture to write (.png, .pdf or .svg).")
@click.option("--hardware", default=None, metavar="PRESET_OR_FILE", help="Hardware preset or file (for the score).")
@capacity_options
@click.option("--mode", type=click.Choice(["map", "pack", "prefetch"]), default=None,
              help="Default: as `mallocgame solve`; prefetch draws the copy windows.")
@click.option("--title", default=None, help="Title (default: problem, value and speed-up).")
def plot_command(problem_path: str, solution_path: str, output: str, hardware: str | None, capacity: str | None,
                 capacity_fraction: str | None, mode: str | None, title: str | None) -> None:
    """Draw one answer: time x address rectangles by buffer kind, slow buffers in a band below."""
    if output == STDOUT:
        fail("-o: a picture is not written to stdout; give a .png, .pdf or .svg file")
    if not output.lower().endswith((".png", ".pdf", ".svg")):
        fail(f"-o: expected a .png, .pdf or .svg file, got {output!r}")
    check_output(output, "-o")
    problem, spec, given = load_answer(problem_path, solution_path, mode=mode, capacity=capacity,
                                       capacity_fraction=capacity_fraction, hardware=hardware)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail("matplotlib is not installed (pip install matplotlib)")
    capacity_warning(problem)
    found = judge(problem, spec, given)
    violation = found.violation
    if problem.mode == "prefetch":
        _plot_prefetch(problem, given, found, output, title)
        return
    if title is None:
        title = f"{problem.name}: {found.placed}/{problem.n} buffers fast, peak {format_bytes(found.peak)}"
        if violation:
            title += f" - INVALID: {violation}"
        elif problem.mode == "map":
            t = found.estimated_time
            title += f", {found.time_all_slow / t:.3f}x faster than all-slow" if t > 0 else ""
    path = plot_solution(problem, given, output, title=title[:160])
    click.echo(f"wrote {path}" + (f" (the solution is not valid: {violation})" if violation else ""))


def _plot_prefetch(problem, intervals, found, output: str, title: str | None) -> None:
    violation = found.violation
    if title is None:
        title = (f"{problem.name}: {len(intervals)} fast intervals of {found.placed}/{problem.n} "
                 f"buffers, peak {format_bytes(found.peak)}")
        if violation:
            title += f" - INVALID: {violation}"
        else:
            b, slow = found.breakdown, found.time_all_slow
            title += (f", {sum(c.kind == 'prefetch' for c in b.copies)} prefetches, stall {format_seconds(b.stall)}, "
                      f"{slow / b.time:.3f}x faster than all-slow" if b.time > 0 else "")
    path = plot_intervals(problem, intervals, output, title=title[:160])
    click.echo(f"wrote {path}" + (f" (the solution is not valid: {violation})" if violation else ""))
