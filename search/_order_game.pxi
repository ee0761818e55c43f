# ---- the order game's native engine (search/_order_game.pxi) ---------------------------------------------
# The fixed-order game's state and step, compiled (the ``native`` engine of ``OrderGame``).
#
# Two classes, one boundary:
#
# * :class:`OrderTables`: what every game on one problem and decision order reads but never writes:
#   the decision order, sizes, alignments, capacity, each position's earlier interfering buffers (a CSR
#   table built by one sweep over the start-sorted live ranges, or, past the decision order's pair budget,
#   where that table would not fit in memory, the problem's ``OverlapIndex`` arrays, queried per decision in
#   compiled code as ``OverlapIndex.query`` answers), and the reward model (per buffer the ops it
#   touches and its saving on each, the ops' compute and slow-memory seconds; or the additive per-buffer
#   rewards; or the pack-mode byte counts).
# * :class:`OrderState`: one game's state: offsets ``[n]``, the per-op saved seconds ``[n_ops]``, the
#   position, the reward sum, the peak, the current decision's holes, and an undo journal. The journal is
#   a persistent chain of :class:`_Step` objects shared by clones, as the Python game's tuple chain is, so
#   ``clone()`` copies the two arrays and nothing else, and a clone can undo the steps taken before it.
#
# Each method computes what ``mallocgame.search.game_order.OrderGame`` computes, with the same
# floating-point operations in the same order (``-ffp-contract=off``: no fused multiply-adds), so rewards
# agree to the last bit; tests/test_engine.py checks both engines against each other.

cimport cython
from cpython.ref cimport Py_REFCNT
from libc.string cimport memcpy
from libcpp.algorithm cimport sort
from libcpp.vector cimport vector

import numpy as np

_SLOW_ILLEGAL = "illegal action: slow memory is not allowed while an offset fits (pack mode)"

cdef long long _UNBOUNDED = 0x7FFFFFFFFFFFFFFF  # the top of the hole above everything when there is no capacity

# A placed neighbour's sort key: its offset above its index among the decision's placed neighbours.
cdef int _INDEX_BITS = 20
cdef Py_ssize_t _INDEX_LIMIT = 1 << 20
cdef long long _OFFSET_LIMIT = 1LL << 43


cdef inline Py_ssize_t _first_above(const long long* a, Py_ssize_t n, long long x) noexcept nogil:
    # the first index of the sorted ``a[:n]`` whose value is > x (numpy's searchsorted side="right")
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _first_at_or_above(const long long* a, Py_ssize_t n, long long x) noexcept nogil:
    # the first index of the sorted ``a[:n]`` whose value is >= x (numpy's searchsorted side="left")
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


ctypedef const long long* _Row  # a read-only row of int64


cdef enum RewardKind:
    OPS = 0        # map mode, the roofline per op: a placement changes the times of the ops it touches
    ADDITIVE = 1   # map mode, additive benefits: a placement earns its own benefit
    PACK = 2       # pack mode: bytes placed (less the peak's rise when there is no capacity)










