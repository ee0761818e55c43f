# ---- the overlap index's checkpoint sets (mallocgame/problem/_overlap_index.pxi) ---------------------------------
# The stored sets of an ``mallocgame.problem.intervals.OverlapIndex`` with many checkpoints, compiled (its ``native``
# engine): buffer at start position ``j`` belongs to checkpoints ``c_lo[j] .. c_hi[j]``; the sets are filled in
# ``j`` order, so each holds its buffers in start order, exactly as the stable sort of the Python reference does.
# tests/test_engine_inputs.py checks both engines against each other.


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


def live_sum_loop(const long long[::1] sorted_start, const long long[::1] sorted_end):
    """The sum over the starts ``s`` (sorted) of the buffers live just after ``s``: ``#(starts <= s) -
    #(ends <= s)``, by one merge of the sorted starts and ends (``[n]`` each)."""
    cdef Py_ssize_t n = sorted_start.shape[0], j, a = 0, b = 0
    cdef long long total = 0, s
    for j in range(n):
        s = sorted_start[j]
        while a < n and sorted_start[a] <= s:
            a += 1
        while b < n and sorted_end[b] <= s:
            b += 1
        total += a - b
    return total


def checkpoint_runs_loop(const long long[::1] sorted_start, const long long[::1] end_in_order,
                         const long long[::1] cp_time, const long long[::1] cp_pos):
    """For the buffer at every start position ``j``, its checkpoints ``c_lo[j] .. c_hi[j]`` (int64 ``[n]`` each):
    ``c_lo[j]`` = #(cp_pos <= j), ``c_hi[j]`` = #(cp_time < end) - 1, as numpy's searchsorted gives them; the
    second by a galloping search up from ``c_lo[j]`` (live ranges span few checkpoints)."""
    cdef Py_ssize_t n = sorted_start.shape[0], m = cp_time.shape[0], j, p = 0, lo, hi, bound, step, mid
    cdef long long e
    c_lo_a = np.empty(n, np.int64)
    c_hi_a = np.empty(n, np.int64)
    cdef long long[::1] c_lo = c_lo_a, c_hi = c_hi_a
    for j in range(n):
        while p < m and cp_pos[p] <= j:
            p += 1
        c_lo[j] = p
        e = end_in_order[j]
        if p > 0 and cp_time[p - 1] >= e:  # an end at or before its start: a plain binary search
            lo, hi = 0, p
        else:
            lo, bound, step = p, p, 1
            while bound < m and cp_time[bound] < e:
                lo = bound + 1
                bound = lo + step
                step *= 2
            hi = bound if bound < m else m
        while lo < hi:  # the first checkpoint in [lo, hi) at or after e
            mid = lo + (hi - lo) // 2
            if cp_time[mid] < e:
                lo = mid + 1
            else:
                hi = mid
        c_hi[j] = lo - 1
    return c_lo_a, c_hi_a
