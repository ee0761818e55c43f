"""Bounds printed beside every result (docs/architecture.md, "Scoring").

* pack: the max live bytes (no packing can peak lower);
* map: the **no-fragmentation relaxation** — choose buffers for fast memory so that at
  every start time the chosen live bytes fit the capacity, ignoring address contiguity.
  With ops, the objective is the evaluator's exact concave saving per op
  (``s_t <= headroom_t``, ``s_t <= sum of deltas of fast operands``), otherwise the sum
  of benefits. Solved as a MIP with SciPy's HiGHS; on very large inputs the LP value
  (still an upper bound) is used, and past that the sum of all fitting benefits.

  **Limits and signals.** HiGHS gets the time limit (MIP and LP alike); its presolve does not
  look at the clock and is superlinear in a long row (one op with 200k operands: more than
  10 minutes in ``HPresolve::dualFixing``), so a model with a row longer than
  `DENSE_ROW` is solved without presolve. A model of `ISOLATE_FROM` nonzeros or
  more is solved in a forked child (`mallocgame.runtime.forking.call_forked`) that is killed at
  the time limit (plus `GRACE`): the caller waits in Python, so SIGINT/SIGTERM reach it
  at once. When HiGHS runs out of time the reported kind says what is left: ``mip-dual`` (the
  MIP's dual bound), or ``trivial-timeout`` (the sum of the fitting benefits: no answer came back).

Examples:
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> from mallocgame.hardware.spec import PRESETS
    >>> p = Problem("t", (Buffer("a", 4, 0, 2, 3.0), Buffer("b", 4, 1, 3, 2.0), Buffer("c", 4, 1, 3, 2.0)), capacity=8)
    >>> b = map_upper_bound(p, PRESETS["unit"]); (b.value, b.kind)
    (5.0, 'mip')
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from mallocgame.algorithms.packing_model import add_cumulative, add_no_overlap, add_rectangles
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.problem.intervals import live_profile_of, max_live, maximal_live_csr, maximal_live_sets, maximal_times
from mallocgame.problem.model import Problem
from mallocgame.runtime.forking import call_forked

MIP_NONZEROS = 2_000_000
REDUCE_FROM = 20_000  # unconstrained candidates from which the MIP drops them (fixed fast)
LP_NONZEROS = 20_000_000
DENSE_ROW = 20_000  # a row longer than this: HiGHS runs without presolve (it ignores the clock there)
ISOLATE_FROM = 100_000  # nonzeros from which HiGHS runs in a forked child, killed at the time limit
GRACE = 2.0  # seconds past the time limit before that child is killed (HiGHS's own checks come first)


@dataclass(frozen=True)
class Bound:
    value: float
    kind: str  # "max-live" | "mip" | "mip-dual" | "lp" | "trivial" | "trivial-timeout" | "per-op" | "residency"
    seconds: float = 0.0
    # Every bound computed for the problem, (kind, value), the reported one among them: prefetch mode
    # reports the tighter of the per-op and the residency bound and shows both.
    others: tuple[tuple[str, float], ...] = ()


def pack_lower_bound(problem: Problem, *, time_limit: float = 0.0, seed: int = 0) -> Bound:
    """A lower bound on the peak of any packing: the max live bytes, raised by
    [`critical_window_bound`][mallocgame.bounds.bounds.critical_window_bound] when ``time_limit`` > 0 seconds are given to it."""
    if time_limit > 0:
        return critical_window_bound(problem, time_limit=time_limit, seed=seed)
    return Bound(float(max_live(problem)), "max-live")


WINDOW_LEVELS = (0.99, 0.98, 0.97, 0.96, 0.95, 0.93, 0.9)


def critical_window_bound(problem: Problem, *, time_limit: float = 5.0, seed: int = 0,
                          levels: tuple[float, ...] = WINDOW_LEVELS, max_buffers: int = 1500) -> Bound:
    """Max live raised by packing a critical sub-instance exactly (pack mode, docs/architecture.md "Scoring").

    The minimum peak of any relaxation of the problem is a lower bound on its peak. The
    relaxation kept here: only the maximal moments whose live bytes are at least ``level`` x
    max live (the critical moments) and the buffers live at one of them; time is compressed
    to those moments (buffer ``i`` covers the run of critical moments inside ``[start_i, end_i)``),
    which drops every conflict outside them. Packing that sub-instance is a 2-D strip
    packing with fixed time sides, solved with CP-SAT (NoOverlap2D plus a cumulative on the
    time axis, one worker, seeded); its proven bound (``BestObjectiveBound``) is valid even
    when the search times out. Levels are tried from the top down while the sub-instance has
    at most ``max_buffers`` buffers and time is left; the best bound is kept. Kind
    ``"window"`` when it beats max live, else ``"max-live"``.
    """
    t0 = time.monotonic()
    a = problem.arrays
    live = max_live(problem)
    best, kind = float(live), "max-live"
    if problem.n == 0 or live == 0:
        return Bound(best, kind, time.monotonic() - t0)
    times = maximal_times(a.start, a.end)
    profile_times, profile_bytes = live_profile_of(a.start, a.end, a.size)
    load = profile_bytes[np.searchsorted(profile_times, times, side="right") - 1]  # live bytes at each moment
    tried = -1
    for level in levels:
        moments = times[load >= level * live]
        lo = np.searchsorted(moments, a.start, side="left")
        hi = np.searchsorted(moments, a.end, side="left")
        keep = np.flatnonzero(hi > lo)
        left = time_limit - (time.monotonic() - t0)
        if len(keep) > max_buffers or left <= 0.05:
            break
        if len(moments) <= tried:  # the same moments as the level before
            continue
        tried = len(moments)
        bound = _strip_packing_bound(lo[keep], hi[keep], a.size[keep], left, seed)
        if bound > best:
            best, kind = float(bound), "window"
    return Bound(best, kind, time.monotonic() - t0)


def _strip_packing_bound(start: np.ndarray, end: np.ndarray, size: np.ndarray, time_limit: float, seed: int) -> int:
    """CP-SAT's proven lower bound on the minimum peak of rectangles with fixed ``[start, end)`` sides."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    top = int(size.sum())
    peak = model.NewIntVar(0, top, "peak")
    rect = add_rectangles(model, start, end, size, top=top)
    for i in rect.placed:
        model.Add(rect.offset_expr(i) + int(size[i]) <= peak)
    add_no_overlap(model, rect, formulation="2d")
    add_cumulative(model, rect, peak)
    model.Minimize(peak)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    status = solver.Solve(model)
    if status == cp_model.OPTIMAL:
        return int(round(solver.ObjectiveValue()))
    if status == cp_model.FEASIBLE:
        return int(np.ceil(solver.BestObjectiveBound() - 1e-6))
    return 0


