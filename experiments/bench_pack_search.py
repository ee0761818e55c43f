"""Benchmark pack-search on MiniMalloc's challenging instances (A..K at capacity 1048576) and input.12.

Prints one row per instance: buffers, status, seconds, peak, valid (independent check),
and writes the table with the exact command to ``--out`` (default experiments/results/pack_search_minimalloc.md).

Usage:
    python experiments/bench_pack_search.py [--time-limit 60] [--seed 0] [--only A,B] [--benchmarks DIR] [--out PATH]
        [--no-write]
"""

from __future__ import annotations

import argparse
import time

from _common import benchmarks_dir, write_results

from mallocgame.intervals import max_live
from mallocgame.io import load_problem
from solvers.pack_search.search import check_packing, pack

NAMES = [f"{c}.1048576" for c in "ABCDEFGHIJK"] + ["input.12"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated instance letters/names")
    ap.add_argument("--no-cpsat", action="store_true", help="search engine only")
    ap.add_argument("--benchmarks", default=None, metavar="DIR",
                    help="shared benchmark folder (default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks)")
    ap.add_argument("--out", default="pack_search_minimalloc.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    bench = benchmarks_dir("minimalloc", explicit=args.benchmarks)
    names = NAMES
    if args.only:
        want = set(args.only.split(","))
        names = [n for n in NAMES if n in want or n.split(".")[0] in want]
    rows = []
    header = "| instance | buffers | capacity | live LB | status | seconds | peak | valid | nodes | engine |"
    print(header)
    print("|---|---:|---:|---:|---|---:|---:|---|---:|---|")
    for name in names:
        prob = load_problem(bench / f"{name}.csv")
        a = prob.arrays
        t = time.perf_counter()
        r = pack(a.size, a.start, a.end, capacity=prob.capacity, time_limit=args.time_limit,
                 seed=args.seed, use_cpsat=not args.no_cpsat)
        dt = time.perf_counter() - t
        complete = bool((r.offsets >= 0).all())
        valid = check_packing(a.size, a.start, a.end, r.offsets, prob.capacity) is None if complete else False
        engine = ("cpsat" if r.stats.get("cpsat_wins") else "search") if complete else "-"
        row = (f"| {name} | {prob.n} | {prob.capacity} | {max_live(prob)} | {r.status} | "
               f"{dt:.2f} | {r.peak if r.peak is not None else '-'} | {'yes' if valid else 'no'} | "
               f"{r.stats.get('nodes', 0)} | {engine} |")
        print(row, flush=True)
        rows.append(row)
    if not args.no_write:
        text = ("# pack-search on MiniMalloc's challenging instances\n\n"
                f"Time limit {args.time_limit:g} s per instance, seed {args.seed}, "
                f"CP-SAT thread {'off' if args.no_cpsat else 'on'}; machine: 2 cores shared with other jobs.\n"
                "`valid` is an independent pairwise overlap/capacity check of the returned offsets.\n\n"
                + header + "\n|---|---:|---:|---:|---|---:|---:|---|---:|---|\n" + "\n".join(rows) + "\n")
        write_results(args.out, text, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
