# ---- the address game's native engine (search/_address_game.pxi) -------------------------------------------
# The fixed-address (skyline) game's state and step, compiled (the ``native`` engine of ``AddressGame``).
#
# Two classes, one boundary:
#
# * :class:`AddressTables`: what every address game on one problem reads but never writes: the compressed time
#   (``m`` elementary intervals), each buffer's elementary range, the buffers by first elementary interval, the
#   candidate ranks, the highest floor each buffer fits on (and the buffers by it), sizes, alignments and the
#   reward model (as the order game's ``OrderTables``: per buffer the ops it touches and its saving on each, the
#   ops' compute and slow-memory seconds; or the additive per-buffer rewards; or the pack-mode byte counts).
# * :class:`AddressState`: one game's state: offsets ``[n]``, undecided flags by position in ``by_cs`` with a
#   union-find that skips the decided positions (the candidate scan visits undecided buffers only), the skyline's segments (height,
#   right end, left neighbour, is-a-segment-start ``[m]``), the min-heap of ``(height, start)`` with stale entries,
#   the per-op saved seconds, the reward sum, the peak, the fit pointer, and the current decision (segment and
#   candidates). ``clone()`` copies these arrays.
#
# Each method computes what ``mallocgame.search.game_address.AddressGame`` computes, with the same floating-point
# operations in the same order, so rewards agree to the last bit; tests/test_engine_address.py checks both engines
# against each other. The heap is a binary heap on (height, start) pairs like ``heapq``'s: which stale duplicate is
# popped first differs, but the valid top (the lowest, leftmost segment) is the same.

from libcpp.algorithm cimport partial_sort, pop_heap, push_heap
from libcpp.pair cimport pair

_CLOSE_ILLEGAL = "illegal action: closing the only segment would give up (pack mode)"
_ADDRESS_UNDO = "undo is not available in the address variant; use clone()"

ctypedef pair[long long, long long] _HeapEntry  # (-height, -segment start): std's max-heap is then heapq's min-heap


cdef class AddressTables:
    """The immutable tables of one problem for the address game (``data``: a ``GameData``; ``sky``: its
    ``_SkylineData``)."""

    cdef Py_ssize_t n, m, n_ops
    cdef vector[long long] size, align, cs, ce, by_cs, sorted_cs, by_rank
    # By position in ``by_cs`` (the candidate scan reads them in order): end, highest floor, rank; and each
    # buffer's position there, the buffers by highest floor as positions, and the highest floors in that order.
    cdef vector[long long] ce_at, threshold_at, rank_at, where, fit_order, fit_threshold
    cdef vector[long long] first_at  # [m + 1]: the first position in ``by_cs`` whose buffer starts at or after c
    cdef long long capacity
    cdef bint capped, map_mode
    cdef RewardKind kind
    cdef double total_bytes, reward_norm
    cdef vector[double] additive, compute, slow_mem, deltas
    cdef vector[long long] op_ptr
    cdef vector[int] ops
    cdef vector[long long] scratch  # the candidates of one decision (shared: one decision at a time, GIL held)

    def __init__(self, data, sky):
        cdef Py_ssize_t n = data.n, i, p, c
        cdef const long long[:] rank = sky.rank
        cdef const long long[:] threshold = sky.threshold
        cdef const long long[:] by_threshold = np.asarray(sky.by_threshold, np.int64)
        self.n = n
        self.m = sky.m
        self.size = data.size_l
        self.align = data.align_l
        self.cs = sky.cs_l
        self.ce = sky.ce_l
        self.by_cs = sky.by_cs_l
        self.sorted_cs = sky.sorted_cs
        self.by_rank.resize(n)
        self.ce_at.resize(n)
        self.threshold_at.resize(n)
        self.rank_at.resize(n)
        self.where.resize(n)
        self.fit_order.resize(n)
        self.fit_threshold.resize(n)
        for i in range(n):
            self.by_rank[rank[i]] = i
        for p in range(n):
            i = self.by_cs[p]
            self.where[i] = p
            self.ce_at[p] = self.ce[i]
            self.threshold_at[p] = threshold[i]
            self.rank_at[p] = rank[i]
        self.first_at.assign(self.m + 1, n)
        for p in range(n - 1, -1, -1):
            self.first_at[self.sorted_cs[p]] = p
        for c in range(self.m - 1, -1, -1):
            if self.first_at[c] > self.first_at[c + 1]:
                self.first_at[c] = self.first_at[c + 1]
        for p in range(n):
            i = by_threshold[p]
            self.fit_order[p] = self.where[i]
            self.fit_threshold[p] = threshold[i]
        self.capped = data.capacity is not None
        self.capacity = data.capacity if self.capped else _UNBOUNDED
        self.map_mode = data.mode == "map"
        self.total_bytes = data.total_bytes
        self.reward_norm = data.reward_norm
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


