# ---- the prefetch game's hole finder (search/_prefetch_holes.pxi) ----------------------------------------
# The offsets the prefetch game offers a new interval, compiled (``PrefetchGame._holes``).
#
# Per decision the game finds the free holes beside the intervals placed over the new interval's
# time, then XLA's look-ahead best fit: a binary search over the buffer's later touches for the
# longest stay with a hole, each probe a sweep over the placed intervals. In NumPy that is a mask
# over every placed interval and a sort per probe, the largest cost of a greedy episode once the
# copy service is compiled (docs/results.md, "The compiled parts of the prefetch game"). Here the
# intervals live somewhere in ``[a, last later touch]`` are
# gathered once and sorted by offset once (C++ ``std::sort``), each probe is one sweep that skips
# those starting after its horizon, and only the ``k`` holes offered become Python tuples. The
# results are those of ``free_holes`` and ``best_fit_offset`` (mallocgame.search.game_order,
# mallocgame.algorithms.placement) on the same sets; tests/test_prefetch_holes.py checks them against those.

from libcpp.algorithm cimport sort
from libcpp.vector cimport vector






cdef long long _fit_below(const Rect* rs, Py_ssize_t n, long long horizon, long long size, long long align,
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


cdef Py_ssize_t holes_among(vector[Rect]& rs, long long t, const long long* later, Py_ssize_t n_later, long long size,
                            long long align, long long cap, bint bounded, Py_ssize_t k, vector[Hole]& hs, Hole* out,
                            bint* top_is_inf, bint by_offset) noexcept nogil:
    """The holes :func:`prefetch_holes` offers, written to ``out`` (room for ``k``); returns how many.

    ``rs``: the placed intervals live somewhere in ``[a, reach)`` (``end > a`` and ``occ < reach``, ``reach`` the
    later of ``t + 1`` and the last later touch + 1), in any order (sorted here, in place). ``top_is_inf[j]``:
    hole ``j`` is the unbounded hole above everything (its top is ``inf``, not ``cap``). ``hs``: scratch.
    Without a bound, ``cap`` is any value above every address (the top hole's top). ``by_offset``: ``rs`` is
    already in offset order (not sorted again)."""
    cdef Py_ssize_t n, nh, i, lo, hi, mid, n_out = 0
    cdef bint top_hole
    cdef long long cur = 0, base, near = t + 1, stay, best
    n = rs.size()
    if not by_offset:
        sort(rs.begin(), rs.end(), _by_address)
    # the free holes among the intervals live over [a, t]
    hs.clear()
    cdef Hole h
    for i in range(n):
        if rs[i].occ >= near:
            continue
        if rs[i].off > cur:
            base = _align_up(cur, align)
            if base + size <= rs[i].off:
                h.offset, h.bottom, h.top = base, cur, rs[i].off
                hs.push_back(h)
        if rs[i].top > cur:
            cur = rs[i].top
    base = _align_up(cur, align)
    top_hole = base + size <= cap  # the hole above everything, up to the capacity
    if top_hole:
        h.offset, h.bottom, h.top = base, cur, cap
        hs.push_back(h)
    nh = hs.size()
    if nh == 0 or k <= 0:  # k >= 1 in every game (GameConfig)
        return 0
    # XLA's best fit with look-ahead: the smallest hole free for the longest stay that the buffer's later
    # touches can use, which keeps the interval extendable.
    lo, hi, stay = 0, n_later, near
    while lo < hi:
        mid = (lo + hi + 1) // 2
        # a hole among the intervals live before the probe's horizon (unbounded: the top one always is)
        if not bounded or _fit_below(rs.data(), n, later[mid - 1] + 1, size, align, cap, True) >= 0:
            lo, stay = mid, later[mid - 1] + 1
        else:
            hi = mid - 1
    best = _fit_below(rs.data(), n, stay, size, align, cap, bounded)
    for i in range(nh):  # the best fit's hole (best lies in exactly one)
        if hs[i].bottom <= best < hs[i].top:
            out[0].offset, out[0].bottom, out[0].top = best, hs[i].bottom, hs[i].top
            top_is_inf[0] = not bounded and top_hole and i == nh - 1
            n_out = 1
            break
    for i in range(nh):
        if n_out == k:
            break
        if hs[i].offset != best:
            out[n_out] = hs[i]
            top_is_inf[n_out] = not bounded and top_hole and i == nh - 1
            n_out += 1
    return n_out


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
    cdef vector[long long] later_v = later
    cdef vector[Rect] rs
    cdef vector[Hole] hs
    cdef vector[Hole] out
    cdef vector[bint] flags
    cdef Py_ssize_t i, j, n_out
    cdef Rect r
    # only intervals live somewhere in [a, last later touch] can close a hole of any probe
    cdef long long reach = later_v.back() + 1 if later_v.size() else t + 1
    if reach < t + 1:
        reach = t + 1
    for i in range(m):
        if end[i] > a and occ[i] < reach:
            r.off, r.top, r.occ = off[i], top[i], occ[i]
            rs.push_back(r)
    out.resize(k if k > 0 else 1)
    flags.resize(k if k > 0 else 1)
    n_out = holes_among(rs, t, later_v.data(), later_v.size(), size, align, cap, bounded, k, hs, out.data(),
                        flags.data(), False)
    return [(out[j].offset, out[j].bottom, float("inf") if flags[j] else out[j].top) for j in range(n_out)]
