# XLA's async-copy service at C level: shared by this module's loops and the compiled prefetch game
# (search/_prefetch_game.pyx), which cimports it.


cdef inline Py_ssize_t next_open(Py_ssize_t* nxt, Py_ssize_t t) noexcept nogil:
    # union-find "next open slot" with path compression (mallocgame.intervals.next_open)
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
