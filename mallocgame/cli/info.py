"""``mallocgame info PROBLEM``: size, horizon, components, max live bytes and the bound of a problem.

Attached lazily to the CLI (``LAZY_COMMANDS`` in :mod:`mallocgame.cli.main`).
"""

from __future__ import annotations

import gc
from typing import Any

import click

from mallocgame.bounds import critical_window_bound
from mallocgame.cli.common import SECONDS, capacity_warning, dump_json, fail, load_prepared, problem_options, stamp
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.inputs.load import oversized
from mallocgame.intervals import component_count, max_live
from mallocgame.model import InputError, Problem
from mallocgame.runner import problem_bound

# Seconds the residency bound (prefetch mode) may take in `info`, before it answers (`solve` gives it
# mallocgame.prefetch_bound.RESIDENCY_SECONDS at most, beside the solver).
INFO_RESIDENCY_SECONDS = 10.0


def _info_facts(problem: Problem, spec, bound_time: float = 0.0) -> dict[str, Any]:
    a = problem.arrays
    live = max_live(problem)
    facts: dict[str, Any] = {
        "problem": problem.name, "source": problem.source, "mode": problem.mode, "buffers": problem.n,
        "ops": len(problem.ops),
        "horizon": [int(a.start.min()), int(a.end.max())] if problem.n else [0, 0],
        "components": component_count(a.start, a.end), "total_bytes": int(a.size.sum()), "max_live_bytes": live,
        "capacity": problem.capacity, "hardware": getattr(spec, "name", None),
        "max_live_over_capacity": live / problem.capacity if problem.capacity else None,
    }
    if problem.mode in ("map", "prefetch"):
        ev = Evaluator.of(problem, spec)
        bound = problem_bound(problem, spec, tighten=INFO_RESIDENCY_SECONDS)
        if bound.others:
            facts.update(bounds=dict(bound.others))
        facts.update(time_all_slow=ev.time_all_slow, time_all_fast=ev.time_all_fast, bound=bound.value,
                     bound_kind=f"no-fragmentation {bound.kind}" if problem.mode == "map" else
                     f"relaxation {bound.kind}, docs/prefetch.md",
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
        elif bound_time > 0:  # mallocgame.bounds.critical_window_bound: the critical moments packed by CP-SAT
            b = critical_window_bound(problem, time_limit=bound_time)
            if b.kind == "window":
                lower = int(b.value), f"critical window, CP-SAT, {b.value / live - 1:+.3%} over max live"
            else:
                lower = live, f"max live; the critical-window bound found nothing higher in {bound_time:g} s"
        facts.update(lower_bound=lower[0], lower_bound_kind=lower[1])
    return facts


@click.command()
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of the lines.")
@click.option("--bound-time", type=SECONDS, default=None,
              help="Pack mode: seconds for a lower bound above max live (the critical moments packed by CP-SAT); "
                   "without it the lower bound is max live.")
def info(problem_path: str, mode: str | None, capacity: str | None, capacity_fraction: str | None,
         hardware: str | None, as_json: bool, bound_time: float | None) -> None:
    """Size, horizon, components, max live bytes and (map mode) the bound of PROBLEM."""
    try:
        problem, spec = load_prepared(problem_path, mode=mode, capacity=capacity, capacity_fraction=capacity_fraction,
                                      hardware=hardware, oversized_ok=True)  # described below, not refused
    except InputError as exc:
        fail(str(exc))
    gc.freeze()  # the problem lives to the end: later collections need not walk its objects
    capacity_warning(problem)
    f = _info_facts(problem, spec, bound_time or 0.0)
    if as_json:
        click.echo(dump_json({**stamp(), **f}), nl=False)
        return
    lines = [
        f"problem: {f['problem']}",
        f"mode: {f['mode']}",
        f"buffers: {f['buffers']}",
        f"ops: {f['ops']}",
        f"horizon: [{f['horizon'][0]}, {f['horizon'][1]})",
        f"components: {f['components']}",
        f"total bytes: {f['total_bytes']}",
        f"max live bytes: {f['max_live_bytes']}",
        f"capacity: {f['capacity'] if f['capacity'] is not None else 'none (minimise the peak)'}",
    ]
    if f["capacity"] is not None:
        lines.append(f"max live / capacity: {f['max_live_over_capacity']:.3f}")
    if problem.mode in ("map", "prefetch"):
        lines.append(f"time all slow: {f['time_all_slow']:.6g}")
        lines.append(f"time all fast: {f['time_all_fast']:.6g}")
        lines.append(f"bound ({f['bound_kind']}): {f['bound']:.6g} (at best {f['max_speedup']:.4g}x faster)")
        if len(f.get("bounds", {})) > 1:  # prefetch: both bounds, the tighter one reported above
            lines.append("bounds: " + ", ".join(f"{kind} {value:.6g}" for kind, value in f["bounds"].items()))
    else:
        if f["buffers_over_capacity"]:
            big = f["largest_over_capacity"]
            lines.append(f"does not fit: {f['buffers_over_capacity']} buffer(s) larger than the capacity "
                         f"(largest {big['id']!r}, {big['size']} bytes): no pack placement exists at this capacity")
        lines.append(f"bound (max live, lower bound on peak): {f['bound']}")
        lines.append(f"lower bound: {f['lower_bound']} ({f['lower_bound_kind']})")
    click.echo("\n".join(lines))
