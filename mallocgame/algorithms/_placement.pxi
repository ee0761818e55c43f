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
# One sort of the buffers by (density descending, NaN last; size descending; length descending; index), then each
# run that ties on the three numeric keys sorted by the ids' ranks (then index): numpy's lexsort of the reference,
# without its passes over a column of strings.

cdef extern from * nogil:
    """
    #include <algorithm>
    #include <cmath>
    #include <vector>
    struct XlaKey { double density; long long size, length, rank, index; };
    struct XlaNumericLess {  // numpy's ascending order of -density (NaN last), -size, -length; then the index
        bool operator()(const XlaKey& x, const XlaKey& y) const {
            bool xn = std::isnan(x.density), yn = std::isnan(y.density);
            if (xn != yn) return yn;
            if (!xn && x.density != y.density) return x.density > y.density;
            if (x.size != y.size) return x.size > y.size;
            if (x.length != y.length) return x.length > y.length;
            return x.index < y.index;
        }
    };
    struct XlaTieLess {  // within a tie of the numeric keys: the id's rank, then the index
        bool operator()(const XlaKey& x, const XlaKey& y) const {
            if (x.rank != y.rank) return x.rank < y.rank;
            return x.index < y.index;
        }
    };
    static void xla_sort_numeric(std::vector<XlaKey>& v) { std::sort(v.begin(), v.end(), XlaNumericLess()); }
    static void xla_sort_tie(std::vector<XlaKey>& v, size_t lo, size_t hi) {
        std::sort(v.begin() + lo, v.begin() + hi, XlaTieLess());
    }
    static inline bool xla_numeric_tie(const XlaKey& x, const XlaKey& y) {
        bool xn = std::isnan(x.density), yn = std::isnan(y.density);
        if (xn != yn || (!xn && x.density != y.density)) return false;
        return x.size == y.size && x.length == y.length;
    }
    """
    cdef cppclass XlaKey:
        double density
        long long size, length, rank, index
    void xla_sort_numeric(vector[XlaKey]& v)
    void xla_sort_tie(vector[XlaKey]& v, size_t lo, size_t hi)
    bint xla_numeric_tie(const XlaKey& x, const XlaKey& y)


def xla_order_loop(const double[::1] density, const long long[::1] size, const long long[::1] length):
    """int64 ``[n]``: the buffers by density, size and length descending (NaN densities last), ties by index;
    and whether any two tie on those three keys (:func:`xla_ties_loop` then orders the ties by id)."""
    cdef Py_ssize_t n = density.shape[0], i
    cdef vector[XlaKey] keys = vector[XlaKey](n)
    for i in range(n):
        keys[i].density = density[i]
        keys[i].size = size[i]
        keys[i].length = length[i]
        keys[i].rank = 0
        keys[i].index = i
    with nogil:
        xla_sort_numeric(keys)
    cdef bint tied = False
    for i in range(1, n):
        if xla_numeric_tie(keys[i - 1], keys[i]):
            tied = True
            break
    out = np.empty(n, np.int64)
    cdef long long[::1] o = out
    for i in range(n):
        o[i] = keys[i].index
    return out, tied


def xla_ties_loop(long long[::1] order, const double[::1] density, const long long[::1] size,
                  const long long[::1] length, const long long[::1] rank):
    """Order in place each run of ``order`` (as :func:`xla_order_loop` gives it) that ties on density, size and
    length by ``rank`` (int64 ``[n]``, each buffer's id's rank), then index."""
    cdef Py_ssize_t n = order.shape[0], i, lo, hi
    cdef vector[XlaKey] keys = vector[XlaKey](n)
    cdef long long b
    for i in range(n):
        b = order[i]
        keys[i].density = density[b]
        keys[i].size = size[b]
        keys[i].length = length[b]
        keys[i].rank = rank[b]
        keys[i].index = b
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and xla_numeric_tie(keys[lo], keys[hi]):
            hi += 1
        if hi - lo > 1:
            xla_sort_tie(keys, lo, hi)
        lo = hi
    for i in range(n):
        order[i] = keys[i].index
