"""Prefetch-mode answers built from map-mode ones (docs/prefetch.md section 6), and such answers' stays cut at
their idle gaps (:func:`split_idle`: the memory a whole-life stay holds between far-apart touches freed).

Example:
    >>> from mallocgame.problem.model import Buffer, Op, Operand, Problem
    >>> ops = (Op("a", operands=(Operand("w", "read", 8), Operand("x", "write", 4))),
    ...        Op("b", operands=(Operand("x", "read", 4),)))
    >>> p = Problem("t", (Buffer("w", 8, 0, 1, kind="weight"), Buffer("x", 4, 0, 2)), ops=ops, capacity=16)
    >>> [(iv.buffer, iv.start, iv.end, iv.copy_start) for iv in lift_map_answer(p, [0, 8])]
    [(0, 0, 1, -1), (1, 0, 2, None)]
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.model import KEY_WIDTH, FastInterval, Problem, Solution
from mallocgame.problem.objective import exceeds

# split_idle's defaults: the least ops a cut must free, and the copy windows' budget in copy times
# (docs/results.md, "cpsat's defaults")
SPLIT_MIN_FREE = 16
SPLIT_RATIO = 1.5


def map_intervals(problem: Problem, offsets: Sequence[int | None] | np.ndarray) -> list[FastInterval]:
    """A map answer as intervals: one ``[start, end)`` interval per fast buffer, no copies.

    Scored with ``mode="map"`` by :class:`mallocgame.hardware.prefetch_cost.PrefetchEvaluator` it gives the
    map-mode time exactly.
    """
    fast, offs = _fast(offsets)
    a = problem.arrays
    return list(map(FastInterval, fast.tolist(), offs[fast].tolist(), a.start[fast].tolist(), a.end[fast].tolist(),
                    [None] * len(fast)))


def _fast(offsets: Sequence[int | None] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(the fast buffers' indices, every buffer's offset, -1 slow)`` of a map answer."""
    if isinstance(offsets, np.ndarray):
        offs = offsets.astype(np.int64, copy=False)
    else:
        offs = np.fromiter((-1 if o is None else o for o in offsets), np.int64, len(offsets))
    return np.flatnonzero(offs >= 0), offs


def lift_map_answer(problem: Problem, offsets: Sequence[int | None] | np.ndarray) -> list[FastInterval]:
    """A valid prefetch answer holding the same rectangles as a valid map answer.

    A fast buffer whose first touch is a pure write at its start is produced in place; any
    other (a parameter, or one first read) is prefetched by a copy that starts one op before
    its interval (``copy_start = start - 1``), so it occupies exactly the map rectangle.
    """
    touches = problem.touches
    fast, offs = _fast(offsets)
    a = problem.arrays
    start = a.start[fast]
    # each fast buffer's first touch at or after its start, all at once (touches.keys: buffer-major, ops sorted)
    k = touches.keys.searchsorted(fast * KEY_WIDTH + np.maximum(start, 0))
    own = k < touches.ptr[fast + 1]
    at = np.minimum(k, max(len(touches.ops) - 1, 0))
    if len(touches.ops):
        pure_write = own & (touches.ops[at] == start) & touches.writes[at] & ~touches.reads[at]
    else:
        pure_write = np.zeros(len(fast), bool)
    copy = [None if w else s - 1 for w, s in zip(pure_write.tolist(), start.tolist())]
    return list(map(FastInterval, fast.tolist(), offs[fast].tolist(), start.tolist(), a.end[fast].tolist(), copy))


def hint_intervals(problem: Problem, hint: Solution | None) -> list[FastInterval] | None:
    """A hint as valid prefetch intervals (a map answer is lifted by :func:`lift_map_answer`), or
    ``None`` when there is no hint or it is not a valid prefetch answer: the one reading of a hint
    in prefetch mode (msa, cpsat, lns, mcts)."""
    if hint is None:
        return None
    if hint.intervals:
        ivs = list(hint.intervals)
    elif len(hint.offsets) == problem.n and any(o is not None for o in hint.offsets):
        try:
            ivs = lift_map_answer(problem, hint.offsets)
        except (ValueError, IndexError, TypeError):
            return None
    else:
        return None
    return ivs if validate_intervals(problem, ivs) is None else None


def _take(left: np.ndarray, lo: int, hi: int, need: float, *, latest: bool = False) -> None:
    """Consume ``need`` seconds of ``left[lo:hi]``, earliest (or latest) slots first."""
    for t in (range(hi - 1, lo - 1, -1) if latest else range(lo, hi)):
        if need <= 0:
            return
        x = min(float(left[t]), need)
        left[t] -= x
        need -= x


def _gaps(problem: Problem, iv: FastInterval, min_free: int) -> list[tuple[int, int]]:
    """The pairs ``(o, nxt)`` of consecutive touches ``iv`` serves at least ``min_free`` ops apart."""
    ops = problem.touches.of(iv.buffer)[0]
    served = ops[ops.searchsorted(iv.start):ops.searchsorted(iv.end)].tolist()
    return [(o, nxt) for o, nxt in zip(served, served[1:]) if nxt - o - 1 >= min_free]


