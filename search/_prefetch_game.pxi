# ---- the prefetch game's native engine (search/_prefetch_game.pxi) ---------------------------------------
# The prefetch game's state and step, compiled (the ``native`` engine of ``PrefetchGame``).
#
# Two classes, one boundary:
#
# * :class:`PrefetchTables`: what every game on one problem, decision order and game shape reads but never
#   writes: the touches, each op's operands in the evaluator's order with their savings, the ops' compute,
#   slow-memory and fixed seconds, the copy time of every buffer, the two prefix sums of the window picker,
#   and the decisions (one per use segment: buffer, touch, op, pure write, last of its buffer, last write
#   before it, the buffer's later touches).
# * :class:`PrefetchState`: one game's state: the fast intervals (columns), the served touches, the op
#   times, the prefetch and eviction copies with their stalls, the service queues and window coverage, the
#   current segment's options and an undo journal (a persistent chain of :class:`_PStep` records shared by
#   clones, as the Python game's tuple chain is).
#
# Each method computes what ``mallocgame.search.game_prefetch.PrefetchGame`` computes, with the same
# floating-point operations in the same order (``-ffp-contract=off``: no fused multiply-adds), so rewards
# agree to the last bit; tests/test_engine_prefetch.py checks both engines against each other. The hole
# finder and the copy service are the compiled ones of ``search/_prefetch_holes.pxi`` and
# ``hardware/_copy_service.pxi``, called at C level (parts of the same module).

cimport cython
from cpython.ref cimport Py_REFCNT
from libcpp.algorithm cimport lower_bound, sort, upper_bound
from libcpp.vector cimport vector


import numpy as np

cdef long long IN_PLACE = -2  # copy_start of an interval produced in place (game_prefetch.IN_PLACE)
cdef long long _MASKED = -(1LL << 62)  # a window offered no new interval (the Python game's None)
cdef double _RATIO = 1.5  # game_prefetch.RATIO
cdef int _PREFETCH = 0, _EVICTION = 1
cdef long long _NO_CAPACITY_TOP = 1LL << 62  # the top hole's top when there is no capacity
cdef int _SHIFT = 5  # the time index's buckets: 32 ops each
cdef int _GROUP = 5  # and its groups of 32 buckets, each with the largest of their ends' upper bounds


cdef struct Copy:  # a copy of rect r: window [first, deadline), its seconds, its buffer
    long long first
    long long deadline
    double seconds
    long long buf


cdef struct Iv:  # a fast interval: occupied [occ, end) x [off, top); its copies (per kind) and time index link
    long long occ
    long long end
    long long off
    long long top
    long long buf
    long long start  # the op it serves first
    long long copy  # copy start (IN_PLACE: produced in place)
    long long lastw  # the last write it serves (-1: none, it holds no new value)
    Copy cp[2]
    bint has[2]
    double stall[2]
    int next  # the next older interval of its time bucket (-1: none)
    int next_long  # the next older interval of its time bucket's long list (below; -2: not on it)


cdef struct Bucket:  # the intervals whose occ falls in one bucket of ops: the newest, an upper bound of their ends
    int head
    long long max
    # the newest of its long intervals: those whose end has passed the bucket's last op. A query over ops after
    # the bucket walks only these: the others all end inside it. An interval joins when its end first passes the
    # bucket (recorded, so that undo takes it off again: it is then the list's newest)
    int long_head


cdef struct LiveRect:  # a fast interval gathered for the hole finder: addresses [off, top), occupied [occ, end)
    long long off
    long long top
    long long occ
    long long end


cdef extern from *:
    """
    // by offset, as a function object: std::sort inlines the comparison (see _by_address for why offset alone)
    template <typename R> struct LiveRectByOffset {
        bool operator()(const R& x, const R& y) const { return x.off < y.off; }
    };
    """
    cdef cppclass LiveRectByOffset[R]:
        LiveRectByOffset()


cdef struct QItem:  # one queued copy, in service order (deadline, first, buffer, rect)
    long long deadline
    long long first
    long long buf
    long long rect
    double seconds


cdef inline bint _q_less(const QItem& p, const QItem& q) noexcept nogil:
    if p.deadline != q.deadline:
        return p.deadline < q.deadline
    if p.first != q.first:
        return p.first < q.first
    if p.buf != q.buf:
        return p.buf < q.buf
    return p.rect < q.rect


cdef inline bint _q_deadline_before(const QItem& p, const QItem& q) noexcept nogil:
    return p.deadline < q.deadline  # upper_bound with (x, ...) finds the first deadline > x


cdef inline void _cover_add(int* cov, long long a, long long e, int d) noexcept nogil:
    """Add ``d`` to the cover counts of ops ``[a, e)`` (nothing when ``a >= e``)."""
    cdef long long i
    for i in range(a, e):
        cov[i] += d


cdef inline Py_ssize_t _lazy_open(Py_ssize_t* nxt, const long long* stamp, long long epoch, Py_ssize_t t) noexcept nogil:
    """The copy service's "next open slot" (``next_open``) over slots set up lazily: a slot not stamped with
    ``epoch`` is untouched in this service run, so open (its own root)."""
    cdef Py_ssize_t root = t, up
    while stamp[root] == epoch and nxt[root] != root:
        root = nxt[root]
    while t != root:
        up = nxt[t]
        nxt[t] = root
        t = up
    return root


