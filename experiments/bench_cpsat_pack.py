"""Pack mode on MiniMalloc's challenging instances (A-K at capacity 1048576): status and seconds per solver.

For every instance and solver (default: best-fit, cpsat, portfolio) one run through
:func:`mallocgame.engine.runner.run_solver`, which validates and scores the answer. Prints a markdown
table and writes it, with the exact command, to ``--out`` (default
``experiments/results/cpsat_pack_minimalloc.md``).

Usage (from the project root):
    nice python experiments/bench_cpsat_pack.py [--time-limit 60] [--solvers best-fit,cpsat,portfolio]
        [--only A,B] [--seed 0] [--benchmarks DIR] [--out PATH] [--no-write]
"""

from __future__ import annotations

import argparse
import time

from _common import benchmarks_dir, write_results

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.formats.io import load_problem
from mallocgame.inputs.load import prepare

LETTERS = "ABCDEFGHIJK"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--solvers", default="best-fit,cpsat,portfolio")
    ap.add_argument("--only", default="", help="comma-separated letters")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--benchmarks", default=None, metavar="DIR",
                    help="shared benchmark folder (default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks)")
    ap.add_argument("--out", default="cpsat_pack_minimalloc.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    bench = benchmarks_dir("minimalloc", explicit=args.benchmarks)
    solvers = [s for s in args.solvers.split(",") if s]
    letters = [x for x in LETTERS if not args.only or x in args.only.split(",")]
    header = "| instance | buffers | live LB | " + " | ".join(f"{s} status | {s} s | {s} peak" for s in solvers) + " |"
    rule = "|---|---:|---:|" + "---|---:|---:|" * len(solvers)
    print(header)
    print(rule)
    rows, solved = [], {s: 0 for s in solvers}
    for letter in letters:
        problem, hw = prepare(load_problem(str(bench / f"{letter}.1048576.csv")), mode="pack", capacity=None,
                              hardware=None)
        bound = problem_bound(problem, hw)  # pack mode: the max-live lower bound
        cells = [letter, str(problem.n), str(int(bound.value))]
        for name in solvers:
            t = time.monotonic()
            r = run_solver(name, problem, hw, time_limit=args.time_limit, seed=args.seed, bound=bound)
            seconds = time.monotonic() - t
            ok = r.valid and r.peak <= problem.capacity
            solved[name] += ok
            status = r.status if ok else f"{r.status} (no fit)"
            if r.placed == problem.n and r.peak > problem.capacity:  # a packing, but over the capacity
                shown = f"{r.peak} (+{(r.peak - problem.capacity) / problem.capacity:.0%})"
            else:
                shown = str(r.peak) if r.placed == problem.n else "-"
            cells += [status, f"{seconds:.1f}", shown]
        row = "| " + " | ".join(cells) + " |"
        print(row, flush=True)
        rows.append(row)
    summary = ", ".join(f"{s}: {solved[s]}/{len(letters)} within capacity" for s in solvers)
    print(summary)
    if not args.no_write:
        write_results(args.out, (
            "# Pack mode on MiniMalloc's challenging instances (capacity 1048576)\n\n"
            f"Time limit {args.time_limit:g} s per solver and instance, seed {args.seed}, default options "
            "(cpsat: 1 CP-SAT worker; portfolio: 2 processes, members pack-search and cpsat). Machine: 2 cores "
            "shared with other jobs, so seconds are wall-clock under load. `status` is the validated status; "
            "`(no fit)` marks an answer over the capacity or none.\n\n"
            + header + "\n" + rule + "\n" + "\n".join(rows) + "\n\n" + summary + "\n"), argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
