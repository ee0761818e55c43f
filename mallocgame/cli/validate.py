"""``mallocgame validate PROBLEM SOLUTION``: check a solution; prints ``ok ...`` or the first violation.

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from mallocgame.cli.common import EXIT_NO_SOLUTION, capacity_warning, dump_json, load_answer, problem_options, stamp
from mallocgame.engine.report import judge
from mallocgame.problem.units import distinct, format_bytes, format_number, format_seconds


@click.command()
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
        peak_, capacity = distinct(format_bytes, [verdict["peak"], problem.capacity])
        msg = f"ok: {placed}/{problem.n} buffers in fast memory, peak {peak_}"
        if problem.capacity is not None:
            msg += f" of capacity {capacity}"
        times = format_seconds if problem.has_ops else format_number  # without ops: the benefits' own units
        if problem.mode in ("map", "prefetch"):
            value, estimated = distinct(times, [verdict["value"], verdict["estimated_time"]])
            msg += f", value {value}, estimated time {estimated}"
        if problem.mode == "prefetch":
            msg += (f" ({verdict['intervals']} intervals, {verdict['copies']} copies, "
                    f"stall {format_seconds(verdict['stall'])})")
        click.echo(msg)
    if violation:
        sys.exit(EXIT_NO_SOLUTION)
