"""The fixed-address mallocGame variant (MiniMalloc's view): the address is fixed, the action picks the buffer.

The **skyline** maps every time to the lowest address not yet given away there (0 at
first). Placed buffers rest on it; the space under it is never revisited. The skyline
is kept as a linked list of *segments* (maximal time runs of equal height, over the
elementary intervals between consecutive distinct start/end times) with a heap keyed
by ``(height, start)``.

A decision is taken at the **lowest segment** (leftmost among equals) ``[a, b)`` of
height ``h``. Its *candidates* are the undecided buffers whose whole live range lies in
``[a, b)``, ranked (map mode: greedy-xla's benefit / sqrt(size) descending, then size and
live-range length descending; pack mode: start ascending, then live-range length and
size descending; ties by index), of which the best ``k`` are offered:

* action ``j < k``: put candidate ``j`` at ``h`` rounded up to its alignment; the
  skyline over its live range rises to its top;
* action ``k`` ("slow" / close): leave the segment idle. It rises to the height of its
  lower neighbour and merges with it; with no neighbour (the segment spans every
  remaining buffer) every undecided buffer goes to slow memory. In pack mode closing is
  legal only when the segment has a neighbour, so the game never gives up voluntarily.

Automatic transitions (no decision, no reward): a lowest segment with no candidates is
closed; candidates must fit below the capacity on the segment's floor, and once no
undecided buffer fits on the lowest floor (the skyline only rises) all of them go to
slow memory. A buffer that no longer fits stays undecided until then (checking it
eagerly would cost an interval query per step). With these rules every placement in which each
buffer rests on the floor or on another buffer is reachable, and every episode ends:
each action places a buffer or removes a segment, placements are at most ``n`` and
each creates at most two segments.
"""

from __future__ import annotations

import bisect
import heapq

import numpy as np

from mallocgame._native import AddressState, AddressTables
from mallocgame.search.game import ACTION_FEATURES, BUFFER_FEATURES, Game, GameConfig, NativeState, Observation
from mallocgame.search.game_data import GameData

_SMALL = 64  # up to this many buffers starting in a segment, candidates are found without numpy


