"""``mallocgame compare``: every solver on every input, validated, scored, tabulated, plotted.

The product's main job. For each input (a built-in suite, ``SUITE:ENTRY`` or a file) the
bound is computed once (:func:`mallocgame.engine.runner.problem_bound`) and, in map mode, the
``greedy-xla`` answer is the reference for the "x greedy" column (run once if it is not
among the solvers). Every (input, solver) pair then runs in its own forked process,
``--jobs`` at a time, through :func:`mallocgame.engine.runner.run_solver`, which validates and scores
the answer; a solver that raises, dies or overruns ``2 x time limit + 30 s`` gets an
``ERROR`` row with a one-line reason and the rest goes on. A solver whose ``modes`` lack an
input's mode gets an ``n/a`` row without running (not counted as invalid).

Outputs: a table on stdout (map: value, bound, gap, speed-up over all-slow and over
greedy-xla, seconds; pack: peak, bound, gap, seconds) and a per-solver summary;
``--out results.csv`` (first columns ``input,solver``, one row per pair) plus
``results.json`` beside it (full reports with anytime histories and offsets);
``--plot DIR`` pictures (see :mod:`mallocgame.plots`). Files are written atomically. The CSV
is rewritten as each row finishes (:class:`ResultsFile`), so a killed comparison keeps every
finished row, and ``--resume`` skips the rows already there (same input, solver, mode, time
limit, seed and capacity); the JSON is written at the end, or at an interrupt. Runs go to
forked processes (``--executor local``, the default) or Ray tasks (``--executor ray``).

Exit codes: 0 the comparison ran; 1 no solver produced a valid answer on any input;
2 bad input or usage (one line on stderr, nothing written); 130 / 143 interrupted by
SIGINT / SIGTERM (the finished rows are kept and summarised).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import importlib.util
import io
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from tqdm import tqdm

from mallocgame.bounds.bounds import MAP_BOUND_SECONDS
from mallocgame.bounds.prefetch_bound import RESIDENCY_SECONDS
from mallocgame.engine.pools import RayPool, open_pool
from mallocgame.engine.protocol import bad_time_limit, parse_solver_options
from mallocgame.engine.registry import SolverLoadError, implied_mode, load_solver, solver_entries
from mallocgame.engine.report import Report
from mallocgame.engine.runner import preload, problem_bound
from mallocgame.engine.session import BASELINE_SOLVER
from mallocgame.engine.solving import solve_with_warm_start  # the one solve path, as every run of the table
from mallocgame.formats.io import atomic_write_text, exclusive_output, workload_text
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import resolve_inputs
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError, Problem, Status
from mallocgame.problem.suggest import did_you_mean
from mallocgame.problem.units import distinct, format_bytes, format_number, format_percent, format_seconds
from mallocgame.runtime.interrupts import interrupted

# The baseline each mode measures against (the one table, mallocgame.engine.session.BASELINE_SOLVER): XLA-style
# greedy in map mode, XLA's memory-space assignment in prefetch mode; pack mode's peak needs no ratio. The
# CSV column keeps its name ``speedup_vs_greedy``; ``baseline`` names the solver.
BASELINE = {mode: BASELINE_SOLVER[mode] for mode in ("map", "prefetch")}
GREEDY = BASELINE["map"]
CSV_COLUMNS = ("input", "solver", "mode", "status", "valid", "value", "bound", "gap", "speedup_vs_slow",
               "speedup_vs_greedy", "estimated_time", "time_all_slow", "peak", "capacity", "placed", "total",
               "seconds", "error", "baseline", "time_limit", "seed", "input_sha256", "bound_kind", "bound_per_op")
# What makes two rows the same run for ``--resume``: a kept row is skipped only if all of these match.
# The input is matched by its content (``input_sha256``, :func:`input_identity`), not by its display
# name: automatic names (``three``, ``three.2``) follow the order the inputs are given in.
RESUME_KEY = ("input_sha256", "solver", "mode", "time_limit", "seed", "capacity")
IMPROVED = 1 + 1e-6  # a speed-up over greedy above this counts as an improvement, not a tie


@dataclass
class Input:
    """One prepared input: the problem as solvers see it, its hardware, bound and reference."""

    name: str
    problem: Problem
    hardware: Any
    capacity_fraction: float | None = None
    bound: Any = None  # mallocgame.bounds.bounds.Bound
    baseline: Any = None  # mallocgame.engine.report.Report of the mode's BASELINE solver, the "x greedy" / "x msa" reference
    max_live: int = 0
    identity: str = ""  # input_identity(problem): what --resume matches rows by


def input_identity(problem: Problem) -> str:
    """SHA-256 (hex) of what the input is: its file's bytes when it was read from a file, else its
    workload JSON (a generated suite entry). The same file under another name or position is the
    same input; two files with the same name are not."""
    h = hashlib.sha256()
    source = problem.source
    if source and os.path.isfile(source):
        with open(source, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    else:
        h.update(workload_text(problem).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass
class Row:
    """One (input, solver) result: a validated report or the one-line reason it has none."""

    input: str
    solver: str
    report: Any = None  # mallocgame.engine.report.Report
    error: str | None = None
    extra: dict = field(default_factory=dict)
    unsupported: bool = False  # the solver does not handle the input's mode: n/a, not run
    resumed: dict | None = None  # kept from the results file by --resume: its CSV record (the run is not redone)

    @property
    def valid(self) -> bool:
        return self.report is not None and self.report.valid

    @property
    def status(self) -> str:
        return "n/a" if self.unsupported else "ERROR" if self.report is None else self.report.status


# ---------------------------------------------------------------------------- options

def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


# ---------------------------------------------------------------------------- preparation

def prepare_inputs(specs: Sequence[str], *, benchmarks: str | None, mode: str | None, capacity: int | None,
                   capacity_fraction: float | None, hardware: str | None) -> list[Input]:
    """Resolve, build and prepare every input; raises :class:`InputError` on the first bad one."""
    entries = resolve_inputs(specs, benchmarks)
    if not entries:
        raise InputError("no inputs: the suites given are empty here")
    inputs, seen = [], set()
    for entry in entries:
        problem = entry.build()
        live = max_live(problem)
        # An explicit --capacity wins; else --capacity-fraction; else the suite entry's own fraction
        # (already applied when it was built) or the input's capacity.
        fraction = None if capacity is not None else (capacity_fraction or entry.capacity_fraction)
        prepared, spec = prepare(problem, mode=mode, capacity=capacity,
                                 capacity_fraction=None if capacity is not None else capacity_fraction,
                                 hardware=hardware)
        name, k = entry.name, 1
        while name in seen:
            k += 1
            name = f"{entry.name}.{k}"
        seen.add(name)
        inputs.append(Input(name, prepared, spec, fraction, max_live=live, identity=input_identity(problem)))
    return inputs


# ---------------------------------------------------------------------------- running

def run_matrix(inputs: list[Input], solvers: Sequence[str], *, time_limit: float, seed: int, jobs: int,
               options: dict[str, dict[str, Any]], load_errors: dict[str, str], progress: bool | None,
               hard_limit: float | None = None, on_row=None, modes: dict[str, frozenset] | None = None,
               done: dict[tuple[int, str], Row] | None = None, executor: str = "local",
               address: str | None = None, pool=None, on_improvement=None) -> list[Row]:
    """Run every (input, solver) pair, ``jobs`` at a time; rows in input order.

    ``executor`` "local" forks processes (:class:`mallocgame.engine.pools.ProcessPool`), "ray" runs Ray
    tasks (:class:`mallocgame.engine.pools.RayPool`, at ``address`` or a local runtime):
    :func:`mallocgame.engine.pools.open_pool`. A pair whose
    solver's ``modes[solver]`` lack the input's mode is an ``n/a`` row, never run; a pair in
    ``done`` (rows kept by ``--resume``) is not run again. ``on_row(row, done, total)`` is called
    as each new row finishes. On SIGINT/SIGTERM (a ``KeyboardInterrupt``) every run still going
    is killed and :class:`mallocgame.runtime.interrupts.Interrupted` is raised with the finished rows as
    its ``partial``. ``pool``: an executor made by the caller (it is closed here). ``on_improvement(input, solver,
    improvement)``: each better answer a local run sends. A local run still going at its time limit +
    :data:`~mallocgame.engine.protocol.LIMIT_GRACE` is stopped; its row is the best answer it sent ("stopped at the limit").
    """
    hard_limit = hard_limit if hard_limit is not None else 2 * time_limit + 30
    tasks = [(i, s) for i in range(len(inputs)) for s in solvers]
    rows: dict[tuple[int, str], Row] = {t: r for t, r in (done or {}).items() if t in set(tasks)}
    queue = [t for t in reversed(tasks) if t not in rows]
    bar = tqdm(total=len(tasks), initial=len(rows), desc="compare", unit="run", disable=_disable(progress),
               file=sys.stderr, leave=False)

    def finish(task, row: Row) -> None:
        rows[task] = row
        bar.update(1)
        if on_row is not None:
            on_row(row, len(rows), len(tasks))

    try:
        if pool is None:
            def improved(task, events, _answer) -> None:
                for event in events:
                    on_improvement(inputs[task[0]].name, task[1], event)

            if executor != "ray":  # heavy imports here, once, before the forks: a run's limit counts from its fork
                for s in solvers:
                    try:
                        preload(load_solver(s))
                    except SolverLoadError:  # its rows say so
                        pass
            pool = open_pool(executor, jobs, address=address,
                             on_incumbent=improved if on_improvement is not None else None)
        with pool:
            while queue or pool.busy:
                while queue and pool.free > 0:
                    i, s = task = queue.pop()
                    inp = inputs[i]
                    if s in load_errors:
                        finish(task, Row(inp.name, s, error=load_errors[s]))
                        continue
                    if modes is not None and s in modes and inp.problem.mode not in modes[s]:
                        finish(task, Row(inp.name, s, unsupported=True, error=f"{s} does not support "
                                         f"{inp.problem.mode} mode (supports: {', '.join(sorted(modes[s]))})"))
                        continue
                    pool.start(task, s, inp.problem, inp.hardware, time_limit=time_limit, seed=seed,
                               options=options.get(s, {}), bound=inp.bound)
                    bar.set_postfix_str(f"{inp.name} / {s}", refresh=False)
                bar.refresh()  # the elapsed time moves on while runs go
                for task, kind, payload in pool.wait(timeout=0.5):
                    i, s = task
                    row = Row(inputs[i].name, s, report=payload) if kind == "ok" else Row(inputs[i].name, s, error=payload)
                    attach_speedup(inputs[i], row)
                    finish(task, row)
                now = time.monotonic()
                for task, started in pool.running():
                    if now - started > hard_limit:
                        pool.kill(task)
                        i, s = task
                        finish(task, Row(inputs[i].name, s, error=f"killed after {hard_limit:.0f} s "
                                                                   f"(time limit {time_limit:g} s)"))
    except KeyboardInterrupt as exc:  # the pool has killed every run still going
        stop = interrupted(exc)
        stop.partial = [rows[t] for t in tasks if t in rows]
        raise stop from None
    finally:
        bar.close()
    return [rows[t] for t in tasks]


def _disable(progress: bool | None) -> bool | None:
    """tqdm's ``disable``: ``None`` lets tqdm hide the bar when stderr is not a terminal."""
    return None if progress is None else not progress


