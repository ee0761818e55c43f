"""XLA heap-simulator style best fit for pack mode: size orders and live-range order, keep the lowest peak.

Runs the best-fit placement three times over an unbounded address space (the orders of
:func:`mallocgame.placement.heap_orders`): size descending with ties by live-range length
(spatial), size descending with ties by start (size-start), and live-range length descending
(temporal), ties then broken by start and id, and keeps the answer with the lowest peak. In
map mode it places in the same orders within the capacity and keeps the highest value.
"""

from __future__ import annotations

import time

from mallocgame.hardware.evaluator import Evaluator

from mallocgame.intervals import overlap_index
from mallocgame.model import Solution, Status, offsets_tuple
from mallocgame.placement import greedy_place, heap_orders
from mallocgame.protocol import Solver


class BestFit(Solver):
    name = "best-fit"
    modes = frozenset({"map", "pack"})
    greedy = True  # a one-pass heuristic: a baseline, not held to never-below-greedy (mallocgame.conformance)

    def solve(self, problem, hardware, *, time_limit, seed, hint=None):
        t0 = time.monotonic()
        a = problem.arrays
        index = overlap_index(problem)
        pack = problem.mode == "pack"
        evaluator = None if pack else Evaluator.of(problem, hardware)
        best, best_key, best_name = None, None, None
        history = []
        for name, order in heap_orders(problem).items():
            out = greedy_place(problem, order, None if pack else problem.capacity, index=index)
            if pack:
                key = -int((out + a.size).max()) if problem.n else 0
            else:
                key = evaluator.value(out)
            if best_key is None or key > best_key:
                best, best_key, best_name = out, key, name
                history.append((time.monotonic() - t0, float(abs(key))))
        return Solution(offsets=offsets_tuple(best), status=Status.FEASIBLE, mode=problem.mode,
                        wall_time=time.monotonic() - t0, history=tuple(history),
                        stats={"order": best_name}, solver=self.name)
