# ---- the ordered best-fit placement loop (mallocgame/algorithms/_placement.pxi) -------------------------------------
# The ordered best-fit placement loop, compiled (the ``native`` engine of ``mallocgame.algorithms.placement.greedy_place``).
#
# One function, :func:`greedy_place_loop`: it places the buffers of ``order`` one by one at their best-fit hole
# among the placed buffers that overlap them in time, exactly as the Python loop does (the same neighbour sets,
# the same holes, the same tie-breaking, the same clock reads), and writes the offsets in place. The neighbour
# sets come either from the interference graph's CSR lists or from the arrays of an
# ``mallocgame.problem.intervals.OverlapIndex`` (its checkpoint sets flattened to CSR), whichever the Python loop would
# have used. tests/test_engine_placement.py checks both engines against each other.

from libc.math cimport isnan
from libcpp.algorithm cimport sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC

ctypedef long long i64
ctypedef pair[i64, i64] Range  # a placed neighbour's (offset, top)


cdef inline double _monotonic() noexcept nogil:
    # the clock time.monotonic() reads on Linux
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9




cdef inline Py_ssize_t _lower_bound(const long long[::1] a, long long x) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = a.shape[0], mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _upper_bound(const long long[::1] a, long long x) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = a.shape[0], mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef long long _best_fit(vector[Range]& ranges, long long size, long long align,
                         bint has_capacity, long long capacity, bint *found) noexcept nogil:
    """The hole the Python ``best_fit_offset`` picks among ``ranges`` (``(offset, top)``, sorted here).

    Below its numpy threshold (48 ranges) the Python code skips empty gaps (``o > cur``), above it it
    considers them too (``o >= cur``); they differ only for a zero-size buffer, and so does this.
    """
    cdef bint with_empty = ranges.size() >= 48
    cdef long long cur = 0, a, best_len = -1, best_off = 0, o, t, top_len
    cdef bint have = False
    cdef size_t k
    sort(ranges.begin(), ranges.end())
    for k in range(ranges.size()):
        o = ranges[k].first
        t = ranges[k].second
        if o > cur or (with_empty and o == cur):
            a = _align_up(cur, align)
            if a + size <= o and (not have or o - cur < best_len):
                have, best_len, best_off = True, o - cur, a
        if t > cur:
            cur = t
    a = _align_up(cur, align)
    found[0] = True
    if not has_capacity:
        return best_off if have else a
    if a + size <= capacity and (not have or capacity - cur < best_len):
        return a
    found[0] = have
    return best_off


def greedy_place_loop(const long long[::1] order, const long long[::1] size, const long long[::1] align,
                      const long long[::1] start, const long long[::1] end, long long[::1] out,
                      object capacity, object csr_indptr, object csr_indices,
                      object idx_order, object idx_sorted_start, object cp_time, object cp_pos,
                      object cp_indptr, object cp_indices, object deadline, double late,
                      Py_ssize_t clock_every_step):
    """Place ``order``'s buffers at their best-fit holes, writing ``out`` (int64 ``[n]``, -1 = unplaced) in place.

    Neighbours come from the CSR lists ``csr_indptr``/``csr_indices`` when they are given, else from an
    ``OverlapIndex``'s arrays (``idx_order``, ``idx_sorted_start``, ``cp_time``, ``cp_pos`` and its checkpoint
    sets as CSR ``cp_indptr``/``cp_indices``). ``deadline`` (monotonic seconds or ``None``) and ``late`` (the
    deadline plus the grace of the first 256 buffers) are read as the Python loop reads them.
    """
    cdef Py_ssize_t n = out.shape[0], m = order.shape[0], step, i, j, q, k, hi, total
    cdef bint has_capacity = capacity is not None
    cdef long long cap = capacity if has_capacity else 0
    cdef bint has_deadline = deadline is not None
    cdef double dl = deadline if has_deadline else 0.0
    cdef bint use_csr = csr_indptr is not None
    cdef const long long[::1] c_ptr, c_idx, i_order, i_sstart, i_cptime, i_cppos, i_cpptr, i_cpidx
    cdef long long s, e, off
    cdef bint found
    cdef vector[char] placed = vector[char](n, 0)
    cdef vector[i64] tops = vector[i64](n, 0)
    cdef vector[Range] ranges
    if use_csr:
        c_ptr = csr_indptr
        c_idx = csr_indices
    else:
        i_order = idx_order
        i_sstart = idx_sorted_start
        i_cptime = cp_time
        i_cppos = cp_pos
        i_cpptr = cp_indptr
        i_cpidx = cp_indices
    for i in range(n):
        if out[i] >= 0:
            placed[i] = 1
            tops[i] = out[i] + size[i]
    with nogil:
        for step in range(m):
            i = order[step]
            if placed[i]:
                continue
            if has_deadline and step and step % 256 == 0 and _monotonic() > dl:
                break
            if has_capacity and size[i] > cap:
                continue
            ranges.clear()
            total = 0
            if use_csr:
                total = c_ptr[i + 1] - c_ptr[i]
                for q in range(c_ptr[i], c_ptr[i + 1]):
                    j = c_idx[q]
                    if placed[j]:
                        ranges.push_back(Range(out[j], tops[j]))
            else:
                s, e = start[i], end[i]
                if i_cptime.shape[0] != 0 and e > s:
                    k = _upper_bound(i_cptime, s) - 1
                    hi = _lower_bound(i_sstart, e)
                    if k < 0:
                        total = hi
                        for q in range(hi):
                            j = i_order[q]
                            if placed[j]:
                                ranges.push_back(Range(out[j], tops[j]))
                    else:
                        for q in range(i_cpptr[k], i_cpptr[k + 1]):
                            j = i_cpidx[q]
                            if end[j] > s:
                                total += 1
                                if placed[j]:
                                    ranges.push_back(Range(out[j], tops[j]))
                        for q in range(i_cppos[k], hi):
                            j = i_order[q]
                            if end[j] > s:
                                total += 1
                                if placed[j]:
                                    ranges.push_back(Range(out[j], tops[j]))
            if has_deadline and total > clock_every_step and step and \
                    _monotonic() > (dl if step >= 256 else late):
                break
            off = _best_fit(ranges, size[i], align[i], has_capacity, cap, &found)
            if found:
                out[i] = off
                placed[i] = 1
                tops[i] = off + size[i]


