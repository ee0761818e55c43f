"""CP-SAT on the order (objective ``peak``): positions, buffer intervals, one cumulative.

Variables: the step ``pos[t]`` of every op (all different, ``pos[u] < pos[v]`` for every
dependency). A buffer's live range follows :class:`mallocgame.algorithms.scheduling.base.Lifetimes`
exactly: from ``max(0, first touch - slack_before)`` (0 when pinned at the start) to
``min(T, last touch + 1 + slack_after)`` (``T`` when pinned at the end); buffers no op touches
keep their range. The live ranges are intervals of demand = size in one cumulative constraint
whose capacity is the peak, minimised. The best order so far is the solution hint, so the
answer is never worse than it. Runs for half of the time left (the local search gets the rest);
graphs above ``max_ops`` (80) ops are skipped: on larger ones (the 145-op BERT fixture) it found
no solution in 3 s, and the local search makes better use of the time.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mallocgame.algorithms.scheduling.base import Context, Lifetimes, Scheduler


class CPSATOrder(Scheduler):
    name = "cpsat"

    def __init__(self, share: float = 0.5, max_ops: int = 80):
        self.share, self.max_ops = share, max_ops

    def run(self, ctx: Context) -> dict[str, Any]:
        if getattr(ctx.objective, "name", "") != "peak":
            return {"skipped": "objective time (not linear in the order)"}
        n = ctx.graph.n
        if n > self.max_ops:
            return {"skipped": f"{n} ops > {self.max_ops}"}
        budget = ctx.time_left() * self.share
        if budget < 0.05:
            return {"skipped": "no time left"}
        try:
            from ortools.sat.python import cp_model
        except ImportError:  # pragma: no cover - ortools is a dependency
            return {"skipped": "OR-Tools not installed"}
        problem = ctx.problem
        lt = Lifetimes(problem)
        T = lt.T
        m = cp_model.CpModel()
        pos = [m.NewIntVar(0, T - 1, f"p{t}") for t in range(n)]
        m.AddAllDifferent(pos)
        for v in range(n):
            for u in ctx.graph.preds[v]:
                m.Add(pos[u] + 1 <= pos[v])
        tc = problem.touches
        intervals, demands = [], []
        for b in range(problem.n):
            size = int(lt.size[b])
            if size <= 0:
                continue
            ops = tc.ops[tc.ptr[b]:tc.ptr[b + 1]].tolist()
            if not ops:
                s, e = int(lt.start0[b]), int(lt.end0[b])
                if e > s:
                    intervals.append(m.NewIntervalVar(s, e - s, e, f"fixed{b}"))
                    demands.append(size)
                continue
            if lt.pin_start[b]:
                start = m.NewConstant(0)
            else:
                first = m.NewIntVar(0, T - 1, f"f{b}")
                m.AddMinEquality(first, [pos[t] for t in ops])
                slack = int(lt.slack_before[b])
                if slack:
                    start = m.NewIntVar(0, T - 1, f"s{b}")
                    m.AddMaxEquality(start, [first - slack, m.NewConstant(0)])
                else:
                    start = first
            if lt.pin_end[b]:
                end = m.NewConstant(T)
            else:
                last = m.NewIntVar(0, T - 1, f"l{b}")
                m.AddMaxEquality(last, [pos[t] for t in ops])
                slack = int(lt.slack_after[b])
                end = m.NewIntVar(1, T, f"e{b}")
                if slack:
                    m.AddMinEquality(end, [last + 1 + slack, m.NewConstant(T)])
                else:
                    m.Add(end == last + 1)
            length = m.NewIntVar(0, T, f"len{b}")
            m.Add(length == end - start)
            intervals.append(m.NewIntervalVar(start, length, end, f"live{b}"))
            demands.append(size)
        upper = int(ctx.best_value) if np.isfinite(ctx.best_value) else int(lt.size.sum())
        peak = m.NewIntVar(0, upper, "peak")
        m.AddCumulative(intervals, demands, peak)
        m.Minimize(peak)
        if ctx.best_order:
            for k, t in enumerate(ctx.best_order):
                m.AddHint(pos[t], k)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = budget
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = ctx.seed % (2**31)
        t0 = time.monotonic()
        status = solver.Solve(m)
        stats = {"status": solver.StatusName(status), "seconds": round(time.monotonic() - t0, 3),
                 "bound": solver.BestObjectiveBound()}
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            order = [int(t) for t in np.argsort([solver.Value(p) for p in pos], kind="stable")]
            stats["value"] = ctx.offer(order, "cpsat")
        return stats


__all__ = ["CPSATOrder"]