class AddressGame(Game, variant="address"):
    """Fixed address (the lowest skyline segment); choose which buffer goes there, or close it."""

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(), *, data=None, mode=None):
        super().__init__(problem, hardware, config, data=data, mode=mode)
        d = self.data
        if d.skyline is None:
            d.skyline = _SkylineData(d)
        self._sky = sd = d.skyline
        n, m = d.n, sd.m
        self._off = np.full(n, -1, np.int64)
        self._undecided = np.ones(n, bool)
        self._n_decisions = n  # one per buffer (closes are not counted); _pos: buffers decided
        self._height = [0] * max(m, 1)
        self._right = [m] + [0] * max(m - 1, 0)
        self._prev = [-1] * max(m, 1)
        self._is_left = [True] + [False] * max(m - 1, 0)
        self._heap = [(0, 0)]
        self._saved = [0.0] * d.n_ops if d.mode == "map" else None
        self._peak = 0
        self._fit_ptr = 0
        self._seg: tuple[int, int, int] | None = None
        self._cands: list[int] = []
        if n == 0:
            return
        if d.capacity is not None:
            too_big = np.flatnonzero(d.size > d.capacity)
            self._undecided[too_big] = False
            self._pos += len(too_big)
        self._advance()

    def _copy_state_from(self, other: "AddressGame") -> None:
        self._off = other._off.copy()
        self._undecided = other._undecided.copy()
        self._height = other._height.copy()
        self._right = other._right.copy()
        self._prev = other._prev.copy()
        self._is_left = other._is_left.copy()
        self._heap = other._heap.copy()
        if other._saved is not None:
            self._saved = other._saved.copy()

    # --- skyline ------------------------------------------------------------------------------
    def _push(self, left: int) -> None:
        heapq.heappush(self._heap, (self._height[left], left))

    def _merge(self, left: int, right: int) -> None:
        """Join segment ``right`` into the adjacent segment ``left`` (same height)."""
        r = self._right[right]
        self._right[left] = r
        self._is_left[right] = False
        if r < self._sky.m:
            self._prev[r] = left

    def _place_on_skyline(self, a: int, r: int, s: int, e: int, top: int) -> None:
        """The buffer spanning elementary ``[s, e)`` inside segment ``[a, r)`` now tops it at ``top``."""
        H, R, P, L, m = self._height, self._right, self._prev, self._is_left, self._sky.m
        h = H[a]
        if e < r:  # right piece keeps height h
            L[e], H[e], R[e], P[e] = True, h, r, s
            if r < m:
                P[r] = e
            self._push(e)
        elif r < m:
            P[r] = s
        if s > a:  # left piece keeps height h
            R[a] = s
            L[s], P[s] = True, a
        H[s], R[s] = top, e
        mid = s
        if s == a and P[a] >= 0 and H[P[a]] == top:
            mid = P[a]
            self._merge(mid, s)
        nxt = R[mid]
        if e == r and nxt < m and H[nxt] == top:
            self._merge(mid, nxt)
        self._push(mid)

    def _close(self, a: int) -> None:
        """Leave segment ``a`` idle: raise it to its lower neighbour and merge (or end the episode)."""
        H, R, P, m = self._height, self._right, self._prev, self._sky.m
        r, pl = R[a], P[a]
        if pl < 0 and r >= m:
            self._undecided[:] = False
            self._pos = self._n_decisions
            return
        v = min(H[pl] if pl >= 0 else np.inf, H[r] if r < m else np.inf)
        H[a] = v
        left = a
        if r < m and H[r] == v:
            self._merge(a, r)
        if pl >= 0 and H[pl] == v:
            self._merge(pl, a)
            left = pl
        self._push(left)

    def _candidates(self, a: int, r: int) -> list[int]:
        sd = self._sky
        lo = bisect.bisect_left(sd.sorted_cs, a)
        hi = bisect.bisect_left(sd.sorted_cs, r)
        if hi - lo <= _SMALL:  # a Python scan: numpy's per-call cost dominates on a few buffers
            und, ce, thr, h = self._undecided, sd.ce_l, sd.threshold_l, self._height[a]
            found = [i for i in sd.by_cs_l[lo:hi] if ce[i] <= r and thr[i] >= h and und[i]]
            if len(found) > 1:
                found.sort(key=sd.rank_l.__getitem__)  # ranks are distinct: the same order as below
            return found[:self.config.k]
        idx = sd.by_cs[lo:hi]
        idx = idx[self._undecided[idx] & (sd.ce[idx] <= r) & (sd.threshold[idx] >= self._height[a])]
        k = self.config.k
        if len(idx) > k:
            idx = idx[np.argpartition(sd.rank[idx], k - 1)[:k]]
        return idx[np.argsort(sd.rank[idx])].tolist()

    def _max_threshold(self) -> int:
        """Highest floor at which some undecided buffer still fits (pointer moves forward only)."""
        sd, und = self._sky, self._undecided
        p = self._fit_ptr
        while p < len(sd.by_threshold) and not und[sd.by_threshold[p]]:
            p += 1
        self._fit_ptr = p
        return sd.threshold_l[sd.by_threshold[p]] if p < len(sd.by_threshold) else -1

    def _advance(self) -> None:
        """Move to the next decision: the lowest segment that has candidates."""
        H, L, heap = self._height, self._is_left, self._heap
        while self._pos < self._n_decisions:
            h, a = heap[0]
            if not L[a] or H[a] != h:
                heapq.heappop(heap)
                continue
            if self._max_threshold() < h:  # the skyline is everywhere too high for what is left
                self._undecided[:] = False
                self._pos = self._n_decisions
                break
            cands = self._candidates(a, self._right[a])
            if cands:
                self._seg, self._cands = (a, self._right[a], h), cands
                return
            self._close(a)
        self._seg, self._cands = None, []

    # --- decisions ----------------------------------------------------------------------------
    @property
    def current(self) -> int:
        """Not in this variant: the decision is a segment (:attr:`segment`), the buffers are :meth:`candidates`."""
        raise AttributeError("the address variant decides a segment, not a buffer: see segment and candidates()")

    def candidates(self) -> list[int]:
        """Buffer indices offered by actions ``0..len-1``, best-ranked first."""
        return self._cands

    @property
    def segment(self) -> tuple[int, int, int] | None:
        """The decision point ``(start time, end time, floor height)``, or ``None`` when done."""
        if self._seg is None:
            return None
        a, r, h = self._seg
        return int(self._sky.times[a]), int(self._sky.times[r]), int(h)

    def _close_legal(self) -> bool:
        if self.data.mode == "map":
            return True
        a, r, _ = self._seg
        return self._prev[a] >= 0 or r < self._sky.m

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_actions, bool)
        if self.done:
            return mask
        mask[:len(self._cands)] = True
        mask[self.slow_action] = self._close_legal()
        return mask

    def legal_actions(self) -> np.ndarray:
        """Indices of the legal actions, int64 ascending (``legal_mask`` without building the mask)."""
        if self.done:
            return np.zeros(0, np.int64)
        legal = list(range(len(self._cands)))
        if self._close_legal():
            legal.append(self.slow_action)
        return np.array(legal, np.int64)

    def greedy_action(self) -> int:
        """The best-ranked candidate."""
        return 0 if self._cands else self.slow_action

    def step(self, action: int) -> float:
        if self.done:
            raise ValueError("step on a finished game")
        a, r, h = self._seg
        reward = 0.0
        if action == self.slow_action:
            if not self._close_legal():
                raise ValueError("illegal action: closing the only segment would give up (pack mode)")
            self._close(a)
        elif 0 <= action < len(self._cands):
            d, sd = self.data, self._sky
            i = self._cands[action]
            al = d.align_l[i]
            off = -(-h // al) * al
            top = off + d.size_l[i]
            self._off[i] = off
            self._undecided[i] = False
            self._pos += 1
            reward = self._place_reward(i, top)
            s, e = sd.cs_l[i], sd.ce_l[i]
            self._place_on_skyline(a, r, s, e, top)
        else:
            raise ValueError(f"illegal action {action}: {len(self._cands)} candidates are offered")
        self._total += reward
        self._steps += 1
        self._advance()
        return reward

    # --- observation --------------------------------------------------------------------------
    def observation(self) -> Observation:
        d, sd, cfg = self.data, self._sky, self.config
        buffer = np.zeros(BUFFER_FEATURES, np.float32)
        actions = np.zeros((self.num_actions, ACTION_FEATURES), np.float32)
        profile = np.zeros(cfg.profile_bins, np.float32)
        upcoming = np.zeros((cfg.upcoming, BUFFER_FEATURES), np.float32)
        mask = self.legal_mask()
        if self.done:
            return Observation(buffer, profile, actions, upcoming, np.ones(2, np.float32), mask)
        a, r, h = self._seg
        t_a, t_r = int(sd.times[a]), int(sd.times[r])
        room = (d.capacity - h) / d.scale if d.capacity is not None else 1.0
        buffer[:] = (1.0, h / d.scale, (t_a - d.t0) / d.horizon, (t_r - d.t0) / d.horizon, (t_r - t_a) / d.horizon,
                     len(self._cands) / cfg.k, room, 0.0)
        # Skyline over the segment and its two neighbours.
        segs = [x for x in (self._prev[a], a, r if r < sd.m else -1) if x >= 0]
        starts = np.array([sd.times[x] for x in segs], np.float64)
        ends = np.array([sd.times[self._right[x]] for x in segs], np.float64)
        heights = np.array([self._height[x] for x in segs], np.float64) / d.scale
        profile = self._profile(starts[0], ends[-1], starts, ends, heights, reduce_max=True)
        seg_len = max(t_r - t_a, 1)
        for j, i in enumerate(self._cands):
            al = d.align_l[i]
            top = -(-h // al) * al + d.size_l[i]
            value = self.placement_value(i) * d.reward_norm / d.max_benefit if d.mode == "map" else \
                d.size_l[i] / d.scale
            actions[j] = (d.size_l[i] / d.scale, top / d.scale, (d.start_l[i] - t_a) / seg_len,
                          (d.end_l[i] - d.start_l[i]) / seg_len, float(d.benefit[i]) / d.max_benefit, value, 0.0, 1.0)
        actions[self.slow_action, 6] = 1.0
        actions[self.slow_action, 7] = float(mask[self.slow_action])
        # Upcoming: the next undecided buffers starting at or after the segment's end.
        pos = int(np.searchsorted(d.sorted_starts, t_r))
        row = 0
        while row < cfg.upcoming and pos < d.n:
            b = int(d.start_order[pos])
            if self._undecided[b]:
                upcoming[row] = d.buffer_features(b)
                row += 1
            pos += 1
        progress = np.array([1.0 - self.decisions_left / max(d.n, 1), h / d.scale], np.float32)
        return Observation(buffer, profile, actions, upcoming, progress, mask)

    # --- text view ----------------------------------------------------------------------------
    def describe_state(self) -> str:
        d = self.data
        if self.done:
            return f"done: {int((self._off >= 0).sum())}/{d.n} buffers in fast memory"
        t_a, t_r, h = self.segment
        return (f"step {self._steps + 1}: lowest free segment time=[{t_a}, {t_r}) at address {h}; "
                f"{self.decisions_left} buffers undecided, {len(self._cands)} candidates offered")

    def describe_actions(self) -> list[str]:
        if self.done:
            return []
        d = self.data
        h = self._seg[2]
        lines = []
        for j, i in enumerate(self._cands):
            b = d.problem.buffers[i]
            off = -(-h // d.align_l[i]) * d.align_l[i]
            lines.append(f"[{j}] buffer {b.id!r} size={b.size} live=[{b.start}, {b.end}) offset={off} "
                         f"value={self.placement_value(i):.4g}{'  <- greedy' if j == 0 else ''}")
        if self._close_legal():
            lines.append(f"[{self.slow_action}] close: leave this segment idle")
        return lines


class NativeAddressGame(NativeState, AddressGame, variant="address", engine_name="native"):
    """:class:`AddressGame` with its state in compiled code (an ``AddressState`` of ``search/_address_game.pxi``).

    Same interface and the same answers (rewards to the last bit); the tables the compiled state reads are
    built once per problem and shared like the skyline data. ``_off``, ``_seg``, ``_cands`` etc. are read-only
    views of the compiled state, for the observation and the text view.
    """

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(), *, data=None, mode=None):
        # Game.__init__'s plain fields, without its state: the state lives in self._core.
        self.config = config
        self.data = d = data if data is not None else GameData(problem, hardware, mode=mode)
        self.num_actions = config.k + 1
        self.slow_action = config.k
        self._decisions = None
        self._n_decisions = d.n  # one per buffer (closes are not counted)
        if d.skyline is None:
            d.skyline = _SkylineData(d)
        self._sky = sd = d.skyline
        if sd.tables is None:
            sd.tables = AddressTables(d, sd)
        self._core = AddressState(sd.tables, config.k)
        self._height, self._right, self._prev = (_SkylineColumn(self._core, j) for j in range(3))

    # --- the state, read from the compiled core (NativeState: the rest) -----------------------
    @property
    def _peak(self) -> int:
        return self._core.peak

    @property
    def _off(self) -> np.ndarray:
        return self._core.offsets()

    @property
    def _undecided(self) -> "_UndecidedView":
        return _UndecidedView(self._core)

    @property
    def _saved(self) -> list[float] | None:
        return self._core.saved_seconds() if self.data.mode == "map" else None

    @property
    def _seg(self) -> tuple[int, int, int] | None:
        return self._core.segment()

    @property
    def _cands(self) -> list[int]:
        return self._core.candidates()

    def clone(self):
        other = NativeState.clone(self)
        other._height, other._right, other._prev = (_SkylineColumn(other._core, j) for j in range(3))
        return other

    def candidates(self) -> list[int]:
        return self._core.candidates()

    def total_reward(self) -> float:
        return self._core.total_reward()

    def offsets(self) -> np.ndarray:
        return self._core.offsets()

    def placement_value(self, i: int) -> float:
        return self._core.placement_value(i)

    def _close_legal(self) -> bool:
        return self._core.close_legal()


class _SkylineColumn:
    """One column of the compiled skyline (0 height, 1 right end, 2 left neighbour), indexed by segment start
    like the Python game's lists, without copying the whole column."""

    __slots__ = ("core", "column")

    def __init__(self, core: AddressState, column: int):
        self.core, self.column = core, column  # the core, not the game: no reference cycle per clone

    def __getitem__(self, a: int) -> int:
        return self.core.skyline_at(a)[self.column]


class _UndecidedView:
    """The compiled state's undecided buffers as the Python game's bool ``[n]`` array reads: one buffer
    (``view[i]``) without copying the whole mask; any other index or ``np.asarray(view)`` reads a copy."""

    __slots__ = ("core",)

    def __init__(self, core: AddressState):
        self.core = core

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.core.is_undecided(key)
        return self.core.undecided_mask()[key]

    def __array__(self, dtype=None, copy=None):
        mask = self.core.undecided_mask()
        return mask if dtype is None else mask.astype(dtype)

    def __len__(self) -> int:
        return self.core.undecided_mask().shape[0]


class _SkylineData:
    """Immutable per-problem data of the address variant: compressed time and candidate ranks.

    ``times`` [m + 1] distinct starts/ends; ``cs, ce`` [n] each buffer's elementary range;
    ``by_cs`` [n] buffers sorted by ``cs`` (with ``sorted_cs``); ``rank`` [n] candidate
    rank (lower = offered first).
    """

    def __init__(self, d):
        self.times = np.unique(np.concatenate([d.start, d.end])) if d.n else np.zeros(1, np.int64)
        self.m = len(self.times) - 1
        self.cs = np.searchsorted(self.times, d.start)
        self.ce = np.searchsorted(self.times, d.end)
        self.cs_l, self.ce_l = self.cs.tolist(), self.ce.tolist()
        self.by_cs = np.argsort(self.cs, kind="stable")
        self.sorted_cs = self.cs[self.by_cs].tolist()
        idx = np.arange(d.n)
        length = d.end - d.start
        # Measured on layered networks and MiniMalloc's A-K (experiments/results/game_speed.md):
        # greedy-xla's density key fills fast memory best in map mode; earliest start (the
        # candidate flush with the segment's left end), then longest, packs best.
        if d.mode == "map":
            key = np.lexsort((idx, -length, -d.size, -(d.benefit / np.sqrt(np.maximum(d.size, 1)))))
        else:
            key = np.lexsort((idx, -d.size, -length, d.start))
        self.rank = np.empty(d.n, np.int64)
        self.rank[key] = idx
        self.rank_l, self.by_cs_l = self.rank.tolist(), self.by_cs.tolist()
        # A buffer fits on a floor h iff h <= threshold: align_up(h) + size <= capacity.
        if d.capacity is None:
            self.threshold = np.full(d.n, np.iinfo(np.int64).max, np.int64)
        else:
            self.threshold = (d.capacity - d.size) // d.align * d.align
            self.threshold[d.size > d.capacity] = -1
        self.threshold_l = self.threshold.tolist()
        self.by_threshold = np.argsort(-self.threshold, kind="stable").tolist()
        self.tables = None  # the native engine's tables (_native.AddressTables), built on first use
