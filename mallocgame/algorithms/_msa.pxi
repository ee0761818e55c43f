# msa's hot parts, compiled: the ``native`` engine of ``mallocgame.algorithms.memory_space_assignment`` (MALLOCGAME_ENGINE).
#
# * :class:`NativeHeap`, the Python ``_Heap``: the fast-memory rectangles in the same time buckets, the same
#   best-fit scan and tie-breaking, over C++ vectors; :meth:`NativeHeap.near` returns a :class:`HeapPool`, an
#   opaque sorted copy of the rectangles near a time range that only the heap's own queries read.
# * :class:`NativeCopyResource`, the Python ``_CopyResource``: the copy budgets kept stall-free decision by
#   decision (witness, local problems, kept over-full intervals, undo journal), sums taken as Python's ``sum()``
#   takes them, so the same decisions and the same count of exact checks.
# * :class:`NativePrefetcher`, the Python ``_Msa.picker`` and the copy-start loop of ``_BufferTry.prefetch``.
# * :class:`NativeMsaLoop`, the buffer loop over these three: the Python ``_Msa.run`` after the cross-program
#   prefetch and its tries, ``_BufferTry``; and :func:`msa_memory_boundedness`, ``_Msa.memory_boundedness`` (the
#   buffer order's key). Python keeps the set-up, the cross-program prefetch, a hint's seeding and a hint whose
#   copies stall (``_FullCopyResource``: that run is the Python loop in both engines).
#
# Self-contained: no cimport of another module of the project. tests/test_engine_msa.py checks both engines
# against each other.


import numpy as np

from libcpp.algorithm cimport sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

ctypedef long long msa_i64


cdef struct MsaRect:  # a pool's rectangle, ordered as the Python pool's tuples (offset, top, occ, end)
    msa_i64 off
    msa_i64 top
    msa_i64 lo
    msa_i64 hi


cdef extern from * nogil:
    """
    // the sort orders of msa's pools and jobs as function objects, so that std::sort inlines the comparison:
    // rectangles by (offset, top, occ, end), jobs as _edf's tuples (deadline, first, group, first0, id, need)
    template <typename R> struct MsaRectLess {
        bool operator()(const R& x, const R& y) const {
            if (x.off != y.off) return x.off < y.off;
            if (x.top != y.top) return x.top < y.top;
            if (x.lo != y.lo) return x.lo < y.lo;
            return x.hi < y.hi;
        }
    };
    // a heap bucket's rectangle indices in that order, and one more sorted run of a pool merged into the rest
    template <typename R> struct MsaIndexLess {
        const R* r;
        explicit MsaIndexLess(const R* rects) : r(rects) {}
        bool operator()(Py_ssize_t a, Py_ssize_t b) const { return MsaRectLess<R>()(r[a], r[b]); }
    };
    template <typename R> void msa_insert_index(std::vector<Py_ssize_t>& idx, Py_ssize_t k, const R* rects) {
        MsaIndexLess<R> less(rects);
        if (idx.empty() || less(idx.back(), k)) idx.push_back(k);
        else idx.insert(std::upper_bound(idx.begin(), idx.end(), k, less), k);
    }
    template <typename R> void msa_merge_run(std::vector<R>& v, size_t mid) {
        std::inplace_merge(v.begin(), v.begin() + mid, v.end(), MsaRectLess<R>());
    }
    template <typename J> struct MsaJobLess {
        bool operator()(const J& x, const J& y) const {
            if (x.d != y.d) return x.d < y.d;
            if (x.f != y.f) return x.f < y.f;
            if (x.g != y.g) return x.g < y.g;
            if (x.f0 != y.f0) return x.f0 < y.f0;
            if (x.id != y.id) return x.id < y.id;
            return x.need < y.need;
        }
    };
    """
    cdef cppclass MsaRectLess[R]:
        MsaRectLess()
    void msa_insert_index[R](vector[Py_ssize_t]& idx, Py_ssize_t k, const R* rects)
    void msa_merge_run[R](vector[R]& v, size_t mid)
    cdef cppclass MsaJobLess[J]:
        MsaJobLess()


@cython.cdivision(True)
cdef inline msa_i64 _msa_align_up(msa_i64 x, msa_i64 a) noexcept nogil:
    # -(-x // a) * a with Python's floor division (x >= 0, a >= 1 here)
    cdef msa_i64 q = x // a
    if q * a < x:
        q += 1
    return q * a


@cython.cdivision(True)
cdef inline msa_i64 _floor_div(msa_i64 x, msa_i64 b) noexcept nogil:
    # Python's // (an op index may be -1)
    cdef msa_i64 q = x // b
    if (x % b != 0) and ((x < 0) != (b < 0)):
        q -= 1
    return q


@cython.cdivision(True)
cdef msa_i64 _best_fit_sorted(vector[pair[msa_i64, msa_i64]]& ranges, msa_i64 size, msa_i64 align, msa_i64 capacity,
                          bint *found) noexcept nogil:
    """``mallocgame.algorithms.placement._best_fit_py`` over ``ranges`` (``(offset, top)``, sorted) with a capacity."""
    cdef msa_i64 cur = 0, a, best_len = 0, best_off = 0, o, t
    cdef bint have = False
    cdef size_t k
    for k in range(ranges.size()):
        o = ranges[k].first
        t = ranges[k].second
        if o > cur:
            a = _msa_align_up(cur, align)
            if a + size <= o and (not have or o - cur < best_len):
                have, best_len, best_off = True, o - cur, a
        if t > cur:
            cur = t
    a = _msa_align_up(cur, align)
    if a + size <= capacity and (not have or capacity - cur < best_len):
        found[0] = True
        return a
    found[0] = have
    return best_off


@cython.cdivision(True)
cdef class HeapPool:
    """The rectangles meeting a time range, sorted by (offset, top, occ, end): :meth:`NativeHeap.near`."""

    cdef vector[MsaRect] rects

    def __len__(self):
        return self.rects.size()

    def as_tuples(self):
        """The pool as the Python heap's list of ``(offset, top, occ, end)`` (for tests)."""
        return [(r.off, r.top, r.lo, r.hi) for r in self.rects]


