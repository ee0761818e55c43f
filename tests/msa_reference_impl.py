"""FROZEN reference copy of mallocgame/algorithms/memory_space_assignment.py before the near-linear rewrite (issue 18 item 1).

Do not edit: tests/msa_reference.py and tests/test_msa.py compare the rewritten algorithm's
answers with this one's (and with the hashes it produced, tests/data/msa_reference_answers.json).
The original docstring describes the algorithm; see the live module.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from mallocgame.algorithms.placement import best_fit_offset
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, serve_copies_left
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.model import FastInterval, InputError, Problem

MIN_OVERLAP_RATIO = 0.8  # XLA's min_overlap_to_async_copy_ratio
PREFERRED_OVERLAP_RATIO = 1.5  # preferred_overlap_to_async_copy_ratio
MAX_OVERLAP_RATIO = 10.0  # max_overlap_to_async_copy_ratio
EVICTION_RETRY_MULTIPLIER = 2.0  # kEvictionRetryMultiplier
EXPLORED_DECREASING = 100  # kNumExploredDecreasingIntervals
MAX_RETRIES = 3
EXTRA_TRIES = 4  # tries beyond MAX_RETRIES for evictions that failed (each sends one more write to slow memory)


class _Timeout(Exception):
    pass


# ---------------------------------------------------------------------------- the fast-memory heap

class _Heap:
    """Committed rectangles ``[occ, end) x [offset, top)``: best-fit and free-at-offset queries over a time range."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.n = 0
        self._grow(256)

    def _grow(self, size: int) -> None:
        old = getattr(self, "lo", None)
        lo, hi, off, top = (np.zeros(size, np.int64) for _ in range(4))
        if old is not None:
            lo[:self.n], hi[:self.n], off[:self.n], top[:self.n] = (a[:self.n] for a in (self.lo, self.hi, self.off, self.top))
        self.lo, self.hi, self.off, self.top = lo, hi, off, top

    def add(self, occ: int, end: int, offset: int, size: int) -> int:
        if self.n == len(self.lo):
            self._grow(2 * self.n)
        k = self.n
        self.lo[k], self.hi[k], self.off[k], self.top[k] = occ, end, offset, offset + size
        self.n += 1
        return k

    def _near(self, a: int, e: int) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        mask = (self.lo[:n] < e) & (self.hi[:n] > a)
        return self.off[:n][mask], self.top[:n][mask]

    def best_fit(self, a: int, e: int, size: int, align: int) -> int | None:
        """Offset of the best-fit hole free during ops ``[a, e)``, or ``None``."""
        offs, tops = self._near(a, e)
        return best_fit_offset(offs, tops, size, align, self.capacity)

    def free(self, a: int, e: int, offset: int, size: int) -> bool:
        """Whether ``[offset, offset + size)`` is free during ops ``[a, e)``."""
        if offset + size > self.capacity:
            return False
        offs, tops = self._near(a, e)
        return not bool(np.any((offs < offset + size) & (tops > offset)))


# ---------------------------------------------------------------------------- the async-copy resource

def _serve(copies: list[tuple[int, int, float]], budgets: np.ndarray) -> tuple[float, np.ndarray]:
    """Serve ``(first, deadline, seconds)`` copies in deadline order (``serve_copies_left``);
    returns the total stall and the budget left per slot."""
    stalls, left = serve_copies_left(sorted(copies, key=lambda c: (c[1], c[0])), budgets)
    return float(sum(stalls)), np.asarray(left, np.float64)


KINDS = ("prefetch", "eviction")


