"""XLA memory-space-assignment style greedy: most memory-bound buffers first, best-fit hole, else slow.

Order (docs/architecture.md, "Solvers"): benefit / sqrt(size) descending, then size descending, then
live-range length descending, then id. Each buffer goes to the smallest free hole among
the placed buffers that overlap it in time (lowest offset on ties); when none fits it
stays in slow memory. In pack mode every buffer must be placed, so the capacity is
lifted and the answer is valid only if its peak fits; a placement the deadline cut short has the buffers it
did not reach stacked above the rest (:func:`mallocgame.algorithms.placement.stack_above`).
"""

from __future__ import annotations

import time

from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import SolveRequest
from mallocgame.problem.model import Solution, Status, offsets_tuple


class GreedyXLA(Solver):
    name = "greedy-xla"
    modes = frozenset({"map", "pack"})
    greedy = True  # a one-pass heuristic: a baseline, not held to never-below-greedy (mallocgame.engine.conformance)

    def solve(self, request: SolveRequest) -> Solution:
        problem = request.problem
        t0 = time.monotonic()
        # built once per solve session, until the deadline: a cut leaves the rest slow (map) or
        # stacked above the rest (pack: still a packing), and the stats and the summary line say so
        # Its end is one tuple of offsets, not a search's scoring: 1 µs per buffer kept back, not the searches' 20,
        # which would take a large share of a short limit on a large input (docs/results.md, "Deadlines")
        deadline = request.budget.search_part(n=problem.n, per_buffer=1e-6).deadline
        base = request.facts.baseline("greedy-xla", deadline)
        stats = {} if base.complete else {"cut_short": True, **base.stats}  # pack: "stacked", how many
        return Solution(offsets=offsets_tuple(base.offsets), status=Status.FEASIBLE, mode=problem.mode,
                        wall_time=time.monotonic() - t0, solver=self.name, stats=stats)
