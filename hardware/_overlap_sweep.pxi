# ---- the validator's overlap sweep (mallocgame/hardware/_overlap_sweep.pxi) -----------------------------------
# The validator's sweep over time, compiled (the ``native`` engine of
# ``mallocgame.hardware.validator.first_overlap``), and the readings of an answer into columns it sweeps.
#
# :func:`first_overlap_merged` walks the placed buffers' events by (time, kind, index), a release before an
# allocation at equal times, keeps the live placed buffers as (offset, top, index) in an ordered set, and at each
# allocation looks at the items just before and just after where the new one goes, exactly as the Python sweep
# does, so both report the same first pair. tests/test_engine_validator.py checks both engines against each other.

from libcpp.set cimport set as cpp_set
from libcpp.pair cimport pair
from cython.operator cimport dereference as deref, preincrement as inc, predecrement as dec

ctypedef pair[pair[long long, long long], long long] LiveItem  # ((offset, top), index)


# ---- a prefetch answer's intervals as columns (mallocgame.hardware.validator.interval_columns) -------------------

cdef inline bint _exact_int(object x, long long* out):
    # an exact int that fits in 64 bits (no bool, no numpy scalar: those take the Python path, as before)
    if type(x) is not int:
        return False
    try:
        out[0] = x
    except OverflowError:
        return False
    return True


def interval_columns_loop(intervals):
    """int64 ``[n, 6]``: each interval's ``(buffer, offset, start, end, copy_start is not None, copy_start or 0)``,
    or ``None`` when a field is not an exact 64-bit int (the caller then builds them in Python)."""
    cdef Py_ssize_t n = len(intervals), i = 0
    out = np.empty((n, 6), np.int64)
    cdef long long[:, ::1] v = out
    cdef long long x
    for iv in intervals:
        if i >= n:
            return None
        if not _exact_int(iv.buffer, &x):
            return None
        v[i, 0] = x
        if not _exact_int(iv.offset, &x):
            return None
        v[i, 1] = x
        if not _exact_int(iv.start, &x):
            return None
        v[i, 2] = x
        if not _exact_int(iv.end, &x):
            return None
        v[i, 3] = x
        c = iv.copy_start
        if c is None:
            v[i, 4], v[i, 5] = 0, 0
        else:
            if not _exact_int(c, &x):
                return None
            v[i, 4], v[i, 5] = 1, x
        i += 1
    return out if i == n else None


# ---- a map or pack answer's offsets as columns, and the sweep over them (mallocgame.hardware.validator) ----------

def offset_columns_loop(offsets):
    """``(offset, placed)``: int64 ``[n]`` (0 where slow) and bool ``[n]`` of an answer's offsets (``None`` slow), or
    ``None`` when an entry is neither ``None`` nor an exact 64-bit int (the caller then reads them in Python)."""
    cdef Py_ssize_t n = len(offsets), i = 0
    off = np.zeros(n, np.int64)
    placed = np.zeros(n, np.bool_)
    cdef long long[::1] o = off
    cdef unsigned char[::1] p = placed.view(np.uint8)
    cdef long long x
    for item in offsets:
        if i >= n:
            return None
        if item is not None:
            if not _exact_int(item, &x):
                return None
            o[i] = x
            p[i] = 1
        i += 1
    return (off, placed) if i == n else None


def first_overlap_merged(const long long[::1] by_start, const long long[::1] by_end,
                         const long long[::1] start, const long long[::1] end,
                         const long long[::1] offset, const long long[::1] top):
    """``(i, j)``: the first live-overlapping pair sharing an address (``i`` the one already live), or ``(-1, -1)``.

    ``by_start``: the placed buffers by (start, index); ``by_end``: the same by (end, index); merged, a release
    before an allocation at equal times, they are the events by (time, kind, index). ``start``/``end``/``offset``/
    ``top``: every buffer's live range and address range (read only for the buffers the orders name)."""
    cdef cpp_set[LiveItem] active
    cdef cpp_set[LiveItem].iterator it
    cdef LiveItem item, near
    cdef Py_ssize_t a = 0, r = 0, n = by_start.shape[0]
    cdef long long i
    cdef bint release
    with nogil:
        while a < n:  # after the last allocation no new pair can appear
            release = r < n and end[by_end[r]] <= start[by_start[a]]
            i = by_end[r] if release else by_start[a]
            item.first.first = offset[i]
            item.first.second = top[i]
            item.second = i
            if release:
                r += 1
                active.erase(item)
                continue
            a += 1
            it = active.lower_bound(item)
            if it != active.begin():
                dec(it)
                near = deref(it)
                if near.first.first < item.first.second and item.first.first < near.first.second:
                    with gil:
                        return near.second, i
                inc(it)
            if it != active.end():
                near = deref(it)
                if near.first.first < item.first.second and item.first.first < near.first.second:
                    with gil:
                        return near.second, i
            active.insert(item)
    return -1, -1