class _CopyResource:
    """docs/prefetch.md's copy budgets (XLA's ``AsynchronousCopyResource``), kept stall-free decision by decision.

    ``saved[t]`` is the memory time saved at op ``t`` by the operands served fast so far, so
    ``times`` are the op times of the answer being built, and the budgets of its copies.
    ``left[kind]`` is the budget left per op by a schedule that completes every copy of that
    kind (a witness).
    """

    def __init__(self, compute: np.ndarray, slow_mem: np.ndarray, fixed: np.ndarray):
        self.compute, self.slow_mem, self.fixed = compute, slow_mem, fixed
        self.saved = np.zeros(len(compute))
        self.times = np.maximum(compute, slow_mem) + fixed
        self.copies: dict[str, list[tuple[int, int, float]]] = {k: [] for k in KINDS}
        self.left = {k: self.times.copy() for k in KINDS}
        self.base_stall = {k: 0.0 for k in KINDS}
        scale = float(self.times.sum()) or 1.0
        self.tol = 1e-12 * scale
        self.exact_checks = 0

    def seed(self, saved: np.ndarray, copies: dict[str, list[tuple[int, int, float]]]) -> None:
        """Start from a given answer (a hint): its served operands and copies, its stalls as the baseline."""
        self.saved = saved.astype(np.float64).copy()
        self.times = np.maximum(self.compute, self.slow_mem - self.saved) + self.fixed
        for kind in KINDS:
            self.copies[kind] = list(copies[kind])
            self.base_stall[kind], self.left[kind] = _serve(self.copies[kind], self.times)

    def snapshot(self):
        return (self.saved.copy(), self.times.copy(), {k: v.copy() for k, v in self.left.items()},
                {k: len(v) for k, v in self.copies.items()})

    def restore(self, snap) -> None:
        saved, times, left, counts = snap
        self.saved, self.times, self.left = saved.copy(), times.copy(), {k: v.copy() for k, v in left.items()}
        for k, c in counts.items():
            del self.copies[k][c:]

    def try_add(self, serve: list[tuple[int, float]], kind: str | None = None,
                copy: tuple[int, int, float] | None = None) -> bool:
        """Serve more operands (``(op, saving)`` pairs) and add ``copy`` of ``kind``, if every copy still completes
        without a stall; commits and returns True, else changes nothing and returns False."""
        new: dict[int, float] = {}
        for t, d in serve:
            new[t] = new.get(t, float(self.saved[t])) + d
        red = {}
        for t, s in new.items():
            nt = max(float(self.compute[t]), float(self.slow_mem[t]) - s) + float(self.fixed[t])
            red[t] = max(float(self.times[t]) - nt, 0.0)
        red = {t: r for t, r in red.items() if r > 0}
        if copy is not None:
            first, deadline, need = copy
            first = max(first, 0)
            if deadline <= first:
                return False
            total = float(self.times[first:deadline].sum()) - sum(r for t, r in red.items() if first <= t < deadline)
            if total < need * (1 + 1e-9):
                return False  # not even the whole budget of its window is enough
        quick = {}
        for k in KINDS:
            left = self.left[k]
            ok = all(left[t] >= r - self.tol for t, r in red.items())
            if ok and copy is not None and k == kind:
                avail = float(left[first:deadline].sum()) - sum(min(r, left[t]) for t, r in red.items()
                                                               if first <= t < deadline)
                ok = avail >= need * (1 + 1e-9)
            quick[k] = ok
        exact = {}
        if not all(quick.values()):
            budgets = self.times.copy()
            for t, r in red.items():
                budgets[t] -= r
            for k in KINDS:
                if quick[k]:
                    continue
                self.exact_checks += 1
                copies = self.copies[k] + ([(first, deadline, need)] if copy is not None and k == kind else [])
                stall, left = _serve(copies, budgets)
                if stall > self.base_stall[k] + self.tol:
                    return False
                exact[k] = left
        for t, s in new.items():
            self.saved[t] = s
        for t, r in red.items():
            self.times[t] -= r
        for k in KINDS:
            if k in exact:
                self.left[k] = exact[k]
                continue
            left = self.left[k]
            for t, r in red.items():
                left[t] = max(left[t] - r, 0.0)
            if copy is not None and k == kind:
                need_left = need
                for t in range(first, deadline):
                    take = min(need_left, left[t])
                    left[t] -= take
                    need_left -= take
                    if need_left <= 0:
                        break
        if copy is not None:
            self.copies[kind].append((first, deadline, need))
        return True


