"""The prefetch variant of the mallocGame: one decision per use segment (docs/prefetch.md).

Buffers come in a fixed order (``GameConfig.order``; ``mcts`` plays ``"xla"``, greedy-xla's
order) and, for each buffer, its use segments in time order. A segment's actions: a new fast
interval (produced in place, or prefetched in one of ``GameConfig.windows`` copy windows, at one
of ``k`` offsets, the first XLA's best fit with look-ahead), extend the previous interval across
the gap, or slow. Rewards are exact changes of the prefetch evaluator's time, kept
incrementally; the greedy (rollout) policy is XLA's decision ladder scored exactly. The actions,
the closing and eviction rules, the rewards and the state: docs/guide/agents.md, "The prefetch
variant in detail".

Example:
    >>> from mallocgame.inputs.generate import layered_network
    >>> from mallocgame.hardware.spec import PRESETS
    >>> from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
    >>> p = layered_network(40, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    >>> g = Game(p, PRESETS["tpuv4i"], GameConfig(variant="prefetch"))
    >>> while not g.done:
    ...     _ = g.step(g.greedy_action())
    >>> ev = PrefetchEvaluator.of(p, PRESETS["tpuv4i"])
    >>> abs(g.total_reward() - ev.value(g.intervals()) / ev.time_all_slow) < 1e-9
    True
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from mallocgame._native import PrefetchState, PrefetchTables, prefetch_holes
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, serve_queue
from mallocgame.problem.model import FastInterval, Problem, ProblemRef, derived_facts
from mallocgame.search.game import ACTION_FEATURES, BUFFER_FEATURES, Game, GameConfig, NativeState, Observation
from mallocgame.search.game_data import GameData, buffer_order, check_until

IN_PLACE = -2  # copy_start of an interval produced in place (in the rows of ``offsets()``)
RATIO = 1.5  # XLA's preferred copy-to-overlap ratio: a window should hold 1.5 x the copy time
WINDOWS = ("xla", "safe", "earliest")
_INF = float("inf")
_PREFETCH, _EVICTION = 0, 1


class PrefetchData(GameData):
    """Everything about one problem the prefetch game reads but never writes (shared by all clones).

    On top of :class:`GameData`: the touches as Python lists, per op the operands in the
    evaluator's order as ``(touch index, seconds saved)``, the all-slow op times, the copy
    time of every buffer, prefix sums of the two op-time estimates of the window picker, and
    the segment lists of each decision order (built on first use).
    """

    problem = ProblemRef()  # held weakly: the store of derived facts keeps no problem alive

    def __init__(self, problem: Problem, hardware, *, until: float = math.inf):
        """``until``: a monotonic deadline, checked between the build's steps (:class:`GameDataCutShort` past it)."""
        if not problem.has_ops:
            raise ValueError(f"{problem.name}: the prefetch game needs a workload with ops")
        super().__init__(problem, hardware, mode="prefetch", until=until)
        check_until(until, "the prefetch evaluator")
        ev = PrefetchEvaluator.of(problem, hardware)
        self.prefetch_evaluator = ev
        self.hardware = hardware
        base = ev.base
        self.n_ops = n_ops = base.n_ops
        tc = problem.touches
        self.t_ptr = tc.ptr.tolist()
        self.t_ops = tc.ops.tolist()
        self.t_reads = tc.reads.tolist()
        self.t_writes = tc.writes.tolist()
        self.output = tc.output.tolist()
        self.n_touches = len(self.t_ops)
        self.touch_of_op: list[list[int]] = [[] for _ in range(n_ops)]  # touch indices per op
        op_operands: list[list[tuple[int, float]]] = [[] for _ in range(n_ops)]
        check_until(until, "the operands per op")
        for op, k, delta in zip(base.op_of.tolist(), ev.operand_touch.tolist(), base.delta.tolist()):
            op_operands[op].append((k, delta))
        for b in range(self.n):
            for k in range(self.t_ptr[b], self.t_ptr[b + 1]):
                self.touch_of_op[self.t_ops[k]].append(k)
        self.op_operands = op_operands
        check_until(until, "the op-time estimates")
        self.compute_l, self.slow_mem_l, self.fixed_l = base.compute.tolist(), base.slow_mem.tolist(), base.fixed.tolist()
        est_slow = ev.op_times(())  # every operand slow
        est_fast = base.op_times(np.ones(self.n, bool))  # every operand fast
        self.op_time0 = est_slow.tolist()
        per_second = 1.0 / hardware.copy_bw
        self.copy_seconds = [float(s) * per_second for s in self.size_l]
        self.prefix = {"xla": np.concatenate(([0.0], np.cumsum(est_slow))).tolist(),
                       "safe": np.concatenate(([0.0], np.cumsum(est_fast))).tolist()}
        self.segments: dict[str, _Segments] = {}
        self.tables: dict[tuple, PrefetchTables] = {}  # the native engine's, per (order, windows, k), built on first use

    @classmethod
    def of(cls, problem: Problem, hardware, *, until: float = math.inf) -> "PrefetchData":
        """Built once per (problem, hardware), like :meth:`PrefetchEvaluator.of`; ``until``: the build's deadline
        (:class:`GameDataCutShort` past it, and nothing is kept)."""
        facts = derived_facts(problem)  # the one store of derived facts (mallocgame.engine.session)
        d = facts.get(("prefetch_game", hardware))
        if d is None:
            d = facts["prefetch_game", hardware] = cls(problem, hardware, until=until)
        return d

    def segments_of(self, order: str) -> "_Segments":
        if order not in self.segments:
            self.segments[order] = _Segments(self, order)
        return self.segments[order]

    def tables_of(self, order: str, windows: int, k: int) -> PrefetchTables:
        """The native engine's tables of one decision order and game shape (shared by its games)."""
        key = (order, windows, k)
        if key not in self.tables:
            self.tables[key] = PrefetchTables(self, self.segments_of(order), windows, k)
        return self.tables[key]


