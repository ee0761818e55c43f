"""What every ``mallocgame`` command shares: exit codes, one-line errors, the problem options,
``-`` for stdout, solver options, and the stamp (tool version, UTC time) of JSON output.

The rules live here once, so the commands keep the same promises:

* ``--capacity`` takes units (``4MiB``, ``1.5GiB``, ``512KB``, plain bytes) and
  ``--capacity-fraction F`` excludes it; both go through :func:`mallocgame.inputs.load.prepare`.
* A capacity that makes the problem degenerate gets one ``warning:`` line on stderr.
* ``-o -`` writes to stdout; then everything else the command prints goes to stderr.
* A solver option that the solver does not take is bad input (exit 2), never ignored.
* An output that cannot be written is said in one line before any work (:func:`check_output`);
  one that fails late is said before the summary (:func:`write_file`), and nothing is left half-written.
* Seeds, time limits and counts are checked by their click types (:data:`SEED`, :data:`SECONDS`,
  :data:`COUNT`): one line, exit 2.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable, Sequence

import click
import msgspec

from mallocgame.bounds import bound_cache
from mallocgame.cli.exits import EXIT_BAD_INPUT, EXIT_NO_SOLUTION, EXIT_OK, fail  # noqa: F401  (the commands import them from here)
from mallocgame.engine.protocol import MAX_SEED, MAX_TIME_LIMIT, bad_time_limit, options_of
from mallocgame.engine.solving import read_answer_file
from mallocgame.formats.io import atomic_write_text
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.validator import validate_schedule
from mallocgame.inputs.load import capacity_warning as capacity_warning_text
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.problem.model import InputError, Problem
from mallocgame.problem.suggest import did_you_mean
from mallocgame.problem.units import decimal_units_note, parse_bytes
from mallocgame.search.muzero.torchless import load_agent_network

STDOUT = "-"


class Seconds(click.ParamType):
    """A time limit: a positive, finite number of seconds, at most
    :data:`mallocgame.engine.protocol.MAX_TIME_LIMIT` (``nan``, ``inf`` and ``3e6`` are refused)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number of seconds, got {value!r}", param, ctx)
        if not (math.isfinite(seconds) and seconds > 0):
            self.fail(f"must be a positive number of seconds, got {value!r}", param, ctx)
        if bad_time_limit(seconds):
            self.fail(f"must be at most {MAX_TIME_LIMIT:g} seconds (about 11.6 days), got {value!r}", param, ctx)
        return seconds


SECONDS = Seconds()
SEED = click.IntRange(0, MAX_SEED)  # every generator takes it (numpy, torch, CP-SAT after a modulo)
COUNT = click.IntRange(min=1)  # workers, simulations, jobs


def warn(message: str | None) -> None:
    if message:
        click.echo(message if message.startswith("warning:") else f"warning: {message}", err=True)


# ---------------------------------------------------------------------------- problem options

def problem_options(func):
    """``--hardware``, ``--capacity`` (with units), ``--capacity-fraction`` and ``--mode``."""
    func = click.option("--hardware", "hardware", default=None, metavar="PRESET_OR_FILE",
                        help="Hardware preset (tpuv4i, test, unit) or a .toml/.json file.")(func)
    func = capacity_options(func)
    func = click.option("--mode", type=click.Choice(["map", "pack", "prefetch"]), default=None,
                        help="map: choose fast vs slow to save time; pack: place every buffer. "
                             "Default: pack for plain CSV, map otherwise.")(func)
    return func


def capacity_options(func):
    func = click.option("--capacity-fraction", "capacity_fraction", default=None, metavar="F",
                        help="Fast memory = F x the max live bytes (rounded down to the alignment); "
                             "excludes --capacity.")(func)
    func = click.option("--capacity", default=None, metavar="BYTES",
                        help="Fast-memory capacity: 4096, 512KB, 4MiB, 1.5GiB (overrides the hardware's).")(func)
    return func


def _no_cache(ctx, param, value) -> None:
    if value:
        bound_cache.disable()


def no_cache_option(func):
    """``--no-cache``: neither read nor write the bound cache (:mod:`mallocgame.bounds.bound_cache`)."""
    return click.option("--no-cache", is_flag=True, expose_value=False, is_eager=True, callback=_no_cache,
                        help="Neither read nor write the bound cache ($MALLOCGAME_CACHE_DIR, "
                             "default ~/.cache/mallocgame).")(func)