# ---------------------------------------------------------------------------- the algorithm

@dataclass
class _Open:
    """The buffer's current fast interval (an allocation in alternate memory)."""

    offset: int
    start: int
    copy_start: int | None
    end: int
    rect: int
    dirty: bool  # serves a write slow memory does not have
    last_write: int = -1  # op of the last write it serves
    write_k: int = -1  # that write's touch index


@dataclass
class _Stats:
    prefetches: int = 0
    evictions: int = 0
    no_copy: int = 0
    retries: int = 0
    uncommits: int = 0
    read_only: int = 0
    buffers_fast: int = 0
    timed_out: bool = False


class _Msa:
    """One run of memory-space assignment on one problem."""

    def __init__(self, problem: Problem, hardware, deadline: float, max_retries: int = MAX_RETRIES,
                 max_overlap: str = "buffer"):
        self.problem = problem
        self.deadline = deadline
        self.max_retries = max(1, int(max_retries))
        ev = PrefetchEvaluator.of(problem, hardware)
        base = ev.base
        self.compute, self.slow_mem, self.fixed = base.compute, base.slow_mem, base.fixed
        # XLA's cost analysis: op times with every operand in default (slow) memory.
        self.elapsed = ev.op_times(())
        self.prefix = np.concatenate(([0.0], np.cumsum(self.elapsed)))
        touches = problem.touches
        self.ptr, self.ops = touches.ptr, touches.ops
        self.reads, self.writes, self.output = touches.reads, touches.writes, touches.output
        n = problem.n
        self.dsum = np.bincount(ev.operand_touch, base.delta, minlength=len(self.ops))  # saving per touch
        a = problem.arrays
        self.size, self.align, self.end = a.size, a.alignment, a.end
        self.copy_time = a.size / float(hardware.copy_bw)
        cap = problem.capacity
        self.capacity = int(cap) if cap is not None else int(a.size.sum()) + int(a.alignment.max(initial=1))
        self.heap = _Heap(self.capacity)
        self.res = _CopyResource(self.compute, self.slow_mem, self.fixed)
        self.stats = _Stats()
        self.done = np.zeros(n, bool)
        self.max_overlap = max_overlap
        self.memory_copy_time = self.capacity / float(hardware.copy_bw)

    # ------------------------------------------------------------ cost analysis

    def max_elapsed(self, copy_t: float, retry: int) -> float:
        """GetMaxElapsedInAlternateMemory: the longest stay without a copy, the longest prefetch window."""
        basis = self.memory_copy_time if self.max_overlap == "memory" else copy_t
        return MAX_OVERLAP_RATIO * basis * (2.0 ** retry)

    def el(self, a: int, b: int) -> float:
        """Elapsed time of the ops strictly between ``a`` and ``b`` (``a >= -1``): GetLogicalIntervalElapsed."""
        return float(self.prefix[b] - self.prefix[a + 1]) if b > a + 1 else 0.0

    def benefit(self, t: int, d: float) -> float:
        """GetAlternateMemoryBenefit of a touch at op ``t`` saving ``d`` seconds of memory time."""
        m, c = float(self.slow_mem[t]), float(self.compute[t])
        return d if m > c else m - c

    def memory_boundedness(self) -> np.ndarray:
        n = self.problem.n
        out = np.zeros(n)
        ops, writes, reads, dsum = self.ops.tolist(), self.writes.tolist(), self.reads.tolist(), self.dsum.tolist()
        for b in range(n):
            lo, hi = int(self.ptr[b]), int(self.ptr[b + 1])
            if lo == hi:
                continue
            acc = 0.0
            first = lo
            if writes[lo] and not reads[lo]:  # the defining position
                acc = self.benefit(ops[lo], dsum[lo])
                first = lo + 1
            for j in range(first, hi):
                use = self.benefit(ops[j], dsum[j])
                acc = acc + use if acc > 0 and use > 0 else max(acc, use)
            out[b] = acc / math.sqrt(max(int(self.size[b]), 1))
        return out

    def order(self) -> np.ndarray:
        """MemoryBoundednessBufferIntervalCompare: boundedness desc, size desc, live range desc, index."""
        a = self.problem.arrays
        mb = self.memory_boundedness()
        idx = np.arange(self.problem.n)
        return np.lexsort((idx, -(a.end - a.start), -a.size, -mb))

    # ------------------------------------------------------------ the prefetch interval picker

    def picker(self, start: int, use: int, copy_t: float, reduction: float, retry: int):
        """CostAnalysisPrefetchIntervalPicker: ``(earliest, latest, candidates)`` of copy starts for a use, or None."""
        if start > use - 1:
            return None
        ps = np.arange(start, use)
        el = self.prefix[use] - self.prefix[ps + 1]  # non-increasing in p
        ok = MIN_OVERLAP_RATIO * copy_t <= el + reduction
        latest = start + int(np.count_nonzero(ok)) - 1
        if latest < start:
            return None
        max_interval = self.max_elapsed(copy_t, retry)
        too_long = np.flatnonzero(el[:latest - start] <= max_interval)
        earliest = start + int(too_long[0]) if len(too_long) else latest
        window = el[earliest - start:latest - start + 1]
        preferred = earliest + int(np.argmin(np.abs(PREFERRED_OVERLAP_RATIO * copy_t - window)))

        def candidates():
            inc, dec = preferred + 1, preferred  # Begin() consumes the first Next() on the increasing side
            using_inc = dec < earliest
            span = float(el[earliest - start]) / EXPLORED_DECREASING
            while inc <= latest or dec >= earliest:
                if using_inc:
                    p = inc
                    inc += 1
                    if dec >= earliest:
                        using_inc = False
                    yield p
                else:
                    p = dec
                    dec -= 1
                    if inc > latest:
                        target = float(el[p - start]) + span
                        while dec >= earliest and el[dec - start] < target:
                            dec -= 1
                    if inc <= latest:
                        using_inc = True
                    yield p

        return earliest, latest, candidates()

    # ------------------------------------------------------------ one buffer

    def touches_of(self, b: int) -> tuple[list[int], list[bool], list[bool], list[float]]:
        """Ops, reads, writes and savings of the touches of ``b`` inside its live range."""
        lo, hi = int(self.ptr[b]), int(self.ptr[b + 1])
        ops = [t for t in self.ops[lo:hi].tolist() if t < int(self.end[b])]
        m = len(ops)
        return ops, self.reads[lo:lo + m].tolist(), self.writes[lo:lo + m].tolist(), self.dsum[lo:lo + m].tolist()

    def required_slow(self, b: int) -> frozenset[int]:
        """Required assignment of outputs: the last write of an output whose eviction window (the ops
        after it) cannot hold its copy even with their whole budget is served in slow memory."""
        ops, _, wr, _ = self.touches_of(b)
        last = max((k for k in range(len(ops)) if wr[k]), default=None)
        if self.output[b] and last is not None and self.el(ops[last], int(self.end[b])) < float(self.copy_time[b]):
            return frozenset({last})
        return frozenset()

    def allocate(self, b: int, retry: int, slow: frozenset[int] = frozenset(),
                 read_only: bool = False) -> tuple[list[FastInterval], str, int]:
        """One try at buffer ``b``: its intervals (committed to heap and resource), ``"ok"``,
        ``"async"`` (a use lacked copy budget) or ``"uncommit"`` (an eviction failed), and the touch
        index of the write the failed eviction had to copy back (else -1). The writes of touches in
        ``slow`` (all writes if ``read_only``) are served in slow memory."""
        bend = int(self.end[b])
        ops, rd, wr, ds = self.touches_of(b)
        m = len(ops)
        size, align = int(self.size[b]), int(self.align[b])
        copy_t = float(self.copy_time[b])
        max_interval = self.max_elapsed(copy_t, retry)
        heap, res = self.heap, self.res
        # next_def[k]: index of the first pure write after touch k (m if none): the end of k's value
        next_def = [m] * m
        for k in range(m - 2, -1, -1):
            next_def[k] = k + 1 if (wr[k + 1] and not rd[k + 1]) else next_def[k + 1]
        out: list[FastInterval] = []
        state = {"cur": None, "pending": None, "slow_ready": -1, "prev_off": None, "async": False, "bad": -1}

        def slow_write(k: int) -> bool:
            return wr[k] and (read_only or k in slow)

        def fits(a: int, e: int) -> bool:
            return heap.best_fit(a, e, size, align) is not None

        def chunk(k: int, a: int) -> int | None:
            """FindBestChunkCandidate for an interval occupying from op ``a`` and serving touch ``k``."""
            last = next_def[k] - 1
            j = k
            while j < last and self.el(ops[j], ops[j + 1]) < max_interval and not slow_write(j + 1):
                j += 1
            if not fits(a, ops[k] + 1):
                return None
            lo_, hi_ = k, j
            while lo_ < hi_:
                mid = (lo_ + hi_ + 1) // 2
                if fits(a, ops[mid] + 1):
                    lo_ = mid
                else:
                    hi_ = mid - 1
            e = ops[lo_] + 1
            prev = state["prev_off"]
            if prev is not None and prev % align == 0 and heap.free(a, e, prev, size):
                return prev
            return heap.best_fit(a, e, size, align)

        def close() -> None:
            cur = state["cur"]
            out.append(FastInterval(b, cur.offset, cur.start, cur.end, cur.copy_start))
            state["slow_ready"] = max(state["slow_ready"], cur.end - 1)
            state["prev_off"] = cur.offset
            state["cur"] = None

        def evict(latest_end: int) -> bool:
            """Evict: extend the open interval to the preferred eviction end and copy it back to slow memory."""
            cur = state["cur"]
            w, a = cur.last_write, cur.end
            latest_end = min(latest_end, bend)
            target = (1 + EVICTION_RETRY_MULTIPLIER * retry) * PREFERRED_OVERLAP_RATIO * copy_t
            e = a
            while e < latest_end and self.el(w, e) < target:
                e += 1
            # shorten while its offset is not free (binary search: free for [a, e) is monotone in e)
            if e > a and not heap.free(a, e, cur.offset, size):
                lo_, hi_ = a, e - 1
                while lo_ < hi_:
                    mid = (lo_ + hi_ + 1) // 2
                    if heap.free(a, mid, cur.offset, size):
                        lo_ = mid
                    else:
                        hi_ = mid - 1
                e = lo_
            if not res.try_add([], "eviction", (w + 1, e, copy_t)):
                state["bad"] = cur.write_k
                return False
            heap.hi[cur.rect] = e
            cur.end = e
            self.stats.evictions += 1
            return True

        def finish_value(at_end: bool) -> bool:
            """The value ends (a pure write follows, or the touches end)."""
            cur = state["cur"]
            pending = state["pending"]
            if cur is None and pending is not None and not slow_write(pending):
                d = ops[pending]
                off = chunk(pending, d)
                if off is not None and res.try_add([(d, ds[pending])]):
                    state["cur"] = cur = _Open(off, d, None, d + 1, heap.add(d, d + 1, off, size), True, d, pending)
                    self.stats.no_copy += 1
            state["pending"] = None
            if cur is not None:
                if at_end and self.output[b] and cur.dirty and not evict(bend):
                    return False
                close()
            return True

        def prefetch(k: int) -> bool:
            v = ops[k]
            reduction = float(self.elapsed[v]) - (max(float(self.compute[v]), float(self.slow_mem[v]) - ds[k])
                                                  + float(self.fixed[v]))
            picked = self.picker(max(state["slow_ready"], -1), v, copy_t, reduction, retry)
            if picked is None:
                return False
            earliest, latest, candidates = picked
            if not fits(latest + 1, v + 1):
                return False  # out of memory for every window
            lo_, hi_ = earliest, latest  # smallest copy start whose occupied range fits somewhere
            while lo_ < hi_:
                mid = (lo_ + hi_) // 2
                if fits(mid + 1, v + 1):
                    hi_ = mid
                else:
                    lo_ = mid + 1
            p_mem, p_bad = lo_, latest + 1
            for p in candidates:
                if p < p_mem or p >= p_bad:
                    continue
                if res.try_add([(v, ds[k])], "prefetch", (p + 1, v, copy_t)):
                    off = chunk(k, p + 1)
                    assert off is not None
                    state["cur"] = _Open(off, v, p, v + 1, heap.add(p + 1, v + 1, off, size), bool(wr[k]),
                                         v if wr[k] else -1, k if wr[k] else -1)
                    self.stats.prefetches += 1
                    return True
                p_bad = p  # a later start has less budget: it would stall too
                state["async"] = True
            return False

        for k in range(m):
            if k % 64 == 63 and time.monotonic() > self.deadline:
                raise _Timeout
            u = ops[k]
            if wr[k] and not rd[k]:  # a pure write: a new value starts
                if not finish_value(False):
                    return out, "uncommit", state["bad"]
                state["pending"] = k
                continue
            served = False
            cur = state["cur"]
            if state["pending"] is not None:  # the value's first use: AllocateSegment(definition, use)
                pending = state["pending"]
                d = ops[pending]
                if not slow_write(pending) and not slow_write(k) and self.el(d, u) < max_interval:
                    off = chunk(k, d)
                    if off is not None and res.try_add([(d, ds[pending]), (u, ds[k])]):
                        state["cur"] = _Open(off, d, None, u + 1, heap.add(d, u + 1, off, size), True,
                                             u if wr[k] else d, k if wr[k] else pending)
                        served = True
                        self.stats.no_copy += 1
                if not served:
                    state["slow_ready"] = max(state["slow_ready"], d)  # defined in slow memory
                state["pending"] = None
            elif cur is not None:
                p = ops[k - 1]
                if (self.el(p, u) < max_interval and not slow_write(k)
                        and heap.free(cur.end, u + 1, cur.offset, size) and res.try_add([(u, ds[k])])):
                    heap.hi[cur.rect] = u + 1
                    cur.end = u + 1
                    if wr[k]:
                        cur.dirty, cur.last_write, cur.write_k = True, u, k
                    served = True
                    self.stats.no_copy += 1
                else:
                    if cur.dirty and not evict(u):
                        return out, "uncommit", state["bad"]
                    close()
            if not served and not slow_write(k):
                served = prefetch(k)
            if not served and wr[k]:
                state["slow_ready"] = u  # updated in slow memory
        if not finish_value(True):
            return out, "uncommit", state["bad"]
        return out, ("async" if state["async"] else "ok"), -1

    # ------------------------------------------------------------ the heap of all buffers

    def seed(self, intervals: list[FastInterval], ev: PrefetchEvaluator) -> None:
        """Commit a given answer first (its buffers are not reallocated)."""
        sizes = self.size
        for iv in intervals:
            self.heap.add(iv.occupied_from, iv.end, iv.offset, int(sizes[iv.buffer]))
            self.done[iv.buffer] = True
        copies: dict[str, list] = {k: [] for k in KINDS}
        for c in ev.copies(intervals):
            copies[c.kind].append((c.first, c.deadline, c.seconds))
        self.res.seed(ev.saved(intervals), copies)

    def run(self, answer: list[FastInterval]) -> list[FastInterval]:
        for b in self.order().tolist():
            if self.done[b] or self.ptr[b] == self.ptr[b + 1] or self.size[b] <= 0 or self.size[b] > self.capacity:
                continue
            if time.monotonic() > self.deadline:
                self.stats.timed_out = True
                break
            heap_n, snap = self.heap.n, self.res.snapshot()
            committed = None
            slow = self.required_slow(b)
            retry = 0
            try:
                for _ in range(self.max_retries + EXTRA_TRIES):
                    ivs, result, bad = self.allocate(b, retry, slow)
                    final = retry == self.max_retries - 1
                    if result == "uncommit" or (result == "async" and not final):
                        self.heap.n = heap_n
                        self.res.restore(snap)
                        self.stats.retries += 1
                        if result == "uncommit":
                            self.stats.uncommits += 1
                            if final and bad >= 0:
                                slow = slow | {bad}  # XLA's retries are spent: that write goes to slow memory
                        retry = min(retry + 1, self.max_retries - 1)
                        continue
                    committed = ivs
                    break
                if committed is None:  # every try failed on an eviction: serve reads only
                    committed, _, _ = self.allocate(b, self.max_retries - 1, read_only=True)
                    self.stats.read_only += 1
            except _Timeout:
                self.heap.n = heap_n
                self.res.restore(snap)
                self.stats.timed_out = True
                break
            if committed:
                self.stats.buffers_fast += 1
            answer.extend(committed)
            self.done[b] = True
        return answer


