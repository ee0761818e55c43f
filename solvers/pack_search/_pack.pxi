# pack-search's loops, compiled (the ``native`` engine of ``mallocgame.solvers.pack_search.search``).
#
# * :func:`first_fit_loop`: the first-fit sweep for components above the exact engine's limits (``_first_fit``).
# * :class:`CanonicalSearch`: one canonical depth-first search over a component for a fixed capacity and
#   preorder (``_Searcher``): the same nodes, branching choices, exclusions, section inference, dynamic
#   decomposition and table of failed states, so the same offsets and the same counters (nodes, backtracks,
#   table hits).
# * :class:`FailedStates`: the table of failed states a capacity's runs share (``set`` of state hashes in the
#   reference).
#
# The boundary is arrays in, arrays and counters out; the Python module keeps the schedule, the restarts, CP-SAT
# and the window repair. tests/test_engine_pack.py checks both engines against each other.
#
# A row of the reference's ``VM`` matrix holds one value on its buffer's sections (and the placed marker
# elsewhere), so here it is one value per buffer (``vm``), and a section's lowest bound is the least ``vm`` of the
# buffers live in it (``sec_ptr``/``sec_idx``: the buffers of each section).


from libc.stdint cimport uint64_t
from libcpp.unordered_set cimport unordered_set
from libcpp.vector cimport vector

import numpy as np

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC

# i64 (long long) is declared by _placement.pxi, included before this part

cdef i64 INF = 1LL << 40       # the reference's _INF: "no min offset" (placed buffers)
cdef i64 EXCL = 1LL << 42      # the reference's _EXCL: added to ``eff`` while a buffer is excluded
cdef i64 VM_INF32 = 1LL << 30  # the reference's _VM_INF32

cdef enum:
    CHOICE_RANK = 0
    CHOICE_WDEG = 1
    CHOICE_TIGHT = 2

# node results
cdef enum:
    R_ABORT = -1
    R_FAIL = 0
    R_OK = 1


@cython.cdivision(True)
cdef inline double _pack_monotonic() noexcept nogil:
    # the clock time.monotonic() reads (a Budget's clock)
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


@cython.cdivision(True)
cdef inline i64 _pack_align_up(i64 x, i64 a) noexcept nogil:
    cdef i64 q = x // a
    if q * a < x:
        q += 1
    return q * a


@cython.cdivision(True)
cdef inline uint64_t _mix(uint64_t h, uint64_t v) noexcept nogil:
    # splitmix64 of the running hash and the next value: a 64-bit state hash, as the reference's set of hashes
    cdef uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2))
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


@cython.cdivision(True)
def first_fit_loop(const i64[::1] order, const i64[::1] size, const i64[::1] start, const i64[::1] end,
                   const i64[::1] align, i64[::1] off, object deadline):
    """The first-fit sweep of ``order``, writing ``off`` in place; returns ``(steps done, highest top)``.

    Each buffer goes to the lowest aligned gap among the live placed buffers (kept sorted by offset). The clock
    (``deadline``: a ``time.monotonic`` instant or ``None``) is read every 64 steps, as the reference reads it;
    when it has passed, the sweep stops and the caller stacks the rest.
    """
    cdef Py_ssize_t m = order.shape[0], step, k, w, L, pos
    cdef bint has_deadline = deadline is not None
    cdef double dl = deadline if has_deadline else 0.0
    cdef vector[i64] lo, hi, en
    cdef i64 i, s, a, sz, o, cand, bottom, top = 0
    cdef bint found
    cdef Py_ssize_t done = m
    with nogil:
        for step in range(m):
            if has_deadline and step % 64 == 0 and _pack_monotonic() > dl:
                done = step
                break
            i = order[step]
            s = start[i]
            L = <Py_ssize_t>lo.size()
            w = 0
            for k in range(L):  # drop the buffers no longer live (order kept)
                if en[k] > s:
                    if w != k:
                        lo[w] = lo[k]
                        hi[w] = hi[k]
                        en[w] = en[k]
                    w += 1
            lo.resize(w)
            hi.resize(w)
            en.resize(w)
            L = w
            a = align[i]
            sz = size[i]
            found = False
            bottom = 0
            o = 0
            for k in range(L):  # gaps [0, lo[0]), [hi[0], lo[1]), ...: the first that holds it
                cand = bottom if a == 1 else _pack_align_up(bottom, a)
                if cand + sz <= lo[k]:
                    o = cand
                    found = True
                    break
                bottom = hi[k]
            if not found:
                o = bottom if a == 1 else _pack_align_up(bottom, a)
            off[i] = o
            if o + sz > top:
                top = o + sz
            pos = 0
            while pos < L and lo[pos] < o:
                pos += 1
            lo.insert(lo.begin() + pos, o)
            hi.insert(hi.begin() + pos, o + sz)
            en.insert(en.begin() + pos, end[i])
    return done, top


