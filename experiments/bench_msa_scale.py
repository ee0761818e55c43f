"""msa at scale (issue 18 item 1): generated layered workloads of 1k-100k buffers, capacity 25% of max live.

The whole solver (``MemorySpaceAssignment().solve``) is called in-process, as the runner's child
would call it, with ``--time-limit`` (default 120 s, so that a loaded machine does not cut the
largest run short). Problem generation and the evaluator's
set-up are outside the timed part (the runner builds them for the bound). Prints one row per
size: wall time, CPU time of this process (the machine is shared: wall time is CPU time plus waiting),
the 1-minute load average after the run, status, whether the limit cut the run short, objective,
buffers placed fast.

    nice python experiments/bench_msa_scale.py [--sizes 1000,5000,20000,100000] [--time-limit 60]
        [--fraction 0.25] [--profile N] [--variants]
    nice python experiments/bench_msa_scale.py --xla [--names a,b] [--answers-out F] [--answers-check F]
        [--out experiments/results/msa_xla.md]
    # --xla: one msa_run (the algorithm, default options) on each compiled program of the xla suite, its
    #   default capacity; --answers-out writes each answer (sorted intervals) to a JSON file,
    #   --answers-check compares with such a file (exit 1 on a difference); --out writes the table
    # --profile N: cProfile the run of size N, top 25 by tottime
    # --variants: the solver's default (also cross-program prefetch and the other max-overlap rule within
    #   10% of the limit); without it, variants=False: one run of the algorithm, what the goal is about

Goal: 20k buffers within 3 s and 100k within 20 s. Results: experiments/results/msa_scale.md.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

from mallocgame.algorithms.memory_space_assignment import msa_run
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.solvers.msa import MemorySpaceAssignment

TPU = PRESETS["tpuv4i"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000,100000")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=None, help="cProfile the run of this size")
    ap.add_argument("--variants", action="store_true",
                    help="the solver's default: also its variants within 10%% of the limit (off: one run of the algorithm)")
    ap.add_argument("--xla", action="store_true", help="time msa_run on the xla suite's compiled programs")
    ap.add_argument("--names", default=None, help="with --xla: only these entries (comma-separated)")
    ap.add_argument("--answers-out", default=None, help="with --xla: write the answers (sorted intervals) here")
    ap.add_argument("--answers-check", default=None, help="with --xla: compare the answers with this file")
    ap.add_argument("--out", default=None, help="with --xla: write the table to this results file")
    args = ap.parse_args()
    if args.xla:
        sys.exit(bench_xla(args))
    print(f"# load average at start: {os.getloadavg()[0]:.2f} (2 cores); variants={args.variants}")
    print(f"{'buffers':>8} {'touches':>8} {'ops':>7} {'seconds':>8} {'cpu_s':>7} {'load':>5} {'status':>9} {'cut_short':>9} "
          f"{'objective':>12} {'placed':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        problem, _ = prepare(layered_network(n, seed=args.seed), mode="prefetch", capacity_fraction=args.fraction,
                             hardware=TPU)
        PrefetchEvaluator.of(problem, TPU)
        prof = cProfile.Profile() if args.profile == n else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        request = MemorySpaceAssignment.request(problem, TPU, time_limit=args.time_limit, seed=args.seed,
                                                variants=args.variants)
        sol = MemorySpaceAssignment().solve(request)
        if prof:
            prof.disable()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        placed = len({iv.buffer for iv in sol.intervals})
        cut = bool(sol.stats.get("cut_short", sol.stats.get("timed_out", False)))
        print(f"{problem.n:>8} {len(problem.touches.ops):>8} {len(problem.ops):>7} {seconds:>8.2f} {cpu:>7.2f} "
              f"{os.getloadavg()[0]:>5.1f} {sol.status.name:>9} {str(cut):>9} {sol.objective:>12.6g} {placed:>8}", flush=True)
        if prof:
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    print(f"# load average at end: {os.getloadavg()[0]:.2f}")


def _rows(answer) -> list[list[int]]:
    return sorted([iv.buffer, iv.start, iv.end, -2 if iv.copy_start is None else iv.copy_start, iv.offset]
                  for iv in answer or ())


def bench_xla(args) -> int:
    """One ``msa_run`` per xla suite program: the table, and the answers written or checked."""
    entries = suite_entries("xla")
    if args.names:
        wanted = set(args.names.split(","))
        unknown = wanted - {e.name for e in entries}
        if unknown:
            print(f"bench_msa_scale: unknown xla entries: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        entries = [e for e in entries if e.name in wanted]
    ref = json.loads(open(args.answers_check).read()) if args.answers_check else None
    lines = [f"# load average at start: {os.getloadavg()[0]:.2f} (2 cores)",
             f"{'program':>24} {'buffers':>8} {'touches':>8} {'ops':>6} {'seconds':>8} {'cpu_s':>7} {'load':>5} "
             f"{'copy_chk':>8} {'intervals':>9} {'answer':>9}"]
    print("\n".join(lines), flush=True)
    answers, bad = {}, 0
    for e in entries:
        problem, _ = prepare(e.build(), mode="prefetch")  # the program's own capacity and hardware
        PrefetchEvaluator.of(problem, problem.hardware)
        prof = cProfile.Profile() if args.profile is not None else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        answer, stats = msa_run(problem, problem.hardware, time.monotonic() + 1e6)
        if prof:
            prof.disable()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        answers[e.name] = rows = _rows(answer)
        same = "-" if ref is None else ("same" if ref.get(e.name) == rows else "DIFFERENT")
        bad += same == "DIFFERENT"
        line = (f"{e.name:>24} {problem.n:>8} {len(problem.touches.ops):>8} {len(problem.ops):>6} {seconds:>8.2f} "
                f"{cpu:>7.2f} {os.getloadavg()[0]:>5.1f} {stats['exact_copy_checks']:>8} {len(rows):>9} {same:>9}")
        lines.append(line)
        print(line, flush=True)
        if prof:
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    lines.append(f"# load average at end: {os.getloadavg()[0]:.2f}")
    print(lines[-1])
    if args.answers_out:
        with open(args.answers_out, "w") as f:
            json.dump(answers, f)
    if args.out:
        from _common import write_results

        write_results(args.out, "# msa on the xla suite (issue 18 item 1)\n\n```\n" + "\n".join(lines) + "\n```\n")
    return 1 if bad else 0


if __name__ == "__main__":
    main()
