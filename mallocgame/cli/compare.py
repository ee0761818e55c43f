"""``mallocgame compare``: the command around :mod:`mallocgame.engine.comparison` (printing, files, pictures).

stdout gets the table and the per-solver summary, or with ``-o -`` only the CSV (the table
then goes to stderr). Progress goes to stderr: a bar when stderr is a terminal, else one
line per finished run (and per input while drawing); ``--no-progress`` is silent.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from mallocgame.cli.common import (
    SECONDS,
    SEED,
    capacity_settings,
    check_muzero_checkpoint,
    check_option_values,
    check_options,
    check_output,
    dump_json,
    fail,
    intervals_json,
    is_stdout,
    no_cache_option,
    offsets_by_id,
    stamp,
    warn,
    write_file,
    write_text,
)
from mallocgame.engine.comparison import (
    _csv_text,
    json_document,
    run_comparison,
    summary_text,
    table_text,
)
from mallocgame.engine.protocol import option_kinds, parse_solver_options, split_option
from mallocgame.engine.registry import SolverLoadError, load_solver, solver_entries
from mallocgame.formats.io import OutputBusy, exclusive_output, output_folder
from mallocgame.inputs.load import capacity_warning
from mallocgame.plots import plot_allocations, plot_anytime, plot_pack_gaps, plot_speedups, safe_name
from mallocgame.problem.model import InputError
from mallocgame.problem.units import distinct, format_bytes, format_number, format_seconds
from mallocgame.runtime.interrupts import Interrupted, ignore_signals, raise_on_signals


@click.command("compare")
@click.argument("specs", nargs=-1, required=True, metavar="SUITE_OR_FILES...")
@click.option("--solvers", "solver_list", required=True, metavar="A,B,C",
              help="Comma-separated registered solvers (see `mallocgame solvers`).")
@click.option("--time-limit", type=SECONDS, default=5.0, show_default=True, help="Seconds per solver and input.")
@click.option("--hardware", default=None, metavar="PRESET_OR_FILE",
              help="Cost model: preset (tpuv4i, test, unit) or file. Keeps each input's capacity.")
@click.option("--capacity", default=None, metavar="BYTES",
              help="Fast memory for every input: 4096, 512KB, 4MiB, 1.5GiB.")
@click.option("--capacity-fraction", default=None, metavar="F",
              help="Fast memory = F x each input's max live bytes (overrides the suite's choice).")
@click.option("--mode", type=click.Choice(["map", "pack", "prefetch"]), default=None,
              help="Default: pack for plain CSV, map otherwise.")
@no_cache_option
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--jobs", type=int, default=1, show_default=True, help="Solver runs in parallel (processes).")
@click.option("--solver-option", "solver_options", multiple=True, metavar="[SOLVER:]KEY=VALUE",
              help="Option passed to the solvers whose Options has KEY (e.g. simulations=64, mcts:workers=1); "
                   "one that no solver takes is an error.")
@click.option("-o", "--output", "--out", "out_path", default=None, metavar="RESULTS.csv",
              help="Write the rows here (first columns input,solver) and the full reports to RESULTS.json; "
                   "'-': the CSV on stdout (the table goes to stderr, no JSON).")
@click.option("--plot", "plot_dir", default=None, metavar="DIR", help="Draw allocations, anytime curves, speed-ups.")
@click.option("--benchmarks", default=None, metavar="DIR",
              help="Shared benchmark folder for the minimalloc/traces suites "
                   "(default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks).")
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr: a bar on a terminal, else a line per run (default: on).")
@click.option("--quiet", is_flag=True, help="No progress on stderr (the same as --no-progress).")
@click.option("--log", "log", is_flag=True,
              help="Print one line per better answer of each run on stderr (input / solver, time, objective, source).")
@click.option("--resume", is_flag=True,
              help="Keep the rows already in --out (same input, solver, mode, time limit, seed, capacity) "
                   "and run only the missing ones.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: forked processes (--jobs at a time); ray: one Ray task per run (pip install "
                   "'mallocgame[ray]').")
@click.option("--address", default=None, metavar="ADDR",
              help="With --executor ray: the cluster to join (e.g. 10.0.0.1:6379 or 'auto'); default: a local runtime.")
def compare_command(specs, solver_list, time_limit, hardware, capacity, capacity_fraction, mode, seed, jobs,
                    solver_options, out_path, plot_dir, benchmarks, progress, resume, executor, address, quiet=False,
                    log=False) -> None:
    """Run every solver on every input; print a table; optionally write CSV/JSON and pictures.

    SUITE_OR_FILES: built-in suites (`mallocgame suites`), SUITE:ENTRY[,ENTRY...], bundled
    examples (example:NAME), problem files (.csv, .json, gzipped or not), or folders of them.

    With --out the CSV holds every finished row at any moment; SIGINT or SIGTERM stops every
    run, prints what finished, and exits 130 / 143; --resume then runs only the rest.
    """
    if log and quiet:
        fail("--log and --quiet: choose one")
    show = progress is not False and not quiet
    bar = show and not log and sys.stderr.isatty()
    outs = _Outputs(out_path, plot_dir, bar=bar, lines=show and not bar)
    _check_outputs(outs, resume=resume, address=address, executor=executor)
    try:
        cap, fraction = capacity_settings(capacity, capacity_fraction)
    except InputError as exc:
        fail(str(exc))
    solvers = [s.strip() for s in solver_list.split(",")]
    options = _checked_options(solvers, solver_options)
    stop: Interrupted | None = None
    try:
        with raise_on_signals():
            result = run_comparison(specs, solvers, time_limit=time_limit, seed=seed, jobs=jobs,
                                    hardware=hardware, capacity=cap, capacity_fraction=fraction,
                                    mode=mode, solver_options=options, benchmarks=benchmarks, progress=outs.bar,
                                    on_row=_progress_line if outs.lines else None,
                                    results_path=None if outs.to_stdout else out_path, resume=resume,
                                    executor=executor, address=address,
                                    on_improvement=functools.partial(_log_line, mode=mode, last={}) if log else None)
    except InputError as exc:
        fail(str(exc))
    except Interrupted as exc:
        ignore_signals()  # a second Ctrl-C must not cut the report of what finished
        stop = exc
        if stop.partial is None:  # nothing had started: no rows, no files
            click.echo(f"interrupted by {stop.signal_name} before any run finished", err=True)
            sys.exit(stop.exit_code)
        result = stop.partial
    _report(result, stop, outs, resume=resume, time_limit=time_limit, jobs=jobs, executor=executor)


@dataclass(frozen=True)
class _Outputs:
    """Where ``compare`` puts what it finds: the CSV (and its JSON) or stdout, pictures, progress."""

    out_path: str | None  # --out: RESULTS.csv, '-' or None
    plot_dir: str | None
    bar: bool  # a progress bar on stderr (a terminal)
    lines: bool  # a progress line per finished run on stderr

    @property
    def to_stdout(self) -> bool:
        """``-o -``: the CSV on stdout, everything else on stderr."""
        return is_stdout(self.out_path)

    @property
    def files(self) -> bool:
        """Are the results written to RESULTS.csv and RESULTS.json?"""
        return bool(self.out_path) and not self.to_stdout

    @property
    def json_path(self) -> str:
        return os.path.splitext(self.out_path)[0] + ".json"

    def say(self, text: str = "", nl: bool = True) -> None:
        """A line of the report: on stdout, or on stderr when stdout has the CSV."""
        click.echo(text, nl=nl, err=self.to_stdout)


def _check_outputs(outs: _Outputs, *, resume: bool, address: str | None, executor: str) -> None:
    """Exit 2 (one line) for outputs that cannot be written or flags that do not go together;
    then hold RESULTS.csv to the end of the command (a second compare writing it refuses)."""
    out_path, to_stdout = outs.out_path, outs.to_stdout
    if resume and (out_path is None or to_stdout):
        fail("--resume: needs --out RESULTS.csv (the file to continue)")
    if address is not None and executor != "ray":
        fail("--address: only with --executor ray")
    if out_path is not None and not to_stdout and not out_path.endswith(".csv"):
        fail(f"--output: expected a .csv path or '-', got {out_path!r}")
    check_output(out_path, "--output")
    if outs.files:
        check_output(outs.json_path, "--output (its JSON)")
    check_output(outs.plot_dir, "--plot", folder=True)
    if outs.files:  # held to the end of the command (the JSON too); released at exit
        held = contextlib.ExitStack()
        try:
            held.enter_context(exclusive_output(out_path, flag="--output"))
        except OutputBusy as exc:
            fail(str(exc))
        atexit.register(held.close)
    if outs.plot_dir:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            fail("--plot: matplotlib is not installed (pip install matplotlib)")


def _report(result, stop, outs: _Outputs, *, resume: bool, time_limit: float, jobs: int, executor: str) -> None:
    """Write the JSON, print the table, the summary and the last line, draw; exit with the comparison's code.

    ``stop``: the :class:`mallocgame.runtime.interrupts.Interrupted` that cut the comparison short, or ``None``.
    """
    inputs, rows, solvers, wall = result.inputs, result.rows, result.solvers, result.wall_seconds
    for inp in inputs:
        warn(capacity_warning(inp.problem))
    # The files first: one that cannot be written is said before the table, which still follows.
    # The CSV itself was written row by row as the runs finished (mallocgame.engine.comparison.ResultsFile).
    csv_text = _csv_text(result.records()) if outs.to_stdout else ""
    unwritten = _write_json(result, outs, resume=resume)
    if rows:
        outs.say(table_text(inputs, rows), nl=False)
        outs.say()
        outs.say(summary_text(inputs, rows, solvers), nl=False)
    kept = sum(r.resumed is not None for r in rows)
    resumed = f", {kept} kept from {outs.out_path}" if kept else ""
    if stop is not None:
        total = len(inputs) * len(solvers)
        outs.say(f"interrupted by {stop.signal_name}: {len(rows)} of {total} runs finished{resumed} in "
                 f"{format_seconds(wall)}"
                 + (f"; their rows are in {outs.out_path} (continue with --resume)" if outs.files else ""))
        if outs.to_stdout:
            write_text(outs.out_path, csv_text)
        sys.exit(stop.exit_code)
    outs.say(f"{len(rows)} runs on {len(inputs)} inputs in {format_seconds(wall)}{resumed} "
             f"(time limit {format_seconds(time_limit)}, {jobs} job{'s' if jobs > 1 else ''}"
             f"{', on ray' if executor == 'ray' else ''})")

    if outs.to_stdout:
        write_text(outs.out_path, csv_text)
    elif outs.out_path and not unwritten:
        outs.say(f"wrote {outs.out_path} and {outs.json_path}")
    if outs.plot_dir:
        written = _draw(inputs, rows, Path(outs.plot_dir), bar=outs.bar, lines=outs.lines)
        outs.say(f"wrote {len(written)} pictures to {outs.plot_dir}")
    if unwritten:
        sys.exit(2)
    if not any(r.valid for r in rows):
        sys.exit(1)


def _write_json(result, outs: _Outputs, *, resume: bool) -> list[str]:
    """RESULTS.json beside the CSV (with ``--resume``, the kept rows' records carried from the old one);
    the one-line reason it could not be written, said on stderr, else nothing."""
    unwritten: list[str] = []
    if outs.files:
        settings = {"argv": sys.argv[1:], **result.settings}
        carried = _carried_results(outs.json_path) if resume else {}
        document = results_document(result.inputs, result.rows, settings, carried)
        unwritten += filter(None, [write_file(outs.json_path, dump_json(document))])
        for line in unwritten:
            click.echo(f"error: {line}", err=True)
    return unwritten


def results_document(inputs, rows, settings: dict[str, Any], carried: dict | None = None) -> dict[str, Any]:
    """The results JSON: :func:`mallocgame.engine.comparison.json_document` with the tool version, a UTC
    timestamp, and each answer's offsets keyed by buffer id (``{"b7": 1024, "b9": null}``).

    A row kept by ``--resume`` takes its record from the previous JSON (``carried``, by
    (input, solver)) when that record is of the same run (same seconds, or same error); else
    the record rebuilt from the CSV, without offsets or history, marked ``"resumed": true``.
    """
    doc = json_document(inputs, rows, settings)
    problems = {inp.name: inp.problem for inp in inputs}
    for k, (rec, row) in enumerate(zip(doc["results"], rows)):
        if row.resumed is not None:
            old = (carried or {}).get((row.resumed.get("input_sha256"), row.solver))
            doc["results"][k] = {**old, "input": row.input} if old is not None and _same_run(old, row.resumed) else \
                {**rec, "offsets": None, "resumed": True}
            continue
        if rec.get("offsets") is not None:
            rec["offsets"] = offsets_by_id(problems[row.input], rec["offsets"])
        if row.report is not None and row.report.valid and problems[row.input].mode == "prefetch":
            rec["offsets"] = None
            rec["intervals"] = intervals_json(problems[row.input], row.report.intervals)
    return {"format": doc.pop("format"), **stamp(), **doc}


def _carried_results(json_path: str) -> dict:
    """The previous results JSON's records by (input_sha256, solver); empty when it is missing or unreadable."""
    try:
        with open(json_path) as fh:
            doc = json.load(fh)
        return {(r.get("input_sha256"), r["solver"]): r for r in doc["results"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _same_run(old: dict, kept: dict) -> bool:
    """Is the old JSON record the run of the kept CSV record?"""
    report = old.get("report")
    if report is None:
        return kept.get("seconds", "") == "" and (old.get("error") or "") == (kept.get("error") or "")
    try:
        return kept.get("seconds", "") != "" and float(report.get("seconds")) == float(kept["seconds"])
    except (TypeError, ValueError):
        return False


def _checked_options(solvers: list[str], items: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``--solver-option`` per solver; exit 2 for one that no solver (or not its SOLVER:) takes.

    A plain ``KEY=VALUE`` still goes only to the solvers whose ``Options`` has KEY.
    """
    known = [s for s in dict.fromkeys(solvers) if s]
    registered = solver_entries()
    if not known or any(s not in registered for s in known):
        return {}  # run_comparison reports the bad solver list
    loaded = {}
    for s in known if items else ():
        try:
            loaded[s] = load_solver(s)
        except SolverLoadError:
            pass  # its rows say why; it is not asked about options
    kinds = option_kinds(list(loaded.values()))  # a text option's value stays text
    try:
        per = parse_solver_options(items, known, kinds)
    except InputError as exc:
        fail(str(exc))
    for item in items:
        target, _ = split_option(item)
        mine = {s: loaded[s] for s in ([target] if target else known) if s in loaded}
        option = parse_solver_options([item], known, kinds)[target or known[0]]
        check_option_values(option, f"--solver-option {item}", mine)
        if mine:
            check_options(option, mine, flags={k: f"--solver-option {item}" for k in option})
    for s in known:
        check_muzero_checkpoint([s], per[s])
    return per


def _progress_line(row, done: int, total: int) -> None:
    """``[3/20] realistic-x / cpsat: FEASIBLE 1.204s`` on stderr, as each run finishes."""
    text = f"[{done}/{total}] {row.input} / {row.solver}: {row.status}"
    if row.report is not None:
        text += f" {format_seconds(row.report.seconds)}"
        if not row.report.valid and row.report.violation:
            rejected = "" if row.status == "DOES_NOT_FIT" else "rejected: "  # its own status, not a rejected answer
            text += f" ({rejected}{row.report.violation[:100]})"
    elif row.error and row.status != "n/a":
        text += f" ({row.error[:100]})"
    click.echo(text, err=True)


def _log_line(input_name: str, solver: str, event, *, mode: str | None = None, last: dict | None = None) -> None:
    """``layered150 / lns 0.52s objective=139.2µs source=lns`` on stderr, as a run sends a better answer: the
    objective in bytes in pack mode, in seconds in map and prefetch modes, a plain number where ``--mode``
    leaves each input its own; with more figures where the run's answer before it would print alike
    (``last`` keeps each run's previous value)."""
    fmt = {"pack": format_bytes, "map": format_seconds, "prefetch": format_seconds}.get(mode, format_number)
    last = {} if last is None else last
    _, objective = distinct(fmt, [last.get((input_name, solver)), event.value])
    last[(input_name, solver)] = event.value
    click.echo(f"{input_name} / {solver} {event.seconds:.2f}s objective={objective} source={event.source}", err=True)


def _draw(inputs, rows, out_dir: Path, *, bar: bool, lines: bool) -> list[Path]:
    """Every picture of :func:`mallocgame.plots.plot_comparison`, with progress per input."""
    out_dir = output_folder(out_dir)
    written: list[Path] = []
    for k, inp in enumerate(tqdm(inputs, desc="pictures", unit="input", file=sys.stderr, leave=False,
                                 disable=not bar), 1):
        mine = [r for r in rows if r.input == inp.name]
        stem = safe_name(inp.name)
        written.append(plot_allocations(inp, mine, out_dir / f"{stem}.alloc.png"))
        written.append(plot_anytime(inp, mine, out_dir / f"{stem}.anytime.png"))
        if lines:
            click.echo(f"[pictures {k}/{len(inputs)}] {inp.name}: {stem}.alloc.png, {stem}.anytime.png", err=True)
    for p in (plot_speedups(inputs, rows, out_dir / "speedups.png"), plot_pack_gaps(inputs, rows, out_dir / "pack_gaps.png")):
        if p is not None:
            written.append(p)
            if lines:
                click.echo(f"[pictures] {p.name}", err=True)
    return written
