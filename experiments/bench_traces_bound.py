"""Pack-mode lower bounds on the real traces: max live against the critical-window bound (issue 11 item 4).

For every trace of ``bench_traces_peak.py`` (the shared benchmark folder): the max live bytes
and :func:`mallocgame.bounds.bounds.critical_window_bound` (the buffers live at the moments whose
live bytes are at least 99%, 98%, ... of max live, time compressed to those moments, packed
exactly by CP-SAT within ``--time-limit``; its proven bound is a lower bound on the peak of the
whole trace). ``best excess`` is the lowest excess over max live of any solver recorded in
``experiments/results/cpsat_traces_peak.md`` (rounded there to 3 decimals of a percent);
``bound excess`` is how far the new bound rises above max live, so the part of the gap it
proves is ``bound excess / best excess``. ``size-first excess``: one best-fit pass in
size-descending order (ties by start; :func:`mallocgame.algorithms.placement.greedy_place`), validated
by :mod:`mallocgame.hardware.validator`: a packing to compare the recorded solvers with (skipped above
``--greedy-max`` buffers).

Usage (from the project root):
    nice python experiments/bench_traces_bound.py [--time-limit 10] [--only NAME,...] [--out traces_bound.md]
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np
from _common import benchmarks_dir, results_path, write_results

from mallocgame.algorithms.placement import greedy_place
from mallocgame.bounds.bounds import critical_window_bound
from mallocgame.formats.io import load_problem
from mallocgame.hardware.validator import peak, validate
from mallocgame.problem.intervals import live_profile_of, max_live, maximal_times

FOLDERS = ("idealloc-iree", "idealloc-somas", "idealloc-iopddl", "iopddl")


def recorded_best() -> dict[str, float]:
    """Trace name -> lowest recorded excess (fraction) over max live in cpsat_traces_peak.md."""
    best: dict[str, float] = {}
    path = results_path("cpsat_traces_peak.md")
    if not path.exists():
        return best
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or "/" not in cells[0]:
            continue
        excess = [float(m.group(1)) / 100 for c in cells[4:] for m in [re.fullmatch(r"\+?(-?[\d.]+)%", c)] if m]
        if excess:
            best[cells[0]] = min(excess)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated file stems")
    ap.add_argument("--benchmarks", default=None, metavar="DIR")
    ap.add_argument("--greedy-max", type=int, default=35_000, help="size-first packing only up to this many buffers")
    ap.add_argument("--out", default="traces_bound.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args(argv)
    shared = benchmarks_dir(explicit=args.benchmarks)
    best = recorded_best()
    rows = ["| trace | buffers | max live | critical moments (>= 99% / 95% / 90%) | bound | kind | bound excess "
            "| best excess (recorded) | size-first excess | bound s |", "|---|---:|---:|---|---:|---|---:|---:|---:|---:|"]
    for folder in FOLDERS:
        for path in sorted((shared / folder).glob("*.csv")):
            if args.only and path.stem not in args.only.split(","):
                continue
            name = f"{folder}/{path.stem}"
            problem = load_problem(path).replace(mode="pack", capacity=None)
            live = max_live(problem)
            a = problem.arrays
            times = maximal_times(a.start, a.end)
            profile_times, profile_bytes = live_profile_of(a.start, a.end, a.size)
            load = profile_bytes[np.searchsorted(profile_times, times, side="right") - 1]
            moments = " / ".join(str(int((load >= x * live).sum())) for x in (0.99, 0.95, 0.9))
            t0 = time.monotonic()
            bound = critical_window_bound(problem, time_limit=args.time_limit, seed=args.seed)
            seconds = time.monotonic() - t0
            rec = best.get(name)
            greedy = "-"
            if problem.n <= args.greedy_max:
                offsets = greedy_place(problem, np.lexsort((a.start, -a.size)), None)
                answer = [int(o) for o in offsets]
                violation = validate(problem, answer)
                greedy = f"{peak(problem, answer) / live - 1:+.3%}" if violation is None else f"INVALID: {violation}"
            row = (f"| {name} | {problem.n} | {live} | {moments} | {int(bound.value)} | {bound.kind} | "
                   f"{bound.value / live - 1:+.3%} | {'-' if rec is None else f'{rec:+.3%}'} | {greedy} | {seconds:.1f} |")
            rows.append(row)
            print(row, flush=True)
    text = ("# Pack-mode lower bounds on the real traces (issue 11 item 4)\n\n"
            f"Critical-window bound, CP-SAT one worker, time limit {args.time_limit:g} s per trace, seed {args.seed}.\n\n"
            + "\n".join(rows) + "\n")
    write_results(args.out, text, argv=argv)


if __name__ == "__main__":
    main()