@cython.cdivision(True)
cdef class FailedStates:
    """The hashes of the search states proven to fail (shared by the runs of one capacity)."""

    cdef unordered_set[uint64_t] keys

    def __len__(self):
        return self.keys.size()

    def clear(self):
        self.keys.clear()


cdef struct Change:
    i64 k        # an unplaced neighbour whose min offset rose
    i64 old_m    # its min offset before
    i64 old_vm   # its row's value before
    i64 old_e    # its eff before


cdef struct Step:
    i64 b        # the buffer placed or excluded
    i64 o        # its offset, or -1 for an exclusion
    Py_ssize_t chg_start
    Py_ssize_t chg_end


cdef struct Tables:
    Py_ssize_t m, S
    vector[i64] size, sl, sh, align, nlo, nhi, live
    vector[i64] nbr_ptr, nbr_idx, sec_ptr, sec_idx
    bint has_align
    i64 peak_live, live_max, size_max


@cython.cdivision(True)
cdef class ComponentTables:
    """The arrays of one component the search reads (built once per component and shared by its runs)."""

    cdef Tables t

    def __init__(self, comp):
        cdef Py_ssize_t k, j, q
        cdef Tables* t = &self.t
        t.m = comp.m
        t.S = comp.S
        t.size = np.asarray(comp.size, np.int64).tolist()
        t.sl = np.asarray(comp.sl, np.int64).tolist()
        t.sh = np.asarray(comp.sh, np.int64).tolist()
        t.has_align = comp.align is not None
        if t.has_align:
            t.align = np.asarray(comp.align, np.int64).tolist()
        t.nlo = list(comp.nlo)
        t.nhi = list(comp.nhi)
        t.live = np.asarray(comp.live, np.int64).tolist()
        t.peak_live = comp.peak_live
        t.live_max = int(comp.live.max(initial=0))
        t.size_max = int(comp.size.max()) if t.m else 0
        lengths = np.array([len(nb) for nb in comp.nbr], np.int64)
        t.nbr_ptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64).tolist()
        t.nbr_idx = (np.concatenate(comp.nbr).astype(np.int64) if t.m else np.zeros(0, np.int64)).tolist()
        # the buffers of each section (ascending)
        cdef vector[i64] count = vector[i64](t.S + 1, 0)
        for k in range(t.m):
            for j in range(t.sl[k], t.sh[k]):
                count[j + 1] += 1
        for j in range(t.S):
            count[j + 1] += count[j]
        t.sec_ptr = count
        t.sec_idx = vector[i64](count[t.S], 0)
        cdef vector[i64] fill = vector[i64](count.begin(), count.end())
        for k in range(t.m):
            for j in range(t.sl[k], t.sh[k]):
                q = fill[j]
                t.sec_idx[q] = k
                fill[j] = q + 1


