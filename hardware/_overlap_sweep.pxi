# ---- the validator's overlap sweep (mallocgame/hardware/_overlap_sweep.pxi) -----------------------------------
# The validator's sweep over time, compiled (the ``native`` engine of
# ``mallocgame.hardware.validator.first_overlap``).
#
# One function, :func:`first_overlap_loop`: it walks the events in the order given (the caller sorts them by
# (time, kind, index), a release before an allocation at equal times), keeps the live placed buffers as
# (offset, top, index) in an ordered set, and at each allocation looks at the items just before and just after
# where the new one goes, exactly as the Python sweep does, so both report the same first pair.
# tests/test_evaluator_validator.py checks both engines against each other.

from libcpp.set cimport set as cpp_set
from libcpp.pair cimport pair
from cython.operator cimport dereference as deref, preincrement as inc, predecrement as dec

ctypedef pair[pair[long long, long long], long long] LiveItem  # ((offset, top), index)


def first_overlap_loop(const long long[::1] event_index, const signed char[::1] event_kind,
                       const long long[::1] offset, const long long[::1] top):
    """``(i, j)``: the first live-overlapping pair sharing an address (``i`` the one already live), or ``(-1, -1)``.

    ``event_index[e]``/``event_kind[e]``: the buffer and kind (0 release, 1 allocate) of the e-th event, sorted;
    ``offset``/``top``: every buffer's address range (read only for the buffers the events name).
    """
    cdef cpp_set[LiveItem] active
    cdef cpp_set[LiveItem].iterator it
    cdef LiveItem item, near
    cdef Py_ssize_t e, n_events = event_index.shape[0]
    cdef long long i
    with nogil:
        for e in range(n_events):
            i = event_index[e]
            item.first.first = offset[i]
            item.first.second = top[i]
            item.second = i
            if event_kind[e] == 0:
                active.erase(item)
                continue
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
