# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# distutils: language = c++
"""msa's fast-memory heap, compiled (the ``native`` engine of ``mallocgame.memory_space_assignment._Heap``).

:class:`NativeHeap` answers every query of the Python ``_Heap`` exactly as it does (the same rectangles in the
same time buckets, the same best-fit scan and tie-breaking), with C++ vectors in place of lists and dicts.
:meth:`NativeHeap.near` returns a :class:`HeapPool`, an opaque sorted copy of the rectangles near a time range
that only the heap's own queries read (the Python heap's pool is a sorted list of tuples). Self-contained:
no cimport of another module of the project. tests/test_engine_msa.py checks both engines against each other.
"""

from libcpp.algorithm cimport sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

ctypedef long long i64


cdef struct Rect:  # a pool's rectangle, ordered as the Python pool's tuples (offset, top, occ, end)
    i64 off
    i64 top
    i64 lo
    i64 hi


cdef bint _rect_less(const Rect& x, const Rect& y) noexcept nogil:
    if x.off != y.off:
        return x.off < y.off
    if x.top != y.top:
        return x.top < y.top
    if x.lo != y.lo:
        return x.lo < y.lo
    return x.hi < y.hi


cdef inline i64 _align_up(i64 x, i64 a) noexcept nogil:
    # -(-x // a) * a with Python's floor division (x >= 0, a >= 1 here)
    cdef i64 q = x // a
    if q * a < x:
        q += 1
    return q * a


cdef inline i64 _floor_div(i64 x, i64 b) noexcept nogil:
    # Python's // (an op index may be -1)
    cdef i64 q = x // b
    if (x % b != 0) and ((x < 0) != (b < 0)):
        q -= 1
    return q


cdef i64 _best_fit_sorted(vector[pair[i64, i64]]& ranges, i64 size, i64 align, i64 capacity,
                          bint *found) noexcept nogil:
    """``mallocgame.placement._best_fit_py`` over ``ranges`` (``(offset, top)``, sorted) with a capacity."""
    cdef i64 cur = 0, a, best_len = 0, best_off = 0, o, t
    cdef bint have = False
    cdef size_t k
    for k in range(ranges.size()):
        o = ranges[k].first
        t = ranges[k].second
        if o > cur:
            a = _align_up(cur, align)
            if a + size <= o and (not have or o - cur < best_len):
                have, best_len, best_off = True, o - cur, a
        if t > cur:
            cur = t
    a = _align_up(cur, align)
    if a + size <= capacity and (not have or capacity - cur < best_len):
        found[0] = True
        return a
    found[0] = have
    return best_off


cdef class HeapPool:
    """The rectangles meeting a time range, sorted by (offset, top, occ, end): :meth:`NativeHeap.near`."""

    cdef vector[Rect] rects

    def __len__(self):
        return self.rects.size()

    def as_tuples(self):
        """The pool as the Python heap's list of ``(offset, top, occ, end)`` (for tests)."""
        return [(r.off, r.top, r.lo, r.hi) for r in self.rects]


