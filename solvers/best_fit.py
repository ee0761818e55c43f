"""XLA heap-simulator style best fit for pack mode: size orders and live-range order, keep the lowest peak.

Runs the best-fit placement three times over an unbounded address space (the orders of
:func:`mallocgame.placement.heap_orders`): size descending with ties by live-range length
(spatial), size descending with ties by start (size-start), and live-range length descending
(temporal), ties then broken by start and id, and keeps the answer with the lowest peak, or the
online allocator's if lower: the pack baseline (:func:`mallocgame.placement.pack_start`), built once
per solve session (:mod:`mallocgame.session`). In map mode it places in the same orders within the
capacity and keeps the highest value.
"""

from __future__ import annotations

import time

from mallocgame.incumbents import offer
from mallocgame.model import Solution, Status, offsets_tuple
from mallocgame.placement import greedy_place, heap_orders
from mallocgame.protocol import Solver
from mallocgame.session import session_for


class BestFit(Solver):
    name = "best-fit"
    modes = frozenset({"map", "pack"})
    greedy = True  # a one-pass heuristic: a baseline, not held to never-below-greedy (mallocgame.conformance)

    def solve(self, problem, hardware, *, time_limit, seed, hint=None):
        t0 = time.monotonic()
        session = session_for(problem, hardware)
        if problem.mode == "pack":  # the pack baseline of the solve session (mallocgame.placement.pack_start), built once
            b = session.baseline("best-fit")
            return Solution(offsets=offsets_tuple(b.offsets), status=Status.FEASIBLE, mode=problem.mode,
                            wall_time=time.monotonic() - t0, history=((b.seconds, b.objective),),
                            stats={"order": b.stats["order"]}, solver=self.name)
        index = session.overlap
        evaluator = session.evaluator
        best, best_key, best_name = None, None, None
        history = []
        for name, order in heap_orders(problem).items():
            out = greedy_place(problem, order, problem.capacity, index=index)
            key = evaluator.value(out)
            if best_key is None or key > best_key:
                best, best_key, best_name = out, key, name
                history.append((time.monotonic() - t0, float(abs(key))))
                offer(value=key, offsets=out, problem=problem, source=f"best-fit ({name} order)")
        return Solution(offsets=offsets_tuple(best), status=Status.FEASIBLE, mode=problem.mode,
                        wall_time=time.monotonic() - t0, history=tuple(history),
                        stats={"order": best_name}, solver=self.name)