def clique_rows(problem: Problem, candidates: np.ndarray) -> list[np.ndarray]:
    """Buffer index sets (of ``candidates``, int ``[k]``) live together at the maximal moments, one per row.

    Sets of one buffer constrain nothing beyond ``size <= capacity`` and are left out.
    """
    a = problem.arrays
    return [candidates[s] for s in maximal_live_sets(a.start[candidates], a.end[candidates]) if len(s) > 1]


@dataclass(frozen=True)
class Relaxation:
    """The no-fragmentation relaxation over a candidate set.

    ``value`` is an upper bound on the time saved by any placement of the candidates
    (the solver's dual bound, not its incumbent); ``chosen`` (bool ``[n]``) is the best
    integral fast set found (empty when none was), which fits the capacity at every time.
    """

    value: float
    kind: str  # "mip" | "mip-dual" | "lp" | "trivial"
    chosen: np.ndarray
    seconds: float


def no_fragmentation_relaxation(problem: Problem, ev, candidates: np.ndarray, *, time_limit: float = 20.0,
                                mip_nonzeros: int = MIP_NONZEROS, lp_nonzeros: int = LP_NONZEROS,
                                rel_gap: float = 1e-6) -> Relaxation:
    """Choose candidates (bool ``[n]``) for fast memory so that at every maximal moment the chosen
    live bytes fit the capacity, ignoring address contiguity; maximise the exact saving.

    With ops (``ev`` not additive) the objective is the evaluator's concave saving per op:
    ``s_t <= headroom_t`` and ``s_t <= sum of deltas of the fast operands of op t``;
    otherwise the sum of benefits. Solved with SciPy's HiGHS: as a MIP up to
    ``mip_nonzeros`` constraint nonzeros, as an LP (still an upper bound) up to
    ``lp_nonzeros``, and past that the sum of the candidates' benefits ("trivial").
    Rows are in units of the capacity and times in units of the largest headroom, so that
    HiGHS's absolute tolerances (1e-7) are small against every coefficient. The MIP stops at
    relative gap ``rel_gap`` (the value stays a valid bound: it is the dual bound).
    """
    t0 = time.monotonic()
    chosen = np.zeros(problem.n, bool)
    cand = np.flatnonzero(candidates)
    trivial = float(np.maximum(ev.benefits[cand], 0).sum())
    if problem.capacity is None or len(cand) == 0:
        chosen[cand] = True
        return Relaxation(trivial, "trivial", chosen, time.monotonic() - t0)
    idx, row_len, binding = _clique_rows(problem, cand)
    nnz = int(row_len[binding].sum())
    if nnz > lp_nonzeros:
        return Relaxation(trivial, "trivial", chosen, time.monotonic() - t0)
    row_ids = np.repeat(np.arange(len(row_len)), row_len)
    rows = _BindingRows(idx, binding, row_ids, binding[row_ids])
    constrained = _constrained_candidates(ev, len(cand), rows)
    chosen[cand[~constrained]] = True
    fixed = _fixed_saving(problem, ev, cand, constrained, chosen)
    if not constrained.any():
        return Relaxation(min(fixed.const, trivial), "mip", chosen, time.monotonic() - t0)
    program = _relaxation_program(problem, ev, cand[constrained], cand, rows, fixed)
    left = max(time_limit - (time.monotonic() - t0), 0.05)
    kind = "lp" if nnz > mip_nonzeros else "mip"
    res = _solve_program(program, kind, left, rel_gap)
    if res is None:
        return Relaxation(trivial, "trivial-timeout", chosen, time.monotonic() - t0)
    if res.x is not None:
        # Rounding an LP answer down keeps it feasible; a MIP answer is integral already.
        chosen[program.sub] = res.x[:len(program.sub)] > (1 - 1e-6 if kind == "lp" else 0.5)
    return _relaxation_of(res, kind, program.unit, fixed.const, trivial, chosen, time.monotonic() - t0)


