"""Benchmark pack-search on MiniMalloc's challenging instances (A..K at capacity 1048576) and input.12.

One run per instance and seed (``--seeds``, default 0) through :func:`mallocgame.solvers.pack_search.search.pack`
with the capacity of the file name (pack mode). Every packing returned is checked twice: by the
search module's independent ``check_packing`` and by the project validator
(:func:`mallocgame.hardware.validator.validate`). Prints a summary table (instance x seed -> seconds and status)
and one detail row per run (nodes, engine, load average when the run started), and writes both with
the exact command to ``--out`` (default experiments/results/pack_search_minimalloc.md).

Usage (from the project root, on a shared machine under ``nice``):
    nice python experiments/bench_pack_search.py [--time-limit 60] [--seeds 0,1,2,3,4] [--only A,B]
        [--no-cpsat] [--benchmarks DIR] [--out PATH] [--no-write] [--note TEXT]
"""

from __future__ import annotations

import argparse
import os
import time

from _common import benchmarks_dir, write_results

from mallocgame.hardware.validator import validate
from mallocgame.intervals import max_live
from mallocgame.io import load_problem
from mallocgame.solvers.pack_search.search import check_packing, pack

NAMES = [f"{c}.1048576" for c in "ABCDEFGHIJK"] + ["input.12"]
DETAIL = ("| instance | seed | load (1 min) | status | seconds | peak | check_packing | validator | nodes | restarts "
          "| engine | winning run |")


def run_one(prob, seed: int, time_limit: float, use_cpsat: bool) -> dict:
    """One pack() call, checked by check_packing and by the project validator."""
    a = prob.arrays
    load = os.getloadavg()[0]
    t = time.perf_counter()
    r = pack(a.size, a.start, a.end, capacity=prob.capacity, alignment=a.alignment, time_limit=time_limit,
             seed=seed, use_cpsat=use_cpsat)
    dt = time.perf_counter() - t
    complete = bool((r.offsets >= 0).all())
    checked = complete and check_packing(a.size, a.start, a.end, r.offsets, prob.capacity, a.alignment) is None
    judged = complete and validate(prob, r.offsets, capacity=prob.capacity, mode="pack") is None
    engine = ("cpsat" if r.stats.get("cpsat_wins") else "search") if complete else "-"
    return {"seed": seed, "load": load, "status": r.status, "seconds": dt, "peak": r.peak, "check": checked,
            "valid": judged, "nodes": r.stats.get("nodes", 0), "restarts": r.stats.get("restarts", 0),
            "engine": engine, "winner": r.stats.get("winner") or "-"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    ap.add_argument("--only", default="", help="comma-separated instance letters/names")
    ap.add_argument("--no-cpsat", action="store_true", help="search engine only")
    ap.add_argument("--benchmarks", default=None, metavar="DIR",
                    help="shared benchmark folder (default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks)")
    ap.add_argument("--out", default="pack_search_minimalloc.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--note", default="", help="a paragraph appended to the results file (e.g. the numbers before a change)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    bench = benchmarks_dir("minimalloc", explicit=args.benchmarks)
    names = NAMES
    if args.only:
        want = set(args.only.split(","))
        names = [n for n in NAMES if n in want or n.split(".")[0] in want]
    load_start = os.getloadavg()
    print(DETAIL)
    print("|---|---:|---:|---|---:|---:|---|---|---:|---:|---|---|")
    summary, detail = [], []
    for name in names:
        prob = load_problem(bench / f"{name}.csv")
        runs = []
        for seed in seeds:
            r = run_one(prob, seed, args.time_limit, not args.no_cpsat)
            row = (f"| {name} | {seed} | {r['load']:.1f} | {r['status']} | {r['seconds']:.2f} | "
                   f"{r['peak'] if r['peak'] is not None else '-'} | {'ok' if r['check'] else 'NO'} | "
                   f"{'ok' if r['valid'] else 'NO'} | {r['nodes']} | {r['restarts']} | {r['engine']} | {r['winner']} |")
            print(row, flush=True)
            detail.append(row)
            runs.append(r)
        cells = " | ".join(f"{r['seconds']:.2f} {r['status'] if r['valid'] else r['status'] + ' (invalid)'}" for r in runs)
        summary.append(f"| {name} | {prob.n} | {max_live(prob)} | {cells} | {max(r['seconds'] for r in runs):.2f} |")
    head = ("| instance | buffers | live LB | " + " | ".join(f"seed {s}" for s in seeds) + " | max s |\n"
            "|---|---:|---:|" + "---:|" * len(seeds) + "---:|")
    print("\n" + head + "\n" + "\n".join(summary))
    if not args.no_write:
        load_end = os.getloadavg()
        text = ("# pack-search on MiniMalloc's challenging instances\n\n"
                f"Time limit {args.time_limit:g} s per run, seeds {', '.join(map(str, seeds))}, CP-SAT thread "
                f"{'off' if args.no_cpsat else 'on'}, capacity from the file name (pack mode). Machine: 2 cores "
                f"shared with other jobs; load average (1, 5, 15 min) {load_start[0]:.1f} {load_start[1]:.1f} "
                f"{load_start[2]:.1f} at the start and {load_end[0]:.1f} {load_end[1]:.1f} {load_end[2]:.1f} at the end. "
                "Every packing is checked by `check_packing` (the search module's own independent sweep) and by the "
                "project validator (`mallocgame.hardware.validator.validate`).\n\n"
                "## Seconds and status per instance and seed\n\n" + head + "\n" + "\n".join(summary) + "\n\n"
                "## Every run\n\n"
                "`engine`: which engine's packing was returned; `winning run`: the search lane and restart that "
                "found it (`choice:preorder run k limit L`).\n\n"
                + DETAIL + "\n|---|---:|---:|---|---:|---:|---|---|---:|---:|---|---|\n" + "\n".join(detail) + "\n"
                + (f"\n{args.note.strip()}\n" if args.note.strip() else ""))
        write_results(args.out, text, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
