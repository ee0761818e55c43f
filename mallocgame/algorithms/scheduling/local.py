"""Local search on the order for the time that is left: move one op within its dependency window.

From the best order so far, a move takes one op and puts it at another step between its
last predecessor and its first successor (so every move keeps the order valid); the move is
kept when the exact objective does not get worse (equal moves walk plateaus). Half of the
moves pick an op near the current peak step (peak objective) -- the ops that decide it --,
the rest any op. Randomness comes from ``seed`` alone; the search stops at the deadline or
after ``max_moves`` moves.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mallocgame.algorithms.scheduling.base import Context, Lifetimes, Scheduler


class LocalSearch(Scheduler):
    name = "local"

    def __init__(self, max_moves: int = 20_000, window: int = 8):
        self.max_moves, self.window = max_moves, window

    def run(self, ctx: Context) -> dict[str, Any]:
        graph = ctx.graph
        n = graph.n
        if n < 2:
            return {"moves": 0}
        rng = np.random.default_rng(ctx.seed)
        order = list(ctx.best_order) if ctx.best_order else list(range(n))
        value = ctx.offer(order, "local") if not ctx.best_order else ctx.best_value
        lifetimes = Lifetimes(ctx.problem) if getattr(ctx.objective, "name", "") == "peak" else None
        pos = [0] * n
        for k, t in enumerate(order):
            pos[t] = k
        tried = kept = 0
        peak_step = self._peak_step(lifetimes, order)
        while tried < self.max_moves and time.monotonic() < ctx.deadline:
            tried += 1
            if peak_step is not None and rng.random() < 0.5:
                k = int(np.clip(peak_step + rng.integers(-self.window, self.window + 1), 0, n - 1))
                t = order[k]
            else:
                t = int(rng.integers(n))
            lo = max((pos[u] for u in graph.preds[t]), default=-1) + 1
            hi = min((pos[v] for v in graph.succs[t]), default=n) - 1
            if hi <= lo:
                continue
            target = int(rng.integers(lo, hi + 1))
            here = pos[t]
            if target == here:
                continue
            cand = order[:here] + order[here + 1:]
            cand.insert(target, t)
            v = ctx.objective(cand)
            if v <= value:
                kept += v < value
                order, value = cand, v
                for k in range(min(here, target), max(here, target) + 1):
                    pos[order[k]] = k
                if v < ctx.best_value:
                    ctx.offer(order, "local", v)
                peak_step = self._peak_step(lifetimes, order)
        return {"moves": tried, "improvements": kept}

    @staticmethod
    def _peak_step(lifetimes: Lifetimes | None, order: list[int]) -> int | None:
        if lifetimes is None:
            return None
        return int(np.argmax(lifetimes.profile(order)))


__all__ = ["LocalSearch"]
