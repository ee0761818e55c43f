# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: language = c++
"""The offsets the prefetch game offers a new interval, compiled (``PrefetchGame._holes``).

Per decision the game finds the free holes beside the intervals placed over the new interval's
time, then XLA's look-ahead best fit: a binary search over the buffer's later touches for the
longest stay with a hole, each probe a sweep over the placed intervals. In NumPy that is a mask
over every placed interval and a sort per probe, the largest cost of a greedy episode once the
copy service is compiled (docs/results.md, "The compiled parts of the prefetch game"). Here the
intervals live somewhere in ``[a, last later touch]`` are
gathered once and sorted by offset once (C++ ``std::sort``), each probe is one sweep that skips
those starting after its horizon, and only the ``k`` holes offered become Python tuples. The
results are those of ``free_holes`` and ``best_fit_offset`` (mallocgame.search.game_order,
mallocgame.placement) on the same sets; tests/test_prefetch_holes.py checks them against those.
"""

from libc.stdlib cimport free, malloc
from libcpp.algorithm cimport sort


cdef struct Rect:  # a placed interval: addresses [off, top), occupied from op occ
    long long off
    long long top
    long long occ


cdef struct Hole:  # a free hole [bottom, top) that holds the buffer at its aligned bottom offset
    long long offset
    long long bottom
    long long top


cdef inline bint _by_address(const Rect& p, const Rect& q) noexcept nogil:
    # by offset only: among intervals at one offset no hole opens after the first (its top is above it), so their
    # order changes neither the holes nor the best fit
    return p.off < q.off


cdef inline long long _align_up(long long x, long long align) noexcept nogil:
    return -((-x) // align) * align  # Python's floor division (cdivision is off), as game_order's free_holes


cdef long long _best_fit(Rect* rs, Py_ssize_t n, long long horizon, long long size, long long align,
                         long long cap, bint bounded) noexcept nogil:
    """``best_fit_offset`` over the rects that start before ``horizon`` (-1: none fits)."""
    cdef long long cur = 0, a, best_len = -1, best_off = -1
    cdef Py_ssize_t i
    for i in range(n):
        if rs[i].occ >= horizon:
            continue
        if rs[i].off > cur:
            a = _align_up(cur, align)
            if a + size <= rs[i].off and (best_len < 0 or rs[i].off - cur < best_len):
                best_len = rs[i].off - cur
                best_off = a
        if rs[i].top > cur:
            cur = rs[i].top
    a = _align_up(cur, align)
    if not bounded:
        return best_off if best_off >= 0 else a
    if a + size <= cap and (best_len < 0 or cap - cur < best_len):
        best_off = a
    return best_off


def prefetch_holes(const long long[::1] occ, const long long[::1] end, const long long[::1] off,
                   const long long[::1] top, Py_ssize_t m, long long a, long long t, later, long long size,
                   long long align, capacity, Py_ssize_t k):
    """``[(offset, hole bottom, hole top)]`` for a new interval occupying from op ``a`` and serving op ``t``:
    the look-ahead best fit first (its hole among the intervals live over ``[a, t]``), then the lowest other
    free holes' aligned bottoms, ``k`` in all; ``[]`` when no hole holds ``size``.

    ``occ``/``end``/``off``/``top`` (``[>= m]``, int64): the placed intervals, occupied ``[occ, end)`` x
    ``[off, top)``; ``later``: the buffer's later touches (ops, ascending); ``capacity``: bytes or ``None``
    (unbounded, the top hole's top is then ``inf``).
    """
    cdef bint bounded = capacity is not None
    cdef long long cap = capacity if bounded else (1LL << 62)
    cdef Rect* rs = <Rect*> malloc((m + 1) * sizeof(Rect))
    cdef Hole* hs = <Hole*> malloc((m + 2) * sizeof(Hole))
    if rs == NULL or hs == NULL:
        free(rs)
        free(hs)
        raise MemoryError()
    cdef Py_ssize_t n = 0, nh, i, lo, hi, mid
    cdef bint top_hole
    cdef long long cur = 0, base, near = t + 1, stay, best
    # only intervals live somewhere in [a, last later touch] can close a hole of any probe: sort just those
    cdef long long reach = (<long long> later[len(later) - 1]) + 1 if len(later) else near
    if reach < near:
        reach = near
    try:
        for i in range(m):
            if end[i] > a and occ[i] < reach:
                rs[n].off = off[i]
                rs[n].top = top[i]
                rs[n].occ = occ[i]
                n += 1
        sort(rs, rs + n, _by_address)
        # the free holes among the intervals live over [a, t], kept in C: only k of them become tuples
        nh = 0
        for i in range(n):
            if rs[i].occ >= near:
                continue
            if rs[i].off > cur:
                base = _align_up(cur, align)
                if base + size <= rs[i].off:
                    hs[nh].offset, hs[nh].bottom, hs[nh].top = base, cur, rs[i].off
                    nh += 1
            if rs[i].top > cur:
                cur = rs[i].top
        base = _align_up(cur, align)
        top_hole = base + size <= cap  # the hole above everything, up to the capacity
        if top_hole:
            hs[nh].offset, hs[nh].bottom, hs[nh].top = base, cur, cap
            nh += 1
        if nh == 0:
            return []
        # XLA's best fit with look-ahead: the smallest hole free for the longest stay that the buffer's later
        # touches can use, which keeps the interval extendable.
        lo, hi, stay = 0, len(later), near
        while lo < hi:
            mid = (lo + hi + 1) // 2
            # a hole among the intervals live before the probe's horizon (unbounded: the top one always is)
            if not bounded or _best_fit(rs, n, <long long> later[mid - 1] + 1, size, align, cap, True) >= 0:
                lo, stay = mid, <long long> later[mid - 1] + 1
            else:
                hi = mid - 1
        best = _best_fit(rs, n, stay, size, align, cap, bounded)
        top_value = capacity if bounded else float("inf")
        out = []
        for i in range(nh):  # the best fit's hole (best lies in exactly one)
            if hs[i].bottom <= best < hs[i].top:
                out.append((best, hs[i].bottom, top_value if top_hole and i == nh - 1 else hs[i].top))
                break
        for i in range(nh):
            if len(out) == k:
                break
            if hs[i].offset != best:
                out.append((hs[i].offset, hs[i].bottom, top_value if top_hole and i == nh - 1 else hs[i].top))
        return out
    finally:
        free(rs)
        free(hs)
