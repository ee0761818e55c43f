"""Benchmark pack-search on MiniMalloc's challenging instances (A..K at capacity 1048576) and input.12.

One run per instance and seed (``--seeds``, default 0) through :func:`mallocgame.solvers.pack_search.search.pack`
with the capacity of the file name (pack mode). Every packing returned is checked twice: by the
search module's independent ``check_packing`` and by the project validator
(:func:`mallocgame.hardware.validator.validate`). Prints a summary table (instance x seed -> seconds and status)
and one detail row per run (nodes, engine, load average when the run started), and writes both with
the exact command to ``--out`` (default experiments/results/pack_search_minimalloc.md).

Usage (from the project root, on a shared machine under ``nice``):
    nice python experiments/bench_pack_search.py [--time-limit 60] [--seeds 0,1,2,3,4] [--only A,B]
        [--no-cpsat] [--benchmarks DIR] [--out PATH] [--no-write] [--note TEXT] [--minimalloc BINARY]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from _common import benchmarks_dir, write_results

from mallocgame.formats.io import load_problem
from mallocgame.hardware.validator import validate
from mallocgame.problem.intervals import max_live
from mallocgame.runtime.budget import Budget
from mallocgame.solvers.pack_search.search import check_packing, pack

NAMES = [f"{c}.1048576" for c in "ABCDEFGHIJK"] + ["input.12"]
DETAIL = ("| instance | seed | load (1 min) | status | seconds | cpu | peak | check_packing | validator | nodes | restarts "
          "| engine | winning run |")


def run_one(prob, seed: int, time_limit: float, use_cpsat: bool) -> dict:
    """One pack() call, checked by check_packing and by the project validator."""
    a = prob.arrays
    load = os.getloadavg()[0]
    cpu = time.process_time()
    t = time.perf_counter()
    r = pack(a.size, a.start, a.end, capacity=prob.capacity, alignment=a.alignment, budget=Budget.start(time_limit),
             seed=seed, use_cpsat=use_cpsat)
    dt = time.perf_counter() - t
    cpu = time.process_time() - cpu
    complete = bool((r.offsets >= 0).all())
    checked = complete and check_packing(a.size, a.start, a.end, r.offsets, prob.capacity, a.alignment) is None
    judged = complete and validate(prob, r.offsets, capacity=prob.capacity, mode="pack") is None
    engine = ("cpsat" if r.stats.get("cpsat_wins") else "search") if complete else "-"
    return {"seed": seed, "load": load, "status": r.status, "seconds": dt, "cpu": cpu, "peak": r.peak, "check": checked,
            "valid": judged, "nodes": r.stats.get("nodes", 0), "restarts": r.stats.get("restarts", 0),
            "engine": engine, "winner": r.stats.get("winner") or "-"}


def run_minimalloc(binary: str, path, prob, time_limit: float) -> dict:
    """MiniMalloc's own CLI on one instance (its default settings, ``--timeout``), timed as a subprocess;
    its answer (the CSV with an ``offset`` column) is checked by the project validator."""
    import csv
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/out.csv"
        load = os.getloadavg()[0]
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([binary, f"--capacity={prob.capacity}", f"--input={path}", f"--output={out}",
                               f"--timeout={time_limit:g}s"], capture_output=True, text=True)
        dt = time.perf_counter() - t
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        valid = False
        if proc.returncode == 0 and os.path.exists(out):
            with open(out, newline="") as fh:
                rows = {r["id"]: int(r["offset"]) for r in csv.DictReader(fh)}
            offsets = [rows.get(b.id, -1) for b in prob.buffers]
            valid = all(o >= 0 for o in offsets) and validate(prob, offsets, capacity=prob.capacity, mode="pack") is None
    return {"load": load, "seconds": dt, "cpu": cpu, "rc": proc.returncode, "valid": valid,
            "status": "OPTIMAL" if valid else ("INVALID" if proc.returncode == 0 else f"no answer (exit {proc.returncode})")}


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
    ap.add_argument("--instances", default=None, metavar="DIR",
                    help="run on every NAME.CAPACITY.csv in DIR (id,lower,upper,size) instead of MiniMalloc's A-K")
    ap.add_argument("--minimalloc", default=None, metavar="BINARY",
                    help="also run MiniMalloc's CLI (built from github.com/google/minimalloc) on each instance, "
                         "right after pack-search's runs, with the same time limit: the side-by-side table")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.instances:  # another set: every NAME.CAPACITY.csv of that folder
        from pathlib import Path

        bench = Path(args.instances)
        names = sorted(p.name[:-4] for p in bench.glob("*.csv"))
    else:
        bench = benchmarks_dir("minimalloc", explicit=args.benchmarks)
        names = NAMES
    if args.only:
        want = set(args.only.split(","))
        names = [n for n in names if n in want or n.split(".")[0] in want]
    load_start = os.getloadavg()
    print(DETAIL)
    print("|---|---:|---:|---|---:|---:|---:|---|---|---:|---:|---|---|")
    summary, detail, side = [], [], []
    for name in names:
        prob = load_problem(bench / f"{name}.csv")
        runs = []
        for seed in seeds:
            r = run_one(prob, seed, args.time_limit, not args.no_cpsat)
            row = (f"| {name} | {seed} | {r['load']:.1f} | {r['status']} | {r['seconds']:.2f} | {r['cpu']:.2f} | "
                   f"{r['peak'] if r['peak'] is not None else '-'} | {'ok' if r['check'] else 'NO'} | "
                   f"{'ok' if r['valid'] else 'NO'} | {r['nodes']} | {r['restarts']} | {r['engine']} | {r['winner']} |")
            print(row, flush=True)
            detail.append(row)
            runs.append(r)
        cells = " | ".join(f"{r['seconds']:.2f} {r['status'] if r['valid'] or r['peak'] is None else r['status'] + ' (invalid)'}"
                           for r in runs)
        summary.append(f"| {name} | {prob.n} | {max_live(prob)} | {cells} | {max(r['seconds'] for r in runs):.2f} |")
        if args.minimalloc:
            mm = run_minimalloc(args.minimalloc, bench / f"{name}.csv", prob, args.time_limit)
            ours = max(r["seconds"] for r in runs)
            ours_cpu = max(r["cpu"] for r in runs)
            side.append(f"| {name} | {ours:.2f} | {mm['seconds']:.2f} {mm['status']} | {ours / mm['seconds']:.2f} "
                        f"| {ours_cpu:.2f} | {mm['cpu']:.2f} | {ours_cpu / max(mm['cpu'], 1e-3):.2f} | {mm['load']:.1f} |")
            print(side[-1], flush=True)
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
                + ("## Side by side with MiniMalloc\n\n"
                   f"MiniMalloc's CLI (`{args.minimalloc}`, default settings: preorders WAT,TAW,TWA, "
                   f"`--timeout={args.time_limit:g}s`) run on each instance right after pack-search's runs on it, "
                   "timed as a subprocess (start-up included); its answer checked by the project validator. "
                   "`pack-search s`: the slowest of its seeds (wall clock); ratio = pack-search / MiniMalloc; "
                   "`cpu`: CPU seconds (user + system: the process's for pack-search, its CP-SAT thread included; the "
                   "child's for MiniMalloc), the fairer figure on a loaded machine.\n\n"
                   "| instance | pack-search s | MiniMalloc s | ratio | pack-search cpu | MiniMalloc cpu | cpu ratio "
                   "| load (1 min) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
                   + "\n".join(side) + "\n\n" if side else "")
                + "## Every run\n\n"
                "`engine`: which engine's packing was returned; `winning run`: the search lane and restart that "
                "found it (`choice:preorder run k limit L`).\n\n"
                + DETAIL + "\n|---|---:|---:|---|---:|---:|---:|---|---|---:|---:|---|---|\n" + "\n".join(detail) + "\n"
                + (f"\n{args.note.strip()}\n" if args.note.strip() else ""))
        write_results(args.out, text, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