# ---------------------------------------------------------------------------- runs

STATS_KEYS = ("prefetches", "evictions", "no_copy", "retries", "uncommits", "read_only", "buffers_fast")


def check_options(max_retries: int, max_overlap: str) -> None:
    """The msa options, or :class:`InputError` (one line: bad input, exit 2)."""
    if max_overlap not in ("buffer", "memory"):
        raise InputError(f"msa: max_overlap must be 'buffer' or 'memory', got {max_overlap!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 1:
        raise InputError(f"msa: max_retries must be a positive integer, got {max_retries!r}")


def msa_run(problem: Problem, hardware, deadline: float, *, start: list[FastInterval] | None = None,
            max_retries: int = MAX_RETRIES, max_overlap: str = "buffer") -> tuple[list[FastInterval] | None, dict]:
    """One run of the algorithm until the monotonic ``deadline`` (``start``: intervals committed first).

    Returns the answer (``None`` when the validator rejects it, which would be a bug) and the
    run's statistics (``timed_out`` says whether the deadline cut it short). Deterministic.
    """
    check_options(max_retries, max_overlap)
    msa = _Msa(problem, hardware, deadline, max_retries, max_overlap)
    answer: list[FastInterval] = []
    if start is not None:
        msa.seed(start, PrefetchEvaluator.of(problem, hardware))
        answer = list(start)
    answer = msa.run(answer)
    st = msa.stats
    stats = {key: getattr(st, key) for key in STATS_KEYS}
    stats.update(exact_copy_checks=msa.res.exact_checks, timed_out=st.timed_out)
    return (answer if validate_intervals(problem, answer) is None else None), stats


def msa_answer(problem: Problem, hardware, deadline: float) -> list[FastInterval]:
    """``msa``'s answer (no hint, default options) built until ``deadline``: the baseline of prefetch mode.

    The searches of prefetch mode (cpsat, lns, mcts, muzero) build it first, with the deadline
    they would give the ``msa`` solver, and never end below it. ``[]`` (all slow) when there is
    nothing to serve, no capacity, or no valid answer.
    """
    if problem.n == 0 or not problem.has_ops or problem.capacity is None:
        return []
    answer, _ = msa_run(problem, hardware, deadline)
    return answer or []

