"""The prefetch window search with and without shapes first (windows of repeated layers), on the xla suite.

For each program of the ``xla`` suite in prefetch mode at the suite's capacity, cpsat's window search
(:func:`~mallocgame.solvers.cpsat.prefetch_windows.solve_prefetch`, in-process, one worker, seed 0) at
``--time-limit`` seconds, once with ``SHAPES_FIRST`` off (rounds most-to-gain first only) and once on (one
window of every shape first, a gain brings its shape forward; docs/cpsat.md, "Repeated layers"). Prints each
run's value, its start, the windows solved and improved, the windows promoted and the wall time::

    nice python experiments/window_shapes.py --time-limit 60 [--entries a,b]
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

from mallocgame.solvers.cpsat import prefetch_windows as pw


def run(problem, time_limit: float, shapes: bool) -> tuple:
    """One window search with ``SHAPES_FIRST`` set to ``shapes``: (solution, wall seconds)."""
    before = pw.SHAPES_FIRST
    pw.SHAPES_FIRST = shapes
    try:
        t = time.monotonic()
        solution = pw.solve_prefetch(problem, problem.hardware, time_limit=time_limit, seed=0)
        return solution, time.monotonic() - t
    finally:
        pw.SHAPES_FIRST = before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--entries", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--out", default="window_shapes.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':24s} {'buffers':>7s} {'shapes':>6s} {'value':>10s} {'start':>18s} {'start value':>11s} "
        f"{'windows':>7s} {'improved':>8s} {'promoted':>8s} {'wall s':>6s}")
    ratios = []
    for e, problem in prefetch_programs("xla", args.entries):  # the suite's capacity
        values = {}
        for shapes in (False, True):
            solution, wall = run(problem, args.time_limit, shapes)
            st = solution.stats
            values[shapes] = solution.objective
            out(f"{e.name:24s} {problem.n:7d} {'on' if shapes else 'off':>6s} {solution.objective:10.4g} "
                f"{st['start']:>18s} {st['start_value']:11.4g} {st.get('windows_solved', 0):7d} "
                f"{st.get('windows_improved', 0):8d} {st.get('promoted', 0):8d} {wall:6.1f}")
        ratios.append(values[True] / values[False] if values[False] > 0 else float("nan"))
    out("")
    out("value with shapes first / without: " + ", ".join(f"{r:.4f}" for r in ratios))
    write_results(args.out, "# The prefetch window search with and without shapes first\n\n"
                  f"Time limit {args.time_limit:g} s per run, in-process, one CP-SAT worker, seed 0; the machine's load "
                  "is in the provenance line (times are wall times).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