cdef inline double _serve_lazy(double* left, Py_ssize_t* nxt, long long* stamp, long long epoch, const double* budget,
                               Py_ssize_t first, Py_ssize_t deadline, double need) noexcept nogil:
    """``serve_one`` on slots indexed by op, each set up (its budget from ``budget``) when the service first reaches
    it: a run of the game's service reaches few of its slots, and setting all of them up cost more than serving.
    The arithmetic is ``serve_one``'s, step for step. ``first < deadline``, both inside the run."""
    cdef Py_ssize_t t = _lazy_open(nxt, stamp, epoch, first)
    cdef double take
    while need > 0 and t < deadline:
        if stamp[t] != epoch:
            stamp[t] = epoch
            nxt[t] = t
            left[t] = budget[t]
        take = need if need < left[t] else left[t]
        need -= take
        left[t] -= take
        if left[t] <= 0:
            nxt[t] = t + 1
            t = _lazy_open(nxt, stamp, epoch, t + 1)
        else:
            break
    return need if need > 0 else 0.0


cdef enum RecKind:
    R_END = 0      # end[idx] was ival
    R_LASTW = 1    # rlastw[idx] was ival
    R_SERVED = 2   # touch idx was not served
    R_OPTIME = 3   # op_time[idx] was dval
    R_RECT = 4     # a rect was added
    R_COPY = 5     # copy (ck, idx) was old (has_old) with stall dval
    R_STALL = 6    # stall (ck, idx) was dval
    R_LONG = 7     # interval idx joined its bucket's long list


cdef struct Rec:
    int kind
    int ck
    long long idx
    long long ival
    double dval
    bint has_old
    Copy old


cdef struct Scalars:  # the scalars before a step
    Py_ssize_t pos, steps
    long long open, last_rect
    double op_total, stall_total, total


@cython.no_gc
cdef class _PStep:
    """One step's undo record: its primitive changes and the scalars before it; ``prev`` the step before."""

    cdef _PStep prev
    cdef vector[Rec] recs
    cdef Scalars scalars

    def __dealloc__(self):
        # unlink the records only this one holds one by one (a recursive free of a long chain overflows the stack)
        cdef _PStep node = self.prev, after
        self.prev = None
        while node is not None and Py_REFCNT(node) == 1:
            after = node.prev
            node.prev = None
            node = after
            after = None


cdef class PrefetchTables:
    """The immutable tables of one problem (``data``: a ``PrefetchData``), decision order (``seg``: its
    ``_Segments``) and game shape (``windows`` copy windows of ``k`` offsets each)."""

    cdef Py_ssize_t n, n_ops, n_touches, S, k, nw, extend_action, slow_action, num_actions, n_buckets
    cdef vector[long long] t_ptr, t_ops, size, align, end_l
    cdef vector[char] t_reads, t_writes, output
    cdef vector[long long] opnd_ptr, opnd_touch
    cdef vector[double] opnd_delta, compute, slow_mem, fixed, op_time0, copy_seconds, pre_xla, pre_safe
    cdef double op_total0, reward_norm
    cdef long long cap
    cdef bint bounded
    cdef vector[long long] s_buf, s_touch, s_t, s_w, later_ptr, later
    cdef vector[char] s_pure, s_last
    # scratch of one decision or one service run (shared: one at a time, the GIL held)
    cdef vector[Rect] rs
    cdef vector[LiveRect] live
    cdef vector[Hole] hs
    cdef vector[double] left  # per op (and a sentinel): the copy service's budgets left, next open slots, and the
    cdef vector[Py_ssize_t] nxt  # service run that set the slot up (``epoch``: the latest run)
    cdef vector[long long] stamp
    cdef long long epoch
    # scratch of one look-ahead (``PrefetchState._look_ahead``; capacities kept, so that it allocates nothing)
    cdef vector[Rec] la_recs
    cdef vector[Scalars] la_marks
    cdef vector[size_t] la_starts
    cdef vector[Hole] la_holes
    cdef vector[bint] la_inf

    def __init__(self, d, seg, Py_ssize_t windows, Py_ssize_t k):
        cdef Py_ssize_t op, i
        self.n, self.n_ops, self.n_touches = d.n, d.n_ops, d.n_touches
        self.n_buckets = (self.n_ops >> _SHIFT) + 1
        self.left.resize(self.n_ops + 1)
        self.nxt.resize(self.n_ops + 1)
        self.stamp.assign(self.n_ops + 1, 0)
        self.epoch = 0
        self.k, self.nw = k, windows
        self.extend_action = k * windows
        self.slow_action = k * windows + 1
        self.num_actions = k * windows + 2
        self.t_ptr, self.t_ops = d.t_ptr, d.t_ops
        self.t_reads = [bool(x) for x in d.t_reads]
        self.t_writes = [bool(x) for x in d.t_writes]
        self.output = [bool(x) for x in d.output]
        self.size, self.align, self.end_l = d.size_l, d.align_l, d.end_l
        self.opnd_ptr.push_back(0)
        for op in range(self.n_ops):
            for kk, delta in d.op_operands[op]:
                self.opnd_touch.push_back(kk)
                self.opnd_delta.push_back(delta)
            self.opnd_ptr.push_back(self.opnd_touch.size())
        self.compute, self.slow_mem, self.fixed = d.compute_l, d.slow_mem_l, d.fixed_l
        self.op_time0 = d.op_time0
        self.op_total0 = float(sum(d.op_time0))  # as the Python game adds them
        self.copy_seconds = d.copy_seconds
        self.pre_xla, self.pre_safe = d.prefix["xla"], d.prefix["safe"]
        self.reward_norm = d.reward_norm
        self.bounded = d.capacity is not None
        self.cap = d.capacity if self.bounded else _NO_CAPACITY_TOP
        self.S = seg.n
        self.s_buf, self.s_touch, self.s_t, self.s_w = seg.buf, seg.touch, seg.t, seg.w
        self.s_pure = [bool(x) for x in seg.pure]
        self.s_last = [bool(x) for x in seg.last]
        self.later_ptr.push_back(0)
        for i in range(self.S):
            for op in seg.later[i]:
                self.later.push_back(op)
            self.later_ptr.push_back(self.later.size())


