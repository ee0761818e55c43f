"""Hole finding and ordered greedy placement, shared by the greedy solvers, hybrids and the game.

A *hole* for a buffer is a free address range in the union of the address ranges of the
placed buffers whose live ranges overlap it. Best fit picks the smallest hole that fits
(lowest offset on ties), as XLA's heap simulator and memory-space assignment do.

Example:
    >>> import numpy as np
    >>> best_fit_offset(np.array([0, 10]), np.array([4, 12]), size=3, align=1, capacity=20)
    4
"""

from __future__ import annotations

import numpy as np

from mallocgame.intervals import OverlapIndex, neighbour_lists
from mallocgame.model import Problem

_SMALL = 48  # below this many neighbours a Python scan beats numpy's call overhead


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


def best_fit_offset(offs: np.ndarray, tops: np.ndarray, size: int, align: int, capacity: int | None) -> int | None:
    """Lowest offset of the smallest free hole that holds ``size`` bytes, or ``None``.

    ``offs``/``tops`` (shape ``[k]``) are the address ranges ``[off, top)`` of the placed
    buffers that overlap in time. The hole above everything is unbounded when
    ``capacity`` is ``None`` and is then chosen only when no bounded hole fits.
    """
    if len(offs) < _SMALL:
        return _best_fit_py(sorted(zip(offs.tolist(), tops.tolist())), size, align, capacity)
    order = np.argsort(offs, kind="stable")
    o, t = offs[order], tops[order]
    reach = np.maximum.accumulate(t)
    lo = np.concatenate(([0], reach))  # hole k spans [lo[k], hi[k])
    hi = np.concatenate((o, [np.iinfo(np.int64).max if capacity is None else capacity]))
    start = -(-lo // align) * align
    fits = start + size <= hi
    if not fits.any():
        return None
    length = np.where(fits, hi - lo, np.iinfo(np.int64).max)
    k = int(np.argmin(length))  # argmin returns the first (lowest) among equal lengths
    return int(start[k])


def _best_fit_py(ranges: list[tuple[int, int]], size: int, align: int, capacity: int | None) -> int | None:
    best_len, best_off, cur = None, None, 0
    for o, t in ranges:
        if o > cur:
            a = _align_up(cur, align)
            if a + size <= o and (best_len is None or o - cur < best_len):
                best_len, best_off = o - cur, a
        if t > cur:
            cur = t
    a = _align_up(cur, align)
    if capacity is None:
        return best_off if best_off is not None else a
    if a + size <= capacity and (best_len is None or capacity - cur < best_len):
        best_off = a
    return best_off


def greedy_place(problem: Problem, order: np.ndarray, capacity: int | None, *,
                 index: OverlapIndex | None = None, offsets: np.ndarray | None = None,
                 deadline: float | None = None) -> np.ndarray:
    """Place buffers in ``order`` at their best-fit hole; those that fit nowhere stay slow.

    Returns offsets as int64 ``[n]`` (-1 = slow / not placed). ``offsets`` may carry
    buffers already placed (kept as they are). Cost per buffer: one index query plus a
    scan of the placed buffers that overlap it in time.
    """
    import time as _time

    a = problem.arrays
    csr = neighbour_lists(a.start, a.end, max_pairs=4_000_000) if index is None else None
    if csr is None:
        index = index or OverlapIndex(a.start, a.end)
    out = np.full(problem.n, -1, np.int64) if offsets is None else offsets.copy()
    placed = out >= 0
    tops = np.where(placed, out + a.size, 0)
    size_l, start_l, end_l, align_l = a.size.tolist(), a.start.tolist(), a.end.tolist(), a.alignment.tolist()
    for step, i in enumerate(order.tolist()):
        if placed[i]:
            continue
        if deadline is not None and step % 256 == 0 and _time.monotonic() > deadline:
            break
        if capacity is not None and size_l[i] > capacity:
            continue
        if csr is not None:
            near = csr[1][csr[0][i]:csr[0][i + 1]]
        else:
            near = index.query(start_l[i], end_l[i])
        near = near[placed[near]]
        off = best_fit_offset(out[near], tops[near], size_l[i], align_l[i], capacity)
        if off is not None:
            out[i], placed[i], tops[i] = off, True, off + size_l[i]
    return out