cdef class OrderTables:
    """The immutable tables of one problem and decision order (``data``: a ``GameData``; ``dec``: its
    ``_DecisionOrder``, whose ``cache`` being ``None`` means too many interfering pairs to tabulate: the
    decisions then query ``data.index``'s arrays)."""

    cdef Py_ssize_t n, n_ops
    cdef vector[long long] order, size, align
    cdef long long capacity
    cdef bint capped
    cdef RewardKind kind
    cdef double total_bytes, reward_norm
    cdef vector[double] additive, compute, slow_mem, deltas
    cdef vector[long long] op_ptr, near_ptr
    cdef vector[int] ops, near
    cdef bint has_near
    # Past the pair budget: the overlap index's arrays (numpy, int64, kept alive by ``index_arrays``; not copied),
    # read through the pointers below: buffers in start order and their starts ``[n]``, the checkpoints' times and
    # start positions ``[checkpoints]``, and each checkpoint's stored set (``cp_len[k]`` buffers at ``cp_set[k]``).
    cdef object index_arrays
    cdef const long long* ix_order
    cdef const long long* ix_start
    cdef const long long* cp_time
    cdef const long long* cp_pos
    cdef vector[_Row] cp_set
    cdef vector[Py_ssize_t] cp_len
    cdef Py_ssize_t n_cp
    cdef vector[long long] start, end
    cdef object dec
    cdef vector[Rect] scratch  # the placed neighbours of one decision (shared: one decision at a time, GIL held)
    cdef vector[unsigned long long] keys  # their sort keys, the same way

    def __init__(self, data, dec):
        cdef Py_ssize_t n = data.n, i, a, b, p
        cdef const long long[:] order = dec.order
        cdef const long long[:] size = data.size
        cdef const long long[:] align = data.align
        self.n = n
        self.order.resize(n)
        self.size.resize(n)
        self.align.resize(n)
        for i in range(n):
            self.order[i] = order[i]
            self.size[i] = size[i]
            self.align[i] = align[i]
        self.capped = data.capacity is not None
        self.capacity = data.capacity if self.capped else _UNBOUNDED
        self.total_bytes = data.total_bytes
        self.reward_norm = data.reward_norm
        self.dec = dec
        self.n_ops = 0
        if data.mode != "map":
            self.kind = PACK
        elif data.buf_ops is None:
            self.kind = ADDITIVE
            self.additive = data.additive_reward
        else:
            self.kind = OPS
            self.n_ops = data.n_ops
            self.compute = data.op_compute
            self.slow_mem = data.op_slow_mem
            self.op_ptr.resize(n + 1)
            self.op_ptr[0] = 0
            for i in range(n):
                self.op_ptr[i + 1] = self.op_ptr[i] + len(data.buf_ops[i])
            self.ops = [op for ops in data.buf_ops for op in ops]
            self.deltas = [delta for deltas in data.buf_deltas for delta in deltas]
        self.has_near = dec.cache is not None
        if self.has_near:
            self._tabulate_neighbours(data)
        self._keep_index(data)  # the decisions past the pair budget and the leaf inputs (_order_leaf.pxi) query it

    cdef void _keep_index(self, data):
        """The problem's overlap index as arrays read in C: by the decisions past the pair budget (where a
        per-position table would not fit in memory) and by the leaf inputs (``_order_leaf.pxi``) always."""
        cdef Py_ssize_t n = self.n, i, k
        cdef const long long[:] start = data.start
        cdef const long long[:] end = data.end
        cdef const long long[::1] view, indptr
        index = data.index
        arrays = [np.ascontiguousarray(a, np.int64) for a in (index.order, index.sorted_start, index.cp_time,
                                                              index.cp_pos)]
        cdef const long long** slots[4]
        slots[0], slots[1], slots[2], slots[3] = &self.ix_order, &self.ix_start, &self.cp_time, &self.cp_pos
        for i in range(4):
            view = arrays[i]
            slots[i][0] = &view[0] if view.shape[0] else NULL
        self.n_cp = arrays[2].shape[0]
        self.cp_set.resize(self.n_cp)
        self.cp_len.resize(self.n_cp)
        if isinstance(index.cp_sets, list):  # the sets as arrays of their own (few checkpoints)
            rows = [np.ascontiguousarray(r, np.int64) for r in index.cp_sets]
            arrays.append(rows)
            for k in range(self.n_cp):
                view = rows[k]
                self.cp_len[k] = view.shape[0]
                self.cp_set[k] = &view[0] if view.shape[0] else NULL
        else:  # rows of CSR arrays (the index keeps them)
            csr = tuple(np.ascontiguousarray(a, np.int64) for a in index.checkpoint_csr())
            arrays.append(csr)
            indptr = csr[0]
            view = csr[1]
            for k in range(self.n_cp):
                self.cp_len[k] = indptr[k + 1] - indptr[k]
                self.cp_set[k] = &view[indptr[k]] if self.cp_len[k] else NULL
        self.index_arrays = arrays
        self.start.resize(n)
        self.end.resize(n)
        for i in range(n):
            self.start[i] = start[i]
            self.end[i] = end[i]

    cdef void _tabulate_neighbours(self, data):
        """``near[near_ptr[p]:near_ptr[p + 1]]``: the buffers interfering with ``order[p]`` decided before it.

        In start order, the buffers starting inside ``[start_i, end_i)`` after ``i`` are one run and are
        exactly those that interfere with it from the right, so every pair is met once; it goes to the
        list of whichever of the two is decided later."""
        cdef Py_ssize_t n = self.n, a, b, i, j, p
        cdef const long long[:] start = data.start
        cdef const long long[:] end = data.end
        cdef const long long[:] position = self.dec.position
        cdef const long long[:] by_start = np.lexsort((data.end, data.start))
        cdef vector[long long] fill
        self.near_ptr.assign(n + 1, 0)
        for a in range(n):
            i = by_start[a]
            for b in range(a + 1, n):
                j = by_start[b]
                if start[j] >= end[i]:
                    break
                self.near_ptr[(position[j] if position[i] < position[j] else position[i]) + 1] += 1
        for p in range(n):
            self.near_ptr[p + 1] += self.near_ptr[p]
        self.near.resize(self.near_ptr[n])
        fill.assign(self.near_ptr.begin(), self.near_ptr.end() - 1)
        for a in range(n):
            i = by_start[a]
            for b in range(a + 1, n):
                j = by_start[b]
                if start[j] >= end[i]:
                    break
                if position[i] < position[j]:
                    self.near[fill[position[j]]] = <int> i
                    fill[position[j]] += 1
                else:
                    self.near[fill[position[i]]] = <int> j
                    fill[position[i]] += 1