def _cut(problem: Problem, iv: FastInterval, part_start: int, o: int, nxt: int, left: dict, need: float,
         min_free: int) -> tuple[int, int, int | None] | None:
    """The cut of ``iv`` between its touches ``o`` and ``nxt`` (the part before it served from ``part_start``):
    ``(end of the part before, start of the part after, its copy start)`` with copy windows of ``need``
    seconds taken from the budgets ``left`` (consumed), or ``None`` when it frees fewer than ``min_free`` ops."""
    ops, reads, writes = problem.touches.of(iv.buffer)
    k = int(ops.searchsorted(nxt))
    if writes[k] and not reads[k]:  # a pure write: the value before it is dead, no copy at all
        return o + 1, nxt, None
    before = np.flatnonzero(writes[:k])
    lw = int(ops[before[-1]]) if len(before) else -1  # the last write: the prefetch starts after it
    end1 = o + 1
    evict = lw >= part_start  # the part before serves a write the next touch reads: evicted
    if evict:
        got = np.cumsum(left["eviction"][lw + 1:nxt])  # slots lw+1 .. end1-1
        j = int(np.searchsorted(got, need))
        if j >= len(got):
            return None
        end1 = max(o + 1, lw + j + 2)
    lo = max(lw, end1 - 1)
    if nxt - 1 - lo < 1:
        return None
    got = np.cumsum(left["prefetch"][lo + 1:nxt][::-1])  # slots c2+1 .. nxt-1, from the last
    j = int(np.searchsorted(got, need))
    if j >= len(got) or nxt - 1 - (j + 1) + 1 - end1 < min_free:
        return None
    c2 = nxt - j - 2
    if evict:
        _take(left["eviction"], lw + 1, end1, need)
    _take(left["prefetch"], c2 + 1, nxt, need, latest=True)
    return end1, nxt, c2


def split_idle(problem: Problem, hardware, intervals: Sequence[FastInterval], *, min_free: int = SPLIT_MIN_FREE,
               ratio: float = SPLIT_RATIO, deadline: float | None = None) -> list[FastInterval]:
    """``intervals`` (a valid prefetch answer) with stays cut where they hold memory between far-apart touches.

    A stay is cut between two touches it serves ``o < nxt`` when the cut frees at least ``min_free`` ops: the
    part before ends after ``o`` (or, when it serves a write ``nxt`` reads, once an eviction of ``ratio`` x the
    copy time fits after that write), the part after is produced in place (``nxt`` a pure write) or
    prefetched by a copy of ``ratio`` x the copy time ending before ``nxt``. The copies take the budgets the
    answer's own copies leave (served in deadline order, as the evaluator does; consumed as cuts are made,
    the largest freed bytes x ops first), so they add no stall. Every touch is served as before, at the same
    offset: the value is the answer's, with less memory held (room for other buffers: docs/results.md,
    "cpsat's defaults"). Returns ``intervals`` unchanged when the
    cut answer would score lower (a stall the budgets did not foresee). ``deadline`` (monotonic): no cut is
    tried after it (the cuts made so far are kept). Deterministic when no deadline cuts it short.
    """
    intervals = list(intervals)
    if not intervals:
        return intervals
    pev = PrefetchEvaluator.of(problem, hardware)
    times = pev.op_times(intervals)
    served = pev.serve(intervals, times)  # the budgets the answer's own copies leave
    base_time = float(times.sum()) + sum(sum(kind[4]) for kind in served.values())
    left = {kind: np.array(rest[5]) for kind, rest in served.items()}
    sizes, per = problem.arrays.size, 1.0 / hardware.copy_bw
    gaps = sorted((-(nxt - o) * int(sizes[iv.buffer]), iv.buffer, o, k, nxt)
                  for k, iv in enumerate(intervals) for o, nxt in _gaps(problem, iv, min_free))
    cuts: dict[int, list[tuple[int, int, int | None]]] = {}
    for n_tried, (_, _, o, k, nxt) in enumerate(gaps):
        if deadline is not None and n_tried % 64 == 63 and time.monotonic() > deadline:
            break
        iv = intervals[k]
        part_start = max([c[1] for c in cuts.get(k, ()) if c[1] <= o], default=iv.start)
        cut = _cut(problem, iv, part_start, o, nxt, left, ratio * float(sizes[iv.buffer]) * per, min_free)
        if cut is not None:
            cuts.setdefault(k, []).append(cut)
    out = []
    for k, iv in enumerate(intervals):
        start, copy = iv.start, iv.copy_start
        for end1, start2, copy2 in sorted(cuts.get(k, ())):
            out.append(FastInterval(iv.buffer, iv.offset, start, end1, copy))
            start, copy = start2, copy2
        out.append(FastInterval(iv.buffer, iv.offset, start, iv.end, copy))
    if not cuts or exceeds(pev.time(out), base_time):
        return intervals
    return out
