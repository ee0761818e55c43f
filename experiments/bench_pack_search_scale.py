"""Benchmark pack-search at scale: generated layered workloads of 1k-100k buffers, minimise the peak.

For each size ``n`` (``--sizes``, default 1000,5000,20000,100000) and workload seed (``--seeds``), the
input is ``layered_network(n, seed)`` prepared for pack mode without a capacity (``minimize_peak``),
as ``mallocgame solve --mode pack --minimize-peak`` reads it. Two runs, each in a fresh child process
so that its peak RSS (``ru_maxrss``) is its own:

* ``solver``: the registered solver called in-process (``PackSearch().solve``), as a user runs it: it
  builds the pack baseline (best fit, ``mallocgame.algorithms.placement.pack_start`` through the session, within
  20% of the limit) and starts from it;
* ``pack()``: the search module alone (``mallocgame.solvers.pack_search.search.pack``) with no hint,
  so only its own heuristic (first fit for components above the exact engine's limits) and its
  window repair.

Every answer is checked by the project validator. Prints one row per run: n, seconds, peak, max live
(the lower bound), gap, best fit's peak, peak RSS, status and what the stats say about a fallback;
writes them with the command to ``--out`` (default experiments/results/pack_search_scale.md).

Usage (from the project root, on a shared machine under ``nice``):
    nice python experiments/bench_pack_search_scale.py [--sizes 1000,5000,20000,100000] [--seeds 0]
        [--time-limit 30] [--out PATH] [--no-write] [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _common import benchmarks_dir, write_results

HEAD = ("| n | seed | run | status | seconds | peak | max live | gap | best-fit peak | best-fit s | incumbent given "
        "| peak RSS MB | windows | fallback |")
RULE = "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"


def one(n: int | str, seed: int, variant: str, time_limit: float) -> dict:
    """One run in this process (the child): returns the row's figures. ``n``: a size, or a trace CSV's path."""
    import ortools.sat.python.cp_model  # noqa: F401  (the runner preloads it before the clock too)

    from mallocgame.engine.session import session_for
    from mallocgame.hardware.validator import validate
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.load import prepare
    from mallocgame.problem.intervals import max_live
    from mallocgame.runtime.budget import Budget
    from mallocgame.solvers.pack_search.search import pack
    from mallocgame.solvers.pack_search.solver import PackSearch

    if isinstance(n, str):  # a trace of the traces suite (pack mode, no capacity: minimise the peak)
        from mallocgame.inputs.load import load_problem

        problem = load_problem(n, mode="pack")
        problem, spec = prepare(problem, mode="pack", minimize_peak=True)
    else:
        problem, spec = prepare(layered_network(n, seed=seed), mode="pack", minimize_peak=True)
    a = problem.arrays
    lb = max_live(problem)
    if variant == "solver":
        t = time.monotonic()
        sol = PackSearch().solve(PackSearch.request(problem, spec, time_limit=time_limit, seed=0, minimize_peak=True))
        seconds = time.monotonic() - t
        offsets = [int(o) for o in sol.offsets] if all(o is not None for o in sol.offsets) else None
        status, stats = sol.status.name, sol.stats
        given = stats.get("best_fit_peak")  # what the solver's own best fit reached within 20% of the limit
    else:
        t = time.perf_counter()
        r = pack(a.size, a.start, a.end, alignment=a.alignment, budget=Budget.start(time_limit), seed=0)
        seconds = time.perf_counter() - t
        offsets = [int(o) for o in r.offsets] if (r.offsets >= 0).all() else None
        status, stats = r.status, r.stats
        given = None
    peak = None
    if offsets is not None:
        err = validate(problem, offsets, capacity=None, mode="pack")
        if err is not None:
            status += f" INVALID ({err})"
        peak = max(o + int(s) for o, s in zip(offsets, a.size))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the reference best fit below
    # the reference: best fit built to the end (no deadline; a fresh session when the solver's was cut short)
    session_for(problem, spec)._baselines.pop("best-fit", None)
    t = time.monotonic()
    bf = session_for(problem, spec).baseline("best-fit")
    label = problem.n if not isinstance(n, str) else f"{problem.n} ({os.path.basename(n)})"
    return {"n": label, "seed": seed, "run": variant, "status": status, "seconds": seconds, "peak": peak,
            "max_live": lb, "best_fit_peak": int(bf.objective), "best_fit_seconds": time.monotonic() - t,
            "given": given, "rss_mb": rss, "windows": stats.get("windows", 0), "fallback": stats.get("fallback", "")}


def row(r: dict) -> str:
    gap = "-" if r["peak"] is None else f"{r['peak'] / r['max_live'] - 1:+.2%}"
    given = "-" if r["given"] is None else str(r["given"])
    return (f"| {r['n']} | {r['seed']} | {r['run']} | {r['status']} | {r['seconds']:.2f} | {r['peak']} | {r['max_live']} "
            f"| {gap} | {r['best_fit_peak']} | {r['best_fit_seconds']:.2f} | {given} | {r['rss_mb']:.0f} | {r['windows']} "
            f"| {r['fallback'] or '-'} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000,100000")
    ap.add_argument("--seeds", default="0", help="workload seeds, comma-separated")
    ap.add_argument("--runs", default="solver,pack()", help="solver, pack() or both (comma-separated)")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--traces", action="store_true",
                    help="also run the traces suite's files (mallocgame suites: traces) through both runs")
    ap.add_argument("--out", default="pack_search_scale.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--note", default="")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:  # n,seed,variant: one run, its figures as JSON on stdout
        n, seed, variant = args.child.rsplit(",", 2)
        print(json.dumps(one(int(n) if n.isdigit() else n, int(seed), variant, args.time_limit)))
        return 0
    load_start = os.getloadavg()
    print(HEAD)
    print(RULE)
    rows = []
    inputs = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.traces:
        from mallocgame.inputs.suites import TRACES

        inputs += [str(benchmarks_dir() / folder / name) for folder, name, _ in TRACES]
    for n in inputs:
        for seed in [int(x) for x in args.seeds.split(",") if x.strip()] if isinstance(n, int) else [0]:
            for variant in [v for v in args.runs.split(",") if v.strip()]:
                out = subprocess.run([sys.executable, __file__, "--child", f"{n},{seed},{variant}",
                                      "--time-limit", str(args.time_limit)], capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"error: child n={n} seed={seed} {variant} exited {out.returncode}: "
                          f"{out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    return 1
                line = row(json.loads(out.stdout.strip().splitlines()[-1]))
                print(line, flush=True)
                rows.append(line)
    if not args.no_write:
        load_end = os.getloadavg()
        text = ("# pack-search at scale (generated layered workloads, minimise the peak)\n\n"
                f"Time limit {args.time_limit:g} s per run; each run in a fresh child process (peak RSS = its "
                "`ru_maxrss`, the Python interpreter, NumPy and OR-Tools included). `solver`: `PackSearch().solve` "
                "in-process (best fit built first, within 20% of the limit, then the search from it); `pack()`: "
                "the search module alone, no hint. Gap = peak / max live - 1 (max live is the lower bound). "
                "`best-fit peak`/`best-fit s`: best fit (`pack_start`) built to the end in the same child after the run "
                "(the reference; peak RSS is taken before it); `incumbent given`: the peak of the best fit the solver "
                "built within its 20% share (when that share cuts it short, the online allocator's answer or a "
                "partial best fit). "
                "Every answer checked by the project validator. Machine: 2 cores shared with other engineers' "
                f"jobs; load average (1, 5, 15 min) {load_start[0]:.1f} {load_start[1]:.1f} {load_start[2]:.1f} at "
                f"the start and {load_end[0]:.1f} {load_end[1]:.1f} {load_end[2]:.1f} at the end, so times are "
                "inflated.\n\n" + HEAD + "\n" + RULE + "\n"
                + "\n".join(rows) + "\n" + (f"\n{args.note.strip()}\n" if args.note.strip() else ""))
        write_results(args.out, text, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