def parse_fraction(text: str | float | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--capacity-fraction: expected a positive number such as 0.4, got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise InputError(f"--capacity-fraction: must be a positive number, got {text!r}")
    return value


def capacity_settings(capacity: str | None, capacity_fraction: str | None) -> tuple[int | None, float | None]:
    """``(bytes, fraction)`` from the two flags; raises :class:`InputError` (one line)."""
    if capacity is not None and capacity_fraction is not None:
        raise InputError("--capacity and --capacity-fraction exclude each other")
    note = decimal_units_note(capacity) if capacity is not None else None
    if note:  # 4GB is 4,000,000,000 bytes, 4G and 4GiB are 4 GiB: the reading is said
        click.echo(note, err=True)
    return (None if capacity is None else parse_bytes(capacity)), parse_fraction(capacity_fraction)


def load_prepared(problem_path: str, *, mode: str | None, capacity: str | None, capacity_fraction: str | None,
                  hardware: str | None, minimize_peak: bool = False, oversized_ok: bool = False):
    """Read PROBLEM and apply the flags through :func:`~mallocgame.inputs.load.prepare` (one rule).

    Returns ``(problem, spec)``; raises :class:`InputError` with one line.
    """
    cap, fraction = capacity_settings(capacity, capacity_fraction)
    if minimize_peak:
        if cap is not None or fraction is not None:
            raise InputError("--minimize-peak: the peak is minimised without a capacity; "
                             "drop --capacity / --capacity-fraction")
        if mode == "map":
            raise InputError("--minimize-peak: only in pack mode (every buffer placed), not with --mode map")
        mode = "pack"
    return prepare(read_problem(problem_path), mode=mode, capacity=cap, capacity_fraction=fraction,
                   hardware=hardware, minimize_peak=minimize_peak, oversized_ok=oversized_ok)


def check_own_order(problem: Problem, path: str) -> None:
    """A re-scheduled workload (with ``original_order``) whose op order breaks the dependencies of that
    order is bad input: one line, as ``validate`` would find it (``solve`` and ``schedule`` refuse it)."""
    if not problem.original_order:
        return

    violation = validate_schedule(problem)
    if violation:
        raise InputError(f"{path}: the op order breaks the workload's own original_order: {violation}")


def load_answer(problem_path: str, solution_path: str, *, mode: str | None, capacity: str | None,
                capacity_fraction: str | None, hardware: str | None):
    """PROBLEM prepared as :func:`load_prepared` does, and SOLUTION read for its mode: fast intervals
    (prefetch mode; a map solution CSV is lifted, :func:`mallocgame.formats.lift.lift_map_answer`, and a note
    says so on stderr) or offsets. Returns ``(problem, spec, answer)``; bad input exits 2 with one line."""
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity,
                                      capacity_fraction=capacity_fraction, hardware=hardware)
        offsets, intervals = read_answer_file(solution_path, problem)
    except InputError as exc:
        fail(str(exc))
    if problem.mode != "prefetch":
        return problem, spec, offsets
    if intervals is None:
        intervals = lift_map_answer(problem, offsets)
        click.echo(f"note: {solution_path}: a map solution, lifted to prefetch mode (mallocgame.formats.lift)", err=True)
    return problem, spec, list(intervals)


def capacity_warning(problem: Problem) -> None:
    """Print the one-line warning for a degenerate capacity (below the alignment, or trivial)."""
    warn(capacity_warning_text(problem))


# ---------------------------------------------------------------------------- output

def is_stdout(path: str | None) -> bool:
    return path == STDOUT