def _clique_rows(problem: Problem, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The clique rows over the candidates (``cand``, indices): the CSR entries (candidate positions),
    each row's length, and which rows can bind.

    A row of one buffer constrains nothing beyond size <= capacity, and a row whose buffers fit
    together can never bind; neither binds.
    """
    a = problem.arrays
    _, indptr, idx = maximal_live_csr(a.start[cand], a.end[cand])
    row_len = np.diff(indptr)
    row_bytes = np.add.reduceat(a.size[cand][idx], indptr[:-1]) if len(idx) else np.zeros(0, np.int64)
    binding = (row_len > 1) & (row_bytes > problem.capacity)
    return idx, row_len, binding


@dataclass(frozen=True)
class _BindingRows:
    """The clique rows as entries: each entry's candidate position and row, and which rows bind."""

    idx: np.ndarray  # candidate position of each entry
    binding: np.ndarray  # bool per row
    row_ids: np.ndarray  # row of each entry
    kept: np.ndarray  # bool per entry: its row binds


def _constrained_candidates(ev, n_cand: int, rows: _BindingRows) -> np.ndarray:
    """Which candidates go to the MIP (bool ``[n_cand]``); the others are fixed fast.

    A candidate in no binding row is constrained by nothing: fast is optimal for it (savings
    only grow with the fast set when every delta is >= 0).
    """
    constrained = np.zeros(n_cand, bool)
    constrained[rows.idx[rows.kept]] = True
    if (not ev.additive and (ev.delta < 0).any()) or (rows.binding.any() and (~constrained).sum() < REDUCE_FROM):
        # Fixing them is exact, but HiGHS solves some small models faster whole (docs/results.md,
        # "Deadlines"): reduce only where the fixed columns are many.
        constrained[:] = True
    return constrained


@dataclass(frozen=True)
class _FixedSaving:
    """What the buffers fixed fast save (``const``) and, with ops, what the MIP's op columns need."""

    const: float
    headroom: np.ndarray | None = None  # per op: slow memory time over compute time, at least 0
    fixed: np.ndarray | None = None  # per op: the deltas of its fixed-fast operands
    open_op: np.ndarray | None = None  # per op: a MIP buffer touches it and it has headroom


def _fixed_saving(problem: Problem, ev, cand: np.ndarray, constrained: np.ndarray,
                  chosen: np.ndarray) -> _FixedSaving:
    """The saving of the candidates fixed fast (``chosen``), apart from the ops the MIP still decides."""
    if ev.additive:
        return _FixedSaving(float(np.maximum(ev.benefits[cand[~constrained]], 0).sum()))
    headroom_all = np.maximum(ev.slow_mem - ev.compute, 0.0)
    fixed = np.bincount(ev.op_of, weights=np.where(chosen[ev.buf_of], ev.delta, 0.0), minlength=ev.n_ops)
    in_mip = np.zeros(problem.n, bool)
    in_mip[cand[constrained]] = True
    open_op = np.zeros(ev.n_ops, bool)
    open_op[ev.op_of[in_mip[ev.buf_of]]] = True
    open_op &= headroom_all > 0
    const = float(np.minimum(headroom_all, fixed)[~open_op].sum())
    return _FixedSaving(const, headroom_all, fixed, open_op)


@dataclass(frozen=True)
class _Program:
    """The relaxation as SciPy's ``milp`` takes it (minimise ``c @ x``), in scaled units."""

    c: np.ndarray
    A: object  # scipy.sparse.coo_matrix, rows x variables
    ub: np.ndarray  # row upper bounds
    var_ub: np.ndarray
    integrality: np.ndarray  # 1 for the buffers' columns, 0 for the ops' savings
    row_of_entry: np.ndarray  # the row of each of A's entries, in building order
    sub: np.ndarray  # the buffers of the MIP's columns, in column order
    unit: float  # the objective's unit (the largest benefit or headroom)


def _relaxation_program(problem: Problem, ev, sub: np.ndarray, cand: np.ndarray, rows: _BindingRows,
                        fixed: _FixedSaving) -> _Program:
    """Columns: the buffers ``sub`` (0/1), then with ops each open op's saving; rows: the binding
    cliques in units of the capacity, then with ops each open op's saving against its deltas."""
    from scipy.sparse import coo_matrix

    a = problem.arrays
    col = np.full(problem.n, -1, np.int64)
    col[sub] = np.arange(len(sub))
    new_row = np.cumsum(rows.binding) - 1
    r_idx = [new_row[rows.row_ids[rows.kept]]]
    c_idx = [col[cand[rows.idx[rows.kept]]]]
    vals = [a.size[cand][rows.idx[rows.kept]] / float(problem.capacity)]
    n_keep = int(rows.binding.sum())
    ub = [np.ones(n_keep)]
    nx, n_rows = len(sub), n_keep
    if ev.additive:
        unit = max(float(ev.benefits[sub].max()), 1e-300)
        c = -ev.benefits[sub] / unit
        n_var, integrality, var_ub = nx, np.ones(nx), np.ones(nx)
    else:
        ops = np.flatnonzero(fixed.open_op)
        unit = float(fixed.headroom.max()) if (fixed.headroom > 0).any() else 1.0
        headroom = fixed.headroom / unit
        op_col = np.full(ev.n_ops, -1, np.int64)
        op_col[ops] = nx + np.arange(len(ops))
        touch = fixed.open_op[ev.op_of] & (col[ev.buf_of] >= 0)
        # s_t <= headroom_t (a bound) and s_t - sum of the MIP buffers' deltas <= the fixed buffers' deltas
        r_idx += [n_rows + np.arange(len(ops)), n_rows + np.searchsorted(ops, ev.op_of[touch])]
        c_idx += [op_col[ops], col[ev.buf_of[touch]]]
        vals += [np.ones(len(ops)), -ev.delta[touch] / unit]
        ub += [fixed.fixed[ops] / unit]
        n_rows += len(ops)
        n_var = nx + len(ops)
        c = np.concatenate([np.zeros(nx), -np.ones(len(ops))])
        integrality = np.concatenate([np.ones(nx), np.zeros(len(ops))])
        var_ub = np.concatenate([np.ones(nx), headroom[ops]])
    A = coo_matrix((np.concatenate(vals), (np.concatenate(r_idx), np.concatenate(c_idx))), shape=(n_rows, n_var))
    return _Program(c, A, np.concatenate(ub), var_ub, integrality, np.concatenate(r_idx), sub, unit)


def _solve_program(program: _Program, kind: str, left: float, rel_gap: float):
    """HiGHS on the program as a MIP (``kind`` "mip", to ``rel_gap``) or an LP, within ``left`` seconds.

    In a forked child killed past the time limit when the model is large (``None`` then).
    """
    from scipy.optimize import Bounds, LinearConstraint

    n_rows, n_var = program.A.shape
    constraint = LinearConstraint(program.A.tocsr(), -np.inf, program.ub)
    var_bounds = Bounds(np.zeros(n_var), program.var_ub)
    options = {"time_limit": left}
    integrality = program.integrality
    if kind == "lp":
        integrality = np.zeros(n_var)
    else:
        options["mip_rel_gap"] = rel_gap
    longest = int(np.bincount(program.row_of_entry, minlength=n_rows).max()) if n_rows else 0
    if longest > DENSE_ROW:
        options["presolve"] = False
    args = (program.c, constraint, var_bounds, integrality, options)
    if program.A.nnz < ISOLATE_FROM:
        return _highs(*args)
    try:
        return call_forked(_highs, *args, timeout=left + GRACE)
    except RuntimeError as exc:
        raise RuntimeError(f"the bound's HiGHS failed: {exc}") from None


def _relaxation_of(res, kind: str, unit: float, const: float, trivial: float, chosen: np.ndarray,
                   seconds: float) -> Relaxation:
    """The relaxation HiGHS's answer proves: its optimum, else its dual bound, else the trivial bound."""
    # The dual bound, not the incumbent, is what no placement can exceed.
    dual = getattr(res, "mip_dual_bound", None)
    if res.status == 0 and res.fun is not None:
        best = float(-res.fun) if dual is None or not np.isfinite(dual) else max(float(-res.fun), float(-dual))
        return Relaxation(min(best * unit + const, trivial), kind, chosen, seconds)
    if dual is not None and np.isfinite(dual):
        return Relaxation(min(float(-dual) * unit + const, trivial), "mip-dual", chosen, seconds)
    return Relaxation(trivial, "trivial", chosen, seconds)


def _highs(c, constraint, var_bounds, integrality, options):
    """SciPy's HiGHS on the relaxation (picklable: what a forked child runs)."""
    from scipy.optimize import milp

    return milp(c, constraints=constraint, bounds=var_bounds, integrality=integrality, options=options)


MAP_BOUND_SECONDS = 20.0  # the no-fragmentation relaxation's time where a command computes it (info, compare)


def map_upper_bound(problem: Problem, hardware, *, time_limit: float = MAP_BOUND_SECONDS) -> Bound:
    """Upper bound on the map-mode value (time saved) of any placement: the relaxation over
    every buffer that fits and has a positive benefit."""
    ev = Evaluator.of(problem, hardware)
    a = problem.arrays
    fits = (a.size <= problem.capacity) if problem.capacity is not None else np.ones(problem.n, bool)
    r = no_fragmentation_relaxation(problem, ev, fits & (ev.benefits > 0), time_limit=time_limit)
    return Bound(r.value, r.kind, r.seconds)


def prefetch_op_savings(problem: Problem, ev, *, exact_up_to: int = 10) -> tuple[np.ndarray, bool]:
    """The most any valid prefetch answer can save on each op, seconds ``[T]``, and whether every op's
    value is exact (docs/prefetch.md section 7).

    Per op: ``min(headroom_t, best sum of the deltas of operands whose buffers fit the capacity
    together)``: a knapsack solved exactly by enumeration up to ``exact_up_to`` distinct buffers,
    else by the fractional knapsack (still an upper bound). ``ev`` is the problem's Evaluator.
    """
    capacity = problem.capacity if problem.capacity is not None else np.iinfo(np.int64).max
    sizes = problem.arrays.size
    headroom = np.maximum(ev.slow_mem - ev.compute, 0.0)
    order = np.lexsort((ev.buf_of, ev.op_of))
    op_of, buf_of, delta = ev.op_of[order], ev.buf_of[order], ev.delta[order]
    cuts = np.searchsorted(op_of, np.arange(ev.n_ops + 1))
    saving, exact = np.zeros(ev.n_ops), True
    # Every op whose serving buffers fit together at once, by columns: the sum of their deltas, added in
    # the order of the loop below (bincount adds in input order), so the same floats. The loop does the rest.
    fits = sizes[buf_of] <= capacity
    pair_op, pair_buf = op_of[fits], buf_of[fits]
    pair = np.concatenate(([True], (pair_op[1:] != pair_op[:-1]) | (pair_buf[1:] != pair_buf[:-1]))) \
        if len(pair_op) else np.zeros(0, bool)
    group = np.cumsum(pair) - 1
    per = np.bincount(group, delta[fits], minlength=int(pair.sum()))
    first = np.flatnonzero(pair)
    serve = per > 0
    p_op, p_size = pair_op[first][serve], sizes[pair_buf[first][serve]]
    total = np.bincount(p_op, p_size.astype(np.float64), minlength=ev.n_ops)
    exact_total = np.zeros(ev.n_ops, np.int64)
    small = total < 2.0**61  # int64 sums cannot overflow
    np.add.at(exact_total, p_op[small[p_op]], p_size[small[p_op]])
    easy = small & (exact_total <= capacity) & (headroom > 0)
    best_easy = np.bincount(p_op, per[serve], minlength=ev.n_ops)
    saving[easy] = np.minimum(headroom[easy], best_easy[easy])
    for t in np.flatnonzero((headroom > 0) & ~easy).tolist():
        best, op_exact = _op_knapsack(buf_of[cuts[t]:cuts[t + 1]], delta[cuts[t]:cuts[t + 1]], sizes, capacity,
                                      exact_up_to)
        exact = exact and op_exact
        saving[t] = min(float(headroom[t]), best)
    return saving, exact


def _op_knapsack(bufs: np.ndarray, deltas: np.ndarray, sizes: np.ndarray, capacity: int,
                 exact_up_to: int) -> tuple[float, bool]:
    """One op's knapsack of :func:`prefetch_op_savings`: the best sum of the deltas of its operands' buffers
    (``bufs`` ascending, ``deltas`` theirs) that fit ``capacity`` together, and whether it is exact. By columns
    (an op may have hundreds of thousands of operands), the floats added in the order of an item-by-item walk:
    buffers in ascending order, the fractional knapsack's items by decreasing delta per byte (stable)."""
    fit = sizes[bufs] <= capacity
    bufs, deltas = bufs[fit], deltas[fit]
    if not len(bufs):
        return 0.0, True
    first = np.concatenate(([True], bufs[1:] != bufs[:-1]))
    per = np.bincount(np.cumsum(first) - 1, deltas)  # adds in input order
    serve = per > 0  # serving a buffer that saves nothing never helps
    d, z = per[serve], sizes[bufs[first][serve]].astype(np.int64)
    if not len(d):
        return 0.0, True
    total = int(z.sum()) if float(z.sum(dtype=np.float64)) < 2.0**61 else sum(z.tolist())
    if total <= capacity:
        return float(np.cumsum(d)[-1]), True
    if len(d) <= exact_up_to:
        items = list(zip(d.tolist(), z.tolist()))
        return max(sum(di for di, _ in combo) for k in range(len(items) + 1)
                   for combo in itertools.combinations(items, k) if sum(zi for _, zi in combo) <= capacity), True
    order = np.argsort(-d / z, kind="stable")
    d, z = d[order], z[order]
    whole = int(np.searchsorted(np.cumsum(z), capacity, side="right"))  # the items taken whole (total > capacity)
    best = float(np.cumsum(d[:whole])[-1]) if whole else 0.0
    room = float(capacity - int(z[:whole].sum())) if whole else capacity
    for di, zi in zip(d[whole:].tolist(), z[whole:].tolist()):  # the item taken in part (rounding: maybe more)
        if room <= 0:
            break
        take = min(1.0, room / zi)
        best += di * take
        room -= zi * take
    return best, False


def map_instant_bound(problem: Problem, hardware) -> Bound:
    """An upper bound on the map-mode value of any placement, in milliseconds at any size.

    With ops, the per-op bound (:func:`prefetch_op_savings`): a map answer serves fast, at each op,
    operands that are live together and so fit the capacity together, and saves ``min(headroom,
    their deltas)`` there. Without ops, the sum of the positive benefits of the buffers that fit
    (kind ``"trivial"``). The no-fragmentation relaxation (:func:`map_upper_bound`) is tighter and
    takes seconds: it is the expensive bound (:mod:`mallocgame.bounds.bound_cache` keeps it).
    """
    t0 = time.monotonic()
    ev = Evaluator.of(problem, hardware)
    if ev.additive:
        a = problem.arrays
        fits = (a.size <= problem.capacity) if problem.capacity is not None else np.ones(problem.n, bool)
        return Bound(float(np.maximum(ev.benefits[fits], 0).sum()), "trivial", time.monotonic() - t0)
    saving, exact = prefetch_op_savings(problem, ev)
    return Bound(float(saving.sum()), "per-op" if exact else "per-op-lp", time.monotonic() - t0)


def prefetch_upper_bound(problem: Problem, hardware) -> Bound:
    """Upper bound on the prefetch-mode value of any answer (docs/prefetch.md section 7).

    Every touch may be served fast independently, holding its buffer in fast memory at that
    op only; contiguity, the memory held between touches and during copies, and the copies'
    cost are dropped. The relaxation then splits into one knapsack per op
    (`prefetch_op_savings`).
    """
    t0 = time.monotonic()
    ev = Evaluator.of(problem, hardware)
    if ev.additive:
        return Bound(float(ev.benefits.sum()), "trivial", time.monotonic() - t0)
    saving, exact = prefetch_op_savings(problem, ev)
    return Bound(float(saving.sum()), "per-op" if exact else "per-op-lp", time.monotonic() - t0)
