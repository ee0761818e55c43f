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
    # --profile N: cProfile the run of size N, top 25 by tottime
    # --variants: the solver's default (also cross-program prefetch and the other max-overlap rule within
    #   10% of the limit); without it, variants=False: one run of the algorithm, what the goal is about

Goal: 20k buffers within 3 s and 100k within 20 s. Results: experiments/results/msa_scale.md.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare
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
    args = ap.parse_args()
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
        sol = MemorySpaceAssignment().solve(problem, TPU, time_limit=args.time_limit, seed=args.seed,
                                            variants=args.variants)
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


if __name__ == "__main__":
    main()
