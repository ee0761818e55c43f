"""Prefetch mode at the size of real training steps (issue 18 item 4): portfolio vs the best baseline.

For every entry of the ``xla`` suite (JAX programs compiled by XLA:CPU, 285-13,465 buffers), in
prefetch mode at the suite's capacity (25% of max live), through the Python API as a user calls it:
``msa`` and ``portfolio`` at ``--time-limit`` seconds, and the lifted map answers of ``greedy-xla``
and ``select-pack`` (each at the same limit in map mode, lifted by
:func:`mallocgame.formats.lift.lift_map_answer`, scored in prefetch mode). Prints each value, the best of
msa and the lifted answers, portfolio's ratio to it, the bound and its ratio to that best (``bound x``: no
answer can exceed it, so where it is below 1.05 item 4's goal cannot be met), the segment ceiling where a record of
``experiments/prefetch_headroom.py`` for the program exists (``ceil x``: the highest ceiling of those records -- the map
bound on the segments, else select-pack's map value on them -- over that best; ``-``: no record), and the wall times::

    nice python experiments/bench_prefetch_portfolio.py --time-limit 60
"""

from __future__ import annotations

import argparse
import re
import time

from _common import RESULTS, Transcript, fenced, prefetch_programs, write_results

import mallocgame
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator


def lifted_value(problem, solver: str, time_limit: float) -> float | None:
    """The prefetch value of ``solver``'s map answer on the same program, lifted."""
    map_problem = problem.replace(mode="map")
    result = mallocgame.solve(map_problem, solver, time_limit=time_limit)
    if not result.valid:
        return None
    intervals = lift_map_answer(problem, result.solution.offsets)
    return PrefetchEvaluator.of(problem, problem.hardware).value(list(intervals))


def segment_ceiling(entry: str) -> tuple[float, list[str]] | None:
    """The highest segment ceiling the ``prefetch_headroom*.md`` records of ``entry`` report (per record: the map bound
    on the segments where computed, else select-pack's map value on them) and the records' names; ``None``: none."""
    values, names = [], []
    for path in sorted(RESULTS.glob("prefetch_headroom*.md")):
        text = path.read_text()
        if f"# Prefetch headroom of {entry}\n" not in text:
            continue
        found = [float(v) for v in re.findall(r"map bound on these segments ([0-9.eE+-]+)", text)] or \
            [float(v) for v in re.findall(r"select-pack map value on them ([0-9.eE+-]+)", text)]
        if found:
            values.append(max(found))
            names.append(path.name)
    return (max(values), names) if values else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--entries", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--out", default="prefetch_portfolio_xla.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':24s} {'buffers':>7s} {'msa':>9s} {'lift gx':>9s} {'lift sp':>9s} {'portfolio':>9s} "
        f"{'x best':>7s} {'bound':>9s} {'bound x':>7s} {'ceil x':>7s} {'gap':>6s} {'msa s':>6s} {'pf s':>6s} winner")
    ratios, reach, ceilings = [], [], []
    for e, problem in prefetch_programs(args.suite, args.entries):  # the suite's capacity
        t = time.monotonic()
        msa = mallocgame.solve(problem, "msa", time_limit=args.time_limit)
        msa_s = time.monotonic() - t
        lifts = [lifted_value(problem, s, args.time_limit) for s in ("greedy-xla", "select-pack")]
        t = time.monotonic()
        pf = mallocgame.solve(problem, "portfolio", time_limit=args.time_limit)
        pf_s = time.monotonic() - t
        best = max(v for v in [msa.objective if msa.valid else None, *lifts] if v is not None)
        ratio = pf.objective / best if pf.valid and best > 0 else float("nan")
        ratios.append(ratio)
        reach.append(pf.bound / best if pf.valid and best > 0 and pf.bound else float("nan"))
        gap = (pf.bound - pf.objective) / pf.bound if pf.valid and pf.bound else float("nan")
        cells = [msa.objective if msa.valid else None, *lifts, pf.objective if pf.valid else None]
        shown = " ".join(f"{v:9.4g}" if v is not None else f"{'-':>9s}" for v in cells)
        winner = pf.solution.stats.get("winner") if pf.valid else None
        ceiling = segment_ceiling(e.name)
        ceilings.append(ceiling[0] / best if ceiling and best > 0 else None)
        ceil_x = f"{ceilings[-1]:7.3f}" if ceilings[-1] is not None else f"{'-':>7s}"
        out(f"{e.name:24s} {problem.n:7d} {shown} {ratio:7.3f} {pf.bound:9.4g} {reach[-1]:7.3f} {ceil_x} {gap:6.1%} "
            f"{msa_s:6.1f} {pf_s:6.1f} {winner}")
        if ceiling:
            out(f"    segment ceiling {ceiling[0]:.4g} ({', '.join(ceiling[1])})")
        stats = pf.solution.stats
        members = ", ".join(f"{k} {m['objective']:.4g} ({m['seconds']:.1f} s)" for k, m in stats.get("members", {}).items()
                            if m.get("valid"))
        out(f"    members: {members}")
        for key, why in stats.get("errors", {}).items():
            out(f"    {key}: {why}")
    out()
    good = [r for r in ratios if r == r]
    out(f"portfolio / best of (msa, lifted greedy-xla, lifted select-pack): min {min(good):.3f}, "
        f"median {sorted(good)[len(good) // 2]:.3f}, programs at >= 1.05: {sum(r >= 1.05 for r in good)}/{len(good)}; "
        f"programs whose bound allows 1.05: {sum(r >= 1.05 for r in reach if r == r)}/{len(good)}")
    held = [(r, c) for r, c in zip(ratios, ceilings) if c is not None and r == r]
    out(f"at >= 1.10: {sum(r >= 1.10 for r in good)}/{len(good)}; with a segment ceiling record: {len(held)}, of which "
        f"the ceiling allows 1.10: {sum(c >= 1.10 for _, c in held)}, portfolio / ceiling "
        + (", ".join(f"{r / c:.3f}" for r, c in held) or "-"))
    write_results(args.out, f"# Prefetch mode on the {args.suite} suite: portfolio vs the best baseline\n\n"
                  f"Time limit {args.time_limit:g} s per run, capacity as the suite sets it; the machine was "
                  "shared with other jobs (load average above; times are wall times).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