# ---- XLA's memory-space-assignment order (mallocgame.algorithms.placement.xla_order) ----------------------------
# A stable least-significant-digit radix sort, 8 bits a pass (a pass whose digit is the same for every buffer is
# skipped), by length descending, then size descending, then density descending (NaN last, -0.0 as 0.0): numpy's
# lexsort of the reference, from the given starting permutation (the buffers by id, when ids must break ties).
# tests/test_engine_inputs.py checks both engines against each other.

from libc.stdint cimport uint64_t
from libc.string cimport memcpy


cdef inline uint64_t _descending_int(long long x) noexcept nogil:
    # ascending in the returned key = descending in x
    return (<uint64_t>(-x)) ^ (<uint64_t>1 << 63)


cdef inline uint64_t _descending_float(double x) noexcept nogil:
    # ascending in the returned key = descending in x, NaN last, -0.0 equal to 0.0 (numpy's sort of -x)
    cdef double y
    cdef uint64_t bits
    if x != x:
        return <uint64_t>0xFFFFFFFFFFFFFFFF
    y = -x
    if y == 0.0:
        y = 0.0
    memcpy(&bits, &y, 8)
    if bits >> 63:
        return ~bits
    return bits | (<uint64_t>1 << 63)


cdef void _radix_pass_all(const uint64_t* key, long long* perm, long long* tmp, uint64_t* kv, uint64_t* kv_tmp,
                          Py_ssize_t n) noexcept nogil:
    # sort perm (stable) by key[perm[i]], 8 bits at a time from the lowest; the keys travel with the permutation
    # (one gather, then every pass reads and writes in sequence); the result ends in perm
    cdef Py_ssize_t i, shift, d
    cdef Py_ssize_t count[256]
    cdef long long* src = perm
    cdef long long* dst = tmp
    cdef uint64_t* ksrc = kv
    cdef uint64_t* kdst = kv_tmp
    cdef long long* swap
    cdef uint64_t* kswap
    cdef Py_ssize_t total, c
    for i in range(n):
        kv[i] = key[perm[i]]
    for shift in range(0, 64, 8):
        for d in range(256):
            count[d] = 0
        for i in range(n):
            count[(ksrc[i] >> shift) & 255] += 1
        if n and count[(ksrc[0] >> shift) & 255] == n:
            continue  # every buffer has the same digit here
        total = 0
        for d in range(256):
            c = count[d]
            count[d] = total
            total += c
        for i in range(n):
            d = (ksrc[i] >> shift) & 255
            dst[count[d]] = src[i]
            kdst[count[d]] = ksrc[i]
            count[d] += 1
        swap = src
        src = dst
        dst = swap
        kswap = ksrc
        ksrc = kdst
        kdst = kswap
    if src != perm:
        memcpy(perm, src, n * sizeof(long long))


def xla_order_loop(const double[::1] density, const long long[::1] size, const long long[::1] length,
                   start=None):
    """int64 ``[n]``: the buffers by density, size and length descending (NaN densities last), ties in the order
    of ``start`` (a permutation, int64 ``[n]``; default: by index); and whether any two tie on those three keys
    (the caller then passes the buffers by id as ``start``)."""
    cdef Py_ssize_t n = density.shape[0], i
    out = np.arange(n, dtype=np.int64) if start is None else np.array(start, np.int64)
    cdef long long[::1] perm = out
    tmp_a = np.empty(n, np.int64)
    cdef long long[::1] tmp = tmp_a
    key_a = np.empty(n, np.uint64)
    cdef uint64_t[::1] key = key_a
    kv_a = np.empty(n, np.uint64)
    cdef uint64_t[::1] kv = kv_a
    kv_tmp_a = np.empty(n, np.uint64)
    cdef uint64_t[::1] kv_tmp = kv_tmp_a
    cdef bint tied = False
    if n == 0:
        return out, tied
    with nogil:
        for i in range(n):
            key[i] = _descending_int(length[i])
        _radix_pass_all(&key[0], &perm[0], &tmp[0], &kv[0], &kv_tmp[0], n)
        for i in range(n):
            key[i] = _descending_int(size[i])
        _radix_pass_all(&key[0], &perm[0], &tmp[0], &kv[0], &kv_tmp[0], n)
        for i in range(n):
            key[i] = _descending_float(density[i])
        _radix_pass_all(&key[0], &perm[0], &tmp[0], &kv[0], &kv_tmp[0], n)
        for i in range(1, n):
            if key[perm[i]] == key[perm[i - 1]] and size[perm[i]] == size[perm[i - 1]] and \
                    length[perm[i]] == length[perm[i - 1]]:
                tied = True
                break
    return out, tied