@cython.cdivision(True)
cdef class NativeHeap:
    """Committed rectangles ``[occ, end) x [offset, top)``: best-fit and free-at-offset queries over a time range.

    The same structure as the Python ``_Heap``: ``buckets[i]`` lists the rectangles overlapping ops
    ``[i * BUCKET, (i + 1) * BUCKET)``; rectangles only grow at their end (:meth:`extend`) and the newest are
    dropped on a retry (:meth:`truncate`).
    """

    cdef readonly msa_i64 capacity
    cdef readonly Py_ssize_t n
    cdef vector[MsaRect] r_  # the rectangles, each in one place (a query reads it from one cache line)
    cdef vector[vector[Py_ssize_t]] buckets
    cdef msa_i64 B

    def __init__(self, long long capacity):
        self.capacity = capacity
        self.n = 0
        self.B = 8

    @property
    def lo(self):
        return [r.lo for r in self.r_]

    @property
    def hi(self):
        return [r.hi for r in self.r_]

    @property
    def off(self):
        return [r.off for r in self.r_]

    @property
    def top(self):
        return [r.top for r in self.r_]

    cdef inline vector[Py_ssize_t]* _bucket(self, msa_i64 i) noexcept nogil:
        if i < 0 or i >= <msa_i64>self.buckets.size():
            return NULL
        return &self.buckets[i]

    cdef void _register(self, Py_ssize_t k, msa_i64 first, msa_i64 last) noexcept nogil:
        # rectangle k into buckets first..last (it is in none of them yet), each kept in the pool order
        cdef msa_i64 i
        if first < 0:  # an op index below 0: never read back (queries start at op 0)
            first = 0
        if last >= <msa_i64>self.buckets.size():
            self.buckets.resize(last + 1)
        for i in range(first, last + 1):
            msa_insert_index(self.buckets[i], k, self.r_.data())

    cpdef Py_ssize_t add(self, msa_i64 occ, msa_i64 end, msa_i64 offset, msa_i64 size):
        cdef Py_ssize_t k = self.n
        cdef MsaRect r
        r.off, r.top, r.lo, r.hi = offset, offset + size, occ, end
        self.r_.resize(k)
        self.r_.push_back(r)
        self.n += 1
        if end > occ:
            self._register(k, _floor_div(occ, self.B), _floor_div(end - 1, self.B))
        return k

    cpdef void extend(self, Py_ssize_t k, msa_i64 end):
        """Rectangle ``k`` now ends at op ``end`` (not earlier than before)."""
        cdef msa_i64 old = self.r_[k].hi, lo = self.r_[k].lo
        self.r_[k].hi = end
        if end > old and end > lo:  # the buckets after those it is in already (none if it was empty)
            self._register(k, _floor_div(old - 1, self.B) + 1 if old > lo else _floor_div(lo, self.B),
                           _floor_div(end - 1, self.B))

    cpdef void truncate(self, Py_ssize_t n):
        """Drop the rectangles added after the first ``n`` (a buffer's failed try)."""
        cdef Py_ssize_t k, j
        cdef msa_i64 lo, hi, i
        cdef vector[Py_ssize_t]* lst
        for k in range(self.n - 1, n - 1, -1):
            lo, hi = self.r_[k].lo, self.r_[k].hi
            if hi <= lo:
                continue
            for i in range(max(_floor_div(lo, self.B), 0), _floor_div(hi - 1, self.B) + 1):
                lst = &self.buckets[i]
                if not lst.empty() and lst.back() == k:
                    lst.pop_back()
                else:  # inside: the bucket is in the pool order, not the order of adding
                    for j in range(<Py_ssize_t>lst.size() - 1, -1, -1):
                        if lst[0][j] == k:
                            lst.erase(lst.begin() + j)
                            break
        self.n = n
        self.r_.resize(n)

    cdef void _near(self, msa_i64 a, msa_i64 e, vector[MsaRect]& out) noexcept nogil:
        """The rectangles meeting ops ``[a, e)`` (or covering op ``a``), each once, sorted.

        Each bucket keeps its rectangles in the pool order (inserted in place: the heap is read far more often
        than it grows), so the pool is its buckets' sorted runs merged. An :meth:`extend` moving an end can
        only reorder rectangles alike in (offset, top, occ), which share addresses at op occ: never in msa, and
        no query reads the order among equal offsets (``near`` sorts once more for its caller)."""
        cdef msa_i64 B = self.B, first = _floor_div(a, B), last = _floor_div(e - 1 if e - 1 > a else a, B), i, occ
        cdef vector[Py_ssize_t]* lst
        cdef Py_ssize_t q
        cdef size_t run
        cdef MsaRect* r
        out.clear()
        for i in range(first, last + 1):
            lst = self._bucket(i)
            if lst == NULL:
                continue
            run = out.size()
            for q in range(<Py_ssize_t>lst.size()):
                r = &self.r_[lst[0][q]]
                occ = r.lo
                # each once: in the first bucket of the range it is in (its buckets are contiguous; listed in
                # bucket i, it starts in bucket i exactly when occ >= i * B)
                if occ < e and r.hi > a and (i == first or occ >= i * B):
                    out.push_back(r[0])
            if run > 0 and out.size() > run:
                msa_merge_run(out, run)

    def near(self, msa_i64 a, msa_i64 e):
        """The rectangles meeting ops ``[a, e)``: a :class:`HeapPool` for queries inside that range (``pool=``)."""
        cdef HeapPool pool = HeapPool.__new__(HeapPool)
        self._near(a, e, pool.rects)
        sort(pool.rects.begin(), pool.rects.end(), MsaRectLess[MsaRect]())
        return pool

    def best_fit(self, msa_i64 a, msa_i64 e, msa_i64 size, msa_i64 align, HeapPool pool=None):
        """Offset of the best-fit hole free during ops ``[a, e)``, or ``None`` (``best_fit_offset``)."""
        cdef vector[MsaRect] own
        cdef bint found
        cdef msa_i64 off
        if pool is None:
            self._near(a, e, own)
            off = _pool_best_fit(own, a, e, size, align, self.capacity, &found)
        else:
            off = _pool_best_fit(pool.rects, a, e, size, align, self.capacity, &found)
        return off if found else None

    def fits(self, msa_i64 a, msa_i64 e, msa_i64 size, msa_i64 align, HeapPool pool):
        """Whether some hole holds ``size`` bytes during ops ``[a, e)`` (``best_fit(...) is not None``)."""
        cdef msa_i64 cur = 0
        cdef size_t q
        cdef MsaRect* r
        for q in range(pool.rects.size()):
            r = &pool.rects[q]
            if r.lo < e and r.hi > a:
                if r.off > cur and _msa_align_up(cur, align) + size <= r.off:
                    return True
                if r.top > cur:
                    cur = r.top
        return _msa_align_up(cur, align) + size <= self.capacity

    def free(self, msa_i64 a, msa_i64 e, msa_i64 offset, msa_i64 size, HeapPool pool=None):
        """Whether ``[offset, offset + size)`` is free during ops ``[a, e)``."""
        if pool is not None:
            return _pool_free(pool.rects, a, e, offset, size, self.capacity)
        return self._free(a, e, offset, size)

    cdef bint _free(self, msa_i64 a, msa_i64 e, msa_i64 offset, msa_i64 size) noexcept nogil:
        cdef msa_i64 end = offset + size, i, B = self.B, last
        cdef size_t q
        cdef vector[Py_ssize_t]* lst
        cdef Py_ssize_t k
        if end > self.capacity:
            return False
        last = _floor_div(e - 1 if e - 1 > a else a, B)
        for i in range(_floor_div(a, B), last + 1):
            lst = self._bucket(i)
            if lst == NULL:
                continue
            for q in range(lst.size()):
                k = lst[0][q]
                if self.r_[k].lo < e and self.r_[k].hi > a and self.r_[k].off < end and self.r_[k].top > offset:
                    return False
        return True


# ---------------------------------------------------------------------------- the async-copy resource

from cython.operator cimport dereference as deref, preincrement as inc
from libcpp.map cimport map as cmap

cdef extern from "Python.h":
    int PY_VERSION_HEX

cdef extern from "<cmath>" nogil:
    double fabs(double)
    bint isfinite(double)
    double sqrt(double)


# the summation of Python's built-in sum() over floats: plain left to right before 3.12, compensated after
cdef bint COMPENSATED_SUM = PY_VERSION_HEX >= 0x030C0000

KIND_INDEX = {"prefetch": 0, "eviction": 1}
cdef int SHORT = 16, LONG = 32, RECENT = 8, TIGHT_REACH = 8, LOOK_AHEAD = 4


cdef struct PySum:  # sum() of a sequence of floats, as CPython computes it
    double f
    double c
    bint started


@cython.cdivision(True)
cdef inline void _sum_init(PySum* s) noexcept nogil:
    s.f = 0.0
    s.c = 0.0
    s.started = False


@cython.cdivision(True)
cdef inline void _sum_add(PySum* s, double x) noexcept nogil:
    cdef double t
    if not s.started:  # 0 + x: the int start meets the first float
        s.f = 0.0 + x
        s.started = True
    elif COMPENSATED_SUM:
        t = s.f + x
        if fabs(s.f) >= fabs(x):
            s.c += (s.f - t) + x
        else:
            s.c += (x - t) + s.f
        s.f = t
    else:
        s.f += x


@cython.cdivision(True)
cdef inline double _sum_value(PySum* s) noexcept nogil:
    if COMPENSATED_SUM and s.c != 0.0 and isfinite(s.c):
        return s.f + s.c
    return s.f


cdef struct Slot:  # (op, seconds) of a copy's witness share
    int t
    double x


cdef struct Job:  # _edf's job tuple (deadline, first, group, first0, id, need)
    int d
    int f
    int g
    int f0
    int id
    double need


cdef struct MsaCopy:
    int f
    int d
    double need


cdef struct Red:  # an op's budget reduction (op, seconds), in the order the Python dict holds them
    int t
    double r


cdef struct Tight:  # a kept over-full interval: from op a, its slack
    int a
    double slack


cdef struct Recent:
    int kind
    int d
    int a
    double slack


cdef struct JEntry:  # the undo journal: what changed and its old value
    int what  # 0 saved[t], 1 times[t], 2 left[kind][t], 3 alloc[kind][t] (old in jalloc), 4 copy appended
    int kind
    int t
    double old


@cython.cdivision(True)
cdef inline bint _job_less(const Job& x, const Job& y) noexcept nogil:
    if x.d != y.d:
        return x.d < y.d
    if x.f != y.f:
        return x.f < y.f
    if x.g != y.g:
        return x.g < y.g
    if x.f0 != y.f0:
        return x.f0 < y.f0
    if x.id != y.id:
        return x.id < y.id
    return x.need < y.need


@cython.cdivision(True)
cdef void _insert_job(vector[Job]& jobs, Job& job) noexcept nogil:
    # job into sorted jobs at its place: the order sort() gives (jobs are distinct: their ids are)
    cdef size_t q = jobs.size()
    jobs.push_back(job)
    while q > 0 and _job_less(job, jobs[q - 1]):
        jobs[q] = jobs[q - 1]
        q -= 1
    jobs[q] = job


@cython.cdivision(True)
cdef void _merge_jobs(vector[Job]& a, vector[Job]& b, vector[Job]& out) noexcept nogil:
    # out = sorted(a + b) of sorted a and b (jobs are distinct: their ids are)
    cdef size_t i = 0, j = 0
    out.clear()
    out.reserve(a.size() + b.size())
    while i < a.size() and j < b.size():
        if _job_less(b[j], a[i]):
            out.push_back(b[j])
            j += 1
        else:
            out.push_back(a[i])
            i += 1
    while i < a.size():
        out.push_back(a[i])
        i += 1
    while j < b.size():
        out.push_back(b[j])
        j += 1


@cython.cdivision(True)
cdef inline int _msa_next_open(vector[int]& nxt, int t) noexcept nogil:
    cdef int root = t, nt
    while nxt[root] != root:
        root = nxt[root]
    while nxt[t] != root:
        nt = nxt[t]
        nxt[t] = root
        t = nt
    return root


cdef vector[int] _edf_next  # _edf's next-open slots, kept between calls (their memory reused)


@cython.cdivision(True)
cdef double _edf(vector[Job]& jobs, vector[double]& budgets, int base, vector[double]& left,
                 vector[vector[Slot]]& allocs, int* first_stall) noexcept nogil:
    """The Python ``_edf``: serve ``jobs`` (sorted) from their earliest slots with budget; the total stall."""
    cdef int n = <int>budgets.size(), i, f, t, end
    cdef double stall = 0.0, need, lt, take
    cdef vector[int]* nxt_p = &_edf_next
    cdef Slot s
    cdef size_t q
    left = budgets
    nxt_p.resize(n + 1)
    for i in range(n + 1):
        nxt_p[0][i] = i
    for q in range(min(allocs.size(), jobs.size())):  # the lists kept (their memory reused), emptied
        allocs[q].clear()
    allocs.resize(jobs.size())
    first_stall[0] = -1
    for i in range(<int>jobs.size()):
        need = jobs[i].need
        f = jobs[i].f - base
        if f < 0:  # as Python's next_open(nxt, -1): the sentinel
            t = n
        else:
            t = _msa_next_open(nxt_p[0], f) if f < n else n
        end = jobs[i].d - base
        if end > n:
            end = n
        while need > 0 and t < end:
            lt = left[t]
            take = need if need < lt else lt
            if take > 0:
                s.t, s.x = t + base, take
                allocs[i].push_back(s)
            need -= take
            left[t] = lt - take
            if left[t] <= 0:
                nxt_p[0][t] = t + 1
                t = _msa_next_open(nxt_p[0], t + 1)
            else:
                break
        if need > 0:
            stall += need
            if first_stall[0] < 0:
                first_stall[0] = i
    return stall


