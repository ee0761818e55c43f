"""Memory-aware list scheduling: grow the order one ready op at a time, by a priority rule.

At each step the ready ops (all predecessors scheduled) are scored in the touch model
(:mod:`mallocgame.algorithms.scheduling.base`): ``alloc`` = bytes of the buffers the op brings to life
(first touch, not pinned at the start), ``free`` = bytes of the buffers it is the last toucher
of (not pinned at the end). The rules:

* ``lpmf`` -- least peak memory first (PyTorch Inductor's ``reorder_for_peak_memory``): the
  smallest live bytes during the op (``alloc``), then the largest ``free``;
* ``net`` -- the smallest net allocation ``alloc - free``;
* ``free`` -- free the most bytes first, then the smallest ``alloc``;
* ``dfs`` -- follow the value just made: the most recently readied op, then ``net``
  (Inductor's DFS order: a consumer right after its producer);
* ``original`` -- the original position (keeps the order when the graph allows; a baseline).

Ties go to the original position. Every rule's order is scored by the exact objective and
the best is kept, never worse than the original order, which is offered first.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

from mallocgame.algorithms.scheduling.base import Context, Scheduler, TouchModel

RULES = ("lpmf", "net", "free", "dfs", "original")


def list_order(ctx: Context, model: TouchModel, rule: str, *, deadline: float | None = None) -> list[int] | None:
    """The order built by ``rule``; ``None`` when the deadline passed first."""
    graph = ctx.graph
    n = graph.n
    missing = [len(p) for p in graph.preds]
    remaining = list(model.touchers)
    started = list(model.pin_start)
    size, pin_end, op_buffers = model.size, model.pin_end, model.op_buffers
    ready = [t for t in range(n) if missing[t] == 0]
    readied_at = {t: 0 for t in ready}
    order: list[int] = []
    if rule == "original":  # a heap on the index: cheap, and the original order when it is valid
        heap = list(ready)
        heapq.heapify(heap)
        while heap:
            t = heapq.heappop(heap)
            order.append(t)
            for v in graph.succs[t]:
                missing[v] -= 1
                if missing[v] == 0:
                    heapq.heappush(heap, v)
        return order
    step = 0
    while ready:
        step += 1
        if deadline is not None and step % 64 == 0 and time.monotonic() > deadline:
            return None
        best_key, best_i = None, 0
        for i, t in enumerate(ready):
            alloc = free = 0
            for b in op_buffers[t]:
                if not started[b]:
                    alloc += size[b]
                if remaining[b] == 1 and not pin_end[b]:
                    free += size[b]
            if rule == "lpmf":
                key = (alloc, -free, t)
            elif rule == "net":
                key = (alloc - free, t)
            elif rule == "free":
                key = (-free, alloc, t)
            else:  # dfs
                key = (-readied_at[t], alloc - free, t)
            if best_key is None or key < best_key:
                best_key, best_i = key, i
        t = ready[best_i]
        ready[best_i] = ready[-1]
        ready.pop()
        order.append(t)
        for b in op_buffers[t]:
            started[b] = True
            remaining[b] -= 1
        for v in graph.succs[t]:
            missing[v] -= 1
            if missing[v] == 0:
                ready.append(v)
                readied_at[v] = step
    return order


class ListScheduler(Scheduler):
    name = "list"

    def __init__(self, rules: tuple[str, ...] = RULES):
        self.rules = rules

    def run(self, ctx: Context) -> dict[str, Any]:
        model = TouchModel(ctx.problem)
        ctx.offer(list(range(ctx.graph.n)), "original")
        values: dict[str, float] = {}
        for rule in self.rules:
            order = list_order(ctx, model, rule, deadline=ctx.deadline)
            if order is None:
                break
            values[rule] = ctx.offer(order, f"list:{rule}")
        return {"rules": values}


__all__ = ["ListScheduler", "RULES", "list_order"]
