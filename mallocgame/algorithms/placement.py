"""Placement primitives shared by solvers, hybrids and the game (docs/architecture.md, "The core").

* orders: :func:`xla_order` (memory-space assignment) and :func:`heap_orders` (heap simulator);
* best fit: :func:`best_fit_offset` and the ordered :func:`greedy_place`;
* the online free-list allocator :func:`online_pack` and :func:`pack_start`, the lowest-peak
  complete placement found before a deadline; :func:`stack_above`, the fast fallback that completes a
  placement a deadline cut short;
* gravity: :func:`push_down`.

A *hole* for a buffer is a free address range in the union of the address ranges of the
placed buffers whose live ranges overlap it. Best fit picks the smallest hole that fits
(lowest offset on ties), as XLA's heap simulator and memory-space assignment do.

The online allocator places buffers the way a runtime allocator would: it sweeps time
(releases before allocations at equal times), keeps the free holes in two sorted lists (by
address, to merge on release; by size, to find the smallest hole that fits), and puts each
new buffer in the best-fitting hole or on top. Cost O(n log n) plus list moves, about a
second for 60,000 buffers, where best fit's neighbour scans take tens of seconds on traces
with 10^8 interfering pairs; its peak is usually a few percent above best fit's.

Example:
    >>> import numpy as np
    >>> best_fit_offset(np.array([0, 10]), np.array([4, 12]), size=3, align=1, capacity=20)
    4
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> p = Problem("t", (Buffer("a", 4, 0, 2), Buffer("b", 2, 1, 3), Buffer("c", 4, 2, 4)), mode="pack")
    >>> online_pack(p).tolist()
    [0, 4, 0]
"""

from __future__ import annotations

import bisect
import time

import numpy as np

from mallocgame._native import greedy_place_loop, xla_order_loop
from mallocgame.problem.intervals import OverlapIndex, neighbour_lists, overlap_index
from mallocgame.problem.model import Problem
from mallocgame.runtime.native_engine import engine