def compute_references(inputs: list[Input], *, time_limit: float, seed: int, progress: bool | None) -> None:
    """The bound of every input and, in map and prefetch modes, the baseline's answer (greedy-xla, msa) in place."""
    for inp in tqdm(inputs, desc="bounds", unit="input", file=sys.stderr, leave=False, disable=_disable(progress)):
        # the expensive bound once per problem (then from the bound cache): the map relaxation its usual
        # time, the residency bound the runs' time limit (at most RESIDENCY_SECONDS); pack mode has none
        seconds = MAP_BOUND_SECONDS if inp.problem.mode == "map" else min(time_limit, RESIDENCY_SECONDS)
        inp.bound = problem_bound(inp.problem, inp.hardware, tighten=seconds)
        if inp.problem.mode in BASELINE:
            try:
                inp.baseline = solve_with_warm_start(BASELINE[inp.problem.mode], inp.problem, inp.hardware,
                                                     time_limit=time_limit, seed=seed, compute_bound=False,
                                                     bound=inp.bound)
            except Exception:  # no reference: the column stays empty
                inp.baseline = None


def attach_speedup(inp: Input, row: Row) -> None:
    """Fill ``row.extra['speedup_vs_greedy']``: the reference run's time (the mode's baseline, run
    first by :func:`compute_references`) over the row's. Known as each row finishes, so a row is
    written once, complete."""
    ref = inp.baseline
    if row.valid and inp.problem.mode in BASELINE and ref is not None and ref.valid and row.report.estimated_time:
        row.extra["speedup_vs_greedy"] = ref.estimated_time / row.report.estimated_time