class _Segments:
    """The decisions of one buffer order, flattened: one entry per servable touch (lists, ``[S]``).

    ``buf`` buffer, ``touch`` touch index, ``t`` op, ``pure`` a pure write, ``last`` the
    buffer's last servable touch, ``w`` the last write of the buffer before ``t`` (-1: none).
    """

    def __init__(self, d: PrefetchData, kind: str):
        order = buffer_order(d.problem, d.benefit, kind)
        self.order = order
        self.buf: list[int] = []
        self.touch: list[int] = []
        self.t: list[int] = []
        self.pure: list[bool] = []
        self.last: list[bool] = []
        self.w: list[int] = []
        self.later: list[tuple[int, ...]] = []  # the buffer's later servable touches (ops)
        for b in order.tolist():
            limit = min(d.end_l[b], d.n_ops)
            last_write = -1
            mine = []
            for k in range(d.t_ptr[b], d.t_ptr[b + 1]):
                t = d.t_ops[k]
                if 0 <= t and t + 1 <= limit:
                    mine.append((k, t, d.t_writes[k] and not d.t_reads[k], last_write))
                if d.t_writes[k]:
                    last_write = t
            for j, (k, t, pure, w) in enumerate(mine):
                self.buf.append(b)
                self.touch.append(k)
                self.t.append(t)
                self.pure.append(pure)
                self.last.append(j == len(mine) - 1)
                self.w.append(w)
                self.later.append(tuple(m[1] for m in mine[j + 1:]))
        self.n = len(self.buf)


class _Options:
    """What the current segment offers (computed once per state)."""

    __slots__ = ("open", "close_end", "extend", "windows", "holes", "greedy")

    def __init__(self, open_rect: int, close_end: int, extend: bool, windows: list, holes: list):
        self.open = open_rect  # the buffer's open interval (served the previous touch), or -1
        self.close_end = close_end  # where it ends if this segment does not extend it
        self.extend = extend  # extending it is legal
        self.windows = windows  # per group: copy_start (IN_PLACE: produced in place), None = masked
        self.holes = holes  # per group: [(offset, hole bottom, hole top)], [] when masked
        self.greedy: int | None = None


