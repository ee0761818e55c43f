"""The prefetch window search with and without shapes first or repeated gains (repeated layers), on the xla suite.

For each program of the ``xla`` suite in prefetch mode at the suite's capacity, cpsat's window search
(:func:`~mallocgame.solvers.cpsat.prefetch_windows.solve_prefetch`, in-process, one worker, seed 0) at
``--time-limit`` seconds, once with the feature ``--compare`` names off and once on (docs/cpsat.md, "Repeated
layers"): ``shapes`` (``SHAPES_FIRST``: one window of every shape first, a gain brings its shape forward; repeats off in
both runs) or
``repeat`` (``REPEAT_GAINS``: a window's gain repeated on the other windows of its shape without a CP-SAT solve;
shapes first in both) or ``holes`` (``PINNED_AS_HOLES``: the fixed stays around a window as holes in the free stays'
offset domains instead of rectangles in the ``no_overlap_2d``, in windows of ``HOLES_FROM`` fixed stays or more;
shapes first and repeats on in both). Prints
each run's value, its start, the windows solved and improved, the windows promoted, demoted and repeated and the wall time::

    nice python experiments/window_shapes.py --time-limit 60 [--compare shapes|repeat|holes] [--entries a,b]
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

from mallocgame.engine.request import SolveRequest
from mallocgame.solvers.cpsat import prefetch_windows as pw

FLAGS = {"shapes": "SHAPES_FIRST", "repeat": "REPEAT_GAINS", "holes": "PINNED_AS_HOLES"}


def run(problem, time_limit: float, compare: str, on: bool) -> tuple:
    """One window search with the flag of ``compare`` set to ``on`` (comparing shapes: repeats off; comparing
    repeats: shapes first on; comparing holes: both on): (solution, wall seconds)."""
    before = {name: getattr(pw, name) for name in FLAGS.values()}
    setting = {"shapes": {"SHAPES_FIRST": on, "REPEAT_GAINS": False},
               "repeat": {"SHAPES_FIRST": True, "REPEAT_GAINS": on},
               "holes": {"SHAPES_FIRST": True, "REPEAT_GAINS": True, "PINNED_AS_HOLES": on}}[compare]
    for name, value in setting.items():
        setattr(pw, name, value)
    try:
        t = time.monotonic()
        solution = pw.solve_prefetch(SolveRequest.of(problem, time_limit=time_limit, seed=0))
        return solution, time.monotonic() - t
    finally:
        for name, value in before.items():
            setattr(pw, name, value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--entries", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--compare", choices=sorted(FLAGS), default="shapes")
    ap.add_argument("--out", default=None, help="default: window_shapes.md (shapes), window_repeats.md (repeat)")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':24s} {'buffers':>7s} {args.compare:>6s} {'value':>10s} {'start':>18s} {'start value':>11s} "
        f"{'windows':>7s} {'improved':>8s} {'promoted':>8s} {'demoted':>7s} {'repeated':>8s} {'wall s':>6s}")
    ratios = []
    for e, problem in prefetch_programs("xla", args.entries):  # the suite's capacity
        values = {}
        for on in (False, True):
            solution, wall = run(problem, args.time_limit, args.compare, on)
            st = solution.stats
            values[on] = solution.objective
            out(f"{e.name:24s} {problem.n:7d} {'on' if on else 'off':>6s} {solution.objective:10.4g} "
                f"{st['start']:>18s} {st['start_value']:11.4g} {st.get('windows_solved', 0):7d} "
                f"{st.get('windows_improved', 0):8d} {st.get('promoted', 0):8d} {st.get('demoted', 0):7d} "
                f"{st.get('repeated', 0):8d} {wall:6.1f}")
        ratios.append(values[True] / values[False] if values[False] > 0 else float("nan"))
    out("")
    what = {"shapes": "shapes first", "repeat": "repeated gains", "holes": "fixed stays as domain holes"}[args.compare]
    out(f"value with {what} / without: " + ", ".join(f"{r:.4f}" for r in ratios))
    name = args.out or {"shapes": "window_shapes.md", "repeat": "window_repeats.md",
                        "holes": "window_holes.md"}[args.compare]
    write_results(name, f"# The prefetch window search with and without {what}\n\n"
                  f"Time limit {args.time_limit:g} s per run, in-process, one CP-SAT worker, seed 0; the machine's load "
                  "is in the provenance line (times are wall times).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