def attach_speedups(inputs: list[Input], rows: list[Row]) -> None:
    """:func:`attach_speedup` for every row; an input whose reference run failed takes its baseline's row."""
    by_input = {inp.name: inp for inp in inputs}
    base_rows = {r.input: r for r in rows if r.valid and r.solver == BASELINE.get(by_input[r.input].problem.mode)}
    for r in rows:
        inp = by_input[r.input]
        if "speedup_vs_greedy" in r.extra or r.resumed:
            continue
        if inp.baseline is None or not inp.baseline.valid:
            ref = base_rows.get(r.input)
            if ref is not None and r.valid and r.report.estimated_time and inp.problem.mode in BASELINE:
                r.extra["speedup_vs_greedy"] = ref.report.estimated_time / r.report.estimated_time
        else:
            attach_speedup(inp, r)


# ---------------------------------------------------------------------------- output

def row_record(inp: Input, r: Row, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CSV record of a row (columns :data:`CSV_COLUMNS`; ``settings`` gives time_limit and seed).

    A row kept by ``--resume`` is its record as read, so it is written back unchanged.
    """
    if r.resumed is not None:
        return dict(r.resumed)
    rep = r.report
    rec: dict[str, Any] = {c: None for c in CSV_COLUMNS}
    rec.update(input=r.input, solver=r.solver, mode=inp.problem.mode, status=r.status,
               valid=None if r.unsupported else r.valid,
               capacity=inp.problem.capacity, total=inp.problem.n,
               bound=None if inp.bound is None else inp.bound.value)
    if rep is not None:
        rec.update(value=rep.objective, gap=rep.gap, speedup_vs_slow=rep.speedup, estimated_time=rep.estimated_time,
                   time_all_slow=rep.time_all_slow, peak=rep.peak if rep.valid else None, placed=rep.placed,
                   seconds=rep.seconds, error=None if rep.valid else (rep.violation or "no valid answer"))
    else:
        rec["error"] = r.error
    rec["speedup_vs_greedy"] = r.extra.get("speedup_vs_greedy")
    rec["baseline"] = BASELINE.get(inp.problem.mode)
    rec["input_sha256"] = inp.identity or None
    if inp.bound is not None:  # prefetch mode reports the tighter bound and shows the per-op one beside it
        rec["bound_kind"] = inp.bound.kind
        rec["bound_per_op"] = dict(inp.bound.others).get("per-op")
    if settings is not None:
        rec["time_limit"] = float(settings["time_limit"])
        rec["seed"] = int(settings["seed"])
    return rec


def _csv_text(records: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for rec in records:
        writer.writerow(["" if rec[c] is None else _csv_cell(rec[c]) for c in CSV_COLUMNS])
    return buf.getvalue()


def resume_key(rec: dict[str, Any]) -> tuple[str, ...]:
    """The :data:`RESUME_KEY` of a CSV record, as text in one spelling (``2`` and ``2.0`` s are one limit)."""
    def text(column: str) -> str:
        v = rec.get(column)
        if v is None or v == "":
            return ""
        if column == "time_limit":
            return repr(float(v))
        if column in ("seed", "capacity"):
            return str(int(float(v)))
        return str(v)

    return tuple(text(c) for c in RESUME_KEY)


def row_from_record(rec: dict[str, str]) -> Row:
    """A row kept by ``--resume``: its report rebuilt from the CSV (no offsets, no history)."""
    def num(column: str, cast=float):
        v = rec.get(column, "")
        return None if v == "" else cast(float(v)) if cast is int else cast(v)

    row = Row(rec["input"], rec["solver"], resumed=dict(rec))
    if rec["status"] == "n/a":
        row.unsupported, row.error = True, rec.get("error") or None
    elif rec["status"] == "ERROR":
        row.error = rec.get("error") or "error"
    else:
        valid = rec["valid"] == "true"
        row.report = Report(
            solver=rec["solver"], mode=rec["mode"], status=rec["status"], valid=valid, objective=num("value"),
            bound=num("bound"), bound_kind=None, gap=num("gap"), placed=num("placed", int) or 0,
            total=num("total", int) or 0, peak=num("peak", int) or 0, seconds=num("seconds") or 0.0,
            estimated_time=num("estimated_time"), time_all_slow=num("time_all_slow"), speedup=num("speedup_vs_slow"),
            violation=None if valid else (rec.get("error") or "no valid answer"))
    if num("speedup_vs_greedy") is not None:
        row.extra["speedup_vs_greedy"] = num("speedup_vs_greedy")
    return row


class ResultsFile:
    """``--out results.csv`` as the runs finish: every finished row is in the file at once.

    Each :meth:`add` rewrites the file through :func:`mallocgame.formats.io.atomic_output` (a temp file,
    then a rename), so whenever the process dies -- SIGKILL included -- the file is a valid CSV
    holding every row finished before the last rename. Rows kept by ``resume`` come first, as
    read; new rows follow in input order. With ``resume``, a file whose header is not
    :data:`CSV_COLUMNS` is refused (:class:`InputError`); a missing file starts empty.
    """

    def __init__(self, path: str, *, resume: bool = False):
        self.path = path
        self.kept: list[dict[str, str]] = []  # records read back, in file order
        self.new: dict[Any, dict[str, Any]] = {}  # sort key -> record
        if resume:
            self.kept = read_results(path)

    def kept_rows(self) -> dict[tuple[str, ...], Row]:
        """The kept rows by :func:`resume_key` (the last of duplicates wins)."""
        return {resume_key(rec): row_from_record(rec) for rec in self.kept}

    def add(self, order: Any, rec: dict[str, Any]) -> None:
        self.new[order] = rec
        self.flush()

    def text(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for rec in self.kept:
            writer.writerow([rec.get(c, "") for c in CSV_COLUMNS])
        body = _csv_text([self.new[k] for k in sorted(self.new)])
        return buf.getvalue() + body.split("\n", 1)[1]

    def flush(self) -> None:
        atomic_write_text(self.path, self.text())


def read_results(path: str) -> list[dict[str, str]]:
    """The records of a results CSV written by this version (its header must be :data:`CSV_COLUMNS`)."""
    if not os.path.exists(path):
        return []
    try:
        with open(path, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return []
            if tuple(header) != CSV_COLUMNS:
                raise InputError(f"{path}: --resume: the header does not match this version's columns "
                                 f"({','.join(CSV_COLUMNS)}); write to a new file")
            records = []
            for lineno, cells in enumerate(reader, 2):
                if len(cells) != len(CSV_COLUMNS):
                    raise InputError(f"{path}: row {lineno}: --resume: expected {len(CSV_COLUMNS)} fields, "
                                     f"got {len(cells)}")
                records.append(dict(zip(CSV_COLUMNS, cells)))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: --resume: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return records


def _csv_cell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def json_document(inputs: list[Input], rows: list[Row], settings: dict[str, Any]) -> dict[str, Any]:
    by_input = {inp.name: inp for inp in inputs}
    results = []
    for r in rows:
        rec = {"input": r.input, "input_sha256": by_input[r.input].identity or None, "solver": r.solver,
               "status": r.status, "error": r.error, **r.extra}
        if r.report is not None:
            rec["report"] = r.report.as_json()
            rec["offsets"] = list(r.report.offsets) if r.report.valid else None
        results.append(rec)
    return {
        "format": "mallocgame.compare/1",
        "settings": settings,
        "inputs": [{
            "input": inp.name, "source": inp.problem.source, "mode": inp.problem.mode, "buffers": inp.problem.n,
            "ops": len(inp.problem.ops), "capacity": inp.problem.capacity,
            "capacity_fraction": inp.capacity_fraction, "max_live": inp.max_live,
            "hardware": getattr(inp.hardware, "name", None),
            "bound": None if inp.bound is None else inp.bound.value,
            "bound_kind": None if inp.bound is None else inp.bound.kind,
            "bound_seconds": None if inp.bound is None else inp.bound.seconds,
            "bounds": {} if inp.bound is None else dict(inp.bound.others),
            # the key keeps its name (results files read it); "baseline" says which solver it is
            "greedy_xla": None if inp.baseline is None else inp.baseline.as_json(),
            "baseline": BASELINE.get(inp.problem.mode),
        } for inp in by_input.values()],
        "results": results,
    }


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _shown_values(inp: Input, rows: list[Row]) -> dict:
    """Each row's value (peak in pack mode) and the input's bound as printed, at the precision that prints
    different numbers differently (:func:`mallocgame.problem.units.distinct`), keyed by row index and ``"bound"``."""
    pack = inp.problem.mode == "pack"
    fmt = format_bytes if pack else format_seconds if inp.problem.has_ops else format_number
    values = [None if r.report is None or not (r.report.valid or r.report.status == str(Status.DOES_NOT_FIT))
              else r.report.peak if pack else r.report.objective for r in rows]
    bound = None if inp.bound is None else int(inp.bound.value) if pack else inp.bound.value
    *texts, bound_text = distinct(fmt, [*values, bound])
    return {**dict(enumerate(texts)), "bound": bound_text}


def table_text(inputs: list[Input], rows: list[Row]) -> str:
    """The comparison table: one line per (input, solver); map and pack inputs in separate tables."""
    by_input = {inp.name: inp for inp in inputs}
    out = []
    for mode in ("map", "prefetch", "pack"):
        mine = [r for r in rows if by_input[r.input].problem.mode == mode]
        if not mine:
            continue
        if mode in BASELINE:
            base = "x greedy" if mode == "map" else f"x {BASELINE[mode]}"
            header = ("input", "solver", "status", "value", "bound", "gap", "x slow", base, "wall")
        else:
            header = ("input", "solver", "status", "peak", "bound", "gap", "wall")
        lines = []
        shown = {inp.name: _shown_values(inp, [r for r in mine if r.input == inp.name]) for inp in inputs
                 if inp.problem.mode == mode}
        seen: dict[str, int] = {}
        for r in mine:
            rep = r.report
            k = seen[r.input] = seen.get(r.input, -1) + 1  # the row's index among its input's rows
            value, bound = shown[r.input][k], shown[r.input]["bound"]
            secs = format_seconds(rep.seconds) if rep else "-"
            mark = rep is None or rep.valid or r.status == str(Status.DOES_NOT_FIT)  # '!': rejected by the validator
            status = r.status if mark else f"{r.status}!"
            gap = format_percent(rep.gap if rep and rep.valid else None)
            if mode in BASELINE:
                lines.append((r.input, r.solver, status, value, bound, gap,
                              _fmt(rep.speedup if rep else None, ".3f"),
                              _fmt(r.extra.get("speedup_vs_greedy"), ".3f"), secs))
            else:
                lines.append((r.input, r.solver, status, value, bound, gap, secs))
        widths = [max(len(h), *(len(line[k]) for line in lines)) for k, h in enumerate(header)]
        left = {0, 1, 2}
        fmt_line = lambda cells: "  ".join(c.ljust(w) if k in left else c.rjust(w)  # noqa: E731
                                           for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
        out.append(fmt_line(header))
        prev = None
        for line in lines:
            if prev is not None and line[0] != prev:
                out.append("")
            out.append(fmt_line(line))
            prev = line[0]
        notes = [f"  {r.input} / {r.solver}: {r.error or r.report.violation}" for r in mine
                 if not r.valid and not r.unsupported]
        if notes:
            out.append("")
            out.append("not valid (status ERROR: the solver failed; '!': its answer was rejected; "
                       "DOES_NOT_FIT: every buffer placed, the peak above the capacity):")
            out += notes
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def summary_text(inputs: list[Input], rows: list[Row], solvers: Sequence[str]) -> str:
    """Per solver: valid answers; map: improved/tied/worse vs greedy-xla, speed-ups; pack: mean gap."""
    by_input = {inp.name: inp for inp in inputs}
    lines = []
    for s in solvers:
        mine = [r for r in rows if r.solver == s and not r.unsupported]
        valid = [r for r in mine if r.valid]
        na = sum(r.solver == s and r.unsupported for r in rows)
        parts = [f"{s}: valid {len(valid)}/{len(mine)}" + (f" ({na} n/a)" if na else "")]
        maps = [r for r in valid if by_input[r.input].problem.mode in BASELINE]
        for mode, baseline in BASELINE.items():
            vs = [r.extra["speedup_vs_greedy"] for r in maps
                  if by_input[r.input].problem.mode == mode and "speedup_vs_greedy" in r.extra]
            if vs:
                better = sum(v > IMPROVED for v in vs)
                worse = sum(v < 1 / IMPROVED for v in vs)
                geo = math.exp(sum(math.log(v) for v in vs) / len(vs))
                parts.append(f"vs {baseline}: better on {better}, equal on {len(vs) - better - worse}, "
                             f"worse on {worse}; speed-up geo-mean {geo:.4f}, max {max(vs):.4f}, min {min(vs):.4f}")
        slows = [r.report.speedup for r in maps if r.report.speedup]
        if slows:
            parts.append(f"mean speed-up over all-slow {sum(slows) / len(slows):.3f}")
        packs = [r for r in valid if by_input[r.input].problem.mode == "pack" and r.report.gap is not None]
        if packs:
            parts.append(f"pack: mean peak gap to max-live {format_percent(sum(r.report.gap for r in packs) / len(packs))}")
        lines.append("; ".join(parts))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the whole comparison

@dataclass
class Comparison:
    """What :func:`run_comparison` returns: prepared inputs, one row per (input, solver), settings."""

    inputs: list[Input]
    rows: list[Row]
    solvers: list[str]
    settings: dict[str, Any]
    wall_seconds: float

    def records(self) -> list[dict[str, Any]]:
        """One dict per row with the CSV columns (:data:`CSV_COLUMNS`)."""
        by_input = {inp.name: inp for inp in self.inputs}
        return [row_record(by_input[r.input], r, self.settings) for r in self.rows]


def _locks_results(fn):
    """``results_path`` is held exclusively for the whole run (:func:`mallocgame.formats.io.exclusive_output`):
    a second comparison writing the same file refuses with one line instead of losing rows."""
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        path = kwargs.get("results_path")
        if not path:
            return fn(*args, **kwargs)

        with exclusive_output(path):
            return fn(*args, **kwargs)

    return locked


@_locks_results
def run_comparison(specs: Sequence[str], solvers: Sequence[str], *, time_limit: float = 5.0, seed: int = 0,
                   jobs: int = 1, hardware=None, capacity: int | str | None = None,
                   capacity_fraction: float | None = None, mode: str | None = None,
                   solver_options: Sequence[str] | dict[str, dict[str, Any]] = (), benchmarks: str | None = None,
                   progress: bool | None = False, on_row=None, results_path: str | None = None,
                   resume: bool = False, executor: str = "local", address: str | None = None,
                   on_improvement=None) -> Comparison:
    """Every solver on every input, each answer validated and scored.

    ``specs`` are suite names, ``SUITE:ENTRY[,ENTRY]``, ``example:NAME`` or files;
    ``solver_options`` is ``["[SOLVER:]KEY=VALUE", ...]`` or ``{solver: {key: value}}``;
    ``on_row(row, done, total)`` is called as each run finishes, ``on_improvement(input, solver, improvement)``
    with each better answer a run sends (:class:`mallocgame.runtime.incumbents.Improvement`; local runs). Raises
    :class:`InputError`
    (one line) for bad settings or inputs; a solver that fails to load is an error row.

    ``results_path``: the CSV is written there as each row finishes (:class:`ResultsFile`);
    with ``resume`` the rows already in it whose :data:`RESUME_KEY` matches a pair are kept
    and not run again. ``executor`` "local" (forked processes) or "ray" (Ray tasks at
    ``address``, else a local runtime). On SIGINT/SIGTERM raises
    :class:`mallocgame.runtime.interrupts.Interrupted` whose ``partial`` is the :class:`Comparison` of the
    rows finished so far (every run still going is killed first).
    """
    solvers = _checked_solvers(solvers)
    mode = mode or implied_mode(solvers)  # solvers with one mode, the same, imply it (msa: prefetch)
    _check_run_settings(time_limit=time_limit, jobs=jobs, executor=executor, address=address, resume=resume,
                        results_path=results_path)
    results = ResultsFile(results_path, resume=resume) if results_path else None
    if capacity is not None and capacity_fraction is not None:
        raise InputError("--capacity and --capacity-fraction exclude each other")
    if isinstance(solver_options, dict):
        options = {s: dict(solver_options.get(s, {})) for s in solvers}
    else:
        options = parse_solver_options(solver_options, solvers)
    inputs = prepare_inputs(specs, benchmarks=benchmarks, mode=mode, capacity=capacity,
                            capacity_fraction=capacity_fraction, hardware=hardware)
    modes, load_errors = _load_solvers(solvers)
    t0 = time.monotonic()
    settings = {"inputs": list(specs), "solvers": solvers, "time_limit": time_limit, "seed": seed, "jobs": jobs,
                "hardware": hardware if hardware is None or isinstance(hardware, str) else getattr(hardware, "name", None),
                "capacity": capacity, "capacity_fraction": capacity_fraction, "mode": mode,
                "solver_options": {s: o for s, o in options.items() if o}, "executor": executor,
                "wall_seconds": None}
    done = _kept_pairs(results, inputs, solvers, time_limit=time_limit, seed=seed) if results is not None else {}
    settings["resumed"] = len(done)
    run = _Run.start(inputs, solvers, settings, results, on_row, t0)
    pool = None
    try:
        if executor == "ray":  # reach the cluster before any work or any file: a bad --address is one line
            pool = RayPool(jobs, address=address)
        _prepare_references(inputs, solvers, done, time_limit=time_limit, seed=seed, progress=progress)
        if results is not None:
            results.flush()  # the header (and any kept rows) from the start
        rows = run_matrix(inputs, solvers, time_limit=time_limit, seed=seed, jobs=jobs, options=options,
                          load_errors=load_errors, progress=progress, on_row=run.finished, modes=modes, done=done,
                          executor=executor, address=address, pool=pool, on_improvement=on_improvement)
    except KeyboardInterrupt as exc:
        raise run.interrupted(exc, done) from None
    finally:
        if pool is not None:
            pool.close()
    return run.comparison(rows)


def _checked_solvers(solvers: Sequence[str]) -> list[str]:
    """The solver names given, stripped and without repeats; :class:`InputError` for none or an unknown one."""

    solvers = list(dict.fromkeys(s.strip() for s in solvers if s.strip()))
    registered = solver_entries()
    if not solvers:
        raise InputError("--solvers: give at least one solver")
    for s in solvers:
        if s not in registered:
            raise InputError(f"--solvers: unknown solver {s!r} (registered: {', '.join(registered)})"
                             f"{did_you_mean(s, registered)}")
    return solvers


def _check_run_settings(*, time_limit: float, jobs: int, executor: str, address: str | None, resume: bool,
                        results_path: str | None) -> None:
    """:class:`InputError` (one line) for a bad time limit, job count, executor, address or resume."""

    if bad_time_limit(time_limit):
        raise InputError(f"--time-limit: {bad_time_limit(time_limit)}")
    if jobs < 1:
        raise InputError(f"--jobs: must be at least 1, got {jobs}")
    if executor not in ("local", "ray"):
        raise InputError(f"--executor: expected local or ray, got {executor!r}")
    if address is not None and executor != "ray":
        raise InputError("--address: only with --executor ray")
    if executor == "ray":
        if importlib.util.find_spec("ray") is None:
            raise InputError("--executor ray: ray is not installed (pip install 'mallocgame[ray]')")
    if resume and not results_path:
        raise InputError("--resume: needs --out RESULTS.csv (the file to continue)")


def _load_solvers(solvers: Sequence[str]) -> tuple[dict[str, frozenset], dict[str, str]]:
    """Each solver's modes, and the one-line load error of each that fails to load.

    Imported once here, so the forked runs share the loaded modules.
    """

    load_errors: dict[str, str] = {}
    modes: dict[str, frozenset] = {}
    for s in solvers:
        try:
            modes[s] = frozenset(getattr(load_solver(s), "modes", frozenset({"map", "pack"})))
        except SolverLoadError as exc:
            load_errors[s] = str(exc)
    return modes, load_errors


def _kept_pairs(results: ResultsFile, inputs: list[Input], solvers: Sequence[str], *, time_limit: float,
                seed: int) -> dict[tuple[int, str], Row]:
    """The (input index, solver) pairs ``--resume`` keeps from the results file, with their rows.

    A kept row is shown (and written back) under this run's name for the input.
    """
    done: dict[tuple[int, str], Row] = {}
    kept = results.kept_rows()
    for i, inp in enumerate(inputs):
        for s in solvers:
            rec = {"input_sha256": inp.identity, "solver": s, "mode": inp.problem.mode, "time_limit": time_limit,
                   "seed": seed, "capacity": inp.problem.capacity}
            key = resume_key(rec)
            row = kept.get(key)
            if row is not None:
                done[(i, s)] = replace(row, input=inp.name, resumed={**row.resumed, "input": inp.name},
                                       extra=dict(row.extra))
                for old in results.kept:
                    if resume_key(old) == key:
                        old["input"] = inp.name
    return done


def _prepare_references(inputs: list[Input], solvers: Sequence[str], done: dict[tuple[int, str], Row], *,
                        time_limit: float, seed: int, progress: bool | None) -> None:
    """Bounds and baselines of the inputs with a pair still to run; the bound alone of the others.

    An input whose every pair is kept still shows its bound.
    """
    pending = {i for i in range(len(inputs)) for s in solvers if (i, s) not in done}
    compute_references([inp for i, inp in enumerate(inputs) if i in pending], time_limit=time_limit, seed=seed,
                       progress=progress)
    for inp in inputs:
        if inp.bound is None:
            inp.bound = problem_bound(inp.problem, inp.hardware)


@dataclass(frozen=True)
class _Run:
    """A comparison while it runs: where each finished row goes and how the result is made."""

    inputs: list[Input]
    solvers: list[str]
    settings: dict[str, Any]  # wall_seconds is filled in at the end
    results: ResultsFile | None
    on_row: Any  # on_row(row, done, total) or None
    started: float  # time.monotonic() at the start
    order: dict[tuple[str, str], tuple[int, int]]  # (input name, solver) -> the row's place in the CSV
    by_name: dict[str, Input]

    @classmethod
    def start(cls, inputs: list[Input], solvers: list[str], settings: dict[str, Any], results: ResultsFile | None,
              on_row, started: float) -> "_Run":
        """The run of these inputs and solvers (the CSV in input order, then solver order)."""
        order = {(inp.name, s): (i, k) for i, inp in enumerate(inputs) for k, s in enumerate(solvers)}
        return cls(inputs, solvers, settings, results, on_row, started, order, {inp.name: inp for inp in inputs})

    def record(self, row: Row) -> dict[str, Any]:
        """The row's CSV record."""
        return row_record(self.by_name[row.input], row, self.settings)

    def finished(self, row: Row, n_done: int, total: int) -> None:
        """A new row: into the results file at once, then to ``on_row``."""
        if self.results is not None:
            self.results.add(self.order[(row.input, row.solver)], self.record(row))
        if self.on_row is not None:
            self.on_row(row, n_done, total)

    def comparison(self, rows: list[Row]) -> Comparison:
        """The result: speed-ups attached, the wall time taken."""
        attach_speedups(self.inputs, rows)
        self.settings["wall_seconds"] = wall = time.monotonic() - self.started
        return Comparison(self.inputs, rows, self.solvers, self.settings, wall)

    def interrupted(self, exc: KeyboardInterrupt, done: dict[tuple[int, str], Row]):
        """The :class:`mallocgame.runtime.interrupts.Interrupted` to raise, its ``partial`` the finished rows'
        comparison; a row the signal caught before its write is written first."""
        stop = interrupted(exc)
        finished_rows = stop.partial if isinstance(stop.partial, list) else \
            [done[(i, s)] for i in range(len(self.inputs)) for s in self.solvers if (i, s) in done]
        if self.results is not None and isinstance(stop.partial, list):
            for row in finished_rows:
                if row.resumed is None:
                    self.results.new[self.order[(row.input, row.solver)]] = self.record(row)
            self.results.flush()
        stop.partial = self.comparison(finished_rows)
        return stop