cdef class PrefetchState:
    """One prefetch game's state on ``tables`` (see the module docstring)."""

    cdef PrefetchTables tb
    cdef readonly Py_ssize_t pos, steps
    cdef readonly long long open, last_rect
    cdef readonly double op_total, stall_total, total
    # the fast intervals, the ops, the copies of each kind in service order, and a time index of the intervals
    # (per bucket of ops the newest interval whose occ falls in it, linked to the older ones, and an upper bound
    # of their ends, never lowered: an undone end leaves it high, which only costs a visit)
    cdef vector[Iv] iv
    # per op: its time now, and per kind how many copy windows cover it (contiguous arrays, so that adding a
    # window's ops and scanning a run for cover are straight loops the compiler vectorises)
    cdef vector[double] op_time
    cdef vector[int] cover[2]
    cdef vector[char] served
    cdef vector[QItem] queue[2]
    cdef vector[Bucket] bk
    cdef vector[long long] group_max  # per group of buckets, the largest of their ``max``: a query skips a group at once
    cdef _PStep journal
    # the current segment's options: the open interval, where it closes, extend (valid while basic_valid; all a
    # step that extends or goes slow needs), then the copy windows and their holes (valid while opts_valid)
    cdef bint basic_valid, opts_valid, o_extend
    cdef long long o_open, o_close_end, o_prev_end
    cdef long long o_win[3]  # per window (at most 3)
    cdef vector[Hole] o_holes  # nw x k
    cdef vector[bint] o_inf  # nw x k: the hole is the unbounded top one
    cdef Py_ssize_t o_nholes[3]
    cdef Py_ssize_t o_greedy  # -1: not computed
    # one step's changes: the records, and per kind the span of the changed ops
    cdef vector[Rec]* rec
    cdef bint ch[2]
    cdef long long ch_lo[2]
    cdef long long ch_hi[2]

    def __init__(self, PrefetchTables tables):
        self.tb = tables
        self.pos = self.steps = 0
        self.open = self.last_rect = -1
        self.op_time = tables.op_time0
        self.cover[0].assign(tables.n_ops, 0)
        self.cover[1].assign(tables.n_ops, 0)
        self.op_total = tables.op_total0
        self.stall_total = 0.0
        self.total = 0.0
        self.served.assign(tables.n_touches, 0)
        self.bk.assign(tables.n_buckets, Bucket(-1, -1, -1))
        self.group_max.assign((tables.n_buckets >> _GROUP) + 1, -1)
        self.journal = None
        self.o_holes.resize(tables.nw * tables.k)
        self.o_inf.resize(tables.nw * tables.k)
        self.basic_valid = self.opts_valid = False
        self.rec = NULL

    def __dealloc__(self):
        # Cython destroys the C++ members it declares one by one, not those in C arrays: free these here (else
        # every state dropped, every clone of a search among them, leaks its queues and cover counts)
        cdef int kind
        for kind in range(2):
            self.queue[kind].clear()
            self.queue[kind].shrink_to_fit()
            self.cover[kind].clear()
            self.cover[kind].shrink_to_fit()

    def clone(self):
        """An independent copy; the tables and the undo journal (immutable) are shared."""
        cdef PrefetchState o = PrefetchState.__new__(PrefetchState)
        o.tb = self.tb
        o.pos, o.steps, o.open, o.last_rect = self.pos, self.steps, self.open, self.last_rect
        o.op_total, o.stall_total, o.total = self.op_total, self.stall_total, self.total
        o.iv, o.op_time, o.served, o.bk, o.group_max = self.iv, self.op_time, self.served, self.bk, self.group_max
        o.cover[0], o.cover[1] = self.cover[0], self.cover[1]
        o.queue[0], o.queue[1] = self.queue[0], self.queue[1]
        o.journal = self.journal
        o.basic_valid, o.opts_valid, o.o_extend = self.basic_valid, self.opts_valid, self.o_extend
        o.o_open, o.o_close_end, o.o_prev_end = self.o_open, self.o_close_end, self.o_prev_end
        o.o_holes, o.o_inf, o.o_greedy = self.o_holes, self.o_inf, self.o_greedy
        o.o_win[0], o.o_win[1], o.o_win[2] = self.o_win[0], self.o_win[1], self.o_win[2]
        o.o_nholes[0], o.o_nholes[1], o.o_nholes[2] = self.o_nholes[0], self.o_nholes[1], self.o_nholes[2]
        o.rec = NULL
        return o

    # --- reading the state ----------------------------------------------------------------------
    @property
    def done(self):
        return self.pos >= self.tb.S

    @property
    def m(self):
        return <Py_ssize_t> self.iv.size()

    def columns(self):
        """int64 ``[8, m]``: occ, end, off, top, buffer, start, copy start, last write of every fast interval."""
        cdef Py_ssize_t m = self.iv.size(), i
        out = np.empty((8, m), np.int64)
        cdef long long[:, ::1] v = out
        for i in range(m):
            v[0, i], v[1, i], v[2, i], v[3, i] = self.iv[i].occ, self.iv[i].end, self.iv[i].off, self.iv[i].top
            v[4, i], v[5, i], v[6, i], v[7, i] = self.iv[i].buf, self.iv[i].start, self.iv[i].copy, self.iv[i].lastw
        return out

    def offsets(self):
        """int64 ``[m, 5]``: ``(buffer, offset, start, end, copy_start)`` per fast interval (``PrefetchGame.offsets``)."""
        cdef Py_ssize_t m = self.iv.size(), i
        out = np.empty((m, 5), np.int64)
        cdef long long[:, ::1] v = out
        for i in range(m):
            v[i, 0], v[i, 1], v[i, 2], v[i, 3], v[i, 4] = self.iv[i].buf, self.iv[i].off, self.iv[i].start, self.iv[i].end, self.iv[i].copy
        return out

    def op_times(self):
        return [t for t in self.op_time]

    def stalls(self, int kind):
        """``{rect: stall}`` of the copies of ``kind`` (0 prefetch, 1 eviction)."""
        cdef Py_ssize_t r
        return {r: self.iv[r].stall[kind] for r in range(<Py_ssize_t> self.iv.size()) if self.iv[r].has[kind]}

    def options(self):
        """``(open, close_end, extend, windows, holes)`` as ``PrefetchGame._options`` (windows: ``None`` masked)."""
        if self.pos >= self.tb.S:
            raise IndexError("no decision left: the game is done")
        self._options()
        cdef Py_ssize_t g, j, k = self.tb.k
        windows, holes = [], []
        for g in range(self.tb.nw):
            windows.append(None if self.o_win[g] == _MASKED else self.o_win[g])
            holes.append([(self.o_holes[g * k + j].offset, self.o_holes[g * k + j].bottom,
                           float("inf") if self.o_inf[g * k + j] else self.o_holes[g * k + j].top)
                          for j in range(self.o_nholes[g])])
        return self.o_open, self.o_close_end, bool(self.o_extend), windows, holes

    # --- decisions --------------------------------------------------------------------------------
    cdef long long _free_until(self, long long r, long long a, long long limit) noexcept:
        """First op in ``[a, limit)`` at which another rectangle takes an address of rectangle ``r``, else ``limit``.

        ``a`` is ``r``'s end (every caller asks how far ``r`` can grow). Another rectangle occupied before ``a`` and
        still after it would share an op before ``a`` with ``r``, which the placement never allows: only the
        rectangles occupied from an op in ``[a, limit)`` can take ``r``'s addresses, the answer the least of
        their ``occ``. So only the buckets of ``[a, limit)`` are walked, in order, up to the first with a hit."""
        cdef long long lo_off = self.iv[r].off, hi_top = self.iv[r].top, first = limit
        cdef const Iv* iv = self.iv.data()
        cdef Py_ssize_t bk, last
        cdef int i
        if limit <= a:
            return limit
        last = (limit - 1) >> _SHIFT
        if last >= self.tb.n_buckets:
            last = self.tb.n_buckets - 1
        for bk in range(a >> _SHIFT, last + 1):
            i = self.bk[bk].head
            while i >= 0:
                if a <= iv[i].occ < first and iv[i].off < hi_top and iv[i].top > lo_off:
                    first = iv[i].occ
                i = iv[i].next
            if first < limit:  # the later buckets hold only later ops
                break
        return first

    cdef long long _evict_end(self, long long r, long long limit) noexcept:
        """Where open interval ``r`` (holding a new value) ends when closed: long enough for its eviction."""
        cdef PrefetchTables tb = self.tb
        cdef long long cur = self.iv[r].end, w = self.iv[r].lastw, e
        cdef double x = tb.pre_safe[w + 1] + _RATIO * tb.copy_seconds[self.iv[r].buf]
        cdef long long target = lower_bound(tb.pre_safe.begin(), tb.pre_safe.end(), x) - tb.pre_safe.begin()
        e = target if target < limit else limit
        if e < cur:
            e = cur
        if e > cur:
            e = self._free_until(r, cur, e)
        return e

    cdef void _holes(self, long long b, Py_ssize_t p) noexcept:
        """The holes offered to a new interval of segment ``p`` in each copy window of ``o_win`` (occupying from
        op ``a``: its copy start + 1, or ``t`` in place). The intervals any window needs are gathered and sorted
        by offset once, for the earliest ``a``; each window then keeps those that end after its own ``a``."""
        cdef PrefetchTables tb = self.tb
        cdef long long t = tb.s_t[p], reach = t + 1, a = -1, a_g
        cdef Py_ssize_t lo = tb.later_ptr[p], n_later = tb.later_ptr[p + 1] - lo, bk, last, g, j, n_live
        cdef const long long* later = tb.later.data() + lo
        cdef const Iv* iv = self.iv.data()
        cdef int i
        cdef LiveRect r
        cdef Rect q
        for g in range(tb.nw):
            if self.o_win[g] != _MASKED:
                a_g = t if self.o_win[g] == IN_PLACE else self.o_win[g] + 1
                if a < 0 or a_g < a:
                    a = a_g
        if a < 0:
            return
        # only intervals live somewhere in [a, last later touch] can close a hole of any probe
        if n_later and later[n_later - 1] + 1 > reach:
            reach = later[n_later - 1] + 1
        tb.live.clear()
        last = (reach - 1) >> _SHIFT
        if last >= tb.n_buckets:
            last = tb.n_buckets - 1
        bk = -1
        while bk < last:  # the buckets 0..last whose intervals may end after a (the intervals with end > a)
            bk += 1
            if self.group_max[bk >> _GROUP] <= a:
                bk = (((bk >> _GROUP) + 1) << _GROUP) - 1
                continue
            if self.bk[bk].max <= a:
                continue
            if ((bk + 1) << _SHIFT) <= a:  # the bucket ends before a: only its long intervals can reach past a
                i = self.bk[bk].long_head
                while i >= 0:
                    if iv[i].end > a and iv[i].occ < reach:
                        r.off, r.top, r.occ, r.end = iv[i].off, iv[i].top, iv[i].occ, iv[i].end
                        tb.live.push_back(r)
                    i = iv[i].next_long
                continue
            i = self.bk[bk].head
            while i >= 0:
                if iv[i].end > a and iv[i].occ < reach:
                    r.off, r.top, r.occ, r.end = iv[i].off, iv[i].top, iv[i].occ, iv[i].end
                    tb.live.push_back(r)
                i = iv[i].next
        sort(tb.live.begin(), tb.live.end(), LiveRectByOffset[LiveRect]())
        n_live = tb.live.size()
        for g in range(tb.nw):
            if self.o_win[g] == _MASKED:
                continue
            a_g = t if self.o_win[g] == IN_PLACE else self.o_win[g] + 1
            tb.rs.clear()
            for j in range(n_live):  # still in offset order
                if tb.live[j].end > a_g:
                    q.off, q.top, q.occ = tb.live[j].off, tb.live[j].top, tb.live[j].occ
                    tb.rs.push_back(q)
            self.o_nholes[g] = holes_among(tb.rs, t, later, n_later, tb.size[b], tb.align[b], tb.cap, tb.bounded,
                                           tb.k, tb.hs, &self.o_holes.data()[g * tb.k], &self.o_inf.data()[g * tb.k],
                                           True)

    cdef void _basic(self) noexcept:
        """The open interval, where it closes if not extended, and whether extending is legal."""
        if self.basic_valid:
            return
        cdef PrefetchTables tb = self.tb
        cdef Py_ssize_t p = self.pos
        cdef long long k = tb.s_touch[p], t = tb.s_t[p], r = self.open, cur
        self.o_open, self.o_close_end, self.o_extend, self.o_greedy = r, -1, False, -1
        if r >= 0:
            cur = self.iv[r].end
            self.o_close_end = self._evict_end(r, t) if self.iv[r].lastw >= 0 and tb.t_reads[k] else cur
            self.o_extend = self._free_until(r, cur, t + 1) >= t + 1
            self.o_prev_end = self.o_close_end
        else:
            self.o_prev_end = self.iv[self.last_rect].end if self.last_rect >= 0 else -1
        self.basic_valid = True

    cdef void _options(self) noexcept:
        """All the options: :meth:`_basic`'s, then the copy windows and the holes each offers."""
        if self.opts_valid:
            return
        self._basic()
        cdef PrefetchTables tb = self.tb
        cdef Py_ssize_t p = self.pos, g, h
        cdef long long b = tb.s_buf[p], t = tb.s_t[p], prev_end = self.o_prev_end, cmin, c, x
        cdef double need
        cdef bint dup
        self.o_greedy = -1
        for g in range(tb.nw):
            self.o_win[g] = _MASKED
            self.o_nholes[g] = 0
        if tb.s_pure[p]:
            self.o_win[0] = IN_PLACE
        else:
            cmin = tb.s_w[p] if tb.s_w[p] > prev_end - 1 else prev_end - 1
            need = _RATIO * tb.copy_seconds[b]
            for g in range(tb.nw):  # the copy starts of the windows, in order: xla, safe, earliest
                if g == 2:
                    c = cmin
                else:
                    if g == 0:
                        x = upper_bound(tb.pre_xla.begin(), tb.pre_xla.end(), tb.pre_xla[t] - need) - tb.pre_xla.begin() - 1
                    else:
                        x = upper_bound(tb.pre_safe.begin(), tb.pre_safe.end(), tb.pre_safe[t] - need) - tb.pre_safe.begin() - 1
                    c = (x if x < t else t) - 1 if x >= cmin + 1 else cmin
                dup = False
                for h in range(g):
                    if self.o_win[h] == c:
                        dup = True
                if not dup:
                    self.o_win[g] = c
        self._holes(b, p)
        self.opts_valid = True

    cdef inline bint _legal(self, Py_ssize_t action) noexcept:
        cdef PrefetchTables tb = self.tb
        if action == tb.slow_action:
            return True
        if action == tb.extend_action:
            return self.o_extend
        if 0 <= action < tb.extend_action:
            return action % tb.k < self.o_nholes[action // tb.k]
        return False

    def legal_actions(self):
        """Indices of the legal actions, int64 ascending (empty when done)."""
        if self.pos >= self.tb.S:
            return np.zeros(0, np.int64)
        self._options()
        cdef Py_ssize_t a, n = 0
        out = np.empty(self.tb.num_actions, np.int64)
        cdef long long[::1] v = out
        for a in range(self.tb.num_actions):
            if self._legal(a):
                v[n] = a
                n += 1
        return out[:n]

    def greedy_action(self):
        """XLA's ladder scored exactly (``PrefetchGame.greedy_action``)."""
        if self.pos >= self.tb.S:
            raise IndexError("no decision left: the game is done")
        return self._greedy()

    def greedy_rollout(self, double stop_step=float("inf")):
        """Play the greedy action (in place) until done or ``stop_step`` steps; the rewards' sum, from 0.0 in step order."""
        cdef double total = 0.0
        while self.pos < self.tb.S and self.steps < stop_step:
            total += self._step(self._greedy())
        return total

    cdef Py_ssize_t _greedy(self) except -1:
        # extend needs only the basic options: the copy windows' holes are found only when it is not legal
        self._basic()
        if self.o_greedy >= 0:
            return self.o_greedy
        cdef PrefetchTables tb = self.tb
        if self.o_extend:
            self.o_greedy = tb.extend_action
            return self.o_greedy
        self._options()
        cdef Py_ssize_t best = tb.slow_action, g, a
        cdef double best_value, value
        cdef bint any_cand = False
        for g in range(tb.nw):
            if self.o_nholes[g]:
                any_cand = True
        if any_cand:
            # without an open interval, slow changes nothing now, and the rest of the buffer stays slow too
            best_value = self._look_ahead(tb.slow_action) if self.o_open >= 0 else 0.0
            for g in range(tb.nw):
                if self.o_nholes[g]:
                    a = g * tb.k
                    value = self._look_ahead(a)
                    if value > best_value + 1e-12:
                        best, best_value = a, value
        self.o_greedy = best
        return best

    cdef double _look_ahead(self, Py_ssize_t action) except? -1e300:
        """Rewards of ``action`` and of the rest of this buffer by "extend if it fits, else slow"; undone."""
        cdef PrefetchTables tb = self.tb
        # the options of this state are kept aside and restored (the steps below overwrite them)
        cdef bint ext = self.o_extend
        cdef long long o_open = self.o_open, o_close = self.o_close_end
        cdef long long win[3]
        tb.la_holes = self.o_holes
        tb.la_inf = self.o_inf
        cdef Py_ssize_t nh[3]
        cdef int g
        for g in range(3):
            win[g], nh[g] = self.o_win[g], self.o_nholes[g]
        cdef vector[Rec]* recs = &tb.la_recs
        cdef vector[Scalars]* marks = &tb.la_marks
        cdef vector[size_t]* starts = &tb.la_starts
        cdef double total
        cdef Py_ssize_t i
        recs.clear()
        marks.clear()
        starts.clear()
        starts.push_back(0)
        marks.push_back(self._scalars())
        total = self._apply(action, recs)
        starts.push_back(recs.size())
        while not tb.s_last[self.pos - 1]:
            self._basic()  # extend or slow: the holes are not needed
            marks.push_back(self._scalars())
            total += self._apply(tb.extend_action if self.o_extend else tb.slow_action, recs)
            starts.push_back(recs.size())
        for i in range(<Py_ssize_t> marks.size() - 1, -1, -1):
            self._revert(recs[0], starts[0][i], starts[0][i + 1], marks[0][i])
        self.o_extend, self.o_open, self.o_close_end = ext, o_open, o_close
        self.o_holes, self.o_inf = tb.la_holes, tb.la_inf
        for g in range(3):
            self.o_win[g], self.o_nholes[g] = win[g], nh[g]
        self.o_greedy = -1
        self.basic_valid = self.opts_valid = True
        return total

    # --- primitive changes, recorded for undo ------------------------------------------------------
    cdef inline void _record(self, int kind, int ck, long long idx, long long ival, double dval) noexcept:
        cdef Rec r
        r.kind, r.ck, r.idx, r.ival, r.dval, r.has_old = kind, ck, idx, ival, dval, False
        self.rec.push_back(r)

    cdef inline void _changed(self, int kind, long long a, long long e) noexcept:
        if not self.ch[kind]:
            self.ch[kind] = True
            self.ch_lo[kind], self.ch_hi[kind] = a, e
        else:
            if a < self.ch_lo[kind]:
                self.ch_lo[kind] = a
            if e > self.ch_hi[kind]:
                self.ch_hi[kind] = e

    cdef void _set_end(self, long long r, long long e) noexcept:
        cdef Py_ssize_t bk
        if self.iv[r].end != e:
            self._record(R_END, 0, r, self.iv[r].end, 0.0)
            self._join_long(r, e)
            self.iv[r].end = e
            bk = self.iv[r].occ >> _SHIFT
            if e > self.bk[bk].max:
                self.bk[bk].max = e
                if e > self.group_max[bk >> _GROUP]:
                    self.group_max[bk >> _GROUP] = e

    cdef inline void _join_long(self, long long r, long long e) noexcept:
        """Put interval ``r`` on its bucket's long list if its end, now ``e``, first passes the bucket."""
        cdef Py_ssize_t bk = self.iv[r].occ >> _SHIFT
        cdef long long past = (bk + 1) << _SHIFT
        if e > past and self.iv[r].next_long == -2:
            self.iv[r].next_long = self.bk[bk].long_head
            self.bk[bk].long_head = <int> r
            self._record(R_LONG, 0, r, 0, 0.0)

    cdef void _serve(self, long long k) noexcept:
        cdef PrefetchTables tb = self.tb
        self.served[k] = 1
        self._record(R_SERVED, 0, k, 0, 0.0)
        cdef long long t = tb.t_ops[k], q
        cdef double saved = 0.0, c, m, new, old
        for q in range(tb.opnd_ptr[t], tb.opnd_ptr[t + 1]):
            if self.served[tb.opnd_touch[q]]:
                saved += tb.opnd_delta[q]
        c, m = tb.compute[t], tb.slow_mem[t] - saved
        new = (c if c > m else m) + tb.fixed[t]
        old = self.op_time[t]
        if new != old:
            self._record(R_OPTIME, 0, t, 0, old)
            self.op_time[t] = new
            self.op_total += new - old
            self._changed(_PREFETCH, t, t + 1)
            self._changed(_EVICTION, t, t + 1)

    cdef long long _add_rect(self, long long b, long long off, long long occ, long long start, long long copy_start,
                             long long lastw) noexcept:
        cdef long long r = self.iv.size()
        cdef Iv x
        cdef Py_ssize_t bk = occ >> _SHIFT
        x.occ, x.end, x.off, x.top = occ, start + 1, off, off + self.tb.size[b]
        x.buf, x.start, x.copy, x.lastw = b, start, copy_start, lastw
        x.has[0] = x.has[1] = False
        x.stall[0] = x.stall[1] = 0.0
        x.cp[0] = x.cp[1] = Copy(0, 0, 0.0, -1)
        x.next = self.bk[bk].head
        x.next_long = -2
        self.iv.push_back(x)
        self.bk[bk].head = <int> r
        if start + 1 > self.bk[bk].max:
            self.bk[bk].max = start + 1
            if start + 1 > self.group_max[bk >> _GROUP]:
                self.group_max[bk >> _GROUP] = start + 1
        self._record(R_RECT, 0, r, 0, 0.0)
        if start + 1 > ((bk + 1) << _SHIFT):  # occupied from a copy start before its bucket's end: long already
            self.iv[r].next_long = self.bk[bk].long_head
            self.bk[bk].long_head = <int> r
            self._record(R_LONG, 0, r, 0, 0.0)
        return r

    cdef void _put_copy(self, int kind, long long r, bint has_new, Copy new, bint record) noexcept:
        cdef bint has_old = self.iv[r].has[kind]
        cdef Copy old = self.iv[r].cp[kind]
        cdef Rec rec
        cdef QItem q
        cdef int* cov
        cdef bint old_live, new_live
        cdef vector[QItem]* queue = &self.queue[kind]
        if not has_old and not has_new:
            return
        if has_old and has_new and old.first == new.first and old.deadline == new.deadline \
                and old.seconds == new.seconds and old.buf == new.buf:
            return
        if record:
            rec.kind, rec.ck, rec.idx, rec.has_old, rec.old = R_COPY, kind, r, has_old, old
            rec.dval = self.iv[r].stall[kind] if has_old else 0.0
            rec.ival = 0
            self.rec.push_back(rec)
        # the cover counts: only the ops in one window and not the other change (an extended interval's eviction
        # window grows at its end; adding and removing whole windows made every step cost their length)
        cov = self.cover[kind].data()
        old_live = has_old and old.first < old.deadline
        new_live = has_new and new.first < new.deadline
        if old_live and new_live:
            _cover_add(cov, new.first, new.deadline if new.deadline < old.first else old.first, 1)
            _cover_add(cov, new.first if new.first > old.deadline else old.deadline, new.deadline, 1)
            _cover_add(cov, old.first, old.deadline if old.deadline < new.first else new.first, -1)
            _cover_add(cov, old.first if old.first > new.deadline else new.deadline, old.deadline, -1)
        elif old_live:
            _cover_add(cov, old.first, old.deadline, -1)
        elif new_live:
            _cover_add(cov, new.first, new.deadline, 1)
        if has_old:
            if old_live:
                if record:
                    self._changed(kind, old.first, old.deadline)
                q.deadline, q.first, q.buf, q.rect, q.seconds = old.deadline, old.first, old.buf, r, old.seconds
                queue.erase(lower_bound(queue.begin(), queue.end(), q, _q_less))
            self.stall_total -= self.iv[r].stall[kind]
            self.iv[r].has[kind] = 0
        if has_new:
            self.iv[r].cp[kind] = new
            self.iv[r].has[kind] = 1
            if new_live:
                if record:
                    self._changed(kind, new.first, new.deadline)
                q.deadline, q.first, q.buf, q.rect, q.seconds = new.deadline, new.first, new.buf, r, new.seconds
                queue.insert(upper_bound(queue.begin(), queue.end(), q, _q_less), q)
                self.iv[r].stall[kind] = 0.0  # served below
            else:  # an empty window: all of it stalls
                self.iv[r].stall[kind] = new.seconds
                self.stall_total += new.seconds

    cdef bint _eviction(self, long long r, Copy* out) noexcept:
        """The eviction copy interval ``r`` needs (``hardware.prefetch.eviction_of``): True and ``out``, else False."""
        cdef long long w = self.iv[r].lastw
        if w < 0:
            return False
        cdef PrefetchTables tb = self.tb
        cdef long long b = self.iv[r].buf, e = self.iv[r].end, lo = tb.t_ptr[b], hi = tb.t_ptr[b + 1]
        cdef long long nx = lower_bound(tb.t_ops.begin() + lo, tb.t_ops.begin() + hi, e) - tb.t_ops.begin()
        cdef bint needed = tb.t_reads[nx] if nx < hi else tb.output[b]
        if not needed:
            return False
        out.first, out.deadline, out.seconds, out.buf = w + 1, e, tb.copy_seconds[b], b
        return True

    cdef void _put_eviction(self, long long r) noexcept:
        cdef Copy c
        cdef bint has = self._eviction(r, &c)
        self._put_copy(_EVICTION, r, has, c, True)

    cdef void _serve_copies(self, int kind) noexcept:
        """Re-serve the copies of ``kind`` in the maximal covered runs that meet the changed span (as the evaluator)."""
        cdef PrefetchTables tb = self.tb
        cdef long long n_ops = tb.n_ops, lo = self.ch_lo[kind], hi = self.ch_hi[kind], i
        cdef const int* cov = self.cover[kind].data()
        if lo < 0:
            lo = 0
        if hi > n_ops:
            hi = n_ops
        if lo >= hi:
            return
        cdef bint any_cover = False
        for i in range(lo, hi):
            if cov[i] != 0:
                any_cover = True
                break
        if not any_cover:  # no copy window meets the change
            return
        if cov[lo] > 0:
            while lo > 0 and cov[lo - 1] != 0:
                lo -= 1
        if cov[hi - 1] > 0:
            while hi < n_ops and cov[hi] != 0:
                hi += 1
        # the copies of the run: those with a deadline in (lo, hi], already in service order
        cdef vector[QItem]* queue = &self.queue[kind]
        cdef QItem key
        key.deadline = lo
        cdef Py_ssize_t start = upper_bound(queue.begin(), queue.end(), key, _q_deadline_before) - queue.begin()
        key.deadline = hi
        cdef Py_ssize_t stop = upper_bound(queue.begin(), queue.end(), key, _q_deadline_before) - queue.begin()
        if start == stop:
            return
        # the run's slots are the ops lo..hi-1 (indexed by op), set up as the service reaches them (a new epoch
        # marks them all untouched; slot hi, never reached, is the sentinel)
        tb.epoch += 1
        cdef long long epoch = tb.epoch
        cdef double* left = tb.left.data()
        cdef Py_ssize_t* nxt = tb.nxt.data()
        cdef long long* stamp = tb.stamp.data()
        cdef const double* budget = self.op_time.data()
        cdef double st, old, delta = 0.0
        cdef Iv* iv = self.iv.data()
        cdef QItem* c
        cdef Py_ssize_t j
        for j in range(start, stop):
            c = &queue.data()[j]
            st = _serve_lazy(left, nxt, stamp, epoch, budget, c.first, c.deadline, c.seconds)
            old = iv[c.rect].stall[kind]
            if st != old:
                self._record(R_STALL, kind, c.rect, 0, old)
                iv[c.rect].stall[kind] = st
                delta += st - old
        self.stall_total += delta

    # --- steps ------------------------------------------------------------------------------------
    cdef inline Scalars _scalars(self) noexcept:
        cdef Scalars s
        s.pos, s.steps, s.open, s.last_rect = self.pos, self.steps, self.open, self.last_rect
        s.op_total, s.stall_total, s.total = self.op_total, self.stall_total, self.total
        return s

    def step(self, long long action):
        """Take ``action``; returns the reward."""
        return self._step(action)

    cdef double _step(self, long long action) except? -1e300:
        cdef _PStep record = _PStep.__new__(_PStep)
        record.scalars = self._scalars()
        cdef double reward = self._apply(action, &record.recs)
        record.prev = self.journal
        self.journal = record
        return reward

    cdef double _apply(self, long long action, vector[Rec]* recs) except? -1e300:
        """One step, its changes recorded in ``recs``."""
        cdef PrefetchTables tb = self.tb
        if self.pos >= tb.S:
            raise ValueError("step on a finished game")
        if action == tb.extend_action or action == tb.slow_action or not 0 <= action < tb.extend_action:
            self._basic()  # no new interval: the holes are not needed
        else:
            self._options()
        cdef Py_ssize_t p = self.pos, g, j
        cdef long long b = tb.s_buf[p], k = tb.s_touch[p], t = tb.s_t[p], r = self.o_open, c, off, occ, lim
        cdef double before = self.op_total + self.stall_total, reward
        cdef bint has_new = False
        cdef Copy cp
        if action == tb.extend_action:
            if not self.o_extend:
                raise ValueError("illegal action: the previous interval cannot be extended (its addresses are taken)")
        elif action == tb.slow_action:
            pass
        elif 0 <= action < tb.extend_action:
            g, j = action // tb.k, action % tb.k
            if j >= self.o_nholes[g]:
                raise ValueError(f"illegal action {action}: window {g} offers {self.o_nholes[g]} offsets")
            has_new = True
            c, off = self.o_win[g], self.o_holes[g * tb.k + j].offset
        else:
            raise ValueError(f"illegal action {action} (the game has {tb.num_actions} actions)")
        self.rec = recs
        self.ch[0] = self.ch[1] = False
        if action == tb.extend_action:
            self._set_end(r, t + 1)
            if tb.t_writes[k]:
                self._record(R_LASTW, 0, r, self.iv[r].lastw, 0.0)
                self.iv[r].lastw = t
            self._serve(k)
            self._put_eviction(r)
        else:
            if r >= 0:
                self._set_end(r, self.o_close_end)
                self._put_eviction(r)
                self.open = -1
            if has_new:
                occ = t if c == IN_PLACE else c + 1
                r = self._add_rect(b, off, occ, t, c, t if tb.t_writes[k] else -1)
                self.open = self.last_rect = r
                if c != IN_PLACE:
                    cp.first, cp.deadline, cp.seconds, cp.buf = c + 1, t, tb.copy_seconds[b], b
                    self._put_copy(_PREFETCH, r, True, cp, True)
                self._serve(k)
                self._put_eviction(r)
        if tb.s_last[p]:
            r = self.open
            if r >= 0 and self.iv[r].lastw >= 0 and self._eviction(r, &cp):
                lim = tb.end_l[b] if tb.end_l[b] < tb.n_ops else tb.n_ops
                self._set_end(r, self._evict_end(r, lim))
                self._put_eviction(r)
            self.open = self.last_rect = -1
        if self.ch[_PREFETCH]:
            self._serve_copies(_PREFETCH)
        if self.ch[_EVICTION]:
            self._serve_copies(_EVICTION)
        self.pos += 1
        self.steps += 1
        reward = (before - (self.op_total + self.stall_total)) / tb.reward_norm
        self.total += reward
        self.rec = NULL
        self.basic_valid = self.opts_valid = False
        return reward

    cdef void _revert(self, vector[Rec]& recs, size_t lo, size_t hi, Scalars s) noexcept:
        """Replay the records ``recs[lo:hi]`` backwards and restore the scalars ``s``."""
        cdef size_t i = hi
        cdef Rec* it
        cdef int kind
        while i > lo:
            i -= 1
            it = &recs[i]
            kind = it.kind
            if kind == R_END:
                self.iv[it.idx].end = it.ival
            elif kind == R_LASTW:
                self.iv[it.idx].lastw = it.ival
            elif kind == R_SERVED:
                self.served[it.idx] = 0
            elif kind == R_OPTIME:
                self.op_time[it.idx] = it.dval
            elif kind == R_RECT:
                self.bk[self.iv.back().occ >> _SHIFT].head = self.iv.back().next  # it is its bucket's newest
                self.iv.pop_back()
            elif kind == R_COPY:
                self._put_copy(it.ck, it.idx, it.has_old, it.old, False)
                if it.has_old:
                    self.iv[it.idx].stall[it.ck] = it.dval
            elif kind == R_LONG:
                self.bk[self.iv[it.idx].occ >> _SHIFT].long_head = self.iv[it.idx].next_long  # its list's newest
                self.iv[it.idx].next_long = -2
            else:
                self.iv[it.idx].stall[it.ck] = it.dval
        self.pos, self.steps, self.open, self.last_rect = s.pos, s.steps, s.open, s.last_rect
        self.op_total, self.stall_total, self.total = s.op_total, s.stall_total, s.total
        self.basic_valid = self.opts_valid = False

    def undo(self):
        """Take back the last step (its primitive changes replayed backwards)."""
        if self.journal is None:
            raise ValueError("undo: no step to take back")
        cdef _PStep record = self.journal
        self.journal = record.prev
        self._revert(record.recs, 0, record.recs.size(), record.scalars)
