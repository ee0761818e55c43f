"""XLA heap-simulator style best fit for pack mode: size orders and live-range order, keep the lowest peak.

Runs the best-fit placement three times over an unbounded address space (the orders of
:func:`mallocgame.algorithms.placement.heap_orders`): size descending with ties by live-range length
(spatial), size descending with ties by start (size-start), and live-range length descending
(temporal), ties then broken by start and id, and keeps the answer with the lowest peak, or the
online allocator's if lower: the pack baseline (:func:`mallocgame.algorithms.placement.pack_start`), built once
per solve session (:mod:`mallocgame.engine.session`). In map mode it places in the same orders within the
capacity and keeps the highest value.

Both modes keep the time limit. Map mode: the orders run one after the other until the deadline; an
order the deadline cuts leaves the buffers it did not reach slow (a valid answer), and the stats say
``cut_short``. Pack mode: the best-fit orders that do not finish in time are dropped (the online
allocator's answer stands); if even the online allocator is cut, the buffers it did not reach are
stacked above the rest, each in an address range of its own (:func:`mallocgame.algorithms.placement.stack_above`):
a complete, valid answer with a higher peak, status FEASIBLE, its stats ``complete: false`` and a
``fallback`` note saying how many were stacked.
"""

from __future__ import annotations

import time

from mallocgame.algorithms.placement import greedy_place, heap_orders
from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import SolveRequest
from mallocgame.problem.model import Solution, Status, offsets_tuple
from mallocgame.runtime.incumbents import offer


class BestFit(Solver):
    name = "best-fit"
    modes = frozenset({"map", "pack"})
    greedy = True  # a one-pass heuristic: a baseline, not held to never-below-greedy (mallocgame.engine.conformance)

    def solve(self, request: SolveRequest) -> Solution:
        problem, session = request.problem, request.facts
        t0 = time.monotonic()
        # the end is one tuple of offsets (and in map mode one scoring per order): 2 µs per buffer kept back
        deadline = request.budget.search_part(n=problem.n, per_buffer=2e-6).deadline
        # the pack baseline of the solve session (mallocgame.algorithms.placement.pack_start), built once
        if problem.mode == "pack":
            b = session.baseline("best-fit", deadline)
            stats = {"order": b.stats["order"]}
            if not b.complete:
                stats["complete"] = False
            if "stacked" in b.stats["order"]:
                stats["fallback"] = f"cut short by the time limit: {b.stats['order']} above the rest"
            return Solution(offsets=offsets_tuple(b.offsets), status=Status.FEASIBLE, mode=problem.mode,
                            wall_time=time.monotonic() - t0, history=((b.seconds, b.objective),),
                            stats=stats, solver=self.name)
        index = session.overlap
        evaluator = session.evaluator
        best, best_key, best_name = None, None, None
        history = []
        cut = False
        for name, order in heap_orders(problem).items():
            if best is not None and time.monotonic() >= deadline:  # the orders not tried cut nothing short
                break
            out = greedy_place(problem, order, problem.capacity, index=index, deadline=deadline)
            cut = time.monotonic() >= deadline
            key = evaluator.value(out)
            if best_key is None or key > best_key:
                best, best_key, best_name = out, key, name
                history.append((time.monotonic() - t0, float(abs(key))))
                offer(value=key, offsets=out, problem=problem, source=f"best-fit ({name} order)")
        stats = {"order": best_name} | ({"cut_short": True} if cut else {})
        return Solution(offsets=offsets_tuple(best), status=Status.FEASIBLE, mode=problem.mode,
                        wall_time=time.monotonic() - t0, history=tuple(history),
                        stats=stats, solver=self.name)
