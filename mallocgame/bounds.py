"""Bounds printed beside every result (DESIGN.md section 4).

* pack: the max live bytes (no packing can peak lower);
* map: the **no-fragmentation relaxation** — choose buffers for fast memory so that at
  every start time the chosen live bytes fit the capacity, ignoring address contiguity.
  With ops, the objective is the evaluator's exact concave saving per op
  (``s_t <= headroom_t``, ``s_t <= sum of deltas of fast operands``), otherwise the sum
  of benefits. Solved as a MIP with SciPy's HiGHS; on very large inputs the LP value
  (still an upper bound) is used, and past that the sum of all fitting benefits.

Example:
    >>> from mallocgame.model import Buffer, Problem
    >>> from hardware.spec import PRESETS
    >>> p = Problem("t", (Buffer("a", 4, 0, 2, 3.0), Buffer("b", 4, 1, 3, 2.0), Buffer("c", 4, 1, 3, 2.0)), capacity=8)
    >>> b = map_upper_bound(p, PRESETS["unit"]); (b.value, b.kind)
    (5.0, 'mip')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mallocgame.intervals import OverlapIndex, max_live
from mallocgame.model import Problem

MIP_NONZEROS = 2_000_000
LP_NONZEROS = 20_000_000


@dataclass(frozen=True)
class Bound:
    value: float
    kind: str  # "max-live" | "mip" | "mip-dual" | "lp" | "trivial"
    seconds: float = 0.0


def pack_lower_bound(problem: Problem) -> Bound:
    return Bound(float(max_live(problem)), "max-live")


def clique_rows(problem: Problem, candidates: np.ndarray) -> list[np.ndarray]:
    """Buffer index sets live together at the maximal moments, one per row.

    Only the moment just before each batch of releases matters: the live set only grows
    between releases, so earlier rows are subsets of it.
    """
    a = problem.arrays
    start, end = a.start[candidates], a.end[candidates]
    times = np.unique(start)
    # A start time t is maximal if some candidate ends after t but no later start comes first.
    next_start = np.append(times[1:], np.iinfo(np.int64).max)
    ends_sorted = np.sort(end)
    has_release = np.searchsorted(ends_sorted, next_start, side="right") > np.searchsorted(ends_sorted, times, side="right")
    rows = []
    index = OverlapIndex(start, end)
    for t in times[has_release].tolist():
        live = index.query(t, t + 1)
        if len(live) > 1:
            rows.append(candidates[live])
    return rows


def map_upper_bound(problem: Problem, hardware, *, time_limit: float = 20.0) -> Bound:
    """Upper bound on the map-mode value (time saved) of any placement."""
    import time

    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    from hardware.evaluator import Evaluator

    t0 = time.monotonic()
    ev = Evaluator(problem, hardware)
    capacity = problem.capacity
    a = problem.arrays
    benefits = ev.benefits
    fits = (a.size <= capacity) if capacity is not None else np.ones(problem.n, bool)
    cand = np.flatnonzero(fits & (benefits > 0))
    trivial = float(benefits[cand].sum())
    if capacity is None or len(cand) == 0:
        return Bound(trivial, "trivial", time.monotonic() - t0)
    rows = clique_rows(problem, cand)
    nnz = sum(len(r) for r in rows)
    if nnz > LP_NONZEROS:
        return Bound(trivial, "trivial", time.monotonic() - t0)
    col = {int(i): k for k, i in enumerate(cand.tolist())}
    nx = len(cand)
    r_idx, c_idx, vals = [], [], []
    for r, row in enumerate(rows):
        r_idx.extend([r] * len(row))
        c_idx.extend(col[int(i)] for i in row.tolist())
        # Rows in units of the capacity, times in units of the largest headroom, so that
        # HiGHS's absolute feasibility tolerance (1e-7) is small against every coefficient.
        vals.extend((a.size[row] / capacity).tolist())
    n_rows = len(rows)
    if ev.additive:
        c = -benefits[cand]
        nvar = nx
        A_rows, A_cols, A_vals = r_idx, c_idx, vals
        ub_rows = [1.0] * n_rows
        lb_rows = [-np.inf] * n_rows
        integrality = np.ones(nx)
        unit = 1.0
        ub_vars = np.ones(nx)
    else:
        # s_t - sum delta_{t,b} x_b <= 0 for every op t with headroom; s_t <= headroom_t.
        headroom = np.maximum(ev.slow_mem - ev.compute, 0.0)
        ops = np.flatnonzero(headroom > 0)
        unit = float(headroom.max()) if len(ops) else 1.0
        headroom = headroom / unit
        op_col = {int(t): nx + k for k, t in enumerate(ops.tolist())}
        nvar = nx + len(ops)
        A_rows, A_cols, A_vals = list(r_idx), list(c_idx), [float(v) for v in vals]
        ub_rows = [1.0] * n_rows
        lb_rows = [-np.inf] * n_rows
        for t in ops.tolist():
            A_rows.append(n_rows)
            A_cols.append(op_col[t])
            A_vals.append(1.0)
            sel = np.flatnonzero(ev.op_of == t)
            for b, d in zip(ev.buf_of[sel].tolist(), ev.delta[sel].tolist()):
                if b in col:
                    A_rows.append(n_rows)
                    A_cols.append(col[b])
                    A_vals.append(-d / unit)
            ub_rows.append(0.0)
            lb_rows.append(-np.inf)
            n_rows += 1
        c = np.concatenate([np.zeros(nx), -np.ones(len(ops))])
        integrality = np.concatenate([np.ones(nx), np.zeros(len(ops))])
        ub_vars = np.concatenate([np.ones(nx), headroom[ops]])
    if n_rows == 0:
        return Bound(trivial, "mip", time.monotonic() - t0)
    A = coo_matrix((A_vals, (A_rows, A_cols)), shape=(n_rows, nvar)).tocsr()
    constraint = LinearConstraint(A, lb_rows, ub_rows)
    var_bounds = Bounds(np.zeros(nvar), ub_vars)
    if nnz > MIP_NONZEROS:
        res = milp(c, constraints=constraint, bounds=var_bounds, integrality=np.zeros(nvar))
        kind = "lp"
    else:
        res = milp(c, constraints=constraint, bounds=var_bounds, integrality=integrality,
                   options={"time_limit": time_limit, "mip_rel_gap": 1e-6})
        kind = "mip"
    # The dual bound, not the incumbent, is what no placement can exceed.
    dual = getattr(res, "mip_dual_bound", None)
    if res.status == 0 and res.fun is not None:
        best = float(-res.fun) if dual is None or not np.isfinite(dual) else max(float(-res.fun), float(-dual))
        return Bound(min(best * unit, trivial), kind, time.monotonic() - t0)
    if dual is not None and np.isfinite(dual):
        return Bound(min(float(-dual) * unit, trivial), "mip-dual", time.monotonic() - t0)
    return Bound(trivial, "trivial", time.monotonic() - t0)
