"""Prefetch mode at the size of real training steps (issue 18 item 4): portfolio vs the best baseline.

For every entry of the ``xla`` suite (JAX programs compiled by XLA:CPU, 285-13,465 buffers), in
prefetch mode at the suite's capacity (25% of max live), through the Python API as a user calls it:
``msa`` and ``portfolio`` at ``--time-limit`` seconds, and the lifted map answers of ``greedy-xla``
and ``select-pack`` (each at the same limit in map mode, lifted by
:func:`mallocgame.formats.lift.lift_map_answer`, scored in prefetch mode). Prints each value, the best of
msa and the lifted answers, portfolio's ratio to it, the bound and its ratio to that best (``bound x``: no
answer can exceed it, so where it is below 1.05 item 4's goal cannot be met), and the wall times::

    nice python experiments/bench_prefetch_portfolio.py --time-limit 60
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--entries", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--out", default="prefetch_portfolio_xla.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':24s} {'buffers':>7s} {'msa':>9s} {'lift gx':>9s} {'lift sp':>9s} {'portfolio':>9s} "
        f"{'x best':>7s} {'bound':>9s} {'bound x':>7s} {'gap':>6s} {'msa s':>6s} {'pf s':>6s} winner")
    ratios, reach = [], []
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
        out(f"{e.name:24s} {problem.n:7d} {shown} {ratio:7.3f} {pf.bound:9.4g} {reach[-1]:7.3f} {gap:6.1%} "
            f"{msa_s:6.1f} {pf_s:6.1f} {winner}")
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
    write_results(args.out, f"# Prefetch mode on the {args.suite} suite: portfolio vs the best baseline\n\n"
                  f"Time limit {args.time_limit:g} s per run, capacity as the suite sets it; the machine was "
                  "shared with other jobs (load average above; times are wall times).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
