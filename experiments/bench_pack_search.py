"""Benchmark pack-search on MiniMalloc's challenging instances (A..K at capacity 1048576) and input.12.

Prints one row per instance: buffers, status, seconds, peak, valid (independent check),
and writes the table with the exact command to experiments/results/pack_search_minimalloc.md.

Usage:
    python experiments/bench_pack_search.py [--time-limit 60] [--seed 0] [--only A,B] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mallocgame.io import load_problem  # noqa: E402
from solvers.pack_search.search import check_packing, max_live, pack  # noqa: E402

BENCH = Path(os.environ.get("MINIMALLOC_BENCH", "/work/shared/benchmarks/minimalloc"))
NAMES = [f"{c}.1048576" for c in "ABCDEFGHIJK"] + ["input.12"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated instance letters/names")
    ap.add_argument("--no-cpsat", action="store_true", help="search engine only")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    names = NAMES
    if args.only:
        want = set(args.only.split(","))
        names = [n for n in NAMES if n in want or n.split(".")[0] in want]
    rows = []
    header = "| instance | buffers | capacity | live LB | status | seconds | peak | valid | nodes | engine |"
    print(header)
    print("|---|---:|---:|---:|---|---:|---:|---|---:|---|")
    for name in names:
        prob = load_problem(BENCH / f"{name}.csv")
        a = prob.arrays
        t = time.perf_counter()
        r = pack(a.size, a.start, a.end, capacity=prob.capacity, time_limit=args.time_limit,
                 seed=args.seed, use_cpsat=not args.no_cpsat)
        dt = time.perf_counter() - t
        complete = bool((r.offsets >= 0).all())
        valid = check_packing(a.size, a.start, a.end, r.offsets, prob.capacity) is None if complete else False
        engine = ("cpsat" if r.stats.get("cpsat_wins") else "search") if complete else "-"
        row = (f"| {name} | {prob.n} | {prob.capacity} | {max_live(a.size, a.start, a.end)} | {r.status} | "
               f"{dt:.2f} | {r.peak if r.peak is not None else '-'} | {'yes' if valid else 'no'} | "
               f"{r.stats.get('nodes', 0)} | {engine} |")
        print(row, flush=True)
        rows.append(row)
    if not args.no_write:
        cmd = "python " + " ".join(shlex.quote(x) for x in [os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:]))
        out = ROOT / "experiments" / "results" / "pack_search_minimalloc.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        text = ("# pack-search on MiniMalloc's challenging instances\n\n"
                f"Command (from the project root): `{cmd}`\n\n"
                f"Time limit {args.time_limit:g} s per instance, seed {args.seed}, "
                f"CP-SAT thread {'off' if args.no_cpsat else 'on'}; machine: 2 cores shared with other jobs.\n"
                "`valid` is an independent pairwise overlap/capacity check of the returned offsets.\n\n"
                + header + "\n|---|---:|---:|---:|---|---:|---:|---|---:|---|\n" + "\n".join(rows) + "\n")
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