@cython.cdivision(True)
cdef inline double _slice_sum(vector[double]& v, int a, int b) noexcept nogil:
    # sum(v[a:b]) (a, b >= 0, clipped at the end)
    cdef PySum s
    cdef int i
    _sum_init(&s)
    if b > <int>v.size():
        b = <int>v.size()
    for i in range(a, b):
        _sum_add(&s, v[i])
    return _sum_value(&s)


@cython.cdivision(True)
cdef class NativeCopyResource:
    """The Python ``_CopyResource`` (docs/prefetch.md's copy budgets, kept stall-free decision by decision) over
    C++ containers: the same witness, local problems, kept over-full intervals, look-ahead and undo journal, so
    the same decisions and the same count of exact checks. The kinds are ``"prefetch"`` and ``"eviction"``."""

    cdef readonly int T
    cdef readonly double tol
    cdef public long exact_checks
    cdef vector[double] compute_, slow_mem_, fixed_, saved_, times_
    # per kind (0 prefetch, 1 eviction): copies, their witness shares, the index by first op (windows of at
    # most SHORT ops) and by LONG-op bucket (longer ones), the budget left, the kept over-full intervals by end
    cdef vector[vector[MsaCopy]] copies_
    cdef vector[vector[vector[Slot]]] alloc_
    cdef vector[cmap[int, vector[int]]] by_first
    cdef int span[2]
    cdef vector[vector[vector[int]]] long_
    cdef vector[vector[double]] left_
    cdef vector[cmap[int, vector[Tight]]] tight
    cdef vector[pair[int, int]] tight_log
    cdef vector[Recent] recent
    cdef vector[JEntry] journal
    cdef vector[vector[Slot]] jalloc
    # the last rejected check: (kind, reductions, need or none)
    cdef bint has_reject, reject_has_copy
    cdef int reject_kind
    cdef vector[Red] reject_red
    cdef double reject_need
    # per kind: the witness update of the last accepted local problem, on ops [upd_lo, upd_hi)
    cdef int upd_lo[2]
    cdef int upd_hi[2]
    cdef vector[vector[double]] upd_left
    cdef vector[vector[Job]] upd_jobs
    cdef vector[vector[vector[Slot]]] upd_allocs
    # scratch lists of _gather, _region and _decide (members: their memory is reused from check to check)
    cdef vector[int] g_ids
    cdef vector[Job] r_inside, r_crossers, r_lower, r_jobs, d_inside, d_crossers, d_jobs
    cdef vector[double] r_budgets, r_left, d_budgets, d_left
    cdef vector[vector[Slot]] r_allocs, d_allocs

    def __cinit__(self, *args, **kwargs):
        self.copies_.resize(2)
        self.alloc_.resize(2)
        self.by_first.resize(2)
        self.long_.resize(2)
        self.left_.resize(2)
        self.tight.resize(2)
        self.upd_left.resize(2)
        self.upd_jobs.resize(2)
        self.upd_allocs.resize(2)

    def __init__(self, compute, slow_mem, fixed):
        compute, slow_mem, fixed = (np.asarray(x, np.float64) for x in (compute, slow_mem, fixed))
        self.compute_ = compute.tolist()
        self.slow_mem_ = slow_mem.tolist()
        self.fixed_ = fixed.tolist()
        self.T = len(compute)
        self.saved_ = [0.0] * self.T
        times = np.maximum(compute, slow_mem) + fixed
        self.times_ = times.tolist()
        scale = float(times.sum()) or 1.0
        self.tol = 1e-12 * scale
        self.exact_checks = 0
        for k in range(2):
            self.left_[k] = self.times_
            self.span[k] = 0
            self.long_[k].resize(self.T // LONG + 2)
        self.has_reject = False

    # ------------------------------------------------ views (tests)

    @property
    def saved(self):
        return list(self.saved_)

    @property
    def times(self):
        return list(self.times_)

    def left(self, kind: str):
        return list(self.left_[KIND_INDEX[kind]])

    def copies(self, kind: str):
        return [(c.f, c.d, c.need) for c in self.copies_[KIND_INDEX[kind]]]

    def allocs(self, kind: str):
        return [[(s.t, s.x) for s in a] for a in self.alloc_[KIND_INDEX[kind]]]

    # ------------------------------------------------ undo journal

    cdef inline void _journal(self, int what, int kind, int t, double old) noexcept:
        cdef JEntry e
        e.what, e.kind, e.t, e.old = what, kind, t, old
        self.journal.push_back(e)

    cdef void _set_alloc(self, int kind, int j, vector[Slot]& a) noexcept:
        self.jalloc.push_back(self.alloc_[kind][j])
        self._journal(3, kind, j, 0.0)
        self.alloc_[kind][j] = a

    cdef void _append_copy(self, int kind, MsaCopy c, vector[Slot]& a) noexcept:
        cdef int j = <int>self.copies_[kind].size(), i
        self.copies_[kind].push_back(c)
        self.alloc_[kind].push_back(a)
        if c.d - c.f <= SHORT:
            self.by_first[kind][c.f].push_back(j)
            if c.d - c.f > self.span[kind]:
                self.span[kind] = c.d - c.f
        else:
            if (c.d - 1) // LONG >= <int>self.long_[kind].size():
                self.long_[kind].resize((c.d - 1) // LONG + 1)
            for i in range(c.f // LONG, (c.d - 1) // LONG + 1):
                self.long_[kind][i].push_back(j)
        self._journal(4, kind, j, 0.0)

    def snapshot(self):
        """A mark to :meth:`restore` to: only the latest one is kept (a buffer's tries restore to its start)."""
        self._snapshot()
        return 0

    cdef void _snapshot(self) noexcept:
        self.journal.clear()
        self.jalloc.clear()
        self.tight_log.clear()

    def restore(self, snap) -> None:
        self._restore(snap)

    cdef void _restore(self, Py_ssize_t snap) noexcept:
        cdef Py_ssize_t q
        cdef int kind, d, i
        cdef JEntry e
        cdef MsaCopy c
        for q in range(<Py_ssize_t>self.tight_log.size() - 1, -1, -1):
            kind, d = self.tight_log[q].first, self.tight_log[q].second
            self.tight[kind][d].pop_back()
            if self.tight[kind][d].empty():
                self.tight[kind].erase(d)
        self.tight_log.clear()
        self.recent.clear()
        while <Py_ssize_t>self.journal.size() > snap:
            e = self.journal.back()
            self.journal.pop_back()
            if e.what == 0:
                self.saved_[e.t] = e.old
            elif e.what == 1:
                self.times_[e.t] = e.old
            elif e.what == 2:
                self.left_[e.kind][e.t] = e.old
            elif e.what == 3:
                self.alloc_[e.kind][e.t] = self.jalloc.back()
                self.jalloc.pop_back()
            else:
                c = self.copies_[e.kind].back()
                self.copies_[e.kind].pop_back()
                self.alloc_[e.kind].pop_back()
                if c.d - c.f <= SHORT:
                    self.by_first[e.kind][c.f].pop_back()
                    if self.by_first[e.kind][c.f].empty():
                        self.by_first[e.kind].erase(c.f)
                else:
                    for i in range(c.f // LONG, (c.d - 1) // LONG + 1):
                        self.long_[e.kind][i].pop_back()

    def seed_full(self, saved, copies) -> bool:
        """Start from a given answer (a hint): its served operands and copies. False (nothing changed) if they stall."""
        compute, slow_mem, fixed = (np.asarray(x) for x in (self.compute_, self.slow_mem_, self.fixed_))
        cdef vector[double] times = (np.maximum(compute, slow_mem - saved.astype(np.float64)) + fixed).tolist()
        cdef vector[vector[Job]] jobs = vector[vector[Job]](2)
        cdef vector[vector[double]] left = vector[vector[double]](2)
        cdef vector[vector[vector[Slot]]] allocs = vector[vector[vector[Slot]]](2)
        cdef vector[vector[vector[Slot]]] by_id = vector[vector[vector[Slot]]](2)
        cdef Job job
        cdef MsaCopy c
        cdef int k, j, first_stall
        cdef double stall
        cdef list listed = [copies["prefetch"], copies["eviction"]]
        for k in range(2):
            for j, (f, d, s) in enumerate(listed[k]):
                job.d, job.f, job.g, job.f0, job.id, job.need = d, max(f, 0), 0, 0, j, s
                jobs[k].push_back(job)
            sort(jobs[k].begin(), jobs[k].end(), MsaJobLess[Job]())
            stall = _edf(jobs[k], times, 0, left[k], allocs[k], &first_stall)
            if stall > self.tol:
                return False
            by_id[k].resize(jobs[k].size())
            for j in range(<int>jobs[k].size()):
                by_id[k][jobs[k][j].id] = allocs[k][j]
        self.saved_ = saved.astype(np.float64).tolist()
        self.times_ = times
        for k in range(2):
            self.left_[k] = left[k]
            for j, (f, d, s) in enumerate(listed[k]):
                c.f, c.d, c.need = max(f, 0), d, s
                self._append_copy(k, c, by_id[k][j])
        self.journal.clear()
        self.jalloc.clear()
        return True

    # ------------------------------------------------ the check

    cdef void _gather(self, int kind, int lo, int hi, bint crossing, vector[Job]& inside,
                      vector[Job]& crossers) noexcept:
        cdef vector[int]* ids = &self.g_ids
        cdef cmap[int, vector[int]].iterator it, stop
        cdef int i, j, b0, f, d
        cdef size_t q
        cdef double need
        cdef PySum share
        cdef Job job
        cdef vector[MsaCopy]* copies = &self.copies_[kind]
        cdef vector[Slot]* al
        ids.clear()
        inside.clear()
        crossers.clear()
        it = self.by_first[kind].lower_bound(lo - self.span[kind])
        stop = self.by_first[kind].lower_bound(hi)
        while it != stop:
            for q in range(deref(it).second.size()):
                ids[0].push_back(deref(it).second[q])
            inc(it)
        b0 = lo // LONG
        for i in range(b0, min((hi - 1) // LONG + 1, <int>self.long_[kind].size())):
            for q in range(self.long_[kind][i].size()):
                j = self.long_[kind][i][q]
                if max(copies[0][j].f // LONG, b0) == i:  # each copy once: in its first bucket here
                    ids[0].push_back(j)
        for q in range(ids[0].size()):
            j = ids[0][q]
            f, d, need = copies[0][j].f, copies[0][j].d, copies[0][j].need
            if d <= lo or f >= hi:
                continue
            if f >= lo and d <= hi:
                job.d, job.f, job.g, job.f0, job.id, job.need = d, f, 0, 0, j, need
                inside.push_back(job)
            elif crossing:
                _sum_init(&share)
                al = &self.alloc_[kind][j]
                for i in range(<int>al.size()):
                    if lo <= al[0][i].t < hi:
                        _sum_add(&share, al[0][i].x)
                if _sum_value(&share) > 0:
                    job.d, job.f, job.g, job.f0, job.id, job.need = min(d, hi), max(f, lo), 2, f, j, _sum_value(&share)
                    crossers.push_back(job)
        sort(inside.begin(), inside.end(), MsaJobLess[Job]())
        sort(crossers.begin(), crossers.end(), MsaJobLess[Job]())

    cdef void _budgets(self, vector[Red]& red, int lo, int hi, vector[double]& budgets) noexcept:
        cdef size_t q
        budgets.assign(self.times_.begin() + lo, self.times_.begin() + hi)
        for q in range(red.size()):
            budgets[red[q].t - lo] -= red[q].r

    cdef double _red_sum(self, vector[Red]& red, int a, int d) noexcept:
        # sum(r for t, r in red.items() if a <= t < d)
        cdef PySum s
        cdef size_t q
        _sum_init(&s)
        for q in range(red.size()):
            if a <= red[q].t < d:
                _sum_add(&s, red[q].r)
        return _sum_value(&s)

    cdef void _note_violation(self, int kind, vector[Red]& red, MsaCopy* copy, int a, int d, double excess) noexcept:
        cdef double slack
        cdef Tight tt
        cdef Recent rc
        if not (a <= copy.f and copy.d <= d):
            return
        slack = copy.need + self._red_sum(red, a, d) - excess
        tt.a, tt.slack = a, slack
        self.tight[kind][d].push_back(tt)
        self.tight_log.push_back(pair[int, int](kind, d))
        rc.kind, rc.d, rc.a, rc.slack = kind, d, a, slack
        self.recent.push_back(rc)
        if self.recent.size() > <size_t>RECENT:
            self.recent.erase(self.recent.begin())

    cdef bint _known_violation(self, int kind, vector[Red]& red, MsaCopy* copy) noexcept:
        cdef size_t q
        cdef int d
        cdef cmap[int, vector[Tight]].iterator it
        for q in range(self.recent.size()):  # the latest, however far they end
            if (self.recent[q].kind == kind and self.recent[q].a <= copy.f and copy.d <= self.recent[q].d
                    and copy.need + self._red_sum(red, self.recent[q].a, self.recent[q].d) - self.recent[q].slack
                    > self.tol):
                return True
        for d in range(copy.d, copy.d + TIGHT_REACH):
            it = self.tight[kind].find(d)
            if it == self.tight[kind].end():
                continue
            for q in range(deref(it).second.size()):
                if (deref(it).second[q].a <= copy.f
                        and copy.need + self._red_sum(red, deref(it).second[q].a, d) - deref(it).second[q].slack
                        > self.tol):
                    return True
        return False

    cdef void _hall(self, int kind, vector[Red]& red, MsaCopy* copy, vector[Job]& jobs, vector[vector[Slot]]& allocs,
                    vector[double]& budgets, int base, int i) noexcept:
        """The Python ``_hall_interval`` for the stalled job ``i``, each interval kept (``_note_violation``)."""
        cdef int d = jobs[i].d, a = jobs[i].f, s, n = <int>budgets.size(), k
        cdef bint moved = True, have_widest = False
        cdef PySum demand
        cdef double excess, first_excess, w_excess = 0.0
        cdef int w_s = 0
        cdef vector[double] by_first
        while moved:
            moved = False
            for k in range(<int>jobs.size()):
                if jobs[k].f < a and not allocs[k].empty() and allocs[k].back().t >= a:
                    a, moved = jobs[k].f, True
        _sum_init(&demand)
        for k in range(<int>jobs.size()):
            if jobs[k].f >= a and jobs[k].d <= d:
                _sum_add(&demand, jobs[k].need)
        first_excess = _sum_value(&demand) - _slice_sum(budgets, a - base, d - base)
        by_first.assign(a - base if a > base else 0, 0.0)
        for k in range(<int>jobs.size()):
            if jobs[k].f < a and jobs[k].d <= d:
                by_first[jobs[k].f - base] = by_first[jobs[k].f - base] + jobs[k].need
        excess = first_excess
        for s in range(a - 1, base - 1, -1):
            excess += by_first[s - base] - budgets[s - base]
            if excess > self.tol:
                have_widest, w_s, w_excess = True, s, excess
        self._note_violation(kind, red, copy, a, d, first_excess)
        if have_widest:
            self._note_violation(kind, red, copy, w_s, d, w_excess)

    cdef bint _lower(self, int kind, vector[Red]& red, MsaCopy* copy, int lo, int hi, vector[Job]& inside,
                     vector[double]& budgets, vector[Job]& jobs, vector[double]& left,
                     vector[vector[Slot]]& allocs) noexcept:
        """The lower problem on ops ``[lo, hi)``: whether it stalls (a Hall violation: reject); its EDF run."""
        cdef Job job
        cdef int i
        cdef double stall
        self._budgets(red, lo, hi, budgets)
        jobs = inside
        if copy != NULL:
            job.d, job.f, job.g, job.f0, job.id, job.need = copy.d, copy.f, 1, 0, -1, copy.need
            _insert_job(jobs, job)
        stall = _edf(jobs, budgets, lo, left, allocs, &i)
        if stall > self.tol:
            if copy != NULL and i >= 0:
                self._hall(kind, red, copy, jobs, allocs, budgets, lo, i)
            return True
        return False

    cdef int _region(self, int kind, vector[Red]& red, MsaCopy* copy, int lo, int hi, bint lower_ok,
                     bint upper_first) noexcept:
        """Decide on ops ``[lo, hi)``: 1 accept (the witness update in ``upd_*[kind]``), 0 reject, -1 undecided."""
        cdef vector[Job]* inside_p = &self.r_inside
        cdef vector[Job]* crossers_p = &self.r_crossers
        cdef vector[Job]* lower_p = &self.r_lower
        cdef vector[Job]* jobs_p = &self.r_jobs
        cdef vector[double]* budgets_p = &self.r_budgets
        cdef vector[double]* left_p = &self.r_left
        cdef vector[vector[Slot]]* allocs_p = &self.r_allocs
        cdef Job job
        cdef int i
        cdef double stall
        self._gather(kind, lo, hi, True, inside_p[0], crossers_p[0])
        if not crossers_p[0].empty():
            self._budgets(red, lo, hi, budgets_p[0])
            lower_p[0] = inside_p[0]
            if copy != NULL:
                job.d, job.f, job.g, job.f0, job.id, job.need = copy.d, copy.f, 1, 0, -1, copy.need
                _insert_job(lower_p[0], job)
            if lower_ok or upper_first:
                _merge_jobs(lower_p[0], crossers_p[0], jobs_p[0])
                stall = _edf(jobs_p[0], budgets_p[0], lo, self.upd_left[kind], self.upd_allocs[kind], &i)
                if stall <= self.tol:
                    self.upd_lo[kind], self.upd_hi[kind] = lo, hi
                    self.upd_jobs[kind].swap(jobs_p[0])
                    return 1
                if lower_ok:
                    return -1
                return 0 if self._lower(kind, red, copy, lo, hi, inside_p[0], budgets_p[0], lower_p[0], left_p[0],
                                        allocs_p[0]) else -1
        if self._lower(kind, red, copy, lo, hi, inside_p[0], budgets_p[0], lower_p[0], left_p[0], allocs_p[0]):
            return 0
        if not crossers_p[0].empty():
            _merge_jobs(lower_p[0], crossers_p[0], jobs_p[0])
            stall = _edf(jobs_p[0], budgets_p[0], lo, self.upd_left[kind], self.upd_allocs[kind], &i)
            if stall > self.tol:
                return -1
            self.upd_lo[kind], self.upd_hi[kind] = lo, hi
            self.upd_jobs[kind].swap(jobs_p[0])
            return 1
        self.upd_lo[kind], self.upd_hi[kind] = lo, hi
        self.upd_jobs[kind].swap(lower_p[0])
        self.upd_left[kind].swap(left_p[0])
        self.upd_allocs[kind].swap(allocs_p[0])
        return 1

    cdef bint _is_last_reject(self, int kind, vector[Red]& red, MsaCopy* copy) noexcept:
        cdef size_t q
        if not self.has_reject or self.reject_kind != kind or self.reject_red.size() != red.size():
            return False
        if (copy != NULL) != self.reject_has_copy or (copy != NULL and copy.need != self.reject_need):
            return False
        for q in range(red.size()):
            if red[q].t != self.reject_red[q].t or red[q].r != self.reject_red[q].r:
                return False
        return True

    cdef void _set_reject(self, int kind, vector[Red]& red, MsaCopy* copy) noexcept:
        self.has_reject, self.reject_kind, self.reject_red = True, kind, red
        self.reject_has_copy = copy != NULL
        self.reject_need = copy.need if copy != NULL else 0.0

    cdef int _decide(self, int kind, vector[Red]& red, MsaCopy* copy) noexcept:
        """Whether ``kind``'s copies (and ``copy``) complete without a stall on budgets less ``red``: 1 (the
        witness update in ``upd[kind]``) or 0."""
        cdef bint upper_first
        cdef int a0, b0, width, checked, lo, hi, lo2, hi2, out
        cdef size_t q
        self.exact_checks += 1
        if copy != NULL and self._known_violation(kind, red, copy):
            self._set_reject(kind, red, copy)
            return 0
        upper_first = not self._is_last_reject(kind, red, copy)  # not the picker's next copy start after a rejection
        a0, b0 = 2147483647, -2147483647
        for q in range(red.size()):
            a0, b0 = min(a0, red[q].t), max(b0, red[q].t)
        if copy != NULL:
            a0 = min(a0, min(copy.f, copy.d - 1))
            b0 = max(b0, max(copy.f, copy.d - 1))
        b0 += 1
        width = max(b0 - a0, 8)
        checked = 0  # the lower problems of windows up to this width do not stall
        while True:
            lo, hi = max(0, a0 - width), min(self.T, b0 + width)
            out = self._region(kind, red, copy, lo, hi, width <= checked, upper_first)
            if out >= 0:
                if out == 0:
                    self._set_reject(kind, red, copy)
                return out
            if not checked:  # undecided: most such checks reject, on a Hall violation a few widths out
                checked = width * LOOK_AHEAD
                lo2, hi2 = max(0, a0 - checked), min(self.T, b0 + checked)
                self._gather(kind, lo2, hi2, False, self.d_inside, self.d_crossers)
                if self._lower(kind, red, copy, lo2, hi2, self.d_inside, self.d_budgets, self.d_jobs, self.d_left,
                               self.d_allocs):
                    self._set_reject(kind, red, copy)
                    return 0
            width *= 2

    cdef void _apply(self, int kind, MsaCopy* copy) noexcept:
        cdef int lo = self.upd_lo[kind], hi = self.upd_hi[kind]
        cdef vector[double]* uleft = &self.upd_left[kind]
        cdef vector[Job]* ujobs = &self.upd_jobs[kind]
        cdef vector[vector[Slot]]* uallocs = &self.upd_allocs[kind]
        cdef vector[double]* arr = &self.left_[kind]
        cdef int t, j
        cdef size_t q, p
        cdef vector[Slot] new_alloc, merged
        cdef vector[Slot]* old
        cdef bint same
        for t in range(lo, hi):
            if arr[0][t] != uleft[0][t - lo]:
                self._journal(2, kind, t, arr[0][t])
                arr[0][t] = uleft[0][t - lo]
        for q in range(ujobs.size()):
            j = ujobs[0][q].id
            if j < 0:
                new_alloc = uallocs[0][q]
            elif ujobs[0][q].g == 0:  # inside the window: its whole share
                old = &self.alloc_[kind][j]
                same = old.size() == uallocs[0][q].size()
                if same:
                    for p in range(old.size()):
                        if old[0][p].t != uallocs[0][q][p].t or old[0][p].x != uallocs[0][q][p].x:
                            same = False
                            break
                if not same:
                    self._set_alloc(kind, j, uallocs[0][q])
            else:
                old = &self.alloc_[kind][j]
                merged.clear()
                for p in range(old.size()):
                    if old[0][p].t < lo:
                        merged.push_back(old[0][p])
                merged.insert(merged.end(), uallocs[0][q].begin(), uallocs[0][q].end())
                for p in range(old.size()):
                    if old[0][p].t >= hi:
                        merged.push_back(old[0][p])
                self._set_alloc(kind, j, merged)
        if copy != NULL:
            self._append_copy(kind, copy[0], new_alloc)

    def try_add(self, serve, kind=None, copy=None) -> bool:
        """Serve more operands (``(op, saving)`` pairs) and add ``copy`` of ``kind``, if every copy still completes
        without a stall; commits and returns True, else changes nothing and returns False."""
        cdef vector[Red] new
        cdef Red item
        cdef size_t q
        cdef int t
        cdef bint found
        for t_, d_ in serve:
            t = t_
            found = False
            for q in range(new.size()):
                if new[q].t == t:
                    new[q].r = new[q].r + <double>d_
                    found = True
                    break
            if not found:
                item.t, item.r = t, self.saved_[t] + <double>d_
                new.push_back(item)
        if copy is None:
            return self._try_add(new, -1, NULL)
        cdef MsaCopy c
        c.f, c.d, c.need = copy[0], copy[1], copy[2]
        return self._try_add(new, KIND_INDEX[kind], &c)

    cdef bint _try_add(self, vector[Red]& new, int kind, MsaCopy* copy) noexcept:
        cdef vector[Red] red
        cdef Red item
        cdef size_t q
        cdef int t, k, first = 0, deadline = 0
        cdef double r, v, total, avail, need = 0.0, need_left, lt, take, m
        cdef bint ok, mine
        cdef bint exact[2]
        cdef vector[double]* left
        cdef vector[Slot] a
        cdef Slot s
        for q in range(new.size()):
            t, v = new[q].t, new[q].r
            m = self.slow_mem_[t] - v
            r = self.times_[t] - ((m if m > self.compute_[t] else self.compute_[t]) + self.fixed_[t])
            if r > 0:
                item.t, item.r = t, r
                red.push_back(item)
        if copy != NULL:
            first, deadline, need = max(copy.f, 0), copy.d, copy.need
            if deadline <= first:
                return False
            total = _slice_sum(self.times_, first, deadline)
            for q in range(red.size()):
                if first <= red[q].t < deadline:
                    total -= red[q].r
            if total < need * (1 + 1e-9):
                return False  # not even the whole budget of its window is enough
            copy.f = first
        for k in range(2):
            exact[k] = False
            left = &self.left_[k]
            ok = True
            for q in range(red.size()):
                if left[0][red[q].t] < red[q].r - self.tol:
                    ok = False
                    break
            mine = copy != NULL and k == kind
            if ok and mine:
                avail = _slice_sum(left[0], first, deadline)
                for q in range(red.size()):
                    t, r = red[q].t, red[q].r
                    if first <= t < deadline:
                        avail -= r if r < left[0][t] else left[0][t]
                ok = avail >= need * (1 + 1e-9)
            if ok:
                continue
            if not self._decide(k, red, copy if mine else NULL):
                return False
            exact[k] = True
        for q in range(new.size()):
            t = new[q].t
            self._journal(0, 0, t, self.saved_[t])
            self.saved_[t] = new[q].r
        for q in range(red.size()):
            t = red[q].t
            self._journal(1, 0, t, self.times_[t])
            self.times_[t] -= red[q].r
        for k in range(2):
            mine = copy != NULL and k == kind
            if exact[k]:
                self._apply(k, copy if mine else NULL)
                continue
            left = &self.left_[k]
            for q in range(red.size()):
                t = red[q].t
                self._journal(2, k, t, left[0][t])
                v = left[0][t] - red[q].r
                left[0][t] = 0.0 if 0.0 > v else v
            if mine:
                need_left = need
                a.clear()
                for t in range(first, deadline):
                    lt = left[0][t]
                    take = need_left if need_left < lt else lt
                    if take > 0:
                        self._journal(2, k, t, lt)
                        left[0][t] = lt - take
                        s.t, s.x = t, take
                        a.push_back(s)
                        need_left -= take
                    if need_left <= 0:
                        break
                self._append_copy(k, copy[0], a)
        return True


# ---------------------------------------------------------------------------- a use's prefetch

cdef double MIN_OVERLAP_RATIO = 0.8, PREFERRED_OVERLAP_RATIO = 1.5
cdef int EXPLORED_DECREASING = 100


@cython.cdivision(True)
cdef class NativePrefetcher:
    """msa's prefetch of one use, compiled: the Python ``_Msa.picker`` (XLA's cost-analysis interval picker:
    its window of copy starts and their order) and the loop of ``_BufferTry.prefetch`` that tries them against
    a :class:`NativeHeap` and a :class:`NativeCopyResource` (the same decisions, so the same commits)."""

    cdef vector[double] prefix
    cdef NativeHeap heap
    cdef NativeCopyResource res
    cdef vector[double] el_scratch  # a pick's window of elapsed times and heap pool, kept to reuse their memory
    cdef vector[MsaRect] pool_scratch

    def __init__(self, prefix, NativeHeap heap, NativeCopyResource res):
        self.prefix = list(prefix)
        self.heap = heap
        self.res = res

    def window(self, int start, int use, double copy_t, double reduction, double max_interval):
        """``(earliest, latest, preferred)`` of the picker, or None (no copy start)."""
        cdef int earliest, latest, preferred
        if not self._window(start, use, copy_t, reduction, max_interval, &earliest, &latest, &preferred):
            return None
        return earliest, latest, preferred

    def candidates(self, int start, int use, double copy_t, double reduction, double max_interval):
        """The picker's copy starts in its order (all of them), or None."""
        cdef int earliest, latest, preferred, p
        cdef vector[double] el
        cdef _Order order
        if not self._window(start, use, copy_t, reduction, max_interval, &earliest, &latest, &preferred):
            return None
        self._el(use, earliest, latest, el)
        _order_init(&order, earliest, latest, preferred, el[0])
        out = []
        while _order_next(&order, el, &p):
            out.append(p)
        return out

    cdef bint _window(self, int start, int use, double copy_t, double reduction, double max_interval,
                      int* earliest, int* latest, int* preferred) noexcept:
        cdef double top, need, best, x
        cdef int lo_, hi_, mid, p
        if start > use - 1:
            return False
        top = self.prefix[use]
        need = MIN_OVERLAP_RATIO * copy_t
        lo_, hi_ = start, use  # latest: last p with need <= el(p) + reduction
        while lo_ < hi_:
            mid = (lo_ + hi_) >> 1  # floor, as Python's // (lo_ may be -1)
            if need <= (top - self.prefix[mid + 1]) + reduction:
                lo_ = mid + 1
            else:
                hi_ = mid
        latest[0] = lo_ - 1
        if latest[0] < start:
            return False
        lo_, hi_ = start, latest[0]  # earliest: first p < latest with el(p) <= max_interval, else latest
        while lo_ < hi_:
            mid = (lo_ + hi_) >> 1  # floor, as Python's // (lo_ may be -1)
            if top - self.prefix[mid + 1] <= max_interval:
                hi_ = mid
            else:
                lo_ = mid + 1
        earliest[0] = lo_
        # preferred: the first p of the window whose el(p) is nearest 1.5 copy times (numpy's argmin)
        preferred[0] = earliest[0]
        best = 0.0
        for p in range(earliest[0], latest[0] + 1):
            x = fabs(PREFERRED_OVERLAP_RATIO * copy_t - (top - self.prefix[p + 1]))
            if p == earliest[0] or x < best:
                best, preferred[0] = x, p
        return True

    cdef void _el(self, int use, int earliest, int latest, vector[double]& el) noexcept:
        cdef int p
        el.clear()
        for p in range(earliest, latest + 1):
            el.push_back(self.prefix[use] - self.prefix[p + 1])

    def pick(self, int v, int start, double copy_t, double reduction, double max_interval, double ds_k,
             long long size, long long align):
        """The copy start of the prefetch serving op ``v`` (its copy and saving committed to the copy resource),
        or None; and whether a start lacked copy budget (``stalled``). As ``_BufferTry.prefetch`` up to the
        chunk: the first start of the picker's order inside the memory window whose copy completes."""
        cdef int p
        cdef bint stalled = False
        if self._pick(v, start, copy_t, reduction, max_interval, ds_k, size, align, &p, &stalled):
            return p, stalled
        return None, stalled

    cdef bint _pick(self, int v, int start, double copy_t, double reduction, double max_interval, double ds_k,
                    msa_i64 size, msa_i64 align, int* picked, bint* stalled) noexcept:
        """:meth:`pick` at C level: whether a copy start was found (``picked``); ``stalled`` set when a start
        lacked copy budget."""
        cdef int earliest, latest, preferred, lo_, hi_, mid, p, p_mem, p_bad
        cdef vector[double]* el = &self.el_scratch
        cdef vector[MsaRect]* pool = &self.pool_scratch
        cdef _Order order
        cdef vector[Red] new
        cdef Red item
        cdef MsaCopy c
        if not self._window(start, v, copy_t, reduction, max_interval, &earliest, &latest, &preferred):
            return False
        # out of memory for every window? (the rectangles meeting the latest window decide it: often no)
        self.heap._near(latest + 1, v + 1, pool[0])
        if not _pool_fits(pool[0], latest + 1, v + 1, size, align, self.heap.capacity):
            return False
        if earliest < latest:
            self.heap._near(earliest + 1, v + 1, pool[0])  # every query below is inside it
        lo_, hi_ = earliest, latest  # smallest copy start whose occupied range fits somewhere
        while lo_ < hi_:
            mid = (lo_ + hi_) >> 1  # floor, as Python's // (lo_ may be -1)
            if _pool_fits(pool[0], mid + 1, v + 1, size, align, self.heap.capacity):
                hi_ = mid
            else:
                lo_ = mid + 1
        p_mem, p_bad = lo_, latest + 1
        self._el(v, earliest, latest, el[0])
        _order_init(&order, earliest, latest, preferred, el[0][0])
        while _order_next(&order, el[0], &p):
            if p < p_mem or p >= p_bad:
                continue
            new.clear()
            item.t, item.r = v, self.res.saved_[v] + ds_k
            new.push_back(item)
            c.f, c.d, c.need = p + 1, v, copy_t
            if self.res._try_add(new, 0, &c):
                picked[0] = p
                return True
            p_bad = p  # a later start has less budget: it would stall too
            stalled[0] = True
        return False


@cython.cdivision(True)
cdef bint _pool_fits(vector[MsaRect]& pool, msa_i64 a, msa_i64 e, msa_i64 size, msa_i64 align, msa_i64 capacity) noexcept nogil:
    # NativeHeap.fits on a pool
    cdef msa_i64 cur = 0
    cdef size_t q
    for q in range(pool.size()):
        if pool[q].lo < e and pool[q].hi > a:
            if pool[q].off > cur and _msa_align_up(cur, align) + size <= pool[q].off:
                return True
            if pool[q].top > cur:
                cur = pool[q].top
    return _msa_align_up(cur, align) + size <= capacity


@cython.cdivision(True)
cdef bint _pool_free(vector[MsaRect]& pool, msa_i64 a, msa_i64 e, msa_i64 offset, msa_i64 size,
                     msa_i64 capacity) noexcept nogil:
    # NativeHeap.free on a pool
    cdef msa_i64 end = offset + size
    cdef size_t q
    if end > capacity:
        return False
    for q in range(pool.size()):
        if pool[q].lo < e and pool[q].hi > a and pool[q].off < end and pool[q].top > offset:
            return False
    return True


@cython.cdivision(True)
cdef msa_i64 _pool_best_fit(vector[MsaRect]& pool, msa_i64 a, msa_i64 e, msa_i64 size, msa_i64 align,
                            msa_i64 capacity, bint* found) noexcept nogil:
    # NativeHeap.best_fit on a pool (sorted): the best-fit scan over the rectangles meeting ops [a, e)
    cdef vector[pair[msa_i64, msa_i64]] ranges
    cdef size_t q
    for q in range(pool.size()):
        if pool[q].lo < e and pool[q].hi > a:
            ranges.push_back(pair[msa_i64, msa_i64](pool[q].off, pool[q].top))
    return _best_fit_sorted(ranges, size, align, capacity, found)


cdef struct _Order:  # the picker's candidates() generator: preferred, then alternately later and earlier
    int inc
    int dec
    int earliest
    int latest
    bint using_inc
    double span


@cython.cdivision(True)
cdef inline void _order_init(_Order* o, int earliest, int latest, int preferred, double el0) noexcept nogil:
    o.inc, o.dec = preferred + 1, preferred  # Begin() consumes the first Next() on the increasing side
    o.earliest, o.latest = earliest, latest
    o.using_inc = o.dec < earliest
    o.span = el0 / EXPLORED_DECREASING


@cython.cdivision(True)
cdef inline bint _order_next(_Order* o, vector[double]& el, int* out) noexcept nogil:
    cdef int p
    cdef double target
    if not (o.inc <= o.latest or o.dec >= o.earliest):
        return False
    if o.using_inc:
        p = o.inc
        o.inc += 1
        if o.dec >= o.earliest:
            o.using_inc = False
    else:
        p = o.dec
        o.dec -= 1
        if o.inc > o.latest:
            target = el[p - o.earliest] + o.span
            while o.dec >= o.earliest and el[o.dec - o.earliest] < target:
                o.dec -= 1
        if o.inc <= o.latest:
            o.using_inc = True
    out[0] = p
    return True



# ---------------------------------------------------------------------------- the buffer loop

import gc

from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef double EVICTION_RETRY_MULTIPLIER = 2.0
cdef int EXTRA_TRIES = 4
cdef int MSA_NO_COPY = -2147483647 - 1  # an interval's copy start when it has none (a copy start is >= -1)


@cython.cdivision(True)
cdef inline double _msa_monotonic() noexcept nogil:
    # time.monotonic(): the same clock
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


@cython.cdivision(True)
cdef vector[char] _msa_flags(arr):
    # a boolean array as one char per element
    cdef const unsigned char[::1] v = np.ascontiguousarray(arr, np.bool_).view(np.uint8)
    cdef vector[char] out
    cdef Py_ssize_t i
    out.resize(v.shape[0])
    for i in range(v.shape[0]):
        out[i] = v[i]
    return out


cdef struct MsaOpen:  # the Python ``_Open``: the buffer's current fast interval
    msa_i64 offset
    int start
    int copy_start  # MSA_NO_COPY: none
    int end
    Py_ssize_t rect
    bint dirty
    int last_write
    int write_k


cdef struct MsaInterval:  # an answer's interval (``FastInterval``)
    int buffer
    msa_i64 offset
    int start
    int end
    int copy_start


@cython.cdivision(True)
cdef class NativeMsaLoop:
    """msa's buffer loop, compiled: the Python ``_Msa.run`` after the cross-program prefetch (buffers in the given
    order, each by up to ``max_retries + EXTRA_TRIES`` tries, then a read-only one) and ``_BufferTry`` (one try:
    every touch by XLA's ladder: keep the fast copy, evict, the definition's interval, a prefetch), over a
    :class:`NativeHeap`, a :class:`NativeCopyResource` and a :class:`NativePrefetcher`. The same operations in
    the same order as the Python loop, so the same intervals and statistics. The counters (``prefetches``,
    ``evictions``, ``no_copy``, ``retries``, ``uncommits``, ``read_only``, ``buffers_fast``, ``timed_out``) are
    what :meth:`run` counted, ``_Stats``'s fields of the same names."""

    cdef NativeHeap heap
    cdef NativeCopyResource res
    cdef NativePrefetcher prefetcher
    cdef vector[msa_i64] ptr_, end_, size_, align_
    cdef vector[int] ops_all
    cdef vector[char] reads_all, writes_all, output_
    cdef vector[double] dsum_all, copy_time_, elapsed_
    cdef int max_retries
    cdef bint memory_basis
    cdef double overlap_ratio, memory_copy_time, deadline
    cdef readonly long prefetches, evictions, no_copy, retries, uncommits, read_only, buffers_fast
    cdef readonly bint timed_out
    # the buffer being decided: its touches inside its live range, each touch's last touch of its value
    # (next_def), the touches whose writes are served in slow memory
    cdef int b, bend, m
    cdef msa_i64 size, align
    cdef double copy_t
    cdef vector[int] ops, next_def
    cdef vector[char] rd, wr, slow
    cdef vector[double] ds
    # the try (``_BufferTry``'s state)
    cdef int retry, pending, slow_ready, bad
    cdef bint read_only_try, stalled, has_cur, has_prev, failed  # failed: an eviction found no copy budget
    cdef double max_interval
    cdef msa_i64 prev_off
    cdef MsaOpen cur
    cdef vector[MsaInterval] out
    cdef vector[MsaRect] pool

    def __init__(self, NativeHeap heap, NativeCopyResource res, NativePrefetcher prefetcher, ptr, ops, reads, writes,
                 dsum, output, size, align, end, copy_time, elapsed, int max_retries, bint memory_basis,
                 double overlap_ratio, double memory_copy_time):
        self.heap, self.res, self.prefetcher = heap, res, prefetcher
        self.ptr_ = np.asarray(ptr, np.int64).tolist()
        self.end_ = np.asarray(end, np.int64).tolist()
        self.size_ = np.asarray(size, np.int64).tolist()
        self.align_ = np.asarray(align, np.int64).tolist()
        self.ops_all = np.asarray(ops, np.int64).tolist()
        self.reads_all, self.writes_all, self.output_ = _msa_flags(reads), _msa_flags(writes), _msa_flags(output)
        self.dsum_all = np.asarray(dsum, np.float64).tolist()
        self.copy_time_ = np.asarray(copy_time, np.float64).tolist()
        self.elapsed_ = np.asarray(elapsed, np.float64).tolist()
        self.max_retries = max_retries
        self.memory_basis = memory_basis
        self.overlap_ratio = overlap_ratio
        self.memory_copy_time = memory_copy_time

    # ------------------------------------------------------------ the loop

    def run(self, order, done, double deadline, int min_decided, interval_type):
        """Decide the buffers of ``order`` (int64) not ``done`` yet (a bool array, updated) until the monotonic
        ``deadline`` (read from position ``min_decided`` of ``order`` on): the ``interval_type``
        (``FastInterval``) of the answer, in the order the Python loop appends them."""
        cdef const long long[::1] order_v = np.ascontiguousarray(order, np.int64)
        cdef unsigned char[::1] done_v = done.view(np.uint8)
        cdef vector[MsaInterval] answer
        cdef Py_ssize_t k, heap_n
        cdef int b, retry, attempt, status, last
        cdef bint committed, final, timed_out = False
        cdef msa_i64 size
        cdef MsaInterval* iv
        self.deadline = deadline
        for k in range(order_v.shape[0]):
            b = <int>order_v[k]
            size = self.size_[b]
            if done_v[b] or self.ptr_[b] == self.ptr_[b + 1] or size <= 0 or size > self.heap.capacity:
                continue
            # the first min_decided buffers whatever the clock (as the Python loop)
            if k >= min_decided and _msa_monotonic() > deadline:
                timed_out = True
                break
            heap_n = self.heap.n
            self.res._snapshot()
            self._buffer(b)
            # required assignment of outputs (``_Msa.required_slow``)
            last = -1
            for attempt in range(self.m):
                if self.wr[attempt]:
                    last = attempt
            if self.output_[b] and last >= 0 and self._el(self.ops[last], self.bend) < self.copy_time_[b]:
                self.slow[last] = 1
            committed = False
            retry = 0
            status = 0
            for attempt in range(self.max_retries + EXTRA_TRIES):
                status = self._try(retry, False)
                if status == 3:
                    break
                final = retry == self.max_retries - 1
                if status == 2 or (status == 1 and not final):
                    self.heap.truncate(heap_n)
                    self.res._restore(0)
                    self.retries += 1
                    if status == 2:
                        self.uncommits += 1
                        if final and self.bad >= 0:
                            self.slow[self.bad] = 1  # XLA's retries are spent: that write goes to slow memory
                    retry = min(retry + 1, self.max_retries - 1)
                    continue
                committed = True
                break
            if status != 3 and not committed:  # every try failed on an eviction: serve reads only
                status = self._try(self.max_retries - 1, True)
                if status != 3:
                    self.read_only += 1
            if status == 3:
                self.heap.truncate(heap_n)
                self.res._restore(0)
                timed_out = True
                break
            if not self.out.empty():
                self.buffers_fast += 1
            answer.insert(answer.end(), self.out.begin(), self.out.end())
            done_v[b] = 1
        self.timed_out = timed_out
        result = []
        # the intervals hold no reference cycle: no collection while they are made (at 100k buffers the
        # collector's passes over the live objects cost several times the making)
        collecting = gc.isenabled()
        gc.disable()
        try:
            for k in range(<Py_ssize_t>answer.size()):
                iv = &answer[k]
                result.append(interval_type(iv.buffer, iv.offset, iv.start, iv.end,
                                            None if iv.copy_start == MSA_NO_COPY else iv.copy_start))
        finally:
            if collecting:
                gc.enable()
        return result

    cdef inline double _el(self, int a, int b) noexcept:
        # elapsed time of the ops strictly between a and b (``_Msa.el``)
        if b > a + 1:
            return self.prefetcher.prefix[b] - self.prefetcher.prefix[a + 1]
        return 0.0

    cdef void _buffer(self, int b) noexcept:
        """Buffer ``b``'s touches inside its live range (``_Msa.touches_of``), its values' ends, no slow write."""
        cdef msa_i64 lo = self.ptr_[b], hi = self.ptr_[b + 1], i
        cdef int m, k
        self.b = b
        self.bend = <int>self.end_[b]
        self.size, self.align, self.copy_t = self.size_[b], self.align_[b], self.copy_time_[b]
        self.ops.clear()
        for i in range(lo, hi):
            if self.ops_all[i] < self.bend:
                self.ops.push_back(self.ops_all[i])
        m = self.m = <int>self.ops.size()
        self.rd.assign(self.reads_all.begin() + lo, self.reads_all.begin() + lo + m)
        self.wr.assign(self.writes_all.begin() + lo, self.writes_all.begin() + lo + m)
        self.ds.assign(self.dsum_all.begin() + lo, self.dsum_all.begin() + lo + m)
        self.slow.assign(m, 0)
        # next_def[k]: index of the first pure write after touch k (m if none): the end of k's value
        self.next_def.assign(m, m)
        for k in range(m - 2, -1, -1):
            self.next_def[k] = k + 1 if (self.wr[k + 1] and not self.rd[k + 1]) else self.next_def[k + 1]

    cdef inline bint _slow_write(self, int k) noexcept:
        return self.wr[k] and (self.read_only_try or self.slow[k])

    cdef int _try(self, int retry, bint read_only) noexcept:
        """One try at the buffer (``_BufferTry.run``), its intervals in ``out``: 0 ok, 1 async (a use lacked copy
        budget), 2 uncommit (an eviction failed; ``bad`` its write's touch), 3 timed out."""
        cdef int k
        cdef bint served
        cdef double pow2 = 1.0
        for k in range(retry):
            pow2 *= 2.0
        self.retry, self.read_only_try = retry, read_only
        self.max_interval = self.overlap_ratio * (self.memory_copy_time if self.memory_basis else self.copy_t) * pow2
        self.out.clear()
        self.has_cur, self.has_prev, self.stalled = False, False, False
        self.pending, self.slow_ready, self.bad, self.failed = -1, -1, -1, False
        for k in range(self.m):
            if k % 64 == 63 and _msa_monotonic() > self.deadline:
                return 3
            if self.wr[k] and not self.rd[k]:  # a pure write: a new value starts
                if not self._finish_value(False):
                    return 2
                self.pending = k
                continue
            if self.pending >= 0:  # the value's first use
                served = self._first_use(k)
            elif self.has_cur:
                served = self._extend(k)
                if self.failed:
                    return 2
            else:
                served = False
            if not served and not self._slow_write(k):
                served = self._prefetch(k)
            if not served and self.wr[k]:
                self.slow_ready = self.ops[k]  # updated in slow memory
        if not self._finish_value(True):
            return 2
        return 1 if self.stalled else 0

    cdef bint _serve(self, int t1, double d1, int t2, double d2, int count) noexcept:
        # the copy resource's try_add of count (op, saving) pairs and no copy
        cdef vector[Red] new
        cdef Red item
        item.t, item.r = t1, self.res.saved_[t1] + d1
        new.push_back(item)
        if count == 2:
            if t2 == t1:
                new[0].r = new[0].r + d2
            else:
                item.t, item.r = t2, self.res.saved_[t2] + d2
                new.push_back(item)
        return self.res._try_add(new, -1, NULL)

    cdef bint _chunk(self, int k, int a, msa_i64* offset) noexcept:
        """FindBestChunkCandidate for an interval occupying from op ``a`` and serving touch ``k``: whether found."""
        cdef int last = self.next_def[k] - 1, j = k, lo_, hi_, mid
        cdef msa_i64 e, cap = self.heap.capacity
        cdef bint found
        while j < last and self._el(self.ops[j], self.ops[j + 1]) < self.max_interval and not self._slow_write(j + 1):
            j += 1
        self.heap._near(a, self.ops[j] + 1, self.pool)  # every query below is inside [a, ops[j] + 1)
        if not _pool_fits(self.pool, a, self.ops[k] + 1, self.size, self.align, cap):
            return False
        lo_, hi_ = k, j
        while lo_ < hi_:
            mid = (lo_ + hi_ + 1) >> 1
            if _pool_fits(self.pool, a, self.ops[mid] + 1, self.size, self.align, cap):
                lo_ = mid
            else:
                hi_ = mid - 1
        e = self.ops[lo_] + 1
        if (self.has_prev and self.prev_off % self.align == 0
                and _pool_free(self.pool, a, e, self.prev_off, self.size, cap)):
            offset[0] = self.prev_off
            return True
        offset[0] = _pool_best_fit(self.pool, a, e, self.size, self.align, cap, &found)
        return found

    cdef void _open(self, msa_i64 offset, int start, int copy_start, int end, int occ, bint dirty, int last_write,
                    int write_k) noexcept:
        self.cur.offset, self.cur.start, self.cur.copy_start, self.cur.end = offset, start, copy_start, end
        self.cur.rect = self.heap.add(occ, end, offset, self.size)
        self.cur.dirty, self.cur.last_write, self.cur.write_k = dirty, last_write, write_k
        self.has_cur = True

    cdef void _close(self) noexcept:
        """Close the open interval: it is an answer's interval from now on."""
        cdef MsaInterval iv
        iv.buffer, iv.offset, iv.start, iv.end, iv.copy_start = (self.b, self.cur.offset, self.cur.start,
                                                                  self.cur.end, self.cur.copy_start)
        self.out.push_back(iv)
        self.slow_ready = max(self.slow_ready, self.cur.end - 1)
        self.prev_off, self.has_prev = self.cur.offset, True
        self.has_cur = False

    cdef bint _evict(self, int latest_end) noexcept:
        """Evict the open interval (``_BufferTry.evict``); False (``failed`` and ``bad`` set) when the copy has no
        budget."""
        cdef int w = self.cur.last_write, a = self.cur.end, e, lo_, hi_, mid
        cdef double target = (1 + EVICTION_RETRY_MULTIPLIER * self.retry) * PREFERRED_OVERLAP_RATIO * self.copy_t
        cdef vector[Red] new
        cdef MsaCopy c
        latest_end = min(latest_end, self.bend)
        e = a
        while e < latest_end and self._el(w, e) < target:
            e += 1
        # shorten while its offset is not free (binary search: free for [a, e) is monotone in e)
        if e > a and not self.heap._free(a, e, self.cur.offset, self.size):
            lo_, hi_ = a, e - 1
            while lo_ < hi_:
                mid = (lo_ + hi_ + 1) >> 1
                if self.heap._free(a, mid, self.cur.offset, self.size):
                    lo_ = mid
                else:
                    hi_ = mid - 1
            e = lo_
        c.f, c.d, c.need = w + 1, e, self.copy_t
        if not self.res._try_add(new, 1, &c):
            self.bad, self.failed = self.cur.write_k, True
            return False
        self.heap.extend(self.cur.rect, e)
        self.cur.end = e
        self.evictions += 1
        return True

    cdef bint _finish_value(self, bint at_end) noexcept:
        """The value ends (a pure write follows, or the touches end); False when its eviction failed."""
        cdef int pending = self.pending, d
        cdef msa_i64 off
        if not self.has_cur and pending >= 0 and not self._slow_write(pending):
            d = self.ops[pending]
            if self._chunk(pending, d, &off) and self._serve(d, self.ds[pending], 0, 0.0, 1):
                self._open(off, d, MSA_NO_COPY, d + 1, d, True, d, pending)
                self.no_copy += 1
        self.pending = -1
        if self.has_cur:
            if at_end and self.output_[self.b] and self.cur.dirty:
                if not self._evict(self.bend):
                    return False
            self._close()
        return True

    cdef bint _first_use(self, int k) noexcept:
        """The value's first use, touch ``k``: one interval from the definition without a copy; True when served."""
        cdef int pending = self.pending, d = self.ops[pending], u = self.ops[k]
        cdef bint served = False, wk
        cdef msa_i64 off
        if (not self._slow_write(pending) and not self._slow_write(k)
                and self._el(d, u) < self.max_interval):
            if self._chunk(k, d, &off) and self._serve(d, self.ds[pending], u, self.ds[k], 2):
                wk = self.wr[k]
                self._open(off, d, MSA_NO_COPY, u + 1, d, True, u if wk else d, k if wk else pending)
                served = True
                self.no_copy += 1
        if not served:
            self.slow_ready = max(self.slow_ready, d)  # defined in slow memory
        self.pending = -1
        return served

    cdef bint _extend(self, int k) noexcept:
        """Touch ``k`` with an interval open: keep the fast copy up to it (True), else evict it if dirty and close
        it (False; ``failed`` set when the eviction failed)."""
        cdef int p = self.ops[k - 1], u = self.ops[k]
        if (self._el(p, u) < self.max_interval and not self._slow_write(k)
                and self.heap._free(self.cur.end, u + 1, self.cur.offset, self.size)
                and self._serve(u, self.ds[k], 0, 0.0, 1)):
            self.heap.extend(self.cur.rect, u + 1)
            self.cur.end = u + 1
            if self.wr[k]:
                self.cur.dirty, self.cur.last_write, self.cur.write_k = True, u, k
            self.no_copy += 1
            return True
        if self.cur.dirty:
            if not self._evict(u):
                return False
        self._close()
        return False

    cdef bint _prefetch(self, int k) noexcept:
        """Touch ``k`` by a prefetch (the picker's first copy start with memory and copy budget); True when served."""
        cdef int v = self.ops[k], p
        cdef double ds_k = self.ds[k], m, c, reduction
        cdef bint stalled = False
        cdef msa_i64 off
        c = self.res.compute_[v]
        m = self.res.slow_mem_[v] - ds_k
        reduction = self.elapsed_[v] - ((m if m > c else c) + self.res.fixed_[v])
        if not self.prefetcher._pick(v, max(self.slow_ready, -1), self.copy_t, reduction, self.max_interval, ds_k,
                                     self.size, self.align, &p, &stalled):
            self.stalled = self.stalled or stalled
            return False
        self.stalled = self.stalled or stalled
        # commit: the interval of the prefetch copied from op p (its copy is committed)
        self._chunk(k, p + 1, &off)
        self._open(off, v, p, v + 1, p + 1, self.wr[k], v if self.wr[k] else -1, k if self.wr[k] else -1)
        self.prefetches += 1
        return True


@cython.cdivision(True)
def msa_memory_boundedness(ptr, ops, reads, writes, dsum, slow_mem, compute, size):
    """The Python ``_Msa.memory_boundedness``, compiled: per buffer, XLA's memory boundedness (the alternate-memory
    benefit of its touches, a use's added to the running one while both are positive, else the larger) over the
    square root of its size; 0 for a buffer without touches."""
    cdef const long long[::1] ptr_v = np.ascontiguousarray(ptr, np.int64)
    cdef const long long[::1] ops_v = np.ascontiguousarray(ops, np.int64)
    cdef const long long[::1] size_v = np.ascontiguousarray(size, np.int64)
    cdef const unsigned char[::1] rd = np.ascontiguousarray(reads, np.bool_).view(np.uint8)
    cdef const unsigned char[::1] wr = np.ascontiguousarray(writes, np.bool_).view(np.uint8)
    cdef const double[::1] ds = np.ascontiguousarray(dsum, np.float64)
    cdef const double[::1] sm = np.ascontiguousarray(slow_mem, np.float64)
    cdef const double[::1] cp = np.ascontiguousarray(compute, np.float64)
    cdef Py_ssize_t n = size_v.shape[0], b, j, lo, hi, first
    out = np.zeros(n)
    cdef double[::1] out_v = out
    cdef double acc, use
    for b in range(n):
        lo, hi = ptr_v[b], ptr_v[b + 1]
        if lo == hi:
            continue
        acc = 0.0
        first = lo
        if wr[lo] and not rd[lo]:  # the defining position
            acc = _msa_benefit(sm, cp, ops_v[lo], ds[lo])
            first = lo + 1
        for j in range(first, hi):
            use = _msa_benefit(sm, cp, ops_v[j], ds[j])
            if acc > 0 and use > 0:
                acc = acc + use
            elif use > acc:
                acc = use
        out_v[b] = acc / sqrt(<double>(size_v[b] if size_v[b] > 1 else 1))
    return out


@cython.cdivision(True)
cdef inline double _msa_benefit(const double[::1] slow_mem, const double[::1] compute, long long t,
                                double d) noexcept nogil:
    # GetAlternateMemoryBenefit of a touch at op t saving d seconds of memory time (``_Msa.benefit``)
    if slow_mem[t] > compute[t]:
        return d
    return slow_mem[t] - compute[t]