cdef class AddressState:
    """One address game's state on ``tables``, offering ``k`` candidates per decision (see the module docstring)."""

    cdef AddressTables t
    cdef readonly Py_ssize_t k, pos, steps
    cdef readonly double total
    cdef readonly long long peak
    cdef Py_ssize_t fit_ptr
    cdef vector[long long] off
    cdef vector[char] undecided  # by position in the tables' ``by_cs``
    cdef vector[int] skip  # [n + 1]: follow to the first undecided position at or after p (n: none); path-compressed
    cdef vector[long long] height
    cdef vector[int] right, prev
    cdef vector[char] is_left
    cdef vector[_HeapEntry] heap
    cdef vector[double] saved
    cdef bint has_seg
    cdef long long seg_a, seg_r, seg_h
    cdef vector[long long] cands

    def __init__(self, AddressTables tables, Py_ssize_t k):
        cdef Py_ssize_t n = tables.n, m = tables.m, i
        cdef Py_ssize_t slots = m if m > 1 else 1
        self.t = tables
        self.k = k
        self.pos = self.steps = 0
        self.total = 0.0
        self.peak = 0
        self.fit_ptr = 0
        self.off.assign(n, -1)
        self.undecided.assign(n, 1)
        self.skip.resize(n + 1)
        for i in range(n + 1):
            self.skip[i] = <int> i
        self.height.assign(slots, 0)
        self.right.assign(slots, 0)
        self.right[0] = <int> m
        self.prev.assign(slots, -1)
        self.is_left.assign(slots, 0)
        self.is_left[0] = 1
        self.heap.push_back(_HeapEntry(0, 0))
        self.saved.assign(tables.n_ops, 0.0)
        self.has_seg = False
        if n == 0:
            return
        if tables.capped:
            for i in range(n):
                if tables.size[i] > tables.capacity:
                    self._decide(tables.where[i])
                    self.pos += 1
        self._advance()

    def clone(self):
        """An independent copy; the tables are shared."""
        cdef AddressState other = AddressState.__new__(AddressState)
        other.t = self.t
        other.k, other.pos, other.steps = self.k, self.pos, self.steps
        other.total, other.peak, other.fit_ptr = self.total, self.peak, self.fit_ptr
        other.off = self.off
        other.undecided = self.undecided
        other.skip = self.skip
        other.height = self.height
        other.right = self.right
        other.prev = self.prev
        other.is_left = self.is_left
        other.heap = self.heap
        other.saved = self.saved
        other.has_seg = self.has_seg
        other.seg_a, other.seg_r, other.seg_h = self.seg_a, self.seg_r, self.seg_h
        other.cands = self.cands
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

    def undecided_mask(self):
        """bool ``[n]``: the buffers not decided yet (a copy)."""
        out = np.empty(self.t.n, np.uint8)
        cdef unsigned char[::1] view = out
        cdef Py_ssize_t i
        for i in range(self.t.n):
            view[i] = self.undecided[self.t.where[i]]
        return out.view(bool)

    def is_undecided(self, Py_ssize_t i):
        """Whether buffer ``i`` is not decided yet."""
        return bool(self.undecided[self.t.where[i]])

    def saved_seconds(self):
        """The per-op saved seconds (map mode, ops reward), a list (a copy)."""
        return list(self.saved)

    def segment(self):
        """``(start, end, floor)`` of the decision in elementary intervals, or ``None`` when done."""
        return (self.seg_a, self.seg_r, self.seg_h) if self.has_seg else None

    def candidates(self):
        """The buffers offered by actions ``0..len-1``, best-ranked first (a list)."""
        return list(self.cands)

    def skyline_at(self, Py_ssize_t a):
        """``(height, right end, left neighbour)`` of the segment starting at elementary interval ``a``."""
        return self.height[a], self.right[a], self.prev[a]

    def close_legal(self):
        return self._close_legal()

    # --- the skyline ----------------------------------------------------------------------------
    cdef inline void _push(self, Py_ssize_t left) except *:
        self.heap.push_back(_HeapEntry(-self.height[left], -<long long> left))
        push_heap(self.heap.begin(), self.heap.end())

    cdef inline void _merge(self, Py_ssize_t left, Py_ssize_t right) noexcept:
        """Join segment ``right`` into the adjacent segment ``left`` (same height)."""
        cdef int r = self.right[right]
        self.right[left] = r
        self.is_left[right] = 0
        if r < self.t.m:
            self.prev[r] = <int> left

    cdef void _place_on_skyline(self, Py_ssize_t a, Py_ssize_t r, Py_ssize_t s, Py_ssize_t e,
                                long long top) except *:
        """The buffer spanning elementary ``[s, e)`` inside segment ``[a, r)`` now tops it at ``top``."""
        cdef Py_ssize_t m = self.t.m, mid, nxt
        cdef long long h = self.height[a]
        if e < r:  # right piece keeps height h
            self.is_left[e], self.height[e], self.right[e], self.prev[e] = 1, h, <int> r, <int> s
            if r < m:
                self.prev[r] = <int> e
            self._push(e)
        elif r < m:
            self.prev[r] = <int> s
        if s > a:  # left piece keeps height h
            self.right[a] = <int> s
            self.is_left[s], self.prev[s] = 1, <int> a
        self.height[s], self.right[s] = top, <int> e
        mid = s
        if s == a and self.prev[a] >= 0 and self.height[self.prev[a]] == top:
            mid = self.prev[a]
            self._merge(mid, s)
        nxt = self.right[mid]
        if e == r and nxt < m and self.height[nxt] == top:
            self._merge(mid, nxt)
        self._push(mid)

    cdef void _give_up(self) noexcept:
        """Every undecided buffer goes to slow memory: the episode ends."""
        cdef Py_ssize_t i
        for i in range(self.t.n):
            self.undecided[i] = 0
            self.skip[i] = <int> self.t.n
        self.pos = self.t.n

    cdef void _close(self, Py_ssize_t a) except *:
        """Leave segment ``a`` idle: raise it to its lower neighbour and merge (or end the episode)."""
        cdef Py_ssize_t m = self.t.m, r = self.right[a], pl = self.prev[a], left = a
        cdef long long v
        if pl < 0 and r >= m:
            self._give_up()
            return
        if pl < 0:
            v = self.height[r]
        elif r >= m:
            v = self.height[pl]
        else:
            v = self.height[pl] if self.height[pl] < self.height[r] else self.height[r]
        self.height[a] = v
        if r < m and self.height[r] == v:
            self._merge(a, r)
        if pl >= 0 and self.height[pl] == v:
            self._merge(pl, a)
            left = pl
        self._push(left)

    cdef inline void _decide(self, Py_ssize_t p) noexcept:
        """The buffer at position ``p`` of ``by_cs`` is decided."""
        self.undecided[p] = 0
        self.skip[p] = <int> (p + 1)

    cdef inline Py_ssize_t _next_undecided(self, Py_ssize_t p) noexcept:
        """The first undecided position at or after ``p`` (``n``: none), compressing the path it followed."""
        cdef int* skip = self.skip.data()
        cdef Py_ssize_t root = p, after
        while skip[root] != root:
            root = skip[root]
        while skip[p] != root:
            after = skip[p]
            skip[p] = <int> root
            p = after
        return root

    cdef void _candidates(self, Py_ssize_t a, Py_ssize_t r) except *:
        """``cands``: the ``k`` best-ranked undecided buffers whose live range lies in ``[a, r)`` and that fit on
        the floor of ``a``, best first."""
        cdef AddressTables t = self.t
        cdef Py_ssize_t lo = t.first_at[a], hi = t.first_at[r]
        cdef Py_ssize_t p, found
        cdef long long h = self.height[a]
        cdef vector[long long]* keys = &t.scratch
        cdef const long long* ce_at = t.ce_at.data()
        cdef const long long* threshold_at = t.threshold_at.data()
        keys.clear()
        p = self._next_undecided(lo)
        while p < hi:
            if ce_at[p] <= r and threshold_at[p] >= h:
                keys.push_back(t.rank_at[p])  # ranks are distinct: the order of the ranks is the order of the buffers
            p = self._next_undecided(p + 1)
        found = keys.size()
        if found > self.k:
            partial_sort(keys.begin(), keys.begin() + self.k, keys.end())
            found = self.k
        else:
            sort(keys.begin(), keys.end())
        self.cands.resize(found)
        for p in range(found):
            self.cands[p] = t.by_rank[keys[0][p]]

    cdef long long _max_threshold(self) noexcept:
        """Highest floor at which some undecided buffer still fits (the pointer moves forward only); -1: none."""
        cdef AddressTables t = self.t
        cdef Py_ssize_t p = self.fit_ptr, nb = t.fit_order.size()
        while p < nb and not self.undecided[t.fit_order[p]]:
            p += 1
        self.fit_ptr = p
        return t.fit_threshold[p] if p < nb else -1

    cdef void _advance(self) except *:
        """Move to the next decision: the lowest segment that has candidates."""
        cdef long long h
        cdef Py_ssize_t a
        while self.pos < self.t.n:
            h = -self.heap[0].first
            a = -self.heap[0].second
            if not self.is_left[a] or self.height[a] != h:
                pop_heap(self.heap.begin(), self.heap.end())
                self.heap.pop_back()
                continue
            if self._max_threshold() < h:  # the skyline is everywhere too high for what is left
                self._give_up()
                break
            self._candidates(a, self.right[a])
            if self.cands.size():
                self.has_seg = True
                self.seg_a, self.seg_r, self.seg_h = a, self.right[a], h
                return
            self._close(a)
        self.has_seg = False
        self.cands.clear()

    # --- decisions --------------------------------------------------------------------------------
    cdef inline bint _close_legal(self) noexcept:
        if self.t.map_mode:
            return True
        return self.prev[self.seg_a] >= 0 or self.seg_r < self.t.m

    def legal_actions(self):
        """Indices of the legal actions, int64 ascending (empty when done)."""
        if self.pos >= self.t.n:
            return np.zeros(0, np.int64)
        cdef Py_ssize_t nc = self.cands.size(), j
        cdef bint close = self._close_legal()
        out = np.empty(nc + close, np.int64)
        cdef long long[::1] view = out
        for j in range(nc):
            view[j] = j
        if close:
            view[nc] = self.k
        return out

    def greedy_action(self):
        """The best-ranked candidate (slow when there is none)."""
        return 0 if self.cands.size() else self.k

    def greedy_rollout(self, double stop_step=float("inf")):
        """Play the greedy action (in place) until done or ``stop_step`` steps; the rewards' sum, from 0.0 in
        step order."""
        cdef double total = 0.0
        while self.pos < self.t.n and self.steps < stop_step:
            total += self._step(0 if self.cands.size() else self.k)
        return total

    cdef double _place_reward(self, Py_ssize_t i, long long top, bint commit) noexcept:
        cdef AddressTables t = self.t
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
        """Take ``action`` (``0..k-1``: place that candidate on the segment; ``k``: close it); returns the reward."""
        return self._step(action)

    cdef double _step(self, long long action) except *:
        cdef AddressTables t = self.t
        if self.pos >= t.n:
            raise ValueError("step on a finished game")
        cdef Py_ssize_t a = self.seg_a, r = self.seg_r, i
        cdef Py_ssize_t nc = self.cands.size()
        cdef long long h = self.seg_h, off, top
        cdef double reward = 0.0
        if action == self.k:
            if not self._close_legal():
                raise ValueError(_CLOSE_ILLEGAL)
            self._close(a)
        elif 0 <= action < nc:
            i = self.cands[action]
            off = _align_up(h, t.align[i])
            top = off + t.size[i]
            self.off[i] = off
            self._decide(t.where[i])
            self.pos += 1
            reward = self._place_reward(i, top, True)
            self._place_on_skyline(a, r, t.cs[i], t.ce[i], top)
        else:
            raise ValueError(f"illegal action {action}: {nc} candidates are offered")
        self.total += reward
        self.steps += 1
        self._advance()
        return reward

    def undo(self):
        raise NotImplementedError(_ADDRESS_UNDO)