_SMALL = 48  # below this many neighbours a Python scan beats numpy's call overhead
# greedy_place reads the clock at every step whose neighbourhood is larger than this (else every 256 steps)
CLOCK_EVERY_STEP = 1024
# how far past its deadline greedy_place may go to place its first 256 buffers (when each step is slow)
FIRST_STEPS_GRACE = 0.05


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
    scan of the placed buffers that overlap it in time. Past ``deadline`` (monotonic seconds)
    the buffers not reached stay unplaced; the clock is read every 256 buffers and at every
    buffer with more than :data:`CLOCK_EVERY_STEP` neighbours. ``MALLOCGAME_ENGINE=native`` (the default) runs
    the loop compiled (``mallocgame._native``), ``python`` runs the code below: the same answer, and the
    same clock reads, so a deadline that falls at the same step cuts both at the same buffer.
    """
    a = problem.arrays
    csr = neighbour_lists(a.start, a.end, max_pairs=4_000_000) if index is None else None
    if csr is None:
        index = index or overlap_index(problem)
    out = np.full(problem.n, -1, np.int64) if offsets is None else offsets.copy()
    late = None if deadline is None else deadline + FIRST_STEPS_GRACE
    if engine() == "native":
        def i64(x: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(x, np.int64)

        if csr is not None:
            tables = (i64(csr[0]), i64(csr[1])) + (None,) * 6
        else:
            cp_indptr, cp_indices = index.checkpoint_csr()
            tables = (None, None, i64(index.order), i64(index.sorted_start), i64(index.cp_time), i64(index.cp_pos),
                      cp_indptr, cp_indices)
        out = i64(out)  # our copy: the compiled loop writes it in place
        greedy_place_loop(i64(order), i64(a.size), i64(a.alignment), i64(a.start), i64(a.end), out, capacity,
                          *tables, deadline, 0.0 if late is None else late, CLOCK_EVERY_STEP)
        return out
    placed = out >= 0
    tops = np.where(placed, out + a.size, 0)
    size_l, start_l, end_l, align_l = a.size.tolist(), a.start.tolist(), a.end.tolist(), a.alignment.tolist()
    for step, i in enumerate(order.tolist()):
        if placed[i]:
            continue
        # the first 256 buffers are placed whatever the clock (a few ms, unless each scans a huge neighbourhood):
        # a deadline that passed while the caller set up (a busy machine, a short limit) must not leave the
        # greedy's answer empty
        if deadline is not None and step and step % 256 == 0 and time.monotonic() > deadline:
            break
        if capacity is not None and size_l[i] > capacity:
            continue
        if csr is not None:
            near = csr[1][csr[0][i]:csr[0][i + 1]]
        else:
            near = index.query(start_l[i], end_l[i])
        # a step over thousands of neighbours takes milliseconds (one op touching 500k buffers: every buffer
        # overlaps every other): there the clock is read at every step, which costs nothing beside the scan
        if late is not None and len(near) > CLOCK_EVERY_STEP and step and \
                time.monotonic() > (deadline if step >= 256 else late):
            break
        near = near[placed[near]]
        off = best_fit_offset(out[near], tops[near], size_l[i], align_l[i], capacity)
        if off is not None:
            out[i], placed[i], tops[i] = off, True, off + size_l[i]
    return out


def xla_order(problem: Problem, benefits: np.ndarray) -> np.ndarray:
    """Buffer indices in XLA memory-space-assignment order, shape ``[n]``.

    Memory-boundedness first: ``benefits / sqrt(size)`` descending, then size descending,
    then live-range length descending, then id. A compiled stable radix sort by the numeric keys, from the
    buffers sorted by id when some tie (``MALLOCGAME_ENGINE=python``: numpy's lexsort with the id column, the same
    order).
    """
    a = problem.arrays
    density = benefits / np.sqrt(a.size)
    length = a.end - a.start
    if engine() == "python":
        ids = np.array(problem.ids)  # the id column: no Buffer object is made for it
        return np.lexsort((ids, -length, -a.size, -density))
    keys = (np.ascontiguousarray(density, np.float64), np.ascontiguousarray(a.size, np.int64),
            np.ascontiguousarray(length, np.int64))
    order, tied = xla_order_loop(*keys)
    if not tied:
        return order
    ids = problem.ids
    if "\x00" in "".join(ids):  # numpy's strings drop trailing NULs: only its sort orders such ids as the reference
        return np.lexsort((np.array(ids), -length, -a.size, -density))
    # the buffers by id (Python's sort of str is numpy's order, and fast on ids that come nearly sorted), then the
    # same stable sort from there: the reference's order without a sort by strings (seconds at 2M buffers)
    return xla_order_loop(*keys, sorted(range(len(ids)), key=ids.__getitem__))[0]


def heap_orders(problem: Problem) -> dict[str, np.ndarray]:
    """XLA heap-simulator orders, each of shape ``[n]``: ``spatial`` (size descending, then
    live-range length) and ``temporal`` (live-range length descending, then size), ties by start,
    index; and ``size-start`` (size descending, ties by start, then index: equal-size buffers
    stack in time order, which packs the real SOMAS traces far tighter than ``spatial``: docs/results.md,
    ``traces_bound.md``)."""
    a = problem.arrays
    length = a.end - a.start
    ids = np.arange(problem.n)
    return {
        "spatial": np.lexsort((ids, a.start, -length, -a.size)),
        "temporal": np.lexsort((ids, a.start, -a.size, -length)),
        "size-start": np.lexsort((ids, a.start, -a.size)),
    }


def push_down(problem: Problem, offsets: np.ndarray, *, index: OverlapIndex | None = None,
              deadline: float | None = None) -> np.ndarray:
    """Gravity: every placed buffer drops to the lowest aligned address above the buffers under it.

    ``offsets`` is int64 ``[n]`` (-1 = slow). Buffers are moved in increasing offset
    order; each rests on ``align_up(max top of the already-moved buffers that overlap it
    in time)``, which is never above its old offset, so the result is valid whenever the
    input is, with no higher peak and the same fast set. Every resulting offset is a sum
    of sizes rounded up to alignments, hence a multiple of their common unit. Past
    ``deadline`` (monotonic seconds) the remaining buffers keep their offsets, which is
    still valid: every moved buffer only went down, below the ones not yet moved.
    """
    a = problem.arrays
    index = index or overlap_index(problem)
    out = np.asarray(offsets, np.int64).copy()
    placed = np.flatnonzero(offsets >= 0)
    order = placed[np.lexsort((placed, offsets[placed]))]
    done = np.zeros(problem.n, bool)
    tops = np.zeros(problem.n, np.int64)
    start, end, size, align = a.start.tolist(), a.end.tolist(), a.size.tolist(), a.alignment.tolist()
    for step, i in enumerate(order.tolist()):
        if deadline is not None and step % 256 == 0 and time.monotonic() > deadline:
            break
        near = index.query(start[i], end[i])
        near = near[done[near]]
        floor = int(tops[near].max()) if len(near) else 0
        off = -(-floor // align[i]) * align[i]
        out[i], done[i], tops[i] = off, True, off + size[i]
    return out


CANDIDATE_HOLES = 32  # holes tried (smallest first) before giving up on alignment and going on top


def online_pack(problem: Problem, *, deadline: float | None = None) -> np.ndarray:
    """Offsets int64 ``[n]`` of a best-fit free-list allocator run in time order (unbounded address space).

    Past ``deadline`` (monotonic seconds) the buffers it has not reached are stacked above the rest
    (:func:`stack_above`): still a complete, valid placement, with a higher peak.
    """
    return online_pack_until(problem, deadline)[0]


def stack_above(problem: Problem, offsets: np.ndarray) -> int:
    """Place every unplaced buffer (offset -1) of ``offsets`` in place, each in an address range of its own
    above every placed buffer (so none overlaps another whatever the times); returns how many.

    The fast fallback of a pack placement a deadline cut short: O(n), numpy only.
    """
    a = problem.arrays
    rest = np.flatnonzero(offsets < 0)
    if len(rest) == 0:
        return 0
    placed = offsets >= 0
    floor = int((offsets[placed] + a.size[placed]).max()) if placed.any() else 0
    offsets[rest] = stacked_offsets(a.size[rest], a.alignment[rest], floor)
    return len(rest)


def stacked_offsets(size: np.ndarray, align: np.ndarray, floor: int) -> np.ndarray:
    """Offsets int64 ``[k]`` that stack ``k`` buffers (sizes, alignments ``[k]``) one above the other from
    ``floor`` up, each aligned, none sharing an address."""
    size, align = np.asarray(size, np.int64), np.maximum(np.asarray(align, np.int64), 1)
    if len(size) == 0:
        return np.zeros(0, np.int64)
    unit = int(np.lcm.reduce(align))
    if unit <= 2**20:  # one slot per buffer, every slot a multiple of the common unit
        slots = -(-size // unit) * unit
        base = -(-int(floor) // unit) * unit
        return base + np.concatenate(([0], np.cumsum(slots)[:-1]))
    out, top = np.empty(len(size), np.int64), int(floor)  # alignments without a small common multiple
    for k, (z, al) in enumerate(zip(size.tolist(), align.tolist())):
        out[k] = -(-top // al) * al
        top = int(out[k]) + z
    return out


def online_pack_until(problem: Problem, deadline: float | None) -> tuple[np.ndarray, int]:
    """:func:`online_pack` until ``deadline``: the offsets and how many buffers were stacked at the cut (0:
    none, it finished)."""
    a = problem.arrays
    n = problem.n
    out = np.full(n, -1, np.int64)
    if n == 0:
        return out, 0
    size, align = a.size.tolist(), a.alignment.tolist()
    # Events: releases (kind 0) before allocations (kind 1) at equal times; larger first on ties.
    times = np.concatenate([a.end, a.start])
    kinds = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    who = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((who, -np.concatenate([a.size, a.size]), kinds, times))
    hole_lo: list[int] = []  # sorted hole starts
    hole_hi: dict[int, int] = {}  # start -> end
    by_size: list[tuple[int, int]] = []  # sorted (length, start)
    top = 0  # everything at or above ``top`` is free

    def remove(lo: int) -> int:
        hi = hole_hi.pop(lo)
        del hole_lo[bisect.bisect_left(hole_lo, lo)]
        del by_size[bisect.bisect_left(by_size, (hi - lo, lo))]
        return hi

    def add(lo: int, hi: int) -> None:
        nonlocal top
        if hi <= lo:
            return
        if hi >= top:  # joins the free space on top
            top = lo
            return
        bisect.insort(hole_lo, lo)
        hole_hi[lo] = hi
        bisect.insort(by_size, (hi - lo, lo))

    who_l, kinds_l = who.tolist(), kinds.tolist()
    for step, e in enumerate(order.tolist()):
        if deadline is not None and step % 1024 == 0 and time.monotonic() > deadline:
            return out, stack_above(problem, out)
        i = who_l[e]
        z, al = size[i], align[i]
        if kinds_l[e] == 0:  # release: merge with the holes on either side
            lo, hi = int(out[i]), int(out[i]) + z
            k = bisect.bisect_left(hole_lo, lo)
            if k > 0 and hole_hi[hole_lo[k - 1]] == lo:
                lo = hole_lo[k - 1]
                remove(lo)
            if hi in hole_hi:
                hi = remove(hi)
            add(lo, hi)
            continue
        placed = None
        k = bisect.bisect_left(by_size, (z, -1))
        for length, lo in by_size[k:k + CANDIDATE_HOLES]:
            off = -(-lo // al) * al
            if off + z <= lo + length:
                placed = off
                hi = remove(lo)
                add(lo, off)
                add(off + z, hi)
                break
        if placed is None:
            placed = -(-top // al) * al
            old_top = top
            top = placed + z
            if placed > old_top:  # the alignment gap becomes a hole
                bisect.insort(hole_lo, old_top)
                hole_hi[old_top] = placed
                bisect.insort(by_size, (placed - old_top, old_top))
        out[i] = placed
    return out, 0


def pack_start(problem: Problem, deadline: float, *, index: OverlapIndex | None = None) -> tuple[np.ndarray, str]:
    """The lowest-peak complete placement found before ``deadline``: online allocator, then best fit.

    Returns offsets int64 ``[n]`` and the name of the placement that won. When the deadline cuts the
    online allocator short, the buffers it did not reach are stacked above the rest (:func:`stack_above`)
    and the name says how many (``online (cut short: K of N stacked)``).
    """
    size = problem.arrays.size
    best, stacked = online_pack_until(problem, deadline)
    if stacked:
        return best, f"online (cut short: {stacked} of {problem.n} stacked)"
    name = "online"
    if problem.n == 0:
        return best, name
    best_peak = int((best + size).max())
    index = index or overlap_index(problem)
    for label, order in heap_orders(problem).items():
        if time.monotonic() >= deadline:
            break
        x = greedy_place(problem, order, None, index=index, deadline=deadline)
        if (x >= 0).all() and int((x + size).max()) < best_peak:
            best, name, best_peak = x, f"best-fit {label}", int((x + size).max())
    return best, name
