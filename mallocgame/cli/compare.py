"""``mallocgame compare``: the command around :mod:`mallocgame.compare` (printing, files, pictures)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from mallocgame.compare import _csv_text, json_document, run_comparison, summary_text, table_text
from mallocgame.model import InputError


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.command("compare")
@click.argument("specs", nargs=-1, required=True, metavar="SUITE_OR_FILES...")
@click.option("--solvers", "solver_list", required=True, metavar="A,B,C",
              help="Comma-separated registered solvers (see `mallocgame solvers`).")
@click.option("--time-limit", type=float, default=5.0, show_default=True, help="Seconds per solver and input.")
@click.option("--hardware", default=None, metavar="PRESET_OR_FILE",
              help="Cost model: preset (tpuv4i, test, unit) or file. Keeps each input's capacity.")
@click.option("--capacity", type=int, default=None, metavar="B", help="Fast-memory bytes for every input.")
@click.option("--capacity-fraction", type=float, default=None, metavar="F",
              help="Fast memory = F x each input's max live bytes (overrides the suite's choice).")
@click.option("--mode", type=click.Choice(["map", "pack"]), default=None,
              help="Default: pack for plain CSV, map otherwise.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--jobs", type=int, default=1, show_default=True, help="Solver runs in parallel (processes).")
@click.option("--solver-option", "solver_options", multiple=True, metavar="[SOLVER:]KEY=VALUE",
              help="Option passed to solvers whose solve() names KEY (e.g. simulations=64, mcts:workers=1).")
@click.option("--out", "out_path", default=None, metavar="RESULTS.csv",
              help="Write the rows here (first columns input,solver) and the full reports to RESULTS.json.")
@click.option("--plot", "plot_dir", default=None, metavar="DIR", help="Draw allocations, anytime curves, speed-ups.")
@click.option("--benchmarks", default=None, metavar="DIR",
              help="Shared benchmark folder for the minimalloc/traces suites "
                   "(default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
def compare_command(specs, solver_list, time_limit, hardware, capacity, capacity_fraction, mode, seed, jobs,
                    solver_options, out_path, plot_dir, benchmarks, progress) -> None:
    """Run every solver on every input; print a table; optionally write CSV/JSON and pictures.

    SUITE_OR_FILES: built-in suites (`mallocgame suites`), SUITE:ENTRY[,ENTRY...], bundled
    examples (example:NAME), or problem files (.csv, .json).
    """
    if out_path is not None and not out_path.endswith(".csv"):
        _fail(f"--out: expected a .csv path, got {out_path!r}")
    if plot_dir:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            _fail("--plot: matplotlib is not installed (pip install matplotlib)")
    try:
        result = run_comparison(specs, solver_list.split(","), time_limit=time_limit, seed=seed, jobs=jobs,
                                hardware=hardware, capacity=capacity, capacity_fraction=capacity_fraction,
                                mode=mode, solver_options=solver_options, benchmarks=benchmarks, progress=progress)
    except InputError as exc:
        _fail(str(exc))
    inputs, rows, solvers, wall = result.inputs, result.rows, result.solvers, result.wall_seconds

    click.echo(table_text(inputs, rows), nl=False)
    click.echo()
    click.echo(summary_text(inputs, rows, solvers), nl=False)
    click.echo(f"{len(rows)} runs on {len(inputs)} inputs in {wall:.1f} s "
               f"(time limit {time_limit:g} s, {jobs} job{'s' if jobs > 1 else ''})")

    if out_path:
        from mallocgame.io import atomic_write_text

        settings = {"argv": sys.argv[1:], **result.settings}
        atomic_write_text(out_path, _csv_text(result.records()))
        json_path = os.path.splitext(out_path)[0] + ".json"
        atomic_write_text(json_path, json.dumps(json_document(inputs, rows, settings), indent=1) + "\n")
        click.echo(f"wrote {out_path} and {json_path}")
    if plot_dir:
        from mallocgame.plots import plot_comparison

        written = plot_comparison(inputs, rows, Path(plot_dir))
        click.echo(f"wrote {len(written)} pictures to {plot_dir}")
    if not any(r.valid for r in rows):
        sys.exit(1)