def output_problem(path: str, *, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written (a file, or with ``folder`` a folder to fill), or ``None``.

    A missing folder is a problem: it is never created for a file (a mistyped path would
    silently make one). Special files (``/dev/null``, a FIFO) are written in place.
    """
    p = Path(path)
    if p.is_dir() and not folder:
        return "it is a directory"
    if p.exists() and not p.is_dir() and folder:
        return "it is not a directory"
    if p.exists() and not p.is_file() and not p.is_dir():
        return None if os.access(p, os.W_OK) else "not writable"
    parent = p if folder else p.parent
    if folder and not p.exists():
        parent = p.parent  # a missing picture folder is created, only inside an existing writable one
    if not parent.exists():
        return "directory does not exist"
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    return None


def check_output(path: str | None, flag: str, *, folder: bool = False) -> None:
    """Exit 2 with one line, before any work is done, when ``path`` (given by ``flag``) cannot be written."""
    if path is None or is_stdout(path):
        return
    problem = output_problem(path, folder=folder)
    if problem:
        fail(f"{flag}: cannot write {path}: {problem}")


def write_file(path: str, text: str) -> str | None:
    """Write ``text`` atomically to ``path``; the one-line reason when it cannot be, else ``None``.

    Nothing is left behind on failure: not the file, not its temp file, not a folder.
    """
    problem = output_problem(path)
    if problem is None:
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            problem = exc.strerror or str(exc)
    return None if problem is None else f"cannot write {path}: {problem}"


def write_text(path: str, text: str) -> None:
    """``text`` to stdout for ``-``, else atomically to the file; an unwritable file is bad input."""
    if is_stdout(path):
        click.echo(text, nl=False)
        return
    problem = write_file(path, text)
    if problem:
        fail(problem)


def one_stdout(**flags: bool) -> None:
    """At most one of ``flags`` (name -> uses stdout) may write to stdout."""
    users = [name for name, used in flags.items() if used]
    if len(users) > 1:
        fail(f"{' and '.join(users)} both write to stdout: choose one")


def stamp() -> dict[str, str]:
    """The tool version and a UTC ISO-8601 timestamp, carried by every JSON output."""
    try:
        tool = version("mallocgame")
    except PackageNotFoundError:  # running from a source tree that is not installed
        tool = "unknown"
    return {"version": tool, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def intervals_json(problem: Problem, intervals) -> list[dict[str, Any]]:
    """A prefetch answer as JSON rows ``{"id", "offset", "start", "end", "copy_start"}`` (docs/prefetch.md)."""
    ids = problem.ids  # the ids column: no buffer object is made
    return [{"id": ids[iv.buffer], "offset": iv.offset, "start": iv.start, "end": iv.end,
             "copy_start": iv.copy_start} for iv in sorted(intervals, key=lambda v: (v.buffer, v.start))]


def offsets_by_id(problem: Problem, offsets: Sequence[int | None] | None) -> dict[str, int | None] | None:
    """``{"b7": 1024, "b9": None}``: a solution's offsets keyed by buffer id (``None``: slow memory)."""
    if offsets is None or len(offsets) != problem.n:
        return None
    return {i: (None if o is None else int(o)) for i, o in zip(problem.ids, offsets)}


# A top-level value of a JSON document with more entries than this (a report's offsets or intervals on a big input)
# is written on one line, without spaces, by msgspec's encoder: indented by json, 200k intervals took 5 s, and on one
# line 2M offsets still took seconds.
COMPACT_ENTRIES = 10_000


def dump_json(data: Any) -> str:
    """``data`` as indented JSON text; in a top-level object, values with more than :data:`COMPACT_ENTRIES` entries
    are written on one line each."""
    if not isinstance(data, dict) or not any(isinstance(v, (list, dict)) and len(v) > COMPACT_ENTRIES
                                             for v in data.values()):
        return json.dumps(data, indent=1) + "\n"
    rows = [f" {json.dumps(str(k))}: " + (msgspec.json.encode(v).decode() if isinstance(v, (list, dict))
                                          and len(v) > COMPACT_ENTRIES else json.dumps(v, indent=1).replace("\n", "\n "))
            for k, v in data.items()]
    return "{\n" + ",\n".join(rows) + "\n}\n"


# ---------------------------------------------------------------------------- solver options

def describe_options(names: Sequence[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def check_options(options: dict[str, Any], solvers: dict[str, Any], *, flags: dict[str, str] | None = None,
                  optional: Iterable[str] = ()) -> None:
    """Exit 2 for an option that none of ``solvers`` (name -> loaded solver) takes.

    ``flags`` maps an option to the flag that set it (``workers`` -> ``--workers``) for the
    message; options in ``optional`` are passed where named and never an error.
    """
    flags = flags or {}
    taken = {name: options_of(s).names() for name, s in solvers.items()}
    for key in options:
        if key in optional or any(key in names for names in taken.values()):
            continue
        where = flags.get(key, f"--solver-option {key}")
        if len(taken) == 1:
            (name, names), = taken.items()
            fail(f"{where}: solver {name!r} does not take option {key!r} (its options: {describe_options(names)})"
                 f"{did_you_mean(key, names or ())}")
        listed = "; ".join(f"{name}: {describe_options(names)}" for name, names in taken.items())
        known = sorted({n for names in taken.values() for n in names or ()})
        fail(f"{where}: none of the solvers {', '.join(map(repr, taken))} takes option {key!r} (options: {listed})"
             f"{did_you_mean(key, known)}")


def check_option_values(options: dict[str, Any], flag: str, solvers: dict[str, Any]) -> None:
    """Exit 2 for a value that the ``Options`` of a solver of ``solvers`` (name -> loaded solver) taking it refuses
    (``workers=0``, ``simulations=-1``, ``windows=4``)."""
    for solver in solvers.values():
        try:
            options_of(solver).taken(options)
        except InputError as exc:
            fail(f"{flag}: {str(exc).partition(': ')[2]}")


# ---------------------------------------------------------------------------- checkpoints

MUZERO = "muzero"
MUZERO_CHECKPOINT_ENV = "MALLOCGAME_MUZERO_CHECKPOINT"


def check_muzero_checkpoint(solver_names: Iterable[str], options: dict[str, Any]) -> None:
    """A missing or unreadable MuZero checkpoint (option or environment) is bad input: exit 2.

    The network is loaded here, before any solver runs; the solver finds it in its cache.
    """
    if MUZERO not in solver_names:
        return
    path = options.get("checkpoint") or os.environ.get(MUZERO_CHECKPOINT_ENV)
    if not path:
        return
    source = "checkpoint option" if options.get("checkpoint") else f"${MUZERO_CHECKPOINT_ENV}"
    try:
        load_agent_network(str(path))
    except ImportError as exc:
        fail(f"solver {MUZERO!r} cannot load: {exc}")
    except Exception as exc:  # CheckpointError and the torchless reader's ValueError
        text = " ".join(str(exc).split())
        fail(f"{text} (from {source})" if str(path) in text else f"{path}: not a readable checkpoint: {text} ({source})")
