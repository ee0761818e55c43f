# ---- the overlap index's checkpoint sets (mallocgame/problem/_overlap_index.pxi) ---------------------------------
# The stored sets of an ``mallocgame.problem.intervals.OverlapIndex`` with many checkpoints, compiled (its ``native``
# engine): buffer at start position ``j`` belongs to checkpoints ``c_lo[j] .. c_hi[j]``; the sets are filled in
# ``j`` order, so each holds its buffers in start order, exactly as the stable sort of the Python reference does.
# tests/test_engine_overlap_index.py checks both engines against each other.


def checkpoint_sets_loop(const long long[::1] order, const long long[::1] c_lo, const long long[::1] c_hi,
                         Py_ssize_t checkpoints):
    """The checkpoint sets as CSR arrays ``(indptr [checkpoints+1], indices [stored])``: checkpoint ``c`` holds
    ``order[j]`` for every ``j`` (ascending) with ``c_lo[j] <= c <= c_hi[j]``."""
    cdef Py_ssize_t n = order.shape[0], j, c, total = 0
    indptr_a = np.zeros(checkpoints + 1, np.int64)
    cdef long long[::1] indptr = indptr_a
    for j in range(n):
        if c_hi[j] >= c_lo[j]:
            indptr[c_lo[j] + 1] += 1
            if c_hi[j] + 2 <= checkpoints:
                indptr[c_hi[j] + 2] -= 1
    cdef long long running = 0
    for c in range(1, checkpoints + 1):  # the difference array's prefix sum: the count of set c at c + 1
        running += indptr[c]
        indptr[c] = running
    for c in range(1, checkpoints + 1):  # then the counts' prefix sum: where each set starts
        indptr[c] += indptr[c - 1]
    total = indptr[checkpoints]
    indices_a = np.empty(total, np.int64)
    cdef long long[::1] indices = indices_a
    fill_a = indptr_a[:checkpoints].copy()
    cdef long long[::1] fill = fill_a
    for j in range(n):
        for c in range(c_lo[j], c_hi[j] + 1):
            indices[fill[c]] = order[j]
            fill[c] += 1
    return indptr_a, indices_a