class PrefetchGame(Game, variant="prefetch"):
    """One decision per use segment: a fast interval (offset x copy window), extend the previous one, or slow."""

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(variant="prefetch"), *, data=None,
                 mode=None):
        if not isinstance(data, PrefetchData):
            data = PrefetchData.of(problem, hardware)
        super().__init__(problem, hardware, config, data=data)
        d = self.data
        self._set_actions(config)
        self._seg = d.segments_of(config.order)
        self._set_decisions(self._seg.buf)
        cap = self._seg.n + 1
        # Rectangles (fast intervals): occupied [occ, end) x [off, top); columns for the overlap queries.
        self._occ = np.zeros(cap, np.int64)
        self._end = np.zeros(cap, np.int64)
        self._off = np.zeros(cap, np.int64)
        self._top = np.zeros(cap, np.int64)
        self._rbuf: list[int] = []
        self._rstart: list[int] = []
        self._rcopy: list[int] = []
        self._rlastw: list[int] = []  # last write it serves (-1: none, it holds no new value)
        self._m = 0
        self._open = -1
        self._last_rect = -1  # the current buffer's latest interval
        self._served = bytearray(d.n_touches)
        self._op_time = list(d.op_time0)
        self._op_total = float(sum(d.op_time0))
        self._copies: list[dict[int, tuple[int, int, float, int]]] = [{}, {}]  # rect -> (first, deadline, s, buffer)
        self._stall: list[dict[int, float]] = [{}, {}]
        # per kind, the copies with a non-empty window as (deadline, first, buffer, rect, seconds), sorted: the
        # service order, kept as copies come and go so that a step never sorts all of them
        self._queue: list[list[tuple]] = [[], []]
        self._cover = [np.zeros(d.n_ops, np.int64), np.zeros(d.n_ops, np.int64)]
        self._stall_total = 0.0
        self._journal = None  # (records, scalars), previous
        self._rec: list | None = None
        self._opts: _Options | None = None


    def _set_actions(self, config: GameConfig) -> None:
        """The action space of ``config``: ``k`` offsets in each window, then extend, then slow."""
        self.windows = WINDOWS[:config.windows]
        k, nw = config.k, len(self.windows)
        self.num_actions = k * nw + 2
        self.extend_action = k * nw
        self.slow_action = k * nw + 1
    def _copy_state_from(self, other: "PrefetchGame") -> None:
        self._occ, self._end = other._occ.copy(), other._end.copy()
        self._off, self._top = other._off.copy(), other._top.copy()
        self._rbuf, self._rstart = other._rbuf.copy(), other._rstart.copy()
        self._rcopy, self._rlastw = other._rcopy.copy(), other._rlastw.copy()
        self._served = bytearray(other._served)
        self._op_time = other._op_time.copy()
        self._copies = [other._copies[0].copy(), other._copies[1].copy()]
        self._stall = [other._stall[0].copy(), other._stall[1].copy()]
        self._queue = [other._queue[0].copy(), other._queue[1].copy()]
        self._cover = [other._cover[0].copy(), other._cover[1].copy()]
        self._rec = None

    # --- the answer ---------------------------------------------------------------------------
    def intervals(self) -> tuple[FastInterval, ...]:
        """The fast intervals so far: a valid answer after every step (undecided touches are slow)."""
        return tuple(FastInterval(self._rbuf[r], int(self._off[r]), self._rstart[r], int(self._end[r]),
                                  None if self._rcopy[r] == IN_PLACE else self._rcopy[r]) for r in range(self._m))

    def offsets(self) -> np.ndarray:
        """int64 ``[m, 5]``: one row ``(buffer, offset, start, end, copy_start)`` per fast interval,
        ``copy_start = IN_PLACE`` (-2) when produced in place; :func:`intervals_of` reads it back."""
        m = self._m
        rows = np.empty((m, 5), np.int64)
        rows[:, 0] = self._rbuf
        rows[:, 1] = self._off[:m]
        rows[:, 2] = self._rstart
        rows[:, 3] = self._end[:m]
        rows[:, 4] = self._rcopy
        return rows

    # --- decisions ----------------------------------------------------------------------------
    def _time(self) -> float:
        return self._op_total + self._stall_total

    def _free_until(self, r: int, a: int, limit: int) -> int:
        """First op in ``[a, limit)`` at which another rectangle takes an address of rectangle ``r``, else ``limit``."""
        m = self._m
        occ, end = self._occ[:m], self._end[:m]
        hit = (occ < limit) & (end > a) & (self._off[:m] < self._top[r]) & (self._top[:m] > self._off[r])
        if not hit.any():
            return limit
        return max(a, min(limit, int(occ[hit].min())))

    def _evict_end(self, r: int, limit: int) -> int:
        """Where open interval ``r`` (holding a new value) ends when closed: long enough for its eviction."""
        d = self.data
        cur = int(self._end[r])
        pre = d.prefix["safe"]
        w = self._rlastw[r]
        target = bisect.bisect_left(pre, pre[w + 1] + RATIO * d.copy_seconds[self._rbuf[r]])
        e = max(cur, min(target, limit))
        if e > cur:
            e = self._free_until(r, cur, e)
        return e

    def _copy_starts(self, b: int, t: int, cmin: int) -> list[int]:
        d = self.data
        need = RATIO * d.copy_seconds[b]
        out = []
        for kind in self.windows:
            if kind == "earliest":
                out.append(cmin)
                continue
            pre = d.prefix[kind]
            x = bisect.bisect_right(pre, pre[t] - need) - 1  # the last x with sum(est[x:t]) >= need
            out.append(min(x, t) - 1 if x >= cmin + 1 else cmin)
        return out

    def _holes(self, b: int, a: int, p: int) -> list[tuple[int, int, float]]:
        """The offsets offered for a new interval of segment ``p`` occupying from op ``a``: ``[(offset, hole bottom,
        hole top)]``, first XLA's best fit with look-ahead (the smallest hole free for the longest stay that the
        buffer's later touches can use, which keeps the interval extendable), then the lowest other feasible
        canonical offsets (``k`` in all). Compiled: ``search/_prefetch_holes.pxi``."""
        d = self.data
        return prefetch_holes(self._occ, self._end, self._off, self._top, self._m, a, self._seg.t[p],
                              self._seg.later[p], d.size_l[b], d.align_l[b], d.capacity, self.config.k)

    def _options(self) -> _Options:
        if self._opts is not None:
            return self._opts
        d, s, p = self.data, self._seg, self._pos
        b, k, t = s.buf[p], s.touch[p], s.t[p]
        r = self._open
        close_end, extend = -1, False
        if r >= 0:
            cur = int(self._end[r])
            close_end = self._evict_end(r, t) if self._rlastw[r] >= 0 and d.t_reads[k] else cur
            extend = self._free_until(r, cur, t + 1) >= t + 1
            prev_end = close_end
        else:
            prev_end = int(self._end[self._last_rect]) if self._last_rect >= 0 else -1
        if s.pure[p]:
            windows = [IN_PLACE] + [None] * (len(self.windows) - 1)
            holes = [self._holes(b, t, p)] + [[] for _ in range(len(self.windows) - 1)]
        else:
            windows, holes = [], []
            for c in self._copy_starts(b, t, max(s.w[p], prev_end - 1)):
                if c in windows:
                    windows.append(None)
                    holes.append([])
                else:
                    windows.append(c)
                    holes.append(self._holes(b, c + 1, p))
        self._opts = _Options(r, close_end, extend, windows, holes)
        return self._opts

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_actions, bool)
        if self.done:
            return mask
        o = self._options()
        k = self.config.k
        for g, holes in enumerate(o.holes):
            mask[g * k:g * k + len(holes)] = True
        mask[self.extend_action] = o.extend
        mask[self.slow_action] = True
        return mask

    def greedy_action(self) -> int:
        """XLA's ladder, scored exactly: keep the previous interval resident when it fits; else the best of slow and
        the look-ahead best fit (``j = 0``) of each window, each scored by its reward plus the rewards of finishing
        the buffer by extending while that fits (then slow), tried and undone; slow on ties."""
        o = self._options()
        if o.greedy is not None:
            return o.greedy
        if o.extend:
            o.greedy = self.extend_action
            return o.greedy
        k = self.config.k
        best = self.slow_action
        cands = []
        for g, holes in enumerate(o.holes):
            if holes:
                cands.append(g * k)  # the look-ahead best fit
        if cands:
            # Without an open interval, slow changes nothing now, and the rest of the buffer stays slow too.
            best_value = self._look_ahead(self.slow_action) if o.open >= 0 else 0.0
            for a in cands:
                value = self._look_ahead(a)
                if value > best_value + 1e-12:
                    best, best_value = a, value
        o.greedy = best
        return best

    def answer_action(self, stays: dict[int, list[FastInterval]], follow_offsets: bool = True) -> int:
        """The move at the current segment that follows an answer to the whole problem (``stays``: buffer index ->
        its fast intervals, e.g. a prefetch solver's validated answer): slow where the answer serves this touch from
        slow memory; extend where the answer's stay serving it also served the buffer's previous touch and extending
        is legal; else a new interval in the offered copy window nearest the answer's (produced in place where the
        answer's is), at the answer's offset if that hole is offered, else the window's first (best-fit) hole; the
        greedy's move where no window is offered. Answers laid out differently from the game so far are followed
        as far as the game allows (the teacher of expert iteration, docs/training.md)."""
        s, p = self._seg, self._pos
        b, t = s.buf[p], s.t[p]
        stay = next((iv for iv in stays.get(b, ()) if iv.start <= t < iv.end), None)
        if stay is None:
            return self.slow_action
        o = self._options()
        previous = s.t[p - 1] if p > 0 and s.buf[p - 1] == b else None
        if o.open >= 0 and o.extend and previous is not None and stay.start <= previous:
            return self.extend_action
        groups = [g for g, c in enumerate(o.windows) if c is not None and o.holes[g]]
        if not groups:
            return self.greedy_action()
        want = IN_PLACE if stay.copy_start is None else stay.copy_start

        def distance(g: int) -> float:
            c = o.windows[g]
            return abs(c - want) if (c == IN_PLACE) == (want == IN_PLACE) else _INF

        g = min(groups, key=lambda g: (distance(g), g))
        j = next((j for j, hole in enumerate(o.holes[g]) if hole[0] == stay.offset), 0) if follow_offsets else 0
        return g * self.config.k + j

    def _look_ahead(self, action: int) -> float:
        """Rewards of ``action`` and of the rest of this buffer played by "extend if it fits, else slow"; undone."""
        opts = self._opts
        total = self.step(action)
        steps = 1
        last = self._seg.last
        while not last[self._pos - 1]:
            total += self.step(self.extend_action if self._options().extend else self.slow_action)
            steps += 1
        for _ in range(steps):
            self.undo()
        self._opts = opts
        return total

    # --- primitive changes, journaled for undo ------------------------------------------------
    def _set_end(self, r: int, e: int) -> None:
        old = int(self._end[r])
        if old != e:
            self._rec.append((0, r, old))
            self._end[r] = e

    def _set_lastw(self, r: int, w: int) -> None:
        self._rec.append((1, r, self._rlastw[r]))
        self._rlastw[r] = w

    def _serve(self, k: int, changed: list) -> None:
        d = self.data
        self._served[k] = 1
        self._rec.append((2, k, 0))
        t = d.t_ops[k]
        saved = 0.0
        served = self._served
        for kk, delta in d.op_operands[t]:
            if served[kk]:
                saved += delta
        c, m = d.compute_l[t], d.slow_mem_l[t] - saved
        new = (c if c > m else m) + d.fixed_l[t]
        old = self._op_time[t]
        if new != old:
            self._rec.append((3, t, old))
            self._op_time[t] = new
            self._op_total += new - old
            changed[0].append((t, t + 1))
            changed[1].append((t, t + 1))

    def _add_rect(self, b: int, off: int, occ: int, start: int, copy_start: int, lastw: int) -> int:
        r = self._m
        self._occ[r], self._end[r], self._off[r], self._top[r] = occ, start + 1, off, off + self.data.size_l[b]
        self._rbuf.append(b)
        self._rstart.append(start)
        self._rcopy.append(copy_start)
        self._rlastw.append(lastw)
        self._m += 1
        self._rec.append((4, r, 0))
        return r

    def _put_copy(self, kind: int, r: int, copy: tuple | None, changed: list, record: bool = True) -> None:
        copies = self._copies[kind]
        old = copies.get(r)
        if old == copy:
            return
        if record:
            self._rec.append((5, kind, r, old, self._stall[kind].get(r)))
        cover = self._cover[kind]
        if old is not None:
            f, dl = old[0], old[1]
            if f < dl:
                cover[f:dl] -= 1
                changed[kind].append((f, dl))
                queue = self._queue[kind]
                del queue[bisect.bisect_left(queue, (dl, f, old[3], r))]
            self._stall_total -= self._stall[kind].pop(r)
            del copies[r]
        if copy is not None:
            f, dl, seconds = copy[0], copy[1], copy[2]
            copies[r] = copy
            if f < dl:
                cover[f:dl] += 1
                changed[kind].append((f, dl))
                bisect.insort(self._queue[kind], (dl, f, copy[3], r, seconds))
                self._stall[kind][r] = 0.0  # served below
            else:  # an empty window: all of it stalls
                self._stall[kind][r] = seconds
                self._stall_total += seconds

    def _eviction(self, r: int) -> tuple | None:
        """The eviction copy interval ``r`` needs (hardware.prefetch.eviction_of), or ``None``."""
        w = self._rlastw[r]
        if w < 0:
            return None
        d = self.data
        b = self._rbuf[r]
        end = int(self._end[r])
        lo, hi = d.t_ptr[b], d.t_ptr[b + 1]
        nxt = bisect.bisect_left(d.t_ops, end, lo, hi)
        needed = d.t_reads[nxt] if nxt < hi else d.output[b]
        return (w + 1, end, d.copy_seconds[b], b) if needed else None

    def _serve_copies(self, kind: int, spans: list) -> None:
        """Re-serve the copies of ``kind`` in the maximal covered runs that meet ``spans`` (exactly as the evaluator)."""
        cover = self._cover[kind]
        n_ops = self.data.n_ops
        lo = max(0, min(a for a, _ in spans))
        hi = min(n_ops, max(e for _, e in spans))
        if lo >= hi or not cover[lo:hi].any():  # no copy window meets the change
            return
        if cover[lo] > 0:
            z = np.flatnonzero(cover[:lo] == 0)
            lo = int(z[-1]) + 1 if len(z) else 0
        if cover[hi - 1] > 0:
            z = np.flatnonzero(cover[hi:] == 0)
            hi = hi + int(z[0]) if len(z) else n_ops
        # The copies of the run: no window crosses a run's ends (the slots just outside are uncovered), so they are
        # the queue's copies with a deadline in (lo, hi], already in service order.
        queue = self._queue[kind]
        start, stop = bisect.bisect_right(queue, (lo, _INF)), bisect.bisect_right(queue, (hi, _INF))
        if start == stop:
            return
        changes, delta = serve_queue(queue, start, stop, self._op_time, lo, hi, self._stall[kind])
        if self._rec is not None:
            self._rec.extend([(6, kind, r, old) for r, old in changes])
        self._stall_total += delta

    # --- steps ------------------------------------------------------------------------------
    def step(self, action: int) -> float:
        if self.done:
            raise ValueError("step on a finished game")
        o = self._options()
        d, s, p = self.data, self._seg, self._pos
        b, k, t = s.buf[p], s.touch[p], s.t[p]
        kk = self.config.k
        before = self._time()
        self._rec = rec = []
        scalars = (self._pos, self._open, self._last_rect, self._op_total, self._stall_total, self._total, self._steps)
        changed: list[list] = [[], []]
        r = o.open
        if action == self.extend_action:
            if not o.extend:
                raise ValueError("illegal action: the previous interval cannot be extended (its addresses are taken)")
            self._set_end(r, t + 1)
            if d.t_writes[k]:
                self._set_lastw(r, t)
            self._serve(k, changed)
            self._put_copy(_EVICTION, r, self._eviction(r), changed)
        elif action == self.slow_action or 0 <= action < self.extend_action:
            new = None
            if action != self.slow_action:
                g, j = divmod(action, kk)
                holes = o.holes[g]
                if j >= len(holes):
                    raise ValueError(f"illegal action {action}: window {g} offers {len(holes)} offsets")
                new = (o.windows[g], holes[j][0])
            if r >= 0:
                self._set_end(r, o.close_end)
                self._put_copy(_EVICTION, r, self._eviction(r), changed)
                self._open = -1
            if new is not None:
                c, off = new
                occ = t if c == IN_PLACE else c + 1
                r = self._add_rect(b, off, occ, t, c, t if d.t_writes[k] else -1)
                self._open = self._last_rect = r
                if c != IN_PLACE:
                    self._put_copy(_PREFETCH, r, (c + 1, t, d.copy_seconds[b], b), changed)
                self._serve(k, changed)
                self._put_copy(_EVICTION, r, self._eviction(r), changed)
        else:
            raise ValueError(f"illegal action {action} (the game has {self.num_actions} actions)")
        if s.last[p]:
            r = self._open
            if r >= 0 and self._rlastw[r] >= 0 and self._eviction(r) is not None:
                self._set_end(r, self._evict_end(r, min(d.end_l[b], d.n_ops)))
                self._put_copy(_EVICTION, r, self._eviction(r), changed)
            self._open = self._last_rect = -1
        for kind in (_PREFETCH, _EVICTION):
            if changed[kind]:
                self._serve_copies(kind, changed[kind])
        self._pos += 1
        self._steps += 1
        reward = (before - self._time()) / d.reward_norm
        self._total += reward
        self._journal = ((tuple(rec), scalars), self._journal)
        self._rec = None
        self._opts = None
        return reward

    def undo(self) -> None:
        """Take back the last step (its primitive changes replayed backwards)."""
        if self._journal is None:
            raise ValueError("undo: no step to take back")
        (rec, scalars), self._journal = self._journal
        dummy: list[list] = [[], []]
        for item in reversed(rec):
            kind = item[0]
            if kind == 0:
                self._end[item[1]] = item[2]
            elif kind == 1:
                self._rlastw[item[1]] = item[2]
            elif kind == 2:
                self._served[item[1]] = 0
            elif kind == 3:
                self._op_time[item[1]] = item[2]
            elif kind == 4:
                self._m -= 1
                for col in (self._rbuf, self._rstart, self._rcopy, self._rlastw):
                    col.pop()
            elif kind == 5:
                _, ck, r, old, old_stall = item
                self._put_copy(ck, r, old, dummy, record=False)
                if old is not None:
                    self._stall[ck][r] = old_stall
            else:
                self._stall[item[1]][item[2]] = item[3]
        (self._pos, self._open, self._last_rect, self._op_total, self._stall_total, self._total,
         self._steps) = scalars
        self._opts = None

    # --- observation --------------------------------------------------------------------------
    def observation(self) -> Observation:
        """The current segment as a pseudo-buffer (valid, size, occupied-from, touch + 1, length, saving of
        serving it fast / max benefit, density, needs a copy), the occupancy over its window, one row per action
        (offset, top, hole, waste, copy window length / horizon, saving, is slow / extend, exists)."""
        d, cfg = self.data, self.config
        buffer = np.zeros(BUFFER_FEATURES, np.float32)
        actions = np.zeros((self.num_actions, ACTION_FEATURES), np.float32)
        profile = np.zeros(cfg.profile_bins, np.float32)
        upcoming = np.zeros((cfg.upcoming, BUFFER_FEATURES), np.float32)
        mask = self.legal_mask()
        if self.done:
            return Observation(buffer, profile, actions, upcoming, np.array([1.0, 1.0], np.float32), mask)
        o, s, p = self._options(), self._seg, self._pos
        b, k, t = s.buf[p], s.touch[p], s.t[p]
        saving = sum(delta for kk, delta in d.op_operands[t] if kk == k) / d.max_benefit
        first = min([c + 1 for c in o.windows if c is not None and c != IN_PLACE] + [t])
        buffer[:] = (1.0, d.size_l[b] / d.scale, (first - d.t0) / d.horizon, (t + 1 - d.t0) / d.horizon,
                     (t + 1 - first) / d.horizon, saving, float(d.density[b]), float(not s.pure[p]))
        m = self._m
        near = (self._occ[:m] < t + 1) & (self._end[:m] > first)
        profile = self._profile(first, t + 1, self._occ[:m][near], self._end[:m][near],
                                (self._top[:m][near] - self._off[:m][near]) / d.scale, reduce_max=False)
        size = d.size_l[b]
        for g, (c, holes) in enumerate(zip(o.windows, o.holes)):
            window = 0.0 if c is None or c == IN_PLACE else (t - c - 1) / d.horizon
            for j, (off, lo, hi) in enumerate(holes):
                hole = min(hi, d.scale) - lo
                actions[g * cfg.k + j] = (off / d.scale, (off + size) / d.scale, hole / d.scale,
                                          (hole - size) / d.scale, window, saving, 0.0, 1.0)
        if o.open >= 0:
            off = int(self._off[o.open])
            actions[self.extend_action] = (off / d.scale, (off + size) / d.scale, 0.0, 0.0, 0.0, saving, 1.0,
                                           float(o.extend))
        actions[self.slow_action, 6] = 1.0
        actions[self.slow_action, 7] = 1.0
        nxt = []
        for q in range(p + 1, s.n):
            if s.buf[q] != b and s.buf[q] not in nxt:
                nxt.append(s.buf[q])
                if len(nxt) == cfg.upcoming:
                    break
        for row, nb in enumerate(nxt):
            upcoming[row] = d.buffer_features(nb)
        progress = np.array([p / max(s.n, 1), (t - d.t0) / d.horizon], np.float32)
        return Observation(buffer, profile, actions, upcoming, progress, mask)

    # --- text view ----------------------------------------------------------------------------
    def describe_state(self) -> str:
        d = self.data
        if self.done:
            return f"done: {self._m} fast intervals of {len(set(self._rbuf))}/{d.n} buffers"
        s, p = self._seg, self._pos
        b, t = s.buf[p], s.t[p]
        buf = d.problem.buffers[b]
        how = "pure write (produced in place)" if s.pure[p] else f"needs a copy (value exists after op {s.w[p]})"
        return (f"step {p + 1}/{s.n}: buffer {buf.id!r} size={buf.size} live=[{buf.start}, {buf.end}) "
                f"touch at op {t}: {how}; time so far {self._time():.6g}")

    def describe_actions(self) -> list[str]:
        if self.done:
            return []
        o = self._options()
        k = self.config.k
        greedy = self.greedy_action()
        t = self._seg.t[self._pos]
        mark = {a: "  <- greedy" for a in (greedy,)}
        lines = []
        for g, (c, holes) in enumerate(zip(o.windows, o.holes)):
            how = "in place" if c == IN_PLACE else f"prefetch after op {c} ({self.windows[g]} window)"
            for j, (off, lo, hi) in enumerate(holes):
                a = g * k + j
                top = "inf" if hi == _INF else str(int(hi))
                lines.append(f"[{a}] offset={off} hole=[{lo}, {top}) {how}{mark.get(a, '')}")
        if o.extend:
            a = self.extend_action
            lines.append(f"[{a}] extend the interval at offset {int(self._off[o.open])} to op {t + 1}{mark.get(a, '')}")
        lines.append(f"[{self.slow_action}] slow memory{mark.get(self.slow_action, '')}")
        return lines


