"""What the does-not-fit verdict and the human summary line cost at 10k and 100k buffers (the probe of
experiments/results/does_not_fit_scale.md).

    nice python experiments/does_not_fit_scale.py

A random pack problem (mallocgame.inputs.generate.random_intervals, seed 1, sizes up to 64 bytes) is
packed by the online best-fit allocator without a capacity; the capacity is then set one byte below
that peak, so the answer places every buffer without overlap and does not fit. Scoring it runs the
validator a second time at the answer's own peak (mallocgame.engine.report): the cost is compared with
scoring the same answer where it fits.
"""

from __future__ import annotations

import time

from mallocgame.algorithms.placement import online_pack
from mallocgame.bounds.bounds import Bound
from mallocgame.engine.report import score
from mallocgame.hardware.validator import peak, validate
from mallocgame.inputs.generate import random_intervals
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import Solution, Status


def timed(fn, *args, **kwargs):
    """``(result, seconds)`` of one call."""
    t = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t


def main() -> None:
    for n in (10_000, 100_000):
        p = random_intervals(n, seed=1, max_size=64).replace(capacity=None, mode="pack")
        packed, t_pack = timed(online_pack, p)
        offsets = [int(o) for o in packed]
        top = peak(p, offsets)
        tight = p.replace(capacity=top - 1)  # the online packing, one byte too high
        first, t_validate = timed(validate, tight, offsets)
        _, t_again = timed(validate, tight, offsets, capacity=top)
        sol = Solution(offsets=tuple(offsets), status=Status.FEASIBLE, mode="pack", solver="online")
        bound = Bound(max_live(tight), "max-live")
        report, t_score = timed(score, tight, None, sol, seconds=1.0, bound=bound, solver_name="online")
        _, t_valid = timed(score, p.replace(capacity=top), None, sol, seconds=1.0, bound=bound, solver_name="online")
        line, t_summary = timed(report.summary)
        print(f"n={n}: online pack {t_pack:.2f} s; validate (first violation) {t_validate:.3f} s, validate at the "
              f"peak {t_again:.3f} s; score: does-not-fit {t_score:.3f} s, the same answer valid {t_valid:.3f} s; "
              f"summary {t_summary * 1e3:.2f} ms")
        print("  ", first)
        print("  ", line)


if __name__ == "__main__":
    main()