@cython.cdivision(True)
cdef class CanonicalSearch:
    """One canonical DFS over a component for a fixed capacity and preorder: the reference's ``_Searcher``.

    ``run()`` returns True (packed: ``off`` holds the local offsets), False (proven impossible) or ``None``
    (the node limit, the deadline or ``stop`` came first). ``nodes``, ``backtracks`` and ``tt_hits`` count as
    the reference counts; ``weights`` (int64 ``[S + 1]``, or ``None``) are updated in place.
    """

    cdef object tables
    cdef Tables* c
    cdef i64 cap, vinf, node_limit
    cdef readonly i64 nodes, backtracks, tt_hits
    cdef double deadline
    cdef object stop
    cdef int choice
    cdef bint use_tt, has_weights
    cdef vector[i64] rank, minoff, eff, vm, total, cuts
    cdef i64[::1] weights
    cdef readonly object off
    cdef i64[::1] off_v
    cdef vector[Step] trail
    cdef vector[Change] changes
    cdef FailedStates tt_obj
    cdef unordered_set[uint64_t]* ttk
    cdef bint stopped

    def __init__(self, ComponentTables tables, i64 cap, rank, *, i64 node_limit, double deadline, stop,
                 bint use_tt, str choice, weights):
        cdef Py_ssize_t k, j, m, S
        self.tables = tables
        self.c = &tables.t
        m = tables.t.m
        S = tables.t.S
        self.cap = cap
        self.rank = np.asarray(rank, np.int64).tolist()
        self.node_limit = node_limit
        self.deadline = deadline
        self.stop = stop
        self.choice = {"rank": CHOICE_RANK, "wdeg": CHOICE_WDEG}.get(choice, CHOICE_TIGHT)
        self.use_tt = use_tt
        self.tt_obj = FailedStates()
        self.ttk = &self.tt_obj.keys
        self.has_weights = weights is not None
        if self.has_weights:
            self.weights = weights
        self.vinf = VM_INF32 if cap + tables.t.live_max < VM_INF32 // 2 else INF
        self.minoff = vector[i64](m, 0)
        self.eff = vector[i64](m, 0)
        self.vm = vector[i64](m, 0)
        self.total = vector[i64](S + 1, 0)
        for k in range(S):
            self.total[k] = tables.t.live[k]
        self.cuts = vector[i64](S - 1 if S > 1 else 0, 0)
        for k in range(m):  # boundary j (between sections j and j + 1) is crossed by k when sl <= j < sh - 1
            for j in range(tables.t.sl[k], tables.t.sh[k] - 1):
                self.cuts[j] += 1
        self.off = np.full(m, -1, np.int64)
        self.off_v = self.off

    @property
    def tt(self):
        """The table of failed states this search reads and adds to (a :class:`FailedStates`)."""
        return self.tt_obj

    @tt.setter
    def tt(self, FailedStates table not None):
        self.tt_obj = table
        self.ttk = &table.keys

    def run(self):
        """True: packed; False: proven impossible; None: a limit hit."""
        cdef Tables* c = self.c
        cdef vector[i64] P
        cdef int r
        cdef Py_ssize_t k
        if c.m == 0:
            return True
        if c.peak_live > self.cap or c.size_max > self.cap:
            return False
        if not self._sections_ok(0, c.S):
            return False
        P.reserve(c.m)
        for k in range(c.m):
            P.push_back(k)
        with nogil:
            r = self._node(P, 0, c.S)
        if r == R_ABORT:
            return None
        return r == R_OK

    cdef bint _tick(self) noexcept nogil:
        """True when the search must stop (the reference's ``_tick`` raising ``_Abort``)."""
        if self.nodes > self.node_limit:
            return True
        if (self.nodes & 63) == 0:
            if _pack_monotonic() > self.deadline:
                return True
            if self.stop is not None:
                with gil:
                    self.stopped = bool(self.stop.is_set())
                if self.stopped:
                    return True
        return False

    cdef bint _sections_ok(self, i64 a, i64 bnd) noexcept nogil:
        """Section inference on ``[a, bnd)``: each section's lowest bound (at most the capacity) plus its unplaced
        total must fit; the failing sections gain conflict weight."""
        cdef Tables* c = self.c
        cdef i64 j, q, u, v
        cdef bint ok = True
        for j in range(a, bnd):
            u = self.cap
            for q in range(c.sec_ptr[j], c.sec_ptr[j + 1]):
                v = self.vm[c.sec_idx[q]]
                if v < u:
                    u = v
            if u + self.total[j] > self.cap:
                ok = False
                if self.has_weights:
                    self.weights[j] += 1
                else:
                    return False
        return ok

    cdef void _place(self, i64 b, i64 o, i64 t) noexcept nogil:
        """Put ``b`` at ``o`` (top ``t``): its unplaced neighbours below the top rise to it (aligned)."""
        cdef Tables* c = self.c
        cdef Py_ssize_t q, start = <Py_ssize_t>self.changes.size()
        cdef i64 k, mk, newm, j
        cdef Change ch
        cdef Step st
        for q in range(c.nbr_ptr[b], c.nbr_ptr[b + 1]):
            k = c.nbr_idx[q]
            mk = self.minoff[k]
            newm = _pack_align_up(t, c.align[k]) if c.has_align else t
            if mk < newm:
                ch.k = k
                ch.old_m = mk
                ch.old_vm = self.vm[k]
                ch.old_e = self.eff[k]
                self.changes.push_back(ch)
                self.minoff[k] = newm
                self.eff[k] = newm
                if self.vm[k] < newm:
                    self.vm[k] = newm
        self.minoff[b] = INF
        self.eff[b] = INF
        self.vm[b] = self.vinf
        for j in range(c.sl[b], c.sh[b]):
            self.total[j] -= c.size[b]
        for j in range(c.sl[b], c.sh[b] - 1):
            self.cuts[j] -= 1
        self.off_v[b] = o
        st.b = b
        st.o = o
        st.chg_start = start
        st.chg_end = <Py_ssize_t>self.changes.size()
        self.trail.push_back(st)

    cdef void _exclude(self, i64 b, i64 lift) noexcept nogil:
        cdef Step st
        st.b = b
        st.o = -1
        st.chg_start = st.chg_end = <Py_ssize_t>self.changes.size()
        self.trail.push_back(st)
        self.eff[b] += EXCL
        self.vm[b] = lift

    cdef void _undo_to(self, Py_ssize_t mark) noexcept nogil:
        cdef Tables* c = self.c
        cdef Step st
        cdef Change ch
        cdef Py_ssize_t q
        cdef i64 b, j
        while <Py_ssize_t>self.trail.size() > mark:
            st = self.trail.back()
            self.trail.pop_back()
            b = st.b
            if st.o < 0:  # an exclusion
                self.eff[b] -= EXCL
                self.vm[b] = self.minoff[b]
                continue
            for j in range(c.sl[b], c.sh[b] - 1):
                self.cuts[j] += 1
            for j in range(c.sl[b], c.sh[b]):
                self.total[j] += c.size[b]
            self.vm[b] = st.o  # as the reference: the row takes the offset it was placed at
            q = st.chg_end
            while q > st.chg_start:
                q -= 1
                ch = self.changes[q]
                if self.vm[ch.k] < self.vinf:
                    self.vm[ch.k] = ch.old_vm
                self.minoff[ch.k] = ch.old_m
                self.eff[ch.k] = ch.old_e
            self.changes.resize(st.chg_start)
            self.minoff[b] = st.o
            self.eff[b] = st.o
            self.off_v[b] = -1

    cdef i64 _excluded_top(self, vector[i64]& todo, i64 ex_top) noexcept nogil:
        cdef Tables* c = self.c
        cdef i64 cb, top, q, lowest
        cdef bint any_nbr
        for cb in todo:
            top = self.minoff[cb] + c.size[cb]
            if top < ex_top:
                ex_top = top
            any_nbr = c.nbr_ptr[cb + 1] > c.nbr_ptr[cb]
            if not any_nbr:
                return -1
            lowest = INF * 8
            for q in range(c.nbr_ptr[cb], c.nbr_ptr[cb + 1]):
                if self.minoff[c.nbr_idx[q]] < lowest:
                    lowest = self.minoff[c.nbr_idx[q]]
            if lowest >= top:
                return -1
        return ex_top

    cdef i64 _branch_buffer(self, vector[i64]& cand) noexcept nogil:
        cdef Tables* c = self.c
        cdef i64 best = -1, k, j, tmax, wsum, best_t = 0, best_w = 0
        cdef bint better
        if cand.size() == 1:
            return cand[0]
        for k in cand:
            if self.choice == CHOICE_RANK:
                better = best < 0 or self.rank[k] < self.rank[best]
            else:
                tmax = self.total[c.sl[k]]
                for j in range(c.sl[k] + 1, c.sh[k]):
                    if self.total[j] > tmax:
                        tmax = self.total[j]
                wsum = 0
                if self.choice == CHOICE_WDEG:
                    for j in range(c.sl[k], c.sh[k]):
                        wsum += self.weights[j]
                if best < 0:
                    better = True
                elif wsum != best_w:
                    better = wsum > best_w
                elif tmax != best_t:
                    better = tmax > best_t
                else:
                    better = self.rank[k] < self.rank[best]
                if better:
                    best_t = tmax
                    best_w = wsum
            if better:
                best = k
        return best

    cdef i64 _lift_bound(self, i64 o, i64 t, vector[i64]& mn, i64 b) noexcept nogil:
        """The lowest offset ``b`` (top ``t``, not at ``o``) can be lifted to, or -1 when nothing can lift it;
        ``mn``: its neighbours' min offsets before the placement was tried."""
        cdef Tables* c = self.c
        cdef Py_ssize_t q, n0 = c.nbr_ptr[b]
        cdef i64 u, best = -1
        cdef bint any_unplaced = False
        for q in range(<Py_ssize_t>mn.size()):
            if mn[q] < INF:
                any_unplaced = True
                break
        if not any_unplaced:
            return -1
        for q in range(<Py_ssize_t>mn.size()):
            u = mn[q] if mn[q] > o else o
            if u < t:
                u += c.size[c.nbr_idx[n0 + q]]
                if best < 0 or u < best:
                    best = u
        return best

    cdef int _node(self, vector[i64]& P_in, i64 ps, i64 pe) noexcept nogil:
        """The reference's ``_node``: solve the unplaced buffers of ``P_in`` living in sections ``[ps, pe)``."""
        cdef Tables* c = self.c
        cdef vector[i64] P, todo, cand, mn, tkeys
        cdef Py_ssize_t mark, q, n0
        cdef i64 k, o, e, omax, ex_top, b, t, lift, tmax
        cdef uint64_t pkey = 0, key
        cdef bint todo_all = True
        cdef int r
        P.reserve(P_in.size())
        for k in P_in:
            if self.minoff[k] < INF:
                P.push_back(k)
        if P.size() == 0:
            return R_OK
        tmax = self.total[ps]
        for k in range(ps + 1, pe):
            if self.total[k] > tmax:
                tmax = self.total[k]
        omax = self.cap - tmax
        if self.use_tt:
            pkey = <uint64_t>P.size()
            for k in P:
                pkey = _mix(pkey, <uint64_t>k)
        mark = <Py_ssize_t>self.trail.size()
        ex_top = INF
        while True:
            self.nodes += 1
            if self._tick():
                return R_ABORT
            o = EXCL * 4
            for k in P:
                if self.eff[k] < o:
                    o = self.eff[k]
            if o >= EXCL or o > omax:
                break
            if todo_all:
                todo.clear()
                for k in P:
                    if self.eff[k] >= EXCL:
                        todo.push_back(k)
                todo_all = False
            ex_top = self._excluded_top(todo, ex_top)
            todo.clear()
            if o >= ex_top:
                break
            if self.use_tt:
                key = pkey
                for k in P:
                    key = _mix(key, <uint64_t>self.eff[k])
                if self.ttk.count(key):
                    self.tt_hits += 1
                    break
                tkeys.push_back(<i64>key)
            cand.clear()
            for k in P:
                if self.eff[k] == o:
                    cand.push_back(k)
            b = self._branch_buffer(cand)
            t = o + c.size[b]
            n0 = c.nbr_ptr[b]
            mn.clear()
            for q in range(n0, c.nbr_ptr[b + 1]):
                mn.push_back(self.minoff[c.nbr_idx[q]])
            if t <= self.cap:
                r = self._place_and_descend(b, o, t, P, ps, pe)
                if r != R_FAIL:
                    return r
            lift = self._lift_bound(o, t, mn, b)
            if lift < 0:
                break
            self._exclude(b, lift)
            todo.push_back(b)
            if not self._sections_ok(c.sl[b], c.sh[b]):
                break
        self.backtracks += 1
        self._undo_to(mark)
        if self.use_tt:
            for k in tkeys:
                self.ttk.insert(<uint64_t>k)
        return R_FAIL

    cdef int _place_and_descend(self, i64 b, i64 o, i64 t, vector[i64]& P, i64 ps, i64 pe) noexcept nogil:
        cdef Py_ssize_t mark_b = <Py_ssize_t>self.trail.size()
        cdef int r
        self._place(b, o, t)
        if self._sections_ok(self.c.nlo[b], self.c.nhi[b]):
            r = self._descend(b, P, ps, pe)
            if r != R_FAIL:
                return r
        self._undo_to(mark_b)
        return R_FAIL

    cdef int _descend(self, i64 b, vector[i64]& P, i64 ps, i64 pe) noexcept nogil:
        """After placing ``b``: the rest of ``P``, as independent partitions where no unplaced buffer crosses a
        boundary of ``b``'s sections any more (dynamic decomposition)."""
        cdef Tables* c = self.c
        cdef i64 l = c.sl[b], h = c.sh[b], j, k, lo_c, hi_c
        cdef vector[i64] cps, U, part
        cdef Py_ssize_t p, q, np_
        cdef bint any_zero = False
        cdef int r
        if h - l > 1:
            for j in range(l, h - 1):
                if self.cuts[j] == 0:
                    any_zero = True
                    break
        if not any_zero:
            return self._node(P, ps, pe)
        cps.push_back(ps)
        for j in range(l, h - 1):
            if self.cuts[j] == 0:
                cps.push_back(j + 1)
        cps.push_back(pe)
        np_ = <Py_ssize_t>cps.size() - 1
        for k in P:
            if self.minoff[k] < INF:
                U.push_back(k)
        for p in range(np_):
            lo_c = cps[p]
            hi_c = cps[p + 1]
            part.clear()
            for k in U:  # searchsorted(cps, sl, "right") - 1 == p
                if lo_c <= c.sl[k] < hi_c:
                    part.push_back(k)
            if part.size():
                r = self._node(part, lo_c, hi_c)
                if r != R_OK:
                    return r
        return R_OK
