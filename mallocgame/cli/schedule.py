"""``mallocgame schedule``: re-order a workload's ops within their dependencies (docs/architecture.md, "Schedules").

Writes the re-scheduled workload (the same ops with the same ids in a new order, lifetimes
recomputed, ``original_order`` recorded) atomically with ``-o``. Exit codes: 0 done, 2 bad input
(one line). Also the pieces of ``solve --reschedule`` that print and write the schedule.
"""

from __future__ import annotations

import json
from typing import Any

import click

from mallocgame.algorithms.scheduling import reorder, schedule
from mallocgame.cli.common import (
    SECONDS,
    SEED,
    check_output,
    check_own_order,
    dump_json,
    fail,
    is_stdout,
    load_prepared,
    problem_options,
    stamp,
    write_file,
    write_text,
)
from mallocgame.formats.io import parse_workload, workload_text
from mallocgame.hardware.validator import validate, validate_intervals, validate_schedule
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError
from mallocgame.problem.units import distinct, format_bytes, format_number, format_seconds


def _raw(problem_path: str):
    """The workload as read (no mode, hardware or capacity applied): what the output file holds."""
    return read_problem(problem_path)


@click.command("schedule")
@click.argument("problem_path", metavar="WORKLOAD")
@click.option("-o", "--output", default=None, metavar="W2.json",
              help="Write the re-scheduled workload here ('-': stdout, the summary then goes to stderr).")
@click.option("--objective", type=click.Choice(["peak", "time"]), default=None,
              help="peak: minimise the live bytes (default in pack mode); time: the estimated time of a "
                   "greedy placement (default in map and prefetch modes).")
@problem_options
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True, help="Seconds.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--scheduler", "schedulers", multiple=True, metavar="NAME",
              help="Run only these schedulers (repeatable): list, dp, cpsat, local; default all (auto).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout.")
def schedule_command(problem_path, output, objective, mode, capacity, capacity_fraction, hardware, time_limit,
                     seed, schedulers, as_json) -> None:
    """Re-order WORKLOAD's ops within their dependencies to lower the peak live bytes or the estimated time."""
    if is_stdout(output) and as_json:
        fail("-o - and --json both want stdout; choose one")
    check_output(output, "-o")
    if not time_limit > 0:
        fail(f"--time-limit: must be positive, got {time_limit}")
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity, capacity_fraction=capacity_fraction,
                                      hardware=hardware)
        check_own_order(problem, problem_path)
        if objective == "time" and problem.mode == "pack":
            raise InputError("--objective time: needs map or prefetch mode (pack mode minimises the peak)")
        result = schedule(problem, objective=objective, hardware=spec, time_limit=time_limit, seed=seed,
                          schedulers=schedulers or ("auto",))
        written = reorder(_raw(problem_path), result.order)
    except InputError as exc:
        fail(str(exc))
    facts: dict[str, Any] = {
        "problem": problem.name, "source": problem.source, "mode": problem.mode, "ops": len(problem.ops),
        "objective": result.objective, "original": result.original, "scheduled": result.value,
        "improvement": result.improvement, "scheduler": result.scheduler, "seconds": result.wall_time,
        "max_live_original": int(_peak(problem)), "max_live_scheduled": int(_peak(result.problem)),
        "stats": result.stats,
    }
    line = (f"schedule: {result.objective} {result.original:.6g} -> {result.value:.6g} "
            f"({-result.improvement:+.2%}) by {result.scheduler}; max live {facts['max_live_original']} -> "
            f"{facts['max_live_scheduled']}; {len(problem.ops)} ops, {result.wall_time:.2f}s")
    if output and not is_stdout(output):
        error = write_file(output, workload_text(written))
        if error:
            fail(error)
    click.echo(line, err=is_stdout(output) or as_json)
    if as_json:
        click.echo(dump_json({**stamp(), **facts}), nl=False)
    if is_stdout(output):
        write_text(output, workload_text(written))


def _peak(problem) -> int:
    return max_live(problem)


def schedule_output_path(output: str | None, explicit: str | None) -> str | None:
    """Where ``solve --reschedule`` writes the re-scheduled workload: ``--schedule-output``, else
    beside ``-o SOLUTION.csv`` as ``SOLUTION.workload.json`` (none when ``-o`` is stdout or absent)."""
    if explicit:
        return explicit
    if not output or is_stdout(output):
        return None
    stem = output[:-4] if output.endswith(".csv") else output
    return stem + ".workload.json"


def reschedule_outputs(problem_path: str, rescheduled, summary: str, document: dict[str, Any], output: str | None,
                       schedule_output: str | None, spec) -> tuple[str, str | None, str]:
    """For ``solve --reschedule``: the summary with the schedule's facts, the report's ``schedule``
    entry (added to ``document``), and where and what to write as the re-scheduled workload.

    The written workload carries the capacity that was solved for (so ``validate W2.json ANSWER``
    needs no capacity flag). The answer is checked once more against the workload exactly as
    written (read back from its text, prepared as the solved problem was); a mismatch is an error
    (exit 1), never a silent file.
    """
    report, problem = rescheduled.report, rescheduled.problem
    raw = _raw(problem_path)
    written = reorder(raw, rescheduled.order)
    if problem.capacity is not None:  # the capacity solved for (a --capacity-fraction is of the original's max live)
        written = written.replace(capacity=problem.capacity)
    text = workload_text(written)
    path = schedule_output_path(output, schedule_output)
    if report.valid:
        back, _ = prepare(parse_workload(path or "rescheduled.json", json.loads(text)), mode=problem.mode,
                          capacity=problem.capacity, hardware=spec)
        violation = validate_schedule(back, raw) or (
            validate_intervals(back, report.intervals) if problem.mode == "prefetch"
            else validate(back, report.offsets))
        if violation:
            fail(f"the re-scheduled answer is not valid on the written workload: {violation}", 1)
    changed = rescheduled.order != list(range(len(rescheduled.order)))
    document["schedule"] = {"reordered": changed, "workload": path, "rounds": rescheduled.rounds,
                            "original_objective": rescheduled.original.objective,
                            "original_valid": rescheduled.original.valid,
                            "max_live_original": _peak(raw), "max_live": _peak(written)}
    orig = rescheduled.original.objective
    shown = (format_bytes(None if orig is None else int(orig)) if problem.mode == "pack"
             else format_seconds(orig) if problem.has_ops else format_number(orig))
    before, after = distinct(format_bytes, [_peak(raw), _peak(written)])
    summary += (f" reschedule: {'new order' if changed else 'original order kept'}, original order objective="
                f"{shown}, max live {before} -> {after}"
                + (f", workload {path}" if path else ""))
    return summary, path, text


__all__ = ["reschedule_outputs", "schedule_command", "schedule_output_path", "workload_text"]