cdef class NativeHeap:
    """Committed rectangles ``[occ, end) x [offset, top)``: best-fit and free-at-offset queries over a time range.

    The same structure as the Python ``_Heap``: ``buckets[i]`` lists the rectangles overlapping ops
    ``[i * BUCKET, (i + 1) * BUCKET)``; rectangles only grow at their end (:meth:`extend`) and the newest are
    dropped on a retry (:meth:`truncate`).
    """

    cdef readonly i64 capacity
    cdef readonly Py_ssize_t n
    cdef vector[i64] lo_, hi_, off_, top_
    cdef vector[vector[Py_ssize_t]] buckets
    cdef i64 B

    def __init__(self, long long capacity):
        self.capacity = capacity
        self.n = 0
        self.B = 8

    @property
    def lo(self):
        return list(self.lo_)

    @property
    def hi(self):
        return list(self.hi_)

    @property
    def off(self):
        return list(self.off_)

    @property
    def top(self):
        return list(self.top_)

    cdef inline vector[Py_ssize_t]* _bucket(self, i64 i) noexcept nogil:
        if i < 0 or i >= <i64>self.buckets.size():
            return NULL
        return &self.buckets[i]

    cdef void _register(self, Py_ssize_t k, i64 a, i64 e) noexcept nogil:
        cdef i64 i, first = _floor_div(a, self.B), last = _floor_div(e - 1, self.B)
        if first < 0:  # an op index below 0: never read back (queries start at op 0)
            first = 0
        if last >= <i64>self.buckets.size():
            self.buckets.resize(last + 1)
        for i in range(first, last + 1):
            if self.buckets[i].empty() or self.buckets[i].back() != k:
                self.buckets[i].push_back(k)

    cpdef Py_ssize_t add(self, i64 occ, i64 end, i64 offset, i64 size):
        cdef Py_ssize_t k = self.n
        self.lo_.resize(k)
        self.hi_.resize(k)
        self.off_.resize(k)
        self.top_.resize(k)
        self.lo_.push_back(occ)
        self.hi_.push_back(end)
        self.off_.push_back(offset)
        self.top_.push_back(offset + size)
        self.n += 1
        if end > occ:
            self._register(k, occ, end)
        return k

    cpdef void extend(self, Py_ssize_t k, i64 end):
        """Rectangle ``k`` now ends at op ``end`` (not earlier than before)."""
        cdef i64 old = self.hi_[k]
        self.hi_[k] = end
        if end > old:
            self._register(k, old if old > self.lo_[k] else self.lo_[k], end)

    cpdef void truncate(self, Py_ssize_t n):
        """Drop the rectangles added after the first ``n`` (a buffer's failed try)."""
        cdef Py_ssize_t k, j
        cdef i64 lo, hi, i
        cdef vector[Py_ssize_t]* lst
        for k in range(self.n - 1, n - 1, -1):
            lo, hi = self.lo_[k], self.hi_[k]
            if hi <= lo:
                continue
            for i in range(max(_floor_div(lo, self.B), 0), _floor_div(hi - 1, self.B) + 1):
                lst = &self.buckets[i]
                if not lst.empty() and lst.back() == k:
                    lst.pop_back()
                else:  # not at the end (as the Python heap: cannot happen)
                    for j in range(<Py_ssize_t>lst.size()):
                        if lst[0][j] == k:
                            lst.erase(lst.begin() + j)
                            break
        self.n = n
        self.lo_.resize(n)
        self.hi_.resize(n)
        self.off_.resize(n)
        self.top_.resize(n)

    cdef void _near(self, i64 a, i64 e, vector[Rect]& out) noexcept nogil:
        """The rectangles meeting ops ``[a, e)`` (or covering op ``a``), each once, sorted."""
        cdef i64 B = self.B, first = _floor_div(a, B), last = _floor_div(e - 1 if e - 1 > a else a, B), i, occ
        cdef vector[Py_ssize_t]* lst
        cdef Py_ssize_t q, k
        cdef Rect r
        out.clear()
        for i in range(first, last + 1):
            lst = self._bucket(i)
            if lst == NULL:
                continue
            for q in range(<Py_ssize_t>lst.size()):
                k = lst[0][q]
                occ = self.lo_[k]
                # each once: in the first bucket of the range it is in (its buckets are contiguous)
                if occ < e and self.hi_[k] > a and (i == first or _floor_div(occ, B) == i):
                    r.off, r.top, r.lo, r.hi = self.off_[k], self.top_[k], occ, self.hi_[k]
                    out.push_back(r)
        sort(out.begin(), out.end(), _rect_less)

    def near(self, i64 a, i64 e):
        """The rectangles meeting ops ``[a, e)``: a :class:`HeapPool` for queries inside that range (``pool=``)."""
        cdef HeapPool pool = HeapPool.__new__(HeapPool)
        self._near(a, e, pool.rects)
        return pool

    def best_fit(self, i64 a, i64 e, i64 size, i64 align, HeapPool pool=None):
        """Offset of the best-fit hole free during ops ``[a, e)``, or ``None`` (``best_fit_offset``)."""
        cdef vector[Rect] own
        cdef vector[Rect]* rects
        cdef vector[pair[i64, i64]] ranges
        cdef size_t q
        cdef bint found
        cdef i64 off
        if pool is None:
            self._near(a, e, own)
            rects = &own
        else:
            rects = &pool.rects
        for q in range(rects.size()):
            if rects[0][q].lo < e and rects[0][q].hi > a:
                ranges.push_back(pair[i64, i64](rects[0][q].off, rects[0][q].top))
        off = _best_fit_sorted(ranges, size, align, self.capacity, &found)
        return off if found else None

    def fits(self, i64 a, i64 e, i64 size, i64 align, HeapPool pool):
        """Whether some hole holds ``size`` bytes during ops ``[a, e)`` (``best_fit(...) is not None``)."""
        cdef i64 cur = 0
        cdef size_t q
        cdef Rect* r
        for q in range(pool.rects.size()):
            r = &pool.rects[q]
            if r.lo < e and r.hi > a:
                if r.off > cur and _align_up(cur, align) + size <= r.off:
                    return True
                if r.top > cur:
                    cur = r.top
        return _align_up(cur, align) + size <= self.capacity

    def free(self, i64 a, i64 e, i64 offset, i64 size, HeapPool pool=None):
        """Whether ``[offset, offset + size)`` is free during ops ``[a, e)``."""
        cdef i64 end = offset + size, i, B = self.B, last
        cdef size_t q
        cdef Rect* r
        cdef vector[Py_ssize_t]* lst
        cdef Py_ssize_t k
        if end > self.capacity:
            return False
        if pool is not None:
            for q in range(pool.rects.size()):
                r = &pool.rects[q]
                if r.lo < e and r.hi > a and r.off < end and r.top > offset:
                    return False
            return True
        last = _floor_div(e - 1 if e - 1 > a else a, B)
        for i in range(_floor_div(a, B), last + 1):
            lst = self._bucket(i)
            if lst == NULL:
                continue
            for q in range(lst.size()):
                k = lst[0][q]
                if self.lo_[k] < e and self.hi_[k] > a and self.off_[k] < end and self.top_[k] > offset:
                    return False
        return True
