"""A prefetch-mode bound that charges residency: the memory held between touches and the copies' cost.

The per-op bound (:func:`mallocgame.bounds.prefetch_upper_bound`, docs/prefetch.md section 7)
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
non-zeros (the held bytes enter the per-op rows through a running sum), solved by HiGHS
(``scipy.optimize.linprog``) within a time limit; where it does not finish, the per-op bound stands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mallocgame.model import Problem


@dataclass(frozen=True)
class ResidencyBound:
    """The LP's value (seconds saved at most), whether HiGHS proved it, and the LP's size and time."""

    value: float
    solved: bool
    variables: int
    nonzeros: int
    seconds: float
    message: str = ""


class _Lp:
    """A sparse LP in triplets: rows ``A x <= b`` (and ``== b`` where ``eq``), bounds per column."""

    def __init__(self):
        self.lo, self.hi, self.cost = [], [], []
        self.rows, self.cols, self.vals = [], [], []
        self.rhs, self.eq, self.integral = [], [], []

    def columns(self, n: int, lo, hi, cost=0.0, *, integral: bool = False) -> np.ndarray:
        start = len(self.lo)
        self.integral.extend([int(integral)] * n)
        self.lo.extend(np.broadcast_to(np.asarray(lo, float), (n,)).tolist())
        self.hi.extend(np.broadcast_to(np.asarray(hi, float), (n,)).tolist())
        self.cost.extend(np.broadcast_to(np.asarray(cost, float), (n,)).tolist())
        return np.arange(start, start + n, dtype=np.int64)

    def add_rows(self, row_of: np.ndarray, col: np.ndarray, val: np.ndarray, rhs: np.ndarray, *, eq: bool = False) -> None:
        """Rows ``0..len(rhs)-1`` of this block hold the triplets ``(row_of, col, val)``."""
        base = len(self.rhs)
        if not len(row_of) == len(col) == len(val):
            raise ValueError(f"rows, columns and values differ in length: {len(row_of)}, {len(col)}, {len(val)}")
        self.rows.append(np.asarray(row_of, np.int64) + base)
        self.cols.append(np.asarray(col, np.int64))
        self.vals.append(np.asarray(val, float))
        self.rhs.extend(np.asarray(rhs, float).tolist())
        self.eq.extend([eq] * len(rhs))

    def solve(self, time_limit: float, *, integral: bool):
        from scipy.optimize import linprog
        from scipy.sparse import csr_matrix

        rows, cols, vals = (np.concatenate(v) if v else np.zeros(0) for v in (self.rows, self.cols, self.vals))
        eq = np.asarray(self.eq, bool)
        a = csr_matrix((vals, (rows, cols)), shape=(len(self.rhs), len(self.lo)))
        rhs = np.asarray(self.rhs, float)
        res = linprog(np.asarray(self.cost), A_ub=a[~eq], b_ub=rhs[~eq], A_eq=a[eq] if eq.any() else None,
                      b_eq=rhs[eq] if eq.any() else None, bounds=list(zip(self.lo, self.hi)), method="highs",
                      integrality=np.asarray(self.integral) if integral else None,
                      options={"time_limit": max(float(time_limit), 0.05), "presolve": True})
        return res, len(self.lo), int(a.nnz)


def _dyadic_blocks(n_ops: int) -> list[tuple[int, int]]:
    """Every block ``[a, a + 2**l)`` (clipped to ``n_ops``) at every level ``l``, the whole program last."""
    out, width = [], 1
    while width < 2 * max(n_ops, 1):
        out += [(a, min(a + width, n_ops)) for a in range(0, n_ops, width)]
        width *= 2
    return out


def _containing_blocks(lo: np.ndarray, hi: np.ndarray, n_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(item, block)``: the dyadic blocks (indices into :func:`_dyadic_blocks`) holding ``[lo, hi)``.

    An item holds a block when its range fits inside; at level ``l`` that is the block
    ``lo >> l`` when ``(hi - 1) >> l`` is the same block. Empty ranges lie in no block.
    """
    items, blocks, offset, width, level = [], [], 0, 1, 0
    idx = np.arange(len(lo))
    while width < 2 * max(n_ops, 1):
        n_blocks = -(-n_ops // width)
        ok = (hi > lo) & ((lo >> level) == ((hi - 1) >> level))
        items.append(idx[ok])
        blocks.append(offset + (lo[ok] >> level))
        offset += n_blocks
        width *= 2
        level += 1
    return np.concatenate(items), np.concatenate(blocks)


def residency_bound(problem: Problem, hardware, *, time_limit: float = 20.0, integral: bool = True) -> ResidencyBound:
    """The residency LP's upper bound on the prefetch-mode value (seconds) of any valid answer.

    Example:
        >>> from mallocgame.hardware.spec import PRESETS
        >>> from mallocgame.inputs.load import load_problem
        >>> problem = load_problem("example:layered150", mode="prefetch")
        >>> bound = residency_bound(problem, PRESETS["tpuv4i"], time_limit=30)
        >>> bound.solved and bound.value > 0
        True
    """
    from mallocgame.hardware.evaluator import Evaluator

    t0 = time.monotonic()
    ev = Evaluator.of(problem, hardware)
    touches = problem.touches
    T = ev.n_ops
    n_touch = len(touches.ops)
    cap = float(problem.capacity) if problem.capacity is not None else float(problem.arrays.size.sum())
    size = problem.arrays.size.astype(float)
    buf = np.repeat(np.arange(problem.n, dtype=np.int64), np.diff(touches.ptr))
    op = touches.ops.astype(np.int64)
    first = np.zeros(n_touch, bool)
    first[touches.ptr[:-1][np.diff(touches.ptr) > 0]] = True
    reads = touches.reads.astype(bool)
    writes = touches.writes.astype(bool)
    fits = size[buf] <= cap

    # Each operand's delta, summed per touch (a buffer may be several operands of one op).
    width = T + 1
    touch_key = buf * width + op
    operand_touch = np.searchsorted(touch_key, ev.buf_of * width + ev.op_of)
    # Seconds are scaled to millionths of the all-slow program: HiGHS's tolerances are absolute, and
    # a whole program of microseconds would sit inside them.
    slow_time = np.maximum(ev.compute, ev.slow_mem) + ev.fixed
    scale = 1e6 / max(float(slow_time.sum()), 1e-300)
    slow_time = slow_time * scale
    delta = np.bincount(operand_touch, ev.delta, minlength=n_touch) * scale
    headroom = np.maximum(ev.slow_mem - ev.compute, 0.0) * scale
    cum_slow = np.concatenate([[0.0], np.cumsum(slow_time)])

    lp = _Lp()
    x = lp.columns(n_touch, 0.0, np.where(fits, 1.0, 0.0), integral=True)
    rho = lp.columns(n_touch, 0.0, np.where(fits, 1.0, 0.0), integral=True)
    s = lp.columns(T, 0.0, headroom, -1.0)
    held = lp.columns(T, 0.0, np.inf)  # bytes held through each op (a running sum of the holds)

    # The touches that read: each may be fetched in the gap before it; all but a first may be held.
    fetch_at = np.flatnonzero(reads & fits)
    n_f = len(fetch_at)
    prev_op = np.where(first[fetch_at], -1, op[np.maximum(fetch_at - 1, 0)])
    gap_lo, gap_hi = prev_op + 1, op[fetch_at]                     # the gap's interior ops [lo, hi)
    # The window ends at the touch's own op when it writes, else at the next write of b (or the end).
    next_write = np.full(n_touch, T, np.int64)
    for b in range(problem.n):  # per buffer: the next write at or after each touch (a reversed running min)
        lo_t, hi_t = touches.ptr[b], touches.ptr[b + 1]
        if hi_t == lo_t:
            continue
        w = np.where(writes[lo_t:hi_t], op[lo_t:hi_t], T)
        next_write[lo_t:hi_t] = np.minimum.accumulate(w[::-1])[::-1]
    win_hi = next_write[fetch_at]
    f = lp.columns(n_f, 0.0, 1.0, integral=True)
    gap_budget = cum_slow[gap_hi] - cum_slow[gap_lo]
    ext_budget = cum_slow[np.maximum(win_hi, gap_hi)] - cum_slow[gap_hi]
    q_in = lp.columns(n_f, 0.0, gap_budget)
    q_ext = lp.columns(n_f, 0.0, ext_budget)
    stall = lp.columns(n_f, 0.0, np.inf, 1.0)
    can_hold = ~first[fetch_at]
    hold_at = fetch_at[can_hold]
    h = lp.columns(len(hold_at), 0.0, 1.0, integral=True)
    f_of_hold = f[can_hold]
    # A fetch is resident over a suffix of its gap's interior, of some length l. Its bracket
    # [S_j, S_{j+1}) of lengths (S = 0, 1, 2, 4, ..., the gap's length) is chosen with weight lam:
    # memory is charged over the suffix S_j (no more than a real answer holds) and the budget taken
    # inside the gap is at most that of the suffix S_{j+1} - 1 (no less than it can take).
    brk_fetch, brk_mem, brk_budget = _brackets(gap_hi - gap_lo)
    lam = lp.columns(len(brk_fetch), 0.0, 1.0, integral=True)
    brk_hi = gap_hi[brk_fetch]
    brk_size = size[buf[fetch_at]][brk_fetch]

    # x <= rho.
    r = np.arange(n_touch)
    lp.add_rows(np.concatenate([r, r]), np.concatenate([x, rho]), np.concatenate([np.ones(n_touch), -np.ones(n_touch)]),
                np.zeros(n_touch))
    # rho_k <= h_k + f_k (a first touch that reads: rho <= f).
    r = np.arange(n_f)
    hold_row = r[can_hold]
    lp.add_rows(np.concatenate([r, r, hold_row]), np.concatenate([rho[fetch_at], f, h]),
                np.concatenate([np.ones(n_f), -np.ones(n_f), -np.ones(len(h))]), np.zeros(n_f))
    # h_k <= rho_{k-1}; h_k + f_k <= 1.
    r = np.arange(len(h))
    lp.add_rows(np.concatenate([r, r]), np.concatenate([h, rho[hold_at - 1]]),
                np.concatenate([np.ones(len(h)), -np.ones(len(h))]), np.zeros(len(h)))
    lp.add_rows(np.concatenate([r, r]), np.concatenate([h, f_of_hold]), np.ones(2 * len(h)), np.ones(len(h)))
    # A fetch served at its own touch is done before it: the budgets after the touch are for a fetch
    # whose interval starts serving later (resident, not served, there): q_ext <= ext budget x f and
    # q_ext <= ext budget x (1 - x).
    r = np.arange(n_f)
    lp.add_rows(np.concatenate([r, r]), np.concatenate([q_ext, f]), np.concatenate([np.ones(n_f), -ext_budget]),
                np.zeros(n_f))
    lp.add_rows(np.concatenate([r, r]), np.concatenate([q_ext, x[fetch_at]]), np.concatenate([np.ones(n_f), ext_budget]),
                ext_budget)
    # One bracket per fetch: sum of lam = f; the budget taken inside the gap follows the bracket.
    r = np.arange(n_f)
    lp.add_rows(np.concatenate([brk_fetch, r]), np.concatenate([lam, f]),
                np.concatenate([np.ones(len(lam)), -np.ones(n_f)]), np.zeros(n_f), eq=True)
    lp.add_rows(np.concatenate([r, brk_fetch]), np.concatenate([q_in, lam]),
                np.concatenate([np.ones(n_f), -(cum_slow[brk_hi] - cum_slow[brk_hi - brk_budget])]), np.zeros(n_f))
    # Evictions. A write served fast leaves slow memory stale: the value is evicted (copied back, on the
    # eviction budgets) before the interval ends, when the next touch reads it and it is not held there,
    # or after the last touch of an output. "dirty" follows a fast value through the holds; the
    # eviction's interval is resident over a prefix of the gap after the touch (brackets as for fetches),
    # and may also take the budgets of the ops since the last write, where it is resident anyway.
    hold_of = np.full(n_touch, -1, np.int64)
    hold_of[hold_at] = h
    x_write = np.flatnonzero(writes & fits)
    r = np.arange(len(x_write))
    lp.add_rows(np.concatenate([r, r]), np.concatenate([rho[x_write], x[x_write]]),
                np.concatenate([np.ones(len(r)), -np.ones(len(r))]), np.zeros(len(r)))   # resident at a write: served
    dirty = lp.columns(n_touch, 0.0, np.where(fits, 1.0, 0.0))
    lp.add_rows(np.concatenate([r, r]), np.concatenate([x[x_write], dirty[x_write]]),
                np.concatenate([np.ones(len(r)), -np.ones(len(r))]), np.zeros(len(r)))   # dirty >= x at a write
    carry = np.flatnonzero((hold_of >= 0) & ~writes)  # a read held into: dirty_k >= dirty_{k-1} + h_k - 1
    r = np.arange(len(carry))
    lp.add_rows(np.concatenate([r, r, r]), np.concatenate([dirty[carry - 1], hold_of[carry], dirty[carry]]),
                np.concatenate([np.ones(len(r)), np.ones(len(r)), -np.ones(len(r))]), np.ones(len(r)))
    last = np.zeros(n_touch, bool)
    last[touches.ptr[1:][np.diff(touches.ptr) > 0] - 1] = True
    nxt_reads = np.zeros(n_touch, bool)
    nxt_reads[:-1] = ~last[:-1] & reads[1:]
    is_output = np.array([bf.kind == "output" for bf in problem.buffers], bool)
    evict_at = np.flatnonzero(fits & (nxt_reads | (last & is_output[buf])))
    n_e = len(evict_at)
    b_end = np.minimum(problem.arrays.end.astype(np.int64), T)
    e_lo = op[evict_at] + 1
    e_hi = np.where(last[evict_at], np.maximum(b_end[buf[evict_at]], e_lo), op[np.minimum(evict_at + 1, n_touch - 1)])
    last_write_op = np.full(n_touch, -1, np.int64)
    for b in range(problem.n):  # per buffer: the last write at or before each touch (a running max)
        lo_t, hi_t = touches.ptr[b], touches.ptr[b + 1]
        if hi_t > lo_t:
            last_write_op[lo_t:hi_t] = np.maximum.accumulate(np.where(writes[lo_t:hi_t], op[lo_t:hi_t], -1))
    w_op = last_write_op[evict_at]
    e = lp.columns(n_e, 0.0, 1.0)
    pre_budget = np.where(w_op >= 0, cum_slow[op[evict_at] + 1] - cum_slow[np.maximum(w_op, 0) + 1], 0.0)
    qe_pre = lp.columns(n_e, 0.0, pre_budget)
    qe_gap = lp.columns(n_e, 0.0, cum_slow[e_hi] - cum_slow[e_lo])
    e_stall = lp.columns(n_e, 0.0, np.inf, 1.0)
    r = np.arange(n_e)
    next_hold = np.where(last[evict_at], -1, hold_of[np.minimum(evict_at + 1, n_touch - 1)])
    has_hold = next_hold >= 0
    lp.add_rows(np.concatenate([r, r, r[has_hold]]), np.concatenate([dirty[evict_at], e, next_hold[has_hold]]),
                np.concatenate([np.ones(n_e), -np.ones(n_e), -np.ones(int(has_hold.sum()))]), np.zeros(n_e))
    ebrk_evict, ebrk_mem, ebrk_budget = _brackets(e_hi - e_lo)
    mu = lp.columns(len(ebrk_evict), 0.0, 1.0, integral=True)
    lp.add_rows(np.concatenate([ebrk_evict, r]), np.concatenate([mu, e]),
                np.concatenate([np.ones(len(mu)), -np.ones(n_e)]), np.zeros(n_e), eq=True)
    ebrk_lo = e_lo[ebrk_evict]
    lp.add_rows(np.concatenate([r, ebrk_evict]), np.concatenate([qe_gap, mu]),
                np.concatenate([np.ones(n_e), -(cum_slow[ebrk_lo + ebrk_budget] - cum_slow[ebrk_lo])]), np.zeros(n_e))
    evict_seconds = size[buf[evict_at]] / float(hardware.copy_bw) * scale
    lp.add_rows(np.concatenate([r] * 4), np.concatenate([e, qe_pre, qe_gap, e_stall]),
                np.concatenate([evict_seconds, -np.ones(n_e), -np.ones(n_e), -np.ones(n_e)]), np.zeros(n_e))

    # The bytes held through each op, as a running sum: held_t - held_{t-1} = (holds and fetch
    # residencies that begin at t) - (those that ended at t - 1).
    h_lo, h_hi = gap_lo[can_hold], gap_hi[can_hold]
    z = size[buf[hold_at]]
    t = np.arange(T)
    begin_op = np.concatenate([h_lo, brk_hi - brk_mem, ebrk_lo])
    end_op = np.concatenate([h_hi, brk_hi, ebrk_lo + ebrk_mem])
    amount = np.concatenate([z, brk_size, size[buf[evict_at]][ebrk_evict]])
    column = np.concatenate([h, lam, mu])
    live = end_op > begin_op
    ends_inside = live & (end_op < T)
    lp.add_rows(np.concatenate([t, t[1:], begin_op[live], end_op[ends_inside]]),
                np.concatenate([held, held[:-1], column[live], column[ends_inside]]),
                np.concatenate([np.ones(T), -np.ones(T - 1), -amount[live], amount[ends_inside]]), np.zeros(T), eq=True)
    # Capacity at every op: resident touches + held bytes.
    lp.add_rows(np.concatenate([op, t]), np.concatenate([rho, held]), np.concatenate([size[buf], np.ones(T)]),
                np.full(T, cap))
    # Savings: s_t <= sum of deltas served (s_t <= headroom is its bound).
    lp.add_rows(np.concatenate([t, op]), np.concatenate([s, x]), np.concatenate([np.ones(T), -delta]), np.zeros(T))
    # Stalls: copy seconds - budget taken <= stall.
    copy_seconds = size[buf[fetch_at]] / float(hardware.copy_bw) * scale
    rf = np.arange(n_f)
    lp.add_rows(np.concatenate([rf] * 4), np.concatenate([f, q_in, q_ext, stall]),
                np.concatenate([copy_seconds, -np.ones(n_f), -np.ones(n_f), -np.ones(n_f)]), np.zeros(n_f))
    # Budgets per dyadic block of ops (the whole program among them): the fetches whose windows lie
    # inside take at most the block's op times in the answer (all-slow time - saving).
    blocks = _dyadic_blocks(T)
    b_lo = np.array([a for a, _ in blocks], np.int64)
    b_hi = np.array([e for _, e in blocks], np.int64)
    op_item, op_block = _containing_blocks(t, t + 1, T)
    win_item, win_block = _containing_blocks(gap_lo, np.maximum(win_hi, gap_hi), T)
    lp.add_rows(np.concatenate([win_block, win_block, op_block]),
                np.concatenate([q_in[win_item], q_ext[win_item], s[op_item]]), np.ones(2 * len(win_item) + len(op_item)),
                cum_slow[b_hi] - cum_slow[b_lo])
    # The same for the evictions, on their own budgets: windows from after the last write to the gap's end.
    ewin_item, ewin_block = _containing_blocks(np.maximum(w_op, -1) + 1, e_hi, T)
    lp.add_rows(np.concatenate([ewin_block, ewin_block, op_block]),
                np.concatenate([qe_pre[ewin_item], qe_gap[ewin_item], s[op_item]]),
                np.ones(2 * len(ewin_item) + len(op_item)), cum_slow[b_hi] - cum_slow[b_lo])

    remaining = time_limit - (time.monotonic() - t0)
    res, n_vars, nnz = lp.solve(remaining, integral=integral)
    seconds = time.monotonic() - t0
    # linprog minimises -(savings - stalls): the value bound is minus its proven lower bound. A MIP cut
    # short still has a valid dual bound (HiGHS's mip_dual_bound); an LP cut short has none.
    dual = getattr(res, "mip_dual_bound", None) if integral else None
    if res.status == 0:
        proven = -float(dual) if dual is not None and np.isfinite(dual) else -float(res.fun)
        return ResidencyBound(max(proven, -float(res.fun)) / scale, True, n_vars, nnz, seconds, str(res.message))
    if dual is not None and np.isfinite(dual):
        return ResidencyBound(-float(dual) / scale, False, n_vars, nnz, seconds, str(res.message))
    return ResidencyBound(float("inf"), False, n_vars, nnz, seconds, str(res.message))


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