@cython.no_gc  # a chain never cycles: no tracking, no collector passes over long journals
cdef class _Step:
    """One undo record: the reward sum and peak before the step, and the saved seconds of the ops of the
    buffer it placed (map mode, ops reward) before it; ``prev`` is the record of the step before."""

    cdef _Step prev
    cdef double total
    cdef long long peak
    cdef vector[double] saved_before

    def __dealloc__(self):
        # Unlink the records only this one holds one by one: freeing them by recursion would take one C frame
        # per step (a million-step journal overflows the stack).
        cdef _Step node = self.prev, after
        self.prev = None
        while node is not None and Py_REFCNT(node) == 1:  # our local is its only holder: it goes now
            after = node.prev
            node.prev = None
            node = after
            after = None


cdef class OrderState:
    """One fixed-order game's state on ``tables``, offering ``k`` holes per decision (see the module docstring)."""

    cdef OrderTables t
    cdef readonly Py_ssize_t k, pos, steps
    cdef readonly double total
    cdef readonly long long peak
    cdef vector[long long] off
    cdef vector[double] saved
    cdef vector[Hole] cur_holes
    cdef bint holes_valid
    cdef _Step journal

    def __init__(self, OrderTables tables, Py_ssize_t k):
        self.t = tables
        self.k = k
        self.pos = self.steps = 0
        self.total = 0.0
        self.peak = 0
        self.off.assign(tables.n, -1)
        self.saved.assign(tables.n_ops, 0.0)
        self.holes_valid = False
        self.journal = None

    def clone(self):
        """An independent copy; the tables and the undo journal (immutable) are shared."""
        cdef OrderState other = OrderState.__new__(OrderState)
        other.t = self.t
        other.k, other.pos, other.steps = self.k, self.pos, self.steps
        other.total, other.peak = self.total, self.peak
        other.off = self.off
        other.saved = self.saved
        other.cur_holes = self.cur_holes
        other.holes_valid = self.holes_valid
        other.journal = self.journal
        return other

    # --- reading the state ----------------------------------------------------------------------
    @property
    def done(self):
        return self.pos >= self.t.n

    def total_reward(self):
        return self.total

    def offsets(self):
        """int64 ``[n]``: offset of every buffer, -1 = slow or undecided (a copy)."""
        out = np.empty(self.t.n, np.int64)
        cdef long long[::1] view = out
        if self.t.n:
            memcpy(&view[0], self.off.data(), self.t.n * sizeof(long long))
        return out

    def saved_seconds(self):
        """The per-op saved seconds (map mode, ops reward), a list (a copy)."""
        return list(self.saved)

    # --- decisions --------------------------------------------------------------------------------
    cdef void _find_holes(self) except *:
        """The ``k`` lowest free holes that hold the current buffer, as ``free_holes``."""
        if self.holes_valid:
            return
        if self.pos >= self.t.n:
            raise IndexError("no decision left: the game is done")
        cdef OrderTables t = self.t
        cdef Py_ssize_t i = t.order[self.pos], p, m
        cdef long long size = t.size[i], align = t.align[i], cur = 0, a, o
        cdef vector[Rect]* rs = &t.scratch
        cdef Rect r
        rs.clear()
        if t.has_near:
            for p in range(t.near_ptr[self.pos], t.near_ptr[self.pos + 1]):
                o = self.off[t.near[p]]
                if o >= 0:
                    rs.push_back(Rect(o, o + t.size[t.near[p]], 0))
        else:
            self._index_neighbours(i, rs)
        self.cur_holes.clear()
        self.holes_valid = True
        m = rs.size()
        cdef vector[unsigned long long]* keys = &t.keys
        cdef bint packed = m < _INDEX_LIMIT
        keys.clear()
        if packed:  # sort (offset, index) packed in one integer: a plain integer sort is ~2x the struct sort's speed
            for p in range(m):
                o = rs[0][p].off
                if o >= _OFFSET_LIMIT:
                    packed = False
                    break
                keys.push_back((<unsigned long long> o << _INDEX_BITS) | <unsigned long long> p)
        if packed:
            sort(keys.begin(), keys.end())
        else:
            sort(rs.begin(), rs.end(), _by_address)
        for p in range(m):
            r = rs[0][keys[0][p] & (_INDEX_LIMIT - 1)] if packed else rs[0][p]
            o = r.off
            if o > cur:
                a = _align_up(cur, align)
                if a + size <= o:
                    self.cur_holes.push_back(Hole(a, cur, o))
                    if <Py_ssize_t> self.cur_holes.size() == self.k:
                        return
            if r.top > cur:
                cur = r.top
        a = _align_up(cur, align)
        if not t.capped or a + size <= t.capacity:
            self.cur_holes.push_back(Hole(a, cur, t.capacity))

    cdef void _index_neighbours(self, Py_ssize_t i, vector[Rect]* rs) except *:
        """Push the placed buffers interfering with ``i`` onto ``rs``: ``OverlapIndex.query(start_i, end_i)``'s
        buffers (checkpoint ``k``'s stored set, then the starts after it and before ``end_i``, those ending after
        ``start_i``; every start before ``end_i`` when no checkpoint is at or before ``start_i``), in its order.
        Only a buffer decided before the current position has an offset, so ``offset >= 0`` is the filter."""
        cdef OrderTables t = self.t
        cdef long long s = t.start[i], e = t.end[i], o
        cdef Py_ssize_t k, hi, q, j
        if t.n_cp == 0 or e <= s:
            return
        k = _first_above(t.cp_time, t.n_cp, s) - 1
        hi = _first_at_or_above(t.ix_start, t.n, e)
        if k < 0:
            for q in range(hi):
                j = t.ix_order[q]
                o = self.off[j]
                if o >= 0:
                    rs.push_back(Rect(o, o + t.size[j], 0))
            return
        cdef _Row row = t.cp_set[k]
        for q in range(t.cp_len[k]):
            j = row[q]
            if t.end[j] > s:
                o = self.off[j]
                if o >= 0:
                    rs.push_back(Rect(o, o + t.size[j], 0))
        for q in range(t.cp_pos[k], hi):
            j = t.ix_order[q]
            if t.end[j] > s:
                o = self.off[j]
                if o >= 0:
                    rs.push_back(Rect(o, o + t.size[j], 0))

    cdef inline bint _slow_legal(self) except -1:
        return self.t.kind != PACK or self.cur_holes.size() == 0

    def holes(self):
        """``[(offset, hole bottom, hole top)]`` of the current buffer (top ``inf`` without a capacity)."""
        self._find_holes()
        cdef Hole h
        out = []
        for h in self.cur_holes:
            out.append((h.offset, h.bottom, h.top if self.t.capped or h.top != _UNBOUNDED else float("inf")))
        return out

    def slow_legal(self):
        self._find_holes()
        return self._slow_legal()

    def legal_actions(self):
        """Indices of the legal actions, int64 ascending (empty when done)."""
        if self.pos >= self.t.n:
            return np.zeros(0, np.int64)
        self._find_holes()
        cdef Py_ssize_t nh = self.cur_holes.size(), j
        cdef bint slow = self._slow_legal()
        out = np.empty(nh + slow, np.int64)
        cdef long long[::1] view = out
        for j in range(nh):
            view[j] = j
        if slow:
            view[nh] = self.k
        return out

    def greedy_action(self):
        """Best fit: the smallest offered hole (lowest on ties; the unbounded top hole is infinite), else slow."""
        return self._greedy()

    def greedy_rollout(self, double stop_step=float("inf")):
        """Play the greedy action (in place) until done or ``stop_step`` steps; the rewards' sum, from 0.0 in
        step order."""
        cdef double total = 0.0
        while self.pos < self.t.n and self.steps < stop_step:
            total += self._step(self._greedy())
        return total

    cdef Py_ssize_t _greedy(self) except -1:
        self._find_holes()
        cdef Py_ssize_t j, best = 0, nh = self.cur_holes.size()
        cdef long long length, best_len = _UNBOUNDED
        if nh == 0:
            return self.k
        for j in range(nh):
            if not self.t.capped and self.cur_holes[j].top == _UNBOUNDED:
                continue  # inf - bottom is never below the best length so far
            length = self.cur_holes[j].top - self.cur_holes[j].bottom
            if length < best_len:
                best, best_len = j, length
        return best

    cdef double _place_reward(self, Py_ssize_t i, long long top, bint commit) noexcept:
        cdef OrderTables t = self.t
        cdef double gain = 0.0, c, m, old, d
        cdef long long rise
        cdef Py_ssize_t p, op
        if t.kind == OPS:
            for p in range(t.op_ptr[i], t.op_ptr[i + 1]):
                op = t.ops[p]
                d = t.deltas[p]
                c = t.compute[op]
                m = t.slow_mem[op] - self.saved[op]
                old = c if c > m else m
                m -= d
                gain += old - (c if c > m else m)
                if commit:
                    self.saved[op] += d
            return gain / t.reward_norm
        if t.kind == ADDITIVE:
            return t.additive[i]
        if t.capped or not commit:
            return <double> t.size[i] / t.total_bytes
        rise = top - self.peak if top > self.peak else 0
        if top > self.peak:
            self.peak = top
        return <double> (t.size[i] - rise) / t.total_bytes

    def placement_value(self, Py_ssize_t i):
        """Reward of placing buffer ``i`` now, without committing it."""
        return self._place_reward(i, 0, False)

    def step(self, long long action):
        """Take ``action`` (``0..k-1``: the hole's offset; ``k``: slow); returns the reward."""
        return self._step(action)

    cdef double _step(self, long long action) except *:
        cdef OrderTables t = self.t
        if self.pos >= t.n:
            raise ValueError("step on a finished game")
        self._find_holes()
        cdef Py_ssize_t i = t.order[self.pos], p
        cdef Py_ssize_t nh = self.cur_holes.size()
        cdef double reward = 0.0
        cdef long long off
        cdef _Step record = _Step.__new__(_Step)
        record.prev = self.journal
        record.total = self.total
        record.peak = self.peak
        if action == self.k:
            if not self._slow_legal():
                raise ValueError(_SLOW_ILLEGAL)
        elif 0 <= action < nh:
            off = self.cur_holes[action].offset
            self.off[i] = off
            if t.kind == OPS:
                for p in range(t.op_ptr[i], t.op_ptr[i + 1]):
                    record.saved_before.push_back(self.saved[t.ops[p]])
            reward = self._place_reward(i, off + t.size[i], True)
        else:
            raise ValueError(f"illegal action {action}: {nh} offsets are offered")
        self.journal = record
        self.total += reward
        self.pos += 1
        self.steps += 1
        self.holes_valid = False
        return reward

    def undo(self):
        """Take back the last step (the saved per-op times are restored, not recomputed)."""
        if self.journal is None:
            raise ValueError("undo: no step to take back")
        cdef OrderTables t = self.t
        cdef _Step record = self.journal
        cdef Py_ssize_t i, p, q = 0
        self.journal = record.prev
        self.pos -= 1
        self.steps -= 1
        i = t.order[self.pos]
        self.off[i] = -1
        self.total, self.peak = record.total, record.peak
        if record.saved_before.size():
            for p in range(t.op_ptr[i], t.op_ptr[i + 1]):
                self.saved[t.ops[p]] = record.saved_before[q]
                q += 1
        self.holes_valid = False
