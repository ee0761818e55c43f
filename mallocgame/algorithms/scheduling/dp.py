"""Serenity-style dynamic programming over the sets of scheduled ops (exact on small graphs).

A state is the set ``S`` of ops already run (a down-set of the dependency graph, a bitmask).
In the touch model (:mod:`mallocgame.algorithms.scheduling.base`) the live bytes while op ``t`` runs
after ``S`` depend only on ``S`` and ``t``: the bytes live between steps after ``S`` plus the
bytes ``t`` brings to life. So ``best(S + t) = min over t of max(best(S), live(S, t))``,
computed layer by layer (``|S| = k``) with memoisation of equal sets, is the exact minimum
peak of the touch model -- the exact minimum peak of the problem when no buffer has a slack
(imported programs). When a layer holds more than ``state_cap`` sets the layer keeps the
``state_cap`` best (a beam; the answer is then a heuristic and ``exact`` says so).
"""

from __future__ import annotations

import time
from typing import Any

from mallocgame.algorithms.scheduling.base import Context, Scheduler, TouchModel

STATE_CAP = 200_000
EXACT_OPS = 25  # graphs up to this many ops are searched exactly (unless the cap is hit)


def dp_order(ctx: Context, *, state_cap: int = STATE_CAP, deadline: float | None = None
             ) -> tuple[list[int] | None, bool, int]:
    """``(order, exact, states)``: the order of least touch-model peak; ``order`` is ``None`` on timeout."""
    graph = ctx.graph
    model = TouchModel(ctx.problem)
    n = graph.n
    pred_mask = [sum(1 << u for u in graph.preds[v]) for v in range(n)]
    size, pin_start, pin_end = model.size, model.pin_start, model.pin_end
    toucher_mask = [0] * len(size)
    for t, bufs in enumerate(model.op_buffers):
        for b in bufs:
            toucher_mask[b] |= 1 << t
    op_buffers = model.op_buffers

    def between(mask: int) -> int:  # live bytes after the ops of ``mask``
        total = 0
        for b, tm in enumerate(toucher_mask):
            if tm == 0:
                continue
            if (pin_start[b] or tm & mask) and (pin_end[b] or tm & ~mask):
                total += size[b]
        return total

    # state -> (peak so far, parent state, last op)
    layer: dict[int, tuple[int, int, int]] = {0: (0, -1, -1)}
    parents: list[dict[int, tuple[int, int, int]]] = []
    exact, states = True, 1
    for _k in range(n):
        nxt: dict[int, tuple[int, int, int]] = {}
        for mask, (peak, _p, _t) in layer.items():
            if deadline is not None and time.monotonic() > deadline:
                return None, False, states
            base = between(mask)
            for t in range(n):
                bit = 1 << t
                if mask & bit or (pred_mask[t] & mask) != pred_mask[t]:
                    continue
                during = base
                for b in op_buffers[t]:
                    if not pin_start[b] and not (toucher_mask[b] & mask):
                        during += size[b]
                value = max(peak, during)
                new = mask | bit
                old = nxt.get(new)
                if old is None or value < old[0]:
                    nxt[new] = (value, mask, t)
        states += len(nxt)
        if len(nxt) > state_cap:
            exact = False
            kept = sorted(nxt.items(), key=lambda kv: (kv[1][0], between(kv[0])))[:state_cap]
            nxt = dict(kept)
        parents.append(layer)
        layer = nxt
    # walk back from the full set
    order: list[int] = []
    mask = (1 << n) - 1
    entry = layer[mask]
    for k in range(n - 1, -1, -1):
        order.append(entry[2])
        mask = entry[1]
        if k:
            entry = parents[k][mask]
    order.reverse()
    return order, exact, states


class DPScheduler(Scheduler):
    name = "dp"

    def __init__(self, state_cap: int = STATE_CAP, max_ops: int = EXACT_OPS * 8):
        self.state_cap, self.max_ops = state_cap, max_ops

    def run(self, ctx: Context) -> dict[str, Any]:
        n = ctx.graph.n
        if n > self.max_ops:
            return {"skipped": f"{n} ops > {self.max_ops}"}
        cap = self.state_cap if n <= EXACT_OPS else max(1, min(self.state_cap, 200_000 // max(n, 1) ** 2))
        order, exact, states = dp_order(ctx, state_cap=cap, deadline=ctx.deadline)
        if order is None:
            return {"timeout": True, "states": states}
        value = ctx.offer(order, "dp" if exact else "dp-beam")
        return {"exact": exact, "states": states, "value": value}


__all__ = ["DPScheduler", "EXACT_OPS", "STATE_CAP", "dp_order"]