class NativePrefetchGame(NativeState, PrefetchGame, variant="prefetch", engine_name="native"):
    """:class:`PrefetchGame` with its state in compiled code (a ``PrefetchState`` of ``search/_prefetch_game.pxi``).

    Same interface and the same answers (rewards to the last bit); the tables the compiled state reads are built
    once per problem, decision order and game shape and shared. ``_occ`` etc. are read-only copies of the
    compiled state, for the observation and the text view.
    """

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(variant="prefetch"), *, data=None,
                 mode=None):
        if not isinstance(data, PrefetchData):
            data = PrefetchData.of(problem, hardware)
        # Game.__init__'s plain fields, without its state: the state lives in self._core.
        self.config = config
        self.data = data
        self._set_actions(config)
        self._seg = data.segments_of(config.order)
        self._set_decisions(self._seg.buf)
        self._core = PrefetchState(data.tables_of(config.order, len(self.windows), config.k))

    # --- the state, read from the compiled core (NativeState: the rest) -----------------------
    @property
    def _m(self) -> int:
        return self._core.m

    def _column(self, i: int) -> np.ndarray:
        return self._core.columns()[i]

    _occ = property(lambda self: self._column(0))
    _end = property(lambda self: self._column(1))
    _off = property(lambda self: self._column(2))
    _top = property(lambda self: self._column(3))
    _rbuf = property(lambda self: self._column(4).tolist())
    _rstart = property(lambda self: self._column(5).tolist())
    _rcopy = property(lambda self: self._column(6).tolist())
    _rlastw = property(lambda self: self._column(7).tolist())

    @property
    def current(self) -> int:
        pos = self._core.pos
        return self._decisions[pos] if pos < self._n_decisions else -1

    def total_reward(self) -> float:
        return self._core.total

    def _time(self) -> float:
        return self._core.op_total + self._core.stall_total

    def intervals(self) -> tuple[FastInterval, ...]:
        return intervals_of(self._core.offsets())

    def offsets(self) -> np.ndarray:
        return self._core.offsets()

    # --- decisions ----------------------------------------------------------------------------
    def _options(self) -> _Options:
        return _Options(*self._core.options())



def intervals_of(rows: np.ndarray) -> tuple[FastInterval, ...]:
    """The rows of :meth:`PrefetchGame.offsets` as fast intervals."""
    return tuple(FastInterval(int(b), int(o), int(s), int(e), None if c == IN_PLACE else int(c))
                 for b, o, s, e, c in np.asarray(rows, np.int64).reshape(-1, 5).tolist())


def rows_of(intervals) -> np.ndarray:
    """Fast intervals as the rows of :meth:`PrefetchGame.offsets` (the inverse of :func:`intervals_of`)."""
    rows = [(iv.buffer, iv.offset, iv.start, iv.end, IN_PLACE if iv.copy_start is None else iv.copy_start)
            for iv in intervals]
    return np.asarray(rows, np.int64).reshape(-1, 5)
