"""``mallocgame info PROBLEM``: size, horizon, components, largest clique, max live bytes and the bound of a problem.

The components and the largest clique are read from the interference graph: the networkx graph up to
:data:`mallocgame.problem.graph.GRAPH_EDGES` edges, its clique path above (:func:`mallocgame.problem.graph.conflicts`).

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`).
"""

from __future__ import annotations

import gc
from typing import Any

import click

from mallocgame.bounds import bound_cache
from mallocgame.bounds.bounds import MAP_BOUND_SECONDS, critical_window_bound
from mallocgame.cli.common import (
    SECONDS,
    capacity_warning,
    dump_json,
    fail,
    load_prepared,
    no_cache_option,
    problem_options,
    stamp,
)
from mallocgame.cli.exits import command_started
from mallocgame.cli.progress import status
from mallocgame.engine.runner import problem_bound
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.inputs.load import oversized
from mallocgame.problem.graph import GRAPH_EDGES
from mallocgame.problem.graph import conflicts as problem_conflicts
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError, Problem
from mallocgame.problem.units import distinct, format_bytes, format_number, format_seconds
from mallocgame.runtime.budget import Budget

# Seconds the expensive bound may take in `info`, before it answers, by mode (the no-fragmentation
# relaxation, the residency bound); computed once per problem, then read from the bound cache.
INFO_BOUND_SECONDS = {"map": MAP_BOUND_SECONDS, "prefetch": 10.0}
# `info` answers within this many seconds of the command's start at any size: the expensive bound gets at most what
# reading the problem and the facts left of them, less INFO_KEEP_SECONDS (the instant bound, the output), and is
# not started with less than MIN_BOUND_SECONDS (the instant or cached bound is reported then; the cache records
# the seconds a bound was given, so a later command with more time computes it again).
INFO_SECONDS = 10.0
INFO_KEEP_SECONDS = 1.0
MIN_BOUND_SECONDS = 1.0


def _bound_label(mode: str, kind: str) -> str:
    """How info names a bound of ``kind``: the relaxation it comes from (docs/architecture.md, "Scoring")."""
    if mode == "map" and kind not in ("per-op", "per-op-lp", "trivial"):
        return f"no-fragmentation {kind}"
    return f"relaxation {kind}, docs/prefetch.md" if mode == "prefetch" else f"relaxation {kind}"


def _expensive_bound_seconds(mode: str, budget: Budget | None) -> float:
    """The seconds ``info`` gives the expensive bound of a ``mode`` problem with ``budget`` left (``None``: no
    limit): :data:`INFO_BOUND_SECONDS` at most, 0 (none) when less than :data:`MIN_BOUND_SECONDS` is left."""
    seconds = INFO_BOUND_SECONDS[mode]
    if budget is not None:
        seconds = min(seconds, budget.left() - INFO_KEEP_SECONDS)
    return seconds if seconds >= MIN_BOUND_SECONDS else 0.0


