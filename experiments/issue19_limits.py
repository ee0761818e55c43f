"""Issue 19 item 5: the map bound and greedy-xla under their time limits (the probes of
experiments/results/issue19_bound_greedy_limits.md).

    nice python experiments/issue19_limits.py bound N LIMIT        # one op over N operands: map_upper_bound
    nice python experiments/issue19_limits.py greedy N MODE LIMIT  # greedy-xla through the runner
    nice python experiments/issue19_limits.py profile N            # cProfile of greedy-xla, pack mode, no limit

The greedy inputs: N buffers, start uniform in [0, N), length geometric with mean 50 (about 50 live
at any time), sizes 1-4096 bytes, benefits uniform in [0, 10); map mode at 0.5% of the total size.
Seed 0 throughout.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

from mallocgame.inputs.load import prepare
from mallocgame.problem.model import Buffer, Op, Operand, Problem


def one_op(n: int):
    sizes = (np.random.default_rng(0).integers(1, 4096, n) * 256).tolist()
    bufs = tuple(Buffer(f"b{k}", sizes[k], 0, 2) for k in range(n))
    ops = (Op("w", flops=1.0, operands=tuple(Operand(f"b{k}", "write", sizes[k]) for k in range(n))),
           Op("r", flops=1e12, operands=tuple(Operand(f"b{k}", "read", sizes[k]) for k in range(n))))
    return prepare(Problem("oneop", bufs, ops=ops), mode="map")


def intervals(n: int, mode: str):
    rng = np.random.default_rng(0)
    start, length, size = rng.integers(0, n, n), rng.geometric(1 / 50, n), rng.integers(1, 4097, n)
    benefit = rng.uniform(0, 10, n)
    bufs = tuple(Buffer(f"b{i}", int(size[i]), int(start[i]), int(start[i] + length[i]), float(benefit[i]))
                 for i in range(n))
    return prepare(Problem("r", bufs, source="r.csv"), mode=mode,
                   capacity=int(size.sum()) // 200 if mode == "map" else None)


def main(argv: list[str]) -> None:
    what, n = argv[0], int(argv[1])
    if what == "bound":
        from mallocgame.bounds.bounds import map_upper_bound

        p, spec = one_op(n)
        t = time.monotonic()
        b = map_upper_bound(p, spec, time_limit=float(argv[2]))
        print(f"bound N={n} limit={argv[2]}: {b.kind} {b.value:.6g} in {time.monotonic() - t:.2f} s")
    elif what == "greedy":
        from mallocgame.engine.runner import run_solver

        p, spec = intervals(n, argv[2])
        t = time.monotonic()
        rep = run_solver("greedy-xla", p, spec, time_limit=float(argv[3]), seed=0)
        print(f"greedy N={n} {argv[2]} limit={argv[3]}: took {time.monotonic() - t:.2f} s; {rep.summary()}")
    elif what == "profile":
        from mallocgame.solvers.greedy_xla import GreedyXLA

        p, spec = intervals(n, "pack")
        prof = cProfile.Profile()
        t = time.monotonic()
        prof.enable()
        GreedyXLA().solve(GreedyXLA.request(p, spec, time_limit=1e5, seed=0))
        prof.disable()
        print(f"profile N={n}: {time.monotonic() - t:.2f} s")
        pstats.Stats(prof).sort_stats("tottime").print_stats(8)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
