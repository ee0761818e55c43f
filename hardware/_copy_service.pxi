# ---- the async-copy service (hardware/_copy_service.pxi) -------------------------------------------------
# XLA's async-copy service, compiled: the loop behind :func:`mallocgame.hardware.prefetch_cost.serve_copies_left`.
#
# The evaluator, ``msa`` and the prefetch game serve copies on every answer, every decision and every
# step; the game re-serves a covered run of copies per step, and in Python that loop is a large share
# of a greedy episode (docs/results.md, "The compiled parts of the prefetch game"). The arithmetic is
# the Python loop's, step for step (``take = min(need, left)``,
# ``need -= take``, ``left -= take``, IEEE doubles, no reassociation), so the stalls and budgets are
# bit-identical to it; tests/test_copy_service.py holds that loop as the reference and checks it.

from libc.stdlib cimport free, malloc


cdef inline Py_ssize_t next_open(Py_ssize_t* nxt, Py_ssize_t t) noexcept nogil:
    # union-find "next open slot" with path compression (mallocgame.problem.intervals.next_open)
    cdef Py_ssize_t root = t, up
    while nxt[root] != root:
        root = nxt[root]
    while nxt[t] != root:
        up = nxt[t]
        nxt[t] = root
        t = up
    return root


cdef inline double serve_one(double* left, Py_ssize_t* nxt, Py_ssize_t n, Py_ssize_t first, Py_ssize_t deadline,
                              double need) noexcept nogil:
    """Serve one copy from the earliest budget left in ``[first, deadline)``; returns its stall."""
    cdef Py_ssize_t t, end
    cdef double take
    if first < n:
        t = next_open(nxt, first if first > 0 else 0)
    else:
        t = n
    end = deadline if deadline < n else n
    while need > 0 and t < end:
        take = need if need < left[t] else left[t]
        need -= take
        left[t] -= take
        if left[t] <= 0:
            nxt[t] = t + 1
            t = next_open(nxt, t + 1)
        else:
            break
    return need if need > 0 else 0.0

import numpy as np


cdef int _alloc(Py_ssize_t n, double** left, Py_ssize_t** nxt) except -1:
    left[0] = <double*> malloc((n + 1) * sizeof(double))
    nxt[0] = <Py_ssize_t*> malloc((n + 1) * sizeof(Py_ssize_t))
    if left[0] == NULL or nxt[0] == NULL:
        free(left[0])
        free(nxt[0])
        raise MemoryError()
    cdef Py_ssize_t i
    for i in range(n + 1):
        nxt[0][i] = i
    return 0


def serve_copies_left(copies, budgets):
    """Serve ``(first, deadline, seconds)`` copies in the given order from ``budgets`` ``[T]``; returns
    ``(stalls, left)``: each copy's stall (a list) and the budget left per slot (a list of ``T`` floats)."""
    cdef double[::1] given = np.ascontiguousarray(budgets, dtype=np.float64)
    cdef Py_ssize_t n = given.shape[0], i
    cdef double* left
    cdef Py_ssize_t* nxt
    _alloc(n, &left, &nxt)
    try:
        for i in range(n):
            left[i] = given[i]
        stalls = [serve_one(left, nxt, n, copy[0], copy[1], copy[2]) for copy in copies]
        return stalls, [left[i] for i in range(n)]
    finally:
        free(left)
        free(nxt)


def serve_queue(list queue, Py_ssize_t start, Py_ssize_t stop, list budgets, Py_ssize_t lo, Py_ssize_t hi,
                dict stalls):
    """The same service for the copies ``queue[start:stop]``, kept as ``(deadline, first, buffer, rect, seconds)`` tuples
    in service order (the prefetch game's queues), on the slots ``lo..hi-1`` of ``budgets`` (a list of floats, the
    game's op times; windows inside ``[lo, hi]``). ``stalls`` (rect -> stall) is brought up to date in place;
    returns ``(changes, delta)``: ``[(rect, old stall)]`` for the stalls that changed and the sum of the changes.
    No slice, shifted copy or list of all stalls is built: a step of the game re-serves thousands of copies of a
    run that spans the program and changes a few of their stalls."""
    cdef Py_ssize_t n = hi - lo, i
    cdef double* left
    cdef Py_ssize_t* nxt
    cdef double stall, old, delta = 0.0
    _alloc(n, &left, &nxt)
    changes = []
    try:
        for i in range(n):
            left[i] = budgets[lo + i]
        for i in range(start, stop):
            c = queue[i]
            stall = serve_one(left, nxt, n, <Py_ssize_t> c[1] - lo, <Py_ssize_t> c[0] - lo, c[4])
            r = c[3]
            old = stalls[r]
            if stall != old:
                changes.append((r, old))
                stalls[r] = stall
                delta += stall - old
        return changes, delta
    finally:
        free(left)
        free(nxt)