def _info_facts(problem: Problem, spec, bound_time: float = 0.0, budget: Budget | None = None) -> dict[str, Any]:
    a = problem.arrays
    live = max_live(problem)
    conflicts = problem_conflicts(problem, build_graph_up_to=GRAPH_EDGES)
    parts = conflicts.components()
    clique = conflicts.largest_clique()
    facts: dict[str, Any] = {
        "problem": problem.name, "source": problem.source, "mode": problem.mode, "buffers": problem.n,
        "ops": len(problem.ops),
        "horizon": [int(a.start.min()), int(a.end.max())] if problem.n else [0, 0],
        "components": len(parts), "largest_component_buffers": max(map(len, parts), default=0),
        "largest_clique_buffers": len(clique), "largest_clique_bytes": conflicts.clique_bytes(clique),
        "total_bytes": int(a.size.sum()), "max_live_bytes": live,
        "capacity": problem.capacity, "hardware": getattr(spec, "name", None),
        "max_live_over_capacity": live / problem.capacity if problem.capacity else None,
    }
    if problem.mode in ("map", "prefetch"):
        ev = Evaluator.of(problem, spec)
        bound = problem_bound(problem, spec, tighten=_expensive_bound_seconds(problem.mode, budget))
        if bound.others:
            facts.update(bounds=dict(bound.others))
        facts.update(time_all_slow=ev.time_all_slow, time_all_fast=ev.time_all_fast, bound=bound.value,
                     bound_kind=_bound_label(problem.mode, bound.kind),
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
        elif bound_time > 0:  # mallocgame.bounds.bounds.critical_window_bound: the critical moments packed by CP-SAT
            b = critical_window_bound(problem, time_limit=bound_time)
            if b.kind == "window":
                bound_cache.store(problem, spec, b)  # solve and compare report it from now on
                lower = int(b.value), f"critical window, CP-SAT, {b.value / live - 1:+.3%} over max live"
            else:
                lower = live, f"max live; the critical-window bound found nothing higher in {bound_time:g} s"
        elif (known := problem_bound(problem, spec)).kind == "window":  # computed by an earlier --bound-time
            lower = int(known.value), f"critical window (cached), {known.value / live - 1:+.3%} over max live"
        facts.update(lower_bound=lower[0], lower_bound_kind=lower[1])
    return facts


def _bytes(n: int) -> str:
    """``9.633MiB (10101248 bytes)``: the figure a person reads and the exact count to copy (``64B`` below 1 KiB)."""
    text = format_bytes(n)
    return text if n < 1024 else f"{text} ({n} bytes)"


@click.command()
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
@no_cache_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of the lines.")
@click.option("--bound-time", type=SECONDS, default=None,
              help="Pack mode: seconds for a lower bound above max live (the critical moments packed by CP-SAT); "
                   "without it the lower bound is max live.")
@click.option("--quiet", is_flag=True, help="No progress on stderr (by default a status line on a terminal).")
def info(problem_path: str, mode: str | None, capacity: str | None, capacity_fraction: str | None,
         hardware: str | None, as_json: bool, bound_time: float | None, quiet: bool = False) -> None:
    """Size, horizon, components, largest clique, max live bytes and (map mode) the bound of PROBLEM."""
    budget = Budget(INFO_SECONDS, command_started())  # from the command's start: the interpreter and imports too
    with status(f"info: reading {problem_path}", quiet=quiet) as line:
        try:
            problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity,
                                          capacity_fraction=capacity_fraction, hardware=hardware,
                                          oversized_ok=True)  # described below, not refused
        except InputError as exc:
            line.close()
            fail(str(exc))
        gc.freeze()  # the problem lives to the end: later collections need not walk its objects
        line.set(f"info: {problem_path}: {problem.n} buffers, computing the facts and the bound")
        f = _info_facts(problem, spec, bound_time or 0.0, budget)
    capacity_warning(problem)
    if as_json:
        click.echo(dump_json({**stamp(), **f}), nl=False)
        return
    lines = [
        f"problem: {f['problem']}",
        f"mode: {f['mode']}",
        f"buffers: {f['buffers']}",
        f"ops: {f['ops']}",
        f"horizon: [{f['horizon'][0]}, {f['horizon'][1]})",
        f"components: {f['components']} (largest: {f['largest_component_buffers']} buffers)",
        f"largest clique (most bytes live together): {f['largest_clique_buffers']} buffers, "
        f"{_bytes(f['largest_clique_bytes'])}",
        f"total bytes: {_bytes(f['total_bytes'])}",
        f"max live bytes: {_bytes(f['max_live_bytes'])}",
        f"capacity: {_bytes(f['capacity']) if f['capacity'] is not None else 'none (minimise the peak)'}",
    ]
    if f["capacity"] is not None:
        lines.append(f"max live / capacity: {format_number(f['max_live_over_capacity'])}")
    if problem.mode in ("map", "prefetch"):
        times = format_seconds if problem.has_ops else format_number  # without ops: the benefits' own units
        others = list(f.get("bounds", {}).items()) if len(f.get("bounds", {})) > 1 else []
        slow, fast, bound, *kinds = distinct(times, [f["time_all_slow"], f["time_all_fast"], f["bound"],
                                                     *(value for _, value in others)])
        lines.append(f"time all slow: {slow}")
        lines.append(f"time all fast: {fast}")
        lines.append(f"bound ({f['bound_kind']}): {bound} (at best {format_number(f['max_speedup'])}x faster)")
        if others:  # prefetch: both bounds, the tighter one reported above
            lines.append("bounds: " + ", ".join(f"{kind} {text}" for (kind, _), text in zip(others, kinds)))
    else:
        if f["buffers_over_capacity"]:
            big = f["largest_over_capacity"]
            lines.append(f"does not fit: {f['buffers_over_capacity']} buffer(s) larger than the capacity "
                         f"(largest {big['id']!r}, {_bytes(big['size'])}): no pack placement exists at this capacity")
        lines.append(f"bound (max live, lower bound on peak): {_bytes(f['bound'])}")
        lines.append(f"lower bound: {_bytes(f['lower_bound'])} ({f['lower_bound_kind']})")
    click.echo("\n".join(lines))
