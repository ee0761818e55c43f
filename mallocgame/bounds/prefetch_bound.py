"""A prefetch-mode bound that charges residency: the memory held between touches and the copies' cost.

The per-op bound ([`mallocgame.bounds.bounds.prefetch_upper_bound`][mallocgame.bounds.bounds.prefetch_upper_bound],
docs/prefetch.md section 7)
lets every touch be served fast on its own, as if a buffer could vanish from fast memory between
two touches and reappear for free. Here it cannot: this is a linear relaxation of the prefetch
game over *residency*, valid for every answer (docs/prefetch.md, "The residency bound"):

- per touch ``(b, k)`` of buffer ``b`` at op ``tau_k``: ``x`` served fast, ``rho`` resident
  (``x <= rho``); every op's resident bytes, plus the bytes *held* through it, fit the capacity;
- a touch that reads ``b`` is resident only if ``b`` was held through the gap before it
  (``h <= rho`` of the previous touch) or *fetched* in that gap (``rho <= h + f``, ``h + f <= 1``);
  a parameter's first touch must be fetched; a pure write is produced in place;
- a fetch is a prefetch of ``size / copy_bw`` seconds, served from the copy budgets of the ops in
  its window (after the previous touch, before the next write of ``b``), or stalled; each op's
  budget is its own time in the answer (all-slow time minus its saving), shared by every fetch
  whose window holds it: the global row and one row per dyadic block of ops bind the fetches whose
  windows lie inside;
- to use the budget of ops inside the gap a fetch must be resident there: at most the largest
  budget per resident op, and its resident op count enters, with the resident and held bytes, a
  memory-time row per dyadic block (``sum over the block of the bytes in fast memory <= capacity x
  its length``);
- an op saves ``min(headroom, sum of the deltas of its operands served fast)``, the evaluator's exact
  concave saving (hardware/evaluator.py); the value is the savings less the stalls.

Each rule drops only constraints of a real answer (evictions and their stalls, the exact copy
service order, the memory of the copies outside their gap), so the LP optimum is an upper bound on
the value of every valid answer; ``tests/test_prefetch_bound.py`` checks it against exhaustive
search on tiny programs. The LP has ``O(touches + ops)`` variables and ``O((touches + ops) log ops)``
non-zeros (the held bytes enter the per-op rows through a running sum).

The value is computed by weak duality from multipliers (`_lagrangian`: any multipliers give a
valid bound, every column being boxed), never taken from a solver's LP value: the per-op knapsacks'
prices (the per-op bound's LP), then each buffer's own rows re-priced by HiGHS under them
(`_price_buffers`, seconds at a million columns), then, up to `DIRECT_VARS` columns, the
whole LP's optimal duals and the MIP (HiGHS, its optimum or dual bound trusted). The least of these
and of the per-op bound is reported, within the time limit (docs/prefetch.md, "The residency bound").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mallocgame.bounds.bounds import Bound, prefetch_upper_bound
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.problem.model import Problem
from mallocgame.runtime.forking import ChildCall


@dataclass(frozen=True)
class ResidencyBound:
    """The bound (seconds saved at most, never above the per-op bound), whether HiGHS proved the
    residency problem's optimum (the MIP's when ``integral``, else the LP's), the LP's size, the time,
    HiGHS's last message and the ``source`` of the value: ``"mip"`` (the MIP's optimum), ``"mip dual
    bound"`` (the MIP cut short), ``"lp"`` (the LP's optimal duals), ``"buffer prices"`` (each buffer's
    own LP under the per-op prices), ``"per-op prices"`` or ``"per-op"`` (the per-op bound was lower)."""

    value: float
    solved: bool
    variables: int
    nonzeros: int
    seconds: float
    message: str = ""
    source: str = ""


class _Lp:
    """A sparse LP in triplets: rows ``A x <= b`` (or ``== b``), bounds and integrality per column."""

    def __init__(self):
        self.lo, self.hi, self.cost, self.integral, self.owner = [], [], [], [], []
        self.rows, self.cols, self.vals = [], [], []
        self.rhs, self.eq = [], []
        self.first_row: dict[str, int] = {}  # where some blocks of rows begin (_per_op_duals reads them)

    def columns(self, n: int, lo, hi, cost=0.0, *, integral: bool = False, owner=-1) -> np.ndarray:
        """``n`` new columns; ``owner``: the buffer each belongs to (-1: none, a column of the ops)."""
        start = len(self.lo)
        for target, value in ((self.lo, lo), (self.hi, hi), (self.cost, cost)):
            target.extend(np.broadcast_to(np.asarray(value, float), (n,)).tolist())
        self.owner.append(np.broadcast_to(np.asarray(owner, np.int64), (n,)))
        self.integral.extend([int(integral)] * n)
        return np.arange(start, start + n, dtype=np.int64)

    def owner_of(self, columns: np.ndarray) -> np.ndarray:
        return np.concatenate(self.owner)[columns]

    def add_rows(self, row_of: np.ndarray, col: np.ndarray, val: np.ndarray, rhs, *, eq: bool = False) -> None:
        """Rows ``0..len(rhs)-1`` of this block hold the triplets ``(row_of, col, val)``."""
        if not len(row_of) == len(col) == len(val):
            raise ValueError(f"rows, columns and values differ in length: {len(row_of)}, {len(col)}, {len(val)}")
        rhs = np.atleast_1d(np.asarray(rhs, float))
        self.rows.append(np.asarray(row_of, np.int64) + len(self.rhs))
        self.cols.append(np.asarray(col, np.int64))
        self.vals.append(np.asarray(val, float))
        self.rhs.extend(rhs.tolist())
        self.eq.extend([eq] * len(rhs))

    def each(self, terms: Sequence[tuple[np.ndarray, object]], rhs, *, eq: bool = False) -> None:
        """One row per index ``i``: ``sum over terms of coef[i] * column[i] <= rhs[i]`` (each term's
        columns are one per row; a coefficient may be a number)."""
        n = len(terms[0][0])
        rows = np.arange(n)
        self.add_rows(np.concatenate([rows] * len(terms)), np.concatenate([c for c, _ in terms]),
                      np.concatenate([np.broadcast_to(np.asarray(v, float), (n,)) for _, v in terms]),
                      np.broadcast_to(np.asarray(rhs, float), (n,)), eq=eq)

    def arrays(self) -> "_Arrays":
        from scipy.sparse import csr_matrix

        rows, cols, vals = (np.concatenate(v) for v in (self.rows, self.cols, self.vals))
        a = csr_matrix((vals, (rows, cols)), shape=(len(self.rhs), len(self.lo)))
        return _Arrays(a, np.asarray(self.rhs, float), np.asarray(self.eq, bool), np.asarray(self.lo, float),
                       np.asarray(self.hi, float), np.asarray(self.cost, float), np.asarray(self.integral, np.int8),
                       np.concatenate(self.owner), dict(self.first_row))


@dataclass(frozen=True)
class _Arrays:
    """The LP ``min cost x, a[~eq] x <= rhs[~eq], a[eq] x = rhs[eq], lo <= x <= hi`` as arrays."""

    a: object  # scipy.sparse.csr_matrix
    rhs: np.ndarray
    eq: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    cost: np.ndarray
    integral: np.ndarray
    owner: np.ndarray       # per column, its buffer (-1: a column of the ops)
    first_row: dict         # where the blocks of rows _per_op_duals reads begin


def _lagrangian(lp: _Arrays, y: np.ndarray) -> float:
    """A lower bound on ``min cost x`` over the LP (so over its MIP too) from ANY multipliers ``y``, one per
    row (weak duality): with ``y <= 0`` on the ``<=`` rows (clipped so here) and ``y`` free on the ``=``
    rows, every feasible ``x`` has ``y (a x) >= y rhs``, so ``cost x = r x + y (a x) >= y rhs + sum_j
    min(r_j lo_j, r_j hi_j)`` with ``r = cost - a^T y``. Every column must be boxed (finite ``lo``, ``hi``).
    Less a margin for the rounding of the sums and of ``r``: 1e-11 of the magnitudes summed (float64's
    error is ~1e-16 per operation, ~1e-15 relative for columns of ten non-zeros and sums of 1e6 terms)."""
    if not (np.isfinite(lp.lo).all() and np.isfinite(lp.hi).all()):
        raise ValueError("the Lagrangian bound needs every column boxed")
    y = np.nan_to_num(np.asarray(y, float), nan=0.0, posinf=0.0, neginf=0.0)
    y = np.where(lp.eq, y, np.minimum(y, 0.0))
    r = lp.cost - lp.a.T @ y
    box = np.minimum(r * lp.lo, r * lp.hi)
    size = np.abs(lp.lo) + np.abs(lp.hi)
    magnitude = np.abs(lp.rhs * y).sum() + ((np.abs(lp.cost) + abs(lp.a).T @ np.abs(y)) * size).sum()
    return float((lp.rhs * y).sum() + box.sum() - 1e-11 * magnitude)


def _per_op_duals(prog: _Program, first_row: dict, n_rows: int) -> np.ndarray:
    """Multipliers under which :func:`_lagrangian` is the per-op bound's fractional knapsacks (a start no
    worse than the per-op LP): per op, the knapsack's critical ratio ``lam`` (value per capacity) on its
    capacity row and ``sigma = 1`` on its saving row, or ``sigma = lam = 0`` where the headroom is less
    than that knapsack; ``sigma x delta`` on each ``x <= rho`` row (so ``x``'s reduced cost is 0). Every
    other row gets 0: the holds, fetches and evictions cost nothing, a held byte ``lam``."""
    T = prog.T
    unit = prog.cap if prog.cap > 0 else 1.0
    items = np.flatnonzero(prog.fits & (prog.delta > 0))
    weight, value, op = prog.size[items] / unit, prog.delta[items], prog.op[items]
    ratio = np.divide(value, weight, out=np.full(len(items), np.inf), where=weight > 0)
    order = np.lexsort((-ratio, op))
    weight, value, op, ratio = weight[order], value[order], op[order], ratio[order]
    used = np.cumsum(weight)
    start = np.searchsorted(op, np.arange(T))
    used -= np.concatenate([[0.0], used])[start][op]  # the weight up to and with each item, within its op
    lam = np.zeros(T)
    over = np.flatnonzero(used > prog.cap / unit)
    first_over = over[np.unique(op[over], return_index=True)[1]]
    lam[op[first_over]] = ratio[first_over]
    knapsack = np.bincount(op, np.maximum(value - lam[op] * weight, 0.0), minlength=T) + lam * (prog.cap / unit)
    sigma = (knapsack <= prog.headroom).astype(float)
    lam *= sigma
    y = np.zeros(n_rows)
    y[first_row["saving"] + np.arange(T)] = -sigma
    y[first_row["capacity"] + np.arange(T)] = -lam
    y[first_row["served"] + items] = -sigma[prog.op[items]] * prog.delta[items]
    return y


def _local_rows(lp: _Arrays) -> tuple[np.ndarray, np.ndarray]:
    """The rows all of whose columns belong to one buffer, and that buffer (the others couple buffers)."""
    a = lp.a
    owner = lp.owner[a.indices]
    nonempty = np.diff(a.indptr) > 0
    starts = a.indptr[:-1][nonempty]
    lo = np.full(a.shape[0], -1, np.int64)
    hi = np.full(a.shape[0], -2, np.int64)
    lo[nonempty] = np.minimum.reduceat(owner, starts)
    hi[nonempty] = np.maximum.reduceat(owner, starts)
    local = np.flatnonzero((lo == hi) & (lo >= 0))
    return local, lo[local]


@dataclass(frozen=True)
class _Split:
    """The LP's rows that couple buffers (``coupling``) and each buffer's own rows, and the matrix of the
    latter permuted block diagonal, buffer by buffer: buffer ``b`` owns rows ``local[row_cut[b]:row_cut[b+1]]``
    and columns ``columns[col_cut[b]:col_cut[b+1]]``."""

    coupling: np.ndarray
    local: np.ndarray
    columns: np.ndarray
    sub: object
    row_cut: np.ndarray
    col_cut: np.ndarray


def _split(lp: _Arrays) -> _Split:
    local, owner = _local_rows(lp)
    order = np.argsort(owner, kind="stable")
    local, owner = local[order], owner[order]
    columns = np.argsort(lp.owner, kind="stable")
    col_owner = lp.owner[columns]
    columns, col_owner = columns[col_owner >= 0], col_owner[col_owner >= 0]
    n_own = int(col_owner.max()) + 1 if len(col_owner) else 0
    coupling = np.ones(len(lp.rhs), bool)
    coupling[local] = False
    return _Split(coupling, local, columns, lp.a[local][:, columns].tocsr(),
                  np.searchsorted(owner, np.arange(n_own + 1)), np.searchsorted(col_owner, np.arange(n_own + 1)))


def _held_running_sums(y: np.ndarray, n_ops: int, first_row: dict) -> np.ndarray:
    """``y`` with the multipliers of the held bytes' running sums set so that a held byte costs the
    capacity prices of the ops it is held through (the held fractions' reduced costs are then 0)."""
    y = y.copy()
    mu = -y[first_row["capacity"] + np.arange(n_ops)]
    y[first_row["running"] + np.arange(n_ops)] = np.cumsum(mu[::-1])[::-1]
    return y


def _price_buffers(lp: _Arrays, split: _Split, y: np.ndarray, deadline: float, chunk: int = 20_000) -> np.ndarray:
    """``y`` with the multipliers of every buffer's own rows replaced by the duals of that buffer's LP under
    the prices of the coupling rows (HiGHS, on groups of about ``chunk`` columns, until ``deadline``; a
    group not solved keeps ``y``'s). Given the coupling multipliers the Lagrangian splits per buffer, so
    each group's duals are its best."""
    y = y.copy()
    coupling = np.where(split.coupling, y, 0.0)
    reduced = lp.cost - lp.a.T @ coupling
    n_own, b = len(split.col_cut) - 1, 0
    while b < n_own and time.monotonic() < deadline:
        e = int(np.searchsorted(split.col_cut, split.col_cut[b] + chunk, side="right"))
        e = min(max(e - 1, b + 1), n_own)
        rows = split.local[split.row_cut[b]:split.row_cut[e]]
        c0, c1 = split.col_cut[b], split.col_cut[e]
        cols = split.columns[c0:c1]
        part = _Arrays(split.sub[split.row_cut[b]:split.row_cut[e], c0:c1], lp.rhs[rows], lp.eq[rows], lp.lo[cols],
                       lp.hi[cols], reduced[cols], lp.integral[cols], None, {})
        res = _highs(part, deadline - time.monotonic(), integral=False)
        if res.status == 0:
            y[rows] = _highs_duals(part, res)
        b = e
    return y


def _highs(lp: _Arrays, time_limit: float, *, integral: bool):
    """``scipy.optimize.linprog`` (HiGHS) on the LP, or its MIP, within ``time_limit`` seconds."""
    from scipy.optimize import linprog

    eq = lp.eq
    return linprog(lp.cost, A_ub=lp.a[~eq], b_ub=lp.rhs[~eq], A_eq=lp.a[eq] if eq.any() else None,
                   b_eq=lp.rhs[eq] if eq.any() else None, bounds=np.column_stack([lp.lo, lp.hi]), method="highs",
                   integrality=lp.integral if integral else None,
                   options={"time_limit": max(float(time_limit), 0.05), "presolve": True})


def _highs_duals(lp: _Arrays, res) -> np.ndarray:
    """HiGHS's row duals in the rows' order (scipy splits them into the ``<=`` and ``=`` rows)."""
    y = np.zeros(len(lp.rhs))
    y[~lp.eq] = res.ineqlin.marginals
    if lp.eq.any():
        y[lp.eq] = res.eqlin.marginals
    return y


@dataclass(frozen=True)
class _Program:
    """The per-touch and per-op facts the LP reads (touches in buffer-then-op order; times scaled)."""

    T: int
    cap: float
    scale: float            # LP seconds per second: millionths of the all-slow program
    buf: np.ndarray         # [touches] the touch's buffer
    op: np.ndarray          # [touches] its op
    first: np.ndarray       # [touches] first touch of its buffer
    last: np.ndarray        # [touches] last touch of its buffer
    reads: np.ndarray       # [touches]
    writes: np.ndarray      # [touches]
    fits: np.ndarray        # [touches] the buffer fits the capacity
    size: np.ndarray        # [touches] the buffer's bytes
    output: np.ndarray      # [touches] the buffer is an output
    buffer_end: np.ndarray  # [touches] the buffer's live range's end (at most T)
    next_write: np.ndarray  # [touches] the next write of the buffer at or after the touch (T: none)
    last_write: np.ndarray  # [touches] the last write at or before the touch (-1: none)
    delta: np.ndarray       # [touches] the seconds the touch saves its op when fast (its operands summed)
    headroom: np.ndarray    # [T] the most an op can save
    cum_time: np.ndarray    # [T + 1] prefix sums of the ops' all-slow times
    copy_bw: float

    def budget(self, lo, hi) -> np.ndarray:
        """The all-slow time of the ops ``[lo, hi)`` (an upper bound on their copy budgets)."""
        return self.cum_time[np.asarray(hi)] - self.cum_time[np.asarray(lo)]

    def copy_seconds(self, touches: np.ndarray) -> np.ndarray:
        return self.size[touches] / self.copy_bw * self.scale


def _program(problem: Problem, hardware) -> _Program:
    ev = Evaluator.of(problem, hardware)
    touches, T = problem.touches, ev.n_ops
    counts = np.diff(touches.ptr)
    buf = np.repeat(np.arange(problem.n, dtype=np.int64), counts)
    op = touches.ops.astype(np.int64)
    n_touch = len(op)
    first, last = np.zeros(n_touch, bool), np.zeros(n_touch, bool)
    first[touches.ptr[:-1][counts > 0]] = True
    last[touches.ptr[1:][counts > 0] - 1] = True
    writes = touches.writes.astype(bool)
    cap = float(problem.capacity) if problem.capacity is not None else float(problem.arrays.size.sum())
    size = problem.arrays.size.astype(float)[buf]
    # Seconds are scaled to millionths of the all-slow program: HiGHS's tolerances are absolute, and a
    # whole program of microseconds would sit inside them.
    slow_time = np.maximum(ev.compute, ev.slow_mem) + ev.fixed
    scale = 1e6 / max(float(slow_time.sum()), 1e-300)
    width = T + 1
    operand_touch = np.searchsorted(buf * width + op, ev.buf_of * width + ev.op_of)
    next_write, last_write = np.full(n_touch, T, np.int64), np.full(n_touch, -1, np.int64)
    for b in np.flatnonzero(counts).tolist():  # running min backwards / max forwards, per buffer
        lo, hi = touches.ptr[b], touches.ptr[b + 1]
        w = writes[lo:hi]
        next_write[lo:hi] = np.minimum.accumulate(np.where(w, op[lo:hi], T)[::-1])[::-1]
        last_write[lo:hi] = np.maximum.accumulate(np.where(w, op[lo:hi], -1))
    output = np.array([b.kind == "output" for b in problem.buffers], bool)[buf]
    return _Program(
        T=T, cap=cap, scale=scale, buf=buf, op=op, first=first, last=last, reads=touches.reads.astype(bool),
        writes=writes, fits=size <= cap, size=size, output=output,
        buffer_end=np.minimum(problem.arrays.end.astype(np.int64)[buf], T), next_write=next_write,
        last_write=last_write, delta=np.bincount(operand_touch, ev.delta, minlength=n_touch) * scale,
        headroom=np.maximum(ev.slow_mem - ev.compute, 0.0) * scale,
        cum_time=np.concatenate([[0.0], np.cumsum(slow_time * scale)]), copy_bw=float(hardware.copy_bw))


@dataclass
class _Residency:
    """Bytes some columns hold in fast memory over op ranges ``[begin, end)``: they enter the running sum."""

    begin: list = None
    end: list = None
    amount: list = None
    column: list = None

    def __post_init__(self):
        self.begin, self.end, self.amount, self.column = [], [], [], []

    def add(self, begin, end, amount, column) -> None:
        for target, value in ((self.begin, begin), (self.end, end), (self.amount, amount), (self.column, column)):
            target.append(np.asarray(value))


def _add_touches(lp: _Lp, prog: _Program) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns ``x`` (served), ``rho`` (resident) per touch and ``s`` (saving) per op, and their rows:
    ``x <= rho``; resident at a write means served there (a write in a prefetch's occupancy before its
    start would fall inside its copy window); ``s_t <= sum of the deltas served at t``."""
    n_touch, T = len(prog.op), prog.T
    room = np.where(prog.fits, 1.0, 0.0)
    x = lp.columns(n_touch, 0.0, room, integral=True, owner=prog.buf)
    rho = lp.columns(n_touch, 0.0, room, integral=True, owner=prog.buf)
    s = lp.columns(T, 0.0, prog.headroom, -1.0)
    lp.first_row["served"] = len(lp.rhs)
    lp.each([(x, 1.0), (rho, -1.0)], 0.0)
    written = np.flatnonzero(prog.writes & prog.fits)
    lp.each([(rho[written], 1.0), (x[written], -1.0)], 0.0)
    t = np.arange(T)
    lp.first_row["saving"] = len(lp.rhs)
    lp.add_rows(np.concatenate([t, prog.op]), np.concatenate([s, x]), np.concatenate([np.ones(T), -prog.delta]),
                np.zeros(T))
    return x, rho, s


def _add_fetches(lp: _Lp, prog: _Program, x, rho, residency: _Residency):
    """Holds and fetches of the touches that read; returns ``(hold_of, windows)``: each touch's hold
    column (-1: none) and the fetches' ``(lo, hi, q_in, q_ext)`` budget windows.

    A reading touch is resident only if held through the gap before it (``h <= rho`` of the previous
    touch) or fetched in it (``rho <= h + f``, ``h + f <= 1``; a first touch cannot be held). A fetch's
    copy (``f x size / copy_bw``) is served by ``q_in`` (ops of the gap, where it must be resident),
    ``q_ext`` (ops from the touch to the next write, only when not served at the touch) or stalls.
    """
    at = np.flatnonzero(prog.reads & prog.fits)
    n = len(at)
    lo = np.where(prog.first[at], 0, prog.op[np.maximum(at - 1, 0)] + 1)  # the gap's interior [lo, hi)
    hi = prog.op[at]
    win_hi = np.maximum(prog.next_write[at], hi)
    ext = prog.budget(hi, win_hi)
    f = lp.columns(n, 0.0, 1.0, integral=True, owner=prog.buf[at])
    q_in = lp.columns(n, 0.0, prog.budget(lo, hi), owner=prog.buf[at])
    q_ext = lp.columns(n, 0.0, ext, owner=prog.buf[at])
    # More stall never helps an answer: a finite box, as _lagrangian needs, that keeps the optimum.
    stall = lp.columns(n, 0.0, prog.copy_seconds(at), 1.0, owner=prog.buf[at])
    held = ~prog.first[at]
    h = lp.columns(int(held.sum()), 0.0, 1.0, integral=True, owner=prog.buf[at[held]])
    hold_of = np.full(len(prog.op), -1, np.int64)
    hold_of[at[held]] = h
    lp.add_rows(np.concatenate([np.arange(n), np.arange(n), np.flatnonzero(held)]), np.concatenate([rho[at], f, h]),
                np.concatenate([np.ones(n), -np.ones(n), -np.ones(len(h))]), np.zeros(n))
    lp.each([(h, 1.0), (rho[at[held] - 1], -1.0)], 0.0)
    lp.each([(h, 1.0), (f[held], 1.0)], 1.0)
    lp.each([(q_ext, 1.0), (f, -ext)], 0.0)
    lp.each([(q_ext, 1.0), (x[at], ext)], ext)
    lp.each([(f, prog.copy_seconds(at)), (q_in, -1.0), (q_ext, -1.0), (stall, -1.0)], 0.0)
    # The fetch is resident over a suffix of its gap (_add_brackets).
    residency.add(lo[held], hi[held], prog.size[at[held]], h)
    _add_brackets(lp, prog, lo, hi, f, q_in, prog.size[at], residency, suffix=True)
    return hold_of, (lo, win_hi, q_in, q_ext)


def _add_brackets(lp: _Lp, prog: _Program, lo, hi, copy, take, sizes, residency: _Residency, *, suffix: bool):
    """A copy's residency inside its gap ``[lo, hi)``: a suffix of it (a fetch) or a prefix (an eviction),
    of some length ``l`` in a bracket ``[S_j, S_{j+1})`` of lengths (``S = 0, 1, 2, 4, ..., the gap's
    length``, :func:`_brackets`) chosen with weights summing to the copy's column ``copy``. Memory is
    charged over ``S_j`` ops (no more than the answer holds); the budget ``take`` drawn inside the gap is
    at most that of ``S_{j+1} - 1`` ops (no less than it can draw)."""
    n = len(lo)
    which, memory, budget = _brackets(hi - lo)
    weight = lp.columns(len(which), 0.0, 1.0, integral=True, owner=lp.owner_of(copy)[which])
    lp.add_rows(np.concatenate([which, np.arange(n)]), np.concatenate([weight, copy]),
                np.concatenate([np.ones(len(weight)), -np.ones(n)]), np.zeros(n), eq=True)
    edge = hi[which] if suffix else lo[which]
    b_lo, b_hi = (edge - budget, edge) if suffix else (edge, edge + budget)
    lp.add_rows(np.concatenate([np.arange(n), which]), np.concatenate([take, weight]),
                np.concatenate([np.ones(n), -prog.budget(b_lo, b_hi)]), np.zeros(n))
    r_lo, r_hi = (edge - memory, edge) if suffix else (edge, edge + memory)
    residency.add(r_lo, r_hi, sizes[which], weight)


def _add_evictions(lp: _Lp, prog: _Program, x, hold_of, residency: _Residency):
    """Evictions of fast-written values needed later; returns their ``(lo, hi, q_pre, q_gap)`` windows.

    ``dirty`` follows a value written fast through the holds (``dirty >= x`` at a write, ``dirty_k >=
    dirty_{k-1} + h_k - 1`` at a read held into). It must be evicted (``e >= dirty - h`` of the next
    touch) when the next touch reads it, or after the last touch of an output. The eviction's interval
    stays resident over a prefix of the gap after the touch (brackets as for fetches) and may also take
    the budgets of the ops since the last write, where it is resident anyway.
    """
    n_touch = len(prog.op)
    dirty = lp.columns(n_touch, 0.0, np.where(prog.fits, 1.0, 0.0), owner=prog.buf)
    written = np.flatnonzero(prog.writes & prog.fits)
    lp.each([(x[written], 1.0), (dirty[written], -1.0)], 0.0)
    carried = np.flatnonzero((hold_of >= 0) & ~prog.writes)
    lp.each([(dirty[carried - 1], 1.0), (hold_of[carried], 1.0), (dirty[carried], -1.0)], 1.0)
    next_reads = np.zeros(n_touch, bool)
    next_reads[:-1] = ~prog.last[:-1] & prog.reads[1:]
    at = np.flatnonzero(prog.fits & (next_reads | (prog.last & prog.output)))
    n = len(at)
    nxt = np.minimum(at + 1, n_touch - 1)
    lo = prog.op[at] + 1
    hi = np.where(prog.last[at], np.maximum(prog.buffer_end[at], lo), prog.op[nxt])
    since = prog.last_write[at]
    e = lp.columns(n, 0.0, 1.0, owner=prog.buf[at])
    q_pre = lp.columns(n, 0.0, np.where(since >= 0, prog.budget(np.maximum(since, 0) + 1, prog.op[at] + 1), 0.0),
                       owner=prog.buf[at])
    q_gap = lp.columns(n, 0.0, prog.budget(lo, hi), owner=prog.buf[at])
    stall = lp.columns(n, 0.0, prog.copy_seconds(at), 1.0, owner=prog.buf[at])
    next_hold = np.where(prog.last[at], -1, hold_of[nxt])
    has = next_hold >= 0
    lp.add_rows(np.concatenate([np.arange(n), np.arange(n), np.flatnonzero(has)]),
                np.concatenate([dirty[at], e, next_hold[has]]),
                np.concatenate([np.ones(n), -np.ones(n), -np.ones(int(has.sum()))]), np.zeros(n))
    _add_brackets(lp, prog, lo, hi, e, q_gap, prog.size[at], residency, suffix=False)
    lp.each([(e, prog.copy_seconds(at)), (q_pre, -1.0), (q_gap, -1.0), (stall, -1.0)], 0.0)
    return np.maximum(since, -1) + 1, hi, q_pre, q_gap


def _add_capacity(lp: _Lp, prog: _Program, rho, residency: _Residency) -> None:
    """Every op's resident touches plus the bytes held through it fit the capacity. The held bytes are a
    running sum: ``held_t - held_{t-1}`` = what begins at ``t`` - what ended at ``t - 1``. Bytes are in
    units of the capacity (so the held bytes lie in ``[0, 1]``, and the rows are of the others' scale)."""
    T = prog.T
    unit = prog.cap if prog.cap > 0 else 1.0
    held = lp.columns(T, 0.0, 1.0)
    begin, end = np.concatenate(residency.begin), np.concatenate(residency.end)
    amount, column = np.concatenate(residency.amount) / unit, np.concatenate(residency.column)
    live = end > begin
    inside = live & (end < T)
    t = np.arange(T)
    lp.first_row["running"] = len(lp.rhs)
    lp.add_rows(np.concatenate([t, t[1:], begin[live], end[inside]]),
                np.concatenate([held, held[:-1], column[live], column[inside]]),
                np.concatenate([np.ones(T), -np.ones(T - 1), -amount[live], amount[inside]]), np.zeros(T), eq=True)
    lp.first_row["capacity"] = len(lp.rhs)
    lp.add_rows(np.concatenate([prog.op, t]), np.concatenate([rho, held]),
                np.concatenate([prog.size / unit, np.ones(T)]), np.full(T, prog.cap / unit))


def _add_budgets(lp: _Lp, prog: _Program, s, windows) -> None:
    """Per dyadic block of ops (the whole program among them), for one kind of copy: the copies whose
    windows lie inside take at most the block's op times in the answer (all-slow time - saving)."""
    T = prog.T
    lo, hi, *takes = windows
    blocks = _dyadic_blocks(T)
    b_lo = np.array([a for a, _ in blocks], np.int64)
    b_hi = np.array([e for _, e in blocks], np.int64)
    op_item, op_block = _containing_blocks(np.arange(T), np.arange(T) + 1, T)
    item, block = _containing_blocks(lo, hi, T)
    # A block's row may leave out copies that lie inside (each q >= 0, so a partial sum is bounded by
    # the whole): each copy enters its smallest block and the whole program only, which keeps the
    # non-zeros near one per copy instead of one per level.
    keep = _smallest_and_root(item, block, len(blocks))
    item, block = item[keep], block[keep]
    lp.add_rows(np.concatenate([block] * len(takes) + [op_block]),
                np.concatenate([q[item] for q in takes] + [s[op_item]]),
                np.ones(len(takes) * len(item) + len(op_item)), prog.budget(b_lo, b_hi))


# Columns above which HiGHS is not given the whole LP (nor the MIP): at that size its interior point method takes
# minutes where the buffer prices take seconds (docs/results.md, "The residency bound's reach").
DIRECT_VARS = 300_000


def _build(problem: Problem, hardware) -> tuple[_Program, _Lp]:
    """The program's facts and the residency LP over them."""
    prog = _program(problem, hardware)
    lp, residency = _Lp(), _Residency()
    x, rho, s = _add_touches(lp, prog)
    hold_of, fetch_windows = _add_fetches(lp, prog, x, rho, residency)
    evict_windows = _add_evictions(lp, prog, x, hold_of, residency)
    _add_capacity(lp, prog, rho, residency)
    _add_budgets(lp, prog, s, fetch_windows)
    _add_budgets(lp, prog, s, evict_windows)
    return prog, lp


def residency_bound(problem: Problem, hardware, *, time_limit: float = 20.0, integral: bool = True) -> ResidencyBound:
    """The residency relaxation's upper bound on the prefetch-mode value (seconds) of any valid answer.

    ``integral``: solve the MIP (HiGHS's dual bound when cut short), else its LP relaxation.

    Examples:
        >>> from mallocgame.hardware.spec import PRESETS
        >>> from mallocgame.inputs.load import load_problem
        >>> problem = load_problem("example:layered150", mode="prefetch")
        >>> bound = residency_bound(problem, PRESETS["tpuv4i"], time_limit=30)
        >>> bound.solved and bound.value > 0
        True
    """
    t0 = time.monotonic()
    deadline = t0 + time_limit
    prog, lp = _build(problem, hardware)
    a = lp.arrays()
    y = _held_running_sums(_per_op_duals(prog, a.first_row, len(a.rhs)), prog.T, a.first_row)
    found = [(-_lagrangian(a, y), "per-op prices"),
             (-_lagrangian(a, _price_buffers(a, _split(a), y, deadline)), "buffer prices")]
    solved, message, small = False, "", len(a.lo) <= DIRECT_VARS
    if small and time.monotonic() < deadline:
        res = _highs(a, deadline - time.monotonic(), integral=False)
        message = str(res.message)
        if res.status == 0:
            found.append((-_lagrangian(a, _highs_duals(a, res)), "lp"))
            solved = not integral
    if integral and small and time.monotonic() < deadline:
        res = _highs(a, deadline - time.monotonic(), integral=True)
        message = str(res.message)
        # A MIP cut short may still have a valid dual bound (HiGHS's mip_dual_bound; trusted, as its optimum is).
        dual = getattr(res, "mip_dual_bound", None)
        dual = float(dual) if dual is not None and np.isfinite(dual) else None
        if res.status == 0:
            found.append((max(-dual if dual is not None else -float(res.fun), -float(res.fun)), "mip"))
            solved = True
        elif dual is not None:
            found.append((-dual, "mip dual bound"))
    value, source = min(found)
    value /= prog.scale
    per_op = prefetch_upper_bound(problem, hardware).value
    if per_op < value:
        value, source = per_op, "per-op"
    return ResidencyBound(value, solved, len(a.lo), int(a.a.nnz), time.monotonic() - t0, message, source)


def _smallest_and_root(item: np.ndarray, block: np.ndarray, n_blocks: int) -> np.ndarray:
    """Of the pairs of :func:`_containing_blocks` (level by level), each item's first (smallest) block and
    the root block (the last)."""
    first = np.zeros(len(item), bool)
    _, where = np.unique(item, return_index=True)
    first[where] = True
    return first | (block == n_blocks - 1)


# Touches from which the residency bound is not tried where a command reports it: the xla suite's largest
# programs are bounded in seconds by the buffer prices (docs/results.md, ``prefetch_bound.md``); past this the
# LP's memory (about linear in the touches) stands in the way.
RESIDENCY_TOUCHES = 200_000
GRACE = 2.0  # seconds past its limit before the bound's child is killed (HiGHS's own checks come first)
# The most the residency bound is given where a command computes it (info, compare: once per problem,
# then kept in the bound cache, mallocgame.bounds.bound_cache).
RESIDENCY_SECONDS = 30.0


def start_residency(problem: Problem, hardware, *, seconds: float):
    """The residency bound started in a killable child (:class:`mallocgame.runtime.forking.ChildCall`) with
    ``seconds`` of HiGHS time, or ``None`` where it is not tried (no ops, above :data:`RESIDENCY_TOUCHES`
    touches, no time)."""
    if not problem.has_ops or len(problem.touches.ops) > RESIDENCY_TOUCHES or seconds <= 0:
        return None
    return ChildCall(residency_bound, problem, hardware, time_limit=seconds)


def tightened(problem: Problem, hardware, per_op, *, seconds: float):
    """The tighter of ``per_op`` (a :class:`~mallocgame.bounds.bounds.Bound`) and the residency bound given
    ``seconds`` in a killable child (:func:`start_residency`), with both in ``others``.

    A failure or a timeout leaves the per-op bound, which holds whatever happens.
    """
    t0 = time.monotonic()
    others = [("per-op", per_op.value)]
    pending = start_residency(problem, hardware, seconds=seconds)
    res = None
    if pending is not None:
        try:
            res = pending.result(timeout=seconds + GRACE)
        except Exception:  # past its limit + GRACE (TimeoutError), died or raised: the per-op bound holds
            res = None
    if res is None or not np.isfinite(res.value):
        return Bound(per_op.value, per_op.kind, per_op.seconds + time.monotonic() - t0, tuple(others))
    others.append(("residency", res.value))
    best = min(others, key=lambda kv: kv[1])
    return Bound(best[1], best[0], per_op.seconds + time.monotonic() - t0, tuple(others))


def _dyadic_blocks(n_ops: int) -> list[tuple[int, int]]:
    """Every block ``[a, a + 2**l)`` (clipped to ``n_ops``) at every level ``l``, the whole program last."""
    out, width = [], 1
    while width < 2 * max(n_ops, 1):
        out += [(a, min(a + width, n_ops)) for a in range(0, n_ops, width)]
        width *= 2
    return out


def _containing_blocks(lo: np.ndarray, hi: np.ndarray, n_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(item, block)``: the dyadic blocks (indices into :func:`_dyadic_blocks`) holding ``[lo, hi)``,
    level by level (each level's items in order). At level ``l`` the block is ``lo >> l`` when ``(hi - 1) >> l``
    is the same one; an empty range lies in no block."""
    items, blocks, offset, width, level = [], [], 0, 1, 0
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    idx = np.arange(len(lo))
    while width < 2 * max(n_ops, 1):
        ok = (hi > lo) & ((lo >> level) == ((hi - 1) >> level))
        items.append(idx[ok])
        blocks.append(offset + (lo[ok] >> level))
        offset += -(-n_ops // width)
        width *= 2
        level += 1
    return np.concatenate(items), np.concatenate(blocks)


def _brackets(length: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The residency brackets of each gap of ``length[g]`` interior ops: ``(gap, memory, budget)`` triplets.

    Lengths ``S = 0, 1, 2, 4, ...`` below the gap's length, and the length itself; bracket ``j`` covers
    real suffixes ``S_j <= l < S_{j+1}``: charged memory ``S_j`` ops, budget of ``S_{j+1} - 1`` ops (the last
    bracket, ``l`` = the whole gap, is charged and paid the whole gap).

    >>> _brackets(np.array([0, 3]))
    (array([0, 1, 1, 1, 1]), array([0, 0, 1, 2, 3]), array([0, 0, 1, 2, 3]))
    """
    length = np.asarray(length, np.int64)
    top = int(length.max()) if len(length) else 0
    powers = [0] + [1 << i for i in range(max(top, 1).bit_length())]
    gaps, mem = [], []
    for p in powers:
        sel = np.flatnonzero(length > p) if p > 0 else np.arange(len(length))
        gaps.append(sel)
        mem.append(np.full(len(sel), p, np.int64))
    whole = np.flatnonzero(length > 0)
    gaps.append(whole)
    mem.append(length[whole])
    gap = np.concatenate(gaps)
    memory = np.concatenate(mem)
    order = np.lexsort((memory, gap))
    gap, memory = gap[order], memory[order]
    budget = memory.copy()
    nxt = np.flatnonzero(gap[1:] == gap[:-1])  # every bracket followed by one of the same gap
    budget[nxt] = memory[nxt + 1] - 1
    return gap, memory, budget
