"""XLA's memory-space assignment (MSA) for prefetch mode, the algorithm: per-use prefetches and evictions.

The solver ``msa`` (:mod:`mallocgame.solvers.msa`) runs it; so do the searches of prefetch mode, which
build its answer first and never end below it (:func:`msa_answer`). It lives in the core so
that no solver imports another.

The baseline of prefetch mode (docs/prefetch.md), after XLA's ``MsaAlgorithm`` (formerly
``AlternateMemoryBestFitHeap``, xla/service/memory_space_assignment): buffers in XLA's
memory-boundedness order; each value's uses decided one at a time by XLA's ladder (keep the
fast copy, evict, prefetch in a window from the cost-analysis interval picker, else slow);
best fit with look-ahead; the async-copy resource of docs/prefetch.md; retries; the
``max_overlap`` option; cross-program prefetch of ``k`` buffers (option). docs/msa.md maps each
part of XLA's algorithm to our model and lists what is left out: the cross-program prefetch's
candidate filter and its end-of-program re-prefetch, sliced prefetches, repacking, scoped allocations,
the memory-bound loop optimizer, conditional aliasing and loop nest levels (our programs are flat
schedules; a while loop's carried values are one buffer when the HLO importer's ``loop_state="alias"``
made them so), required assignments beyond "outputs end in slow memory", async-copy count limits
(the copy resource replaces them), mirrored/window/block prefetches. The copy check and the
heap are incremental (near-linear). Deterministic: ``seed`` is ignored. With a hint (a prefetch answer, or a map
answer lifted by :func:`mallocgame.formats.lift.lift_map_answer`) MSA also runs with the hint's
intervals committed first and returns the best of the two runs and the hint.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass

import numpy as np

from mallocgame._native import NativeCopyResource, NativeHeap, NativeMsaLoop, NativePrefetcher, msa_memory_boundedness
from mallocgame.algorithms.placement import _SMALL, _best_fit_py, best_fit_offset  # the same best fit, without numpy when small
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, serve_copies_left
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.intervals import next_open
from mallocgame.problem.model import FastInterval, InputError, Problem
from mallocgame.runtime.native_engine import engine

MIN_OVERLAP_RATIO = 0.8  # XLA's min_overlap_to_async_copy_ratio
PREFERRED_OVERLAP_RATIO = 1.5  # preferred_overlap_to_async_copy_ratio
MAX_OVERLAP_RATIO = 10.0  # max_overlap_to_async_copy_ratio
EVICTION_RETRY_MULTIPLIER = 2.0  # kEvictionRetryMultiplier
EXPLORED_DECREASING = 100  # kNumExploredDecreasingIntervals
MAX_RETRIES = 3
LOOK_AHEAD = 4  # msa's copy check: an undecided window looks for a Hall violation this many times wider
SHORT, LONG = 16, 32  # copy index: windows of at most SHORT ops by first op, longer ones in LONG-op buckets
RECENT = 8  # and by the latest few kept, wherever they end
TIGHT_REACH = 8  # and a new copy is rejected at once by a kept over-full interval ending at most this far past it
EXTRA_TRIES = 4  # tries beyond MAX_RETRIES for evictions that failed (each sends one more write to slow memory)


class _Timeout(Exception):
    pass


# ---------------------------------------------------------------------------- the fast-memory heap

class _Heap:
    """Committed rectangles ``[occ, end) x [offset, top)``: best-fit and free-at-offset queries over a time range.

    The rectangles are indexed by time: ``buckets[i]`` lists those overlapping ops
    ``[i * B, (i + 1) * B)``, so a query reads only the rectangles near its time range (the live
    ones), not every committed one. Rectangles only grow at their end (:meth:`extend`) and the
    newest are dropped on a retry (:meth:`truncate`).
    """

    BUCKET = 8

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.n = 0
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.off: list[int] = []
        self.top: list[int] = []
        self.buckets: dict[int, list[int]] = {}

    def _register(self, k: int, a: int, e: int) -> None:
        """Add rectangle ``k`` to the buckets of ops ``[a, e)``."""
        B = self.BUCKET
        buckets = self.buckets
        for i in range(a // B, (e - 1) // B + 1):
            lst = buckets.get(i)
            if lst is None:
                buckets[i] = [k]
            elif lst[-1] != k:
                lst.append(k)

    def add(self, occ: int, end: int, offset: int, size: int) -> int:
        k = self.n
        del self.lo[k:], self.hi[k:], self.off[k:], self.top[k:]
        self.lo.append(occ)
        self.hi.append(end)
        self.off.append(offset)
        self.top.append(offset + size)
        self.n += 1
        if end > occ:
            self._register(k, occ, end)
        return k

    def extend(self, k: int, end: int) -> None:
        """Rectangle ``k`` now ends at op ``end`` (not earlier than before)."""
        old = self.hi[k]
        self.hi[k] = end
        if end > old:
            self._register(k, max(old, self.lo[k]), end)

    def truncate(self, n: int) -> None:
        """Drop the rectangles added after the first ``n`` (a buffer's failed try)."""
        B = self.BUCKET
        for k in range(self.n - 1, n - 1, -1):
            lo, hi = self.lo[k], self.hi[k]
            if hi <= lo:
                continue
            for i in range(lo // B, (hi - 1) // B + 1):
                lst = self.buckets[i]
                if lst and lst[-1] == k:
                    lst.pop()
                else:  # not at the end (cannot happen: rectangles are extended only while they are the newest)
                    lst.remove(k)
                if not lst:
                    del self.buckets[i]
        self.n = n
        del self.lo[n:], self.hi[n:], self.off[n:], self.top[n:]

    def _near(self, a: int, e: int) -> list[int]:
        """The rectangles meeting ops ``[a, e)`` (or covering op ``a``), each once."""
        B = self.BUCKET
        lo, hi = self.lo, self.hi
        first, last = a // B, max(a, e - 1) // B
        get = self.buckets.get
        if first == last:
            return [k for k in get(first, ()) if lo[k] < e and hi[k] > a]
        seen: set[int] = set()
        for i in range(first, last + 1):
            seen.update(k for k in get(i, ()) if lo[k] < e and hi[k] > a)
        return list(seen)

    def near(self, a: int, e: int) -> list[tuple[int, int, int, int]]:
        """The rectangles meeting ops ``[a, e)`` as ``(offset, top, occ, end)``, sorted: a pool for queries
        inside that range (``pool=``)."""
        B = self.BUCKET
        lo, hi, off, top = self.lo, self.hi, self.off, self.top
        first, last = a // B, max(a, e - 1) // B
        get = self.buckets.get
        out = []
        for i in range(first, last + 1):
            for k in get(i, ()):
                occ = lo[k]
                # each once: in the first bucket of the range it is in (its buckets are contiguous)
                if occ < e and hi[k] > a and (i == first or occ // B == i):
                    out.append((off[k], top[k], occ, hi[k]))
        out.sort()
        return out

    def best_fit(self, a: int, e: int, size: int, align: int, pool: list | None = None) -> int | None:
        """Offset of the best-fit hole free during ops ``[a, e)``, or ``None`` (``best_fit_offset``)."""
        if pool is not None:  # sorted already: the same scan as best_fit_offset's
            return _best_fit_py([(o, t) for o, t, lo, hi in pool if lo < e and hi > a], size, align, self.capacity)
        ks = self._near(a, e)
        off, top = self.off, self.top
        if len(ks) < _SMALL:
            return _best_fit_py(sorted([(off[k], top[k]) for k in ks]), size, align, self.capacity)
        return best_fit_offset(np.array([off[k] for k in ks], np.int64), np.array([top[k] for k in ks], np.int64),
                               size, align, self.capacity)

    def fits(self, a: int, e: int, size: int, align: int, pool: list) -> bool:
        """Whether some hole holds ``size`` bytes during ops ``[a, e)`` (``best_fit(...) is not None``)."""
        cur = 0
        for o, t, lo, hi in pool:
            if lo < e and hi > a:
                if o > cur and -(-cur // align) * align + size <= o:
                    return True
                if t > cur:
                    cur = t
        return -(-cur // align) * align + size <= self.capacity

    def free(self, a: int, e: int, offset: int, size: int, pool: list[int] | None = None) -> bool:
        """Whether ``[offset, offset + size)`` is free during ops ``[a, e)``."""
        if offset + size > self.capacity:
            return False
        if pool is not None:
            end = offset + size
            return not any(lo < e and hi > a and o < end and t > offset for o, t, lo, hi in pool)
        B = self.BUCKET
        lo, hi, off, top = self.lo, self.hi, self.off, self.top
        end = offset + size
        get = self.buckets.get
        for i in range(a // B, max(a, e - 1) // B + 1):
            for k in get(i, ()):
                if lo[k] < e and hi[k] > a and off[k] < end and top[k] > offset:
                    return False
        return True


# ---------------------------------------------------------------------------- the async-copy resource

def _serve(copies: list[tuple[int, int, float]], budgets: np.ndarray) -> tuple[float, np.ndarray]:
    """Serve ``(first, deadline, seconds)`` copies in deadline order (``serve_copies_left``);
    returns the total stall and the budget left per slot."""
    stalls, left = serve_copies_left(sorted(copies, key=lambda c: (c[1], c[0])), budgets)
    return float(sum(stalls)), np.asarray(left, np.float64)


KINDS = ("prefetch", "eviction")


class _FullCopyResource:
    """docs/prefetch.md's copy budgets (XLA's ``AsynchronousCopyResource``), kept stall-free decision by decision,
    by re-serving every copy when the witness lacks room: O(copies + ops) per such check. Used only when a
    hint's copies already stall (its stall is then the baseline every check compares with);
    :class:`_CopyResource` otherwise.

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
        self.tol = 1e-12 * scale  # time arithmetic (does a copy fit its window), not a comparison of answers
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


def _edf(jobs: list[tuple], budgets: list[float], base: int):
    """Serve jobs ``(deadline, first, group, first0, id, need)``, sorted (deadline order, ties by first, then
    the rest of the tuple), each from its earliest slots with budget (``serve_copies_left`` over slots
    ``base ..``); returns the total stall, the budget left, each job's ``[(slot, amount), ...]`` in the
    order of ``jobs``, and the index in ``jobs`` of the first job that stalled (-1 if none:
    :func:`_hall_interval`)."""
    left = list(budgets)
    n = len(left)
    nxt = list(range(n + 1))  # nxt[t]: first slot >= t that may have budget (n = none)

    allocs: list[list[tuple[int, float]]] = []
    stall = 0.0
    first_stall = -1
    for i, (deadline, first, _, _, _, need) in enumerate(jobs):
        a: list[tuple[int, float]] = []
        allocs.append(a)
        f = first - base
        t = next_open(nxt, f) if f < n else n
        end = min(deadline - base, n)
        while need > 0 and t < end:
            lt = left[t]
            take = need if need < lt else lt
            if take > 0:
                a.append((t + base, take))
            need -= take
            left[t] = lt - take
            if left[t] <= 0:
                nxt[t] = t + 1
                t = next_open(nxt, t + 1)
            else:
                break
        if need > 0:
            stall += need
            if first_stall < 0:
                first_stall = i
    return stall, left, allocs, first_stall


def _hall_interval(jobs, allocs, budgets: list[float], base: int, i: int, tol: float) -> list[tuple[int, int, float]]:
    """After :func:`_edf`, an interval ``[a, d)`` of ops that job ``i`` (which stalled, first) proves
    over-full, and by how much: the needs of the jobs whose windows lie inside it less its budget;
    also the widest ``[a', d)``, ``a' < a``, still over-full by more than ``tol`` (if any).

    When ``i`` stalls, its slots ``[first, d)`` are exhausted; a job with a share in ``[a, d)`` and an
    earlier ``first`` took its earliest slots, so ``[its first, a)`` is exhausted too: ``a`` moves to
    it, until every job with a share in ``[a, d)`` lies inside (all have deadlines ``<= d``, served
    before ``i``). Then the shares exhaust the budget and ``i`` still lacks some: Hall's condition fails.
    """
    d, a = jobs[i][0], jobs[i][1]
    moved = True
    while moved:
        moved = False
        for job, al in zip(jobs, allocs):
            if job[1] < a and al and al[-1][0] >= a:
                a, moved = job[1], True
    demand = sum(job[5] for job in jobs if job[1] >= a and job[0] <= d)
    out = [(a, d, demand - sum(budgets[a - base:d - base]))]
    by_first: dict[int, float] = {}  # the jobs inside [base, d) starting before a
    for job in jobs:
        if job[1] < a and job[0] <= d:
            by_first[job[1]] = by_first.get(job[1], 0.0) + job[5]
    excess, widest = out[0][2], None
    for s in range(a - 1, base - 1, -1):
        excess += by_first.get(s, 0.0) - budgets[s - base]
        if excess > tol:
            widest = (s, d, excess)
    if widest is not None:
        out.append(widest)
    return out


class _CopyResource:
    """docs/prefetch.md's copy budgets (XLA's ``AsynchronousCopyResource``), kept stall-free decision by decision.

    ``saved[t]`` is the memory time saved at op ``t`` by the operands served fast so far, so
    ``times`` are the op times of the answer being built, and the budgets of its copies. Per kind,
    a witness schedule that completes every copy: ``alloc[kind][j]`` the ``(op, seconds)`` copy
    ``j`` takes, ``left[kind]`` the budget left per op.

    A decision (more operands served, so smaller budgets at their ops, and perhaps a new copy) is
    taken iff every copy still completes without a stall: iff serving all copies in deadline
    order, each from its earliest slots, does (exact on interval windows: Hall's condition). The
    check first tries the witness (room left at the changed ops and in the new copy's window);
    otherwise it decides on a window of ops ``[L, R)`` around the change, growing it until one of
    two local problems decides:

    * *lower*: the copies whose windows lie inside ``[L, R)`` (and the new one) served on the
      window's budgets. A stall there is a set of copies needing more than the ops their windows
      cover can give (Hall), which no schedule of all copies avoids: reject.
    * *upper*: also the copies crossing the window's ends, keeping their witness share outside it
      and needing the rest inside (their windows clipped). No stall there is a stall-free schedule
      of all copies: accept, and it becomes the witness inside the window.

    When the window is every op both are the whole problem, so the decision is always the one a
    full re-serve takes, at the cost of the window (the copies are local: windows of at most
    ``10 x`` the copy time). The undo journal makes a buffer's retry cost what it changed, not O(ops).

    Faster paths that change no decision (for compiled programs with saturated budgets): a
    lower problem's stall is kept as an over-full interval (:meth:`_note_violation`), which rejects
    later copies needing more inside it at once; an undecided first window looks for a violation
    ``LOOK_AHEAD`` times wider; the upper problem goes first unless the last check like it rejected.
    """

    def __init__(self, compute: np.ndarray, slow_mem: np.ndarray, fixed: np.ndarray):
        self.compute, self.slow_mem, self.fixed = compute.tolist(), slow_mem.tolist(), fixed.tolist()
        self.T = len(compute)
        self.saved = [0.0] * self.T  # plain lists: the checks read and write single ops
        times = np.maximum(compute, slow_mem) + fixed
        self.times = times.tolist()
        self.copies: dict[str, list[tuple[int, int, float]]] = {k: [] for k in KINDS}
        self.alloc: dict[str, list[list[tuple[int, float]]]] = {k: [] for k in KINDS}
        # the copies by first op (windows of at most SHORT ops; span: the longest of them) and, longer
        # ones, by the LONG-op buckets their windows meet: a window's copies are read from near it
        self.by_first: dict[str, dict[int, list[int]]] = {k: {} for k in KINDS}
        self.firsts: dict[str, list[int]] = {k: [] for k in KINDS}  # by_first's keys, sorted
        self.span = {k: 0 for k in KINDS}
        self.long: dict[str, dict[int, list[int]]] = {k: {} for k in KINDS}
        self.left = {k: list(self.times) for k in KINDS}
        self.base_stall = {k: 0.0 for k in KINDS}
        scale = float(times.sum()) or 1.0
        self.tol = 1e-12 * scale  # time arithmetic (does a copy fit its window), not a comparison of answers
        self.exact_checks = 0
        self.journal: list = []
        self.tight: dict[str, dict[int, list[tuple[int, float]]]] = {k: {} for k in KINDS}  # :meth:`_note_violation`
        self.tight_log: list[tuple[str, int]] = []  # what was kept since the last snapshot
        self.last_reject = None  # the last rejected check's (kind, savings, need)
        self.recent: list[tuple[str, int, int, float]] = []  # the last RECENT kept, as (kind, end, start, slack)

    # ------------------------------------------------ undo journal

    def _set(self, arr, i, value) -> None:
        self.journal.append((arr, i, arr[i]))
        arr[i] = value

    def _append_copy(self, kind: str, copy: tuple[int, int, float], alloc: list[tuple[int, float]]) -> None:
        j = len(self.copies[kind])
        self.copies[kind].append(copy)
        self.alloc[kind].append(alloc)
        f, d = copy[0], copy[1]
        if d - f <= SHORT:
            bf = self.by_first[kind]
            if f in bf:
                bf[f].append(j)
            else:
                bf[f] = [j]
                bisect.insort(self.firsts[kind], f)
            self.span[kind] = max(self.span[kind], d - f)
        else:
            buckets = self.long[kind]
            for i in range(f // LONG, (d - 1) // LONG + 1):
                buckets.setdefault(i, []).append(j)
        self.journal.append((None, kind, copy))

    def snapshot(self):
        """A mark to :meth:`restore` to: only the latest one is kept (a buffer's tries restore to its start)."""
        self.journal.clear()
        self.tight_log.clear()
        return 0

    def restore(self, snap) -> None:
        for kind, d in reversed(self.tight_log):
            lst = self.tight[kind][d]
            lst.pop()
            if not lst:
                del self.tight[kind][d]
        self.tight_log.clear()
        self.recent.clear()
        journal = self.journal
        while len(journal) > snap:
            arr, i, old = journal.pop()
            if arr is None:  # an appended copy
                self.copies[i].pop()
                self.alloc[i].pop()
                f, d, _ = old
                index, keys = ((self.by_first[i], (f,)) if d - f <= SHORT else
                               (self.long[i], range(f // LONG, (d - 1) // LONG + 1)))
                for key in keys:
                    lst = index[key]
                    lst.pop()
                    if not lst:
                        del index[key]
                        if d - f <= SHORT:
                            firsts = self.firsts[i]
                            del firsts[bisect.bisect_left(firsts, key)]
            else:
                arr[i] = old

    def seed_full(self, saved: np.ndarray, copies: dict[str, list[tuple[int, int, float]]]) -> bool:
        """Start from a given answer (a hint): its served operands and copies. False (nothing changed) if they stall."""
        compute, slow_mem, fixed = (np.asarray(x) for x in (self.compute, self.slow_mem, self.fixed))
        times = (np.maximum(compute, slow_mem - saved.astype(np.float64)) + fixed).tolist()
        served = {}
        for kind in KINDS:
            jobs = sorted((d, max(f, 0), 0, 0, j, s) for j, (f, d, s) in enumerate(copies[kind]))
            stall, left, allocs, _ = _edf(jobs, times, 0)
            if stall > self.tol:
                return False
            by_id = [None] * len(jobs)
            for job, a in zip(jobs, allocs):
                by_id[job[4]] = a
            served[kind] = (left, by_id)
        self.saved = saved.astype(np.float64).tolist()
        self.times = times
        for kind in KINDS:
            left, allocs = served[kind]
            self.left[kind] = left
            for (f, d, s), a in zip(copies[kind], allocs):
                self._append_copy(kind, (max(f, 0), d, s), a)
        self.journal.clear()
        return True

    # ------------------------------------------------ the check

    def _gather(self, kind: str, lo: int, hi: int, crossing: bool = True):
        """The jobs (:func:`_edf`) of the copies of ``kind`` inside ops ``[lo, hi)`` and (if ``crossing``)
        of those crossing its ends, the latter with their witness share inside as the need, their
        windows clipped; each list sorted."""
        copies, alloc, bf = self.copies[kind], self.alloc[kind], self.by_first[kind]
        inside: list[tuple] = []
        crossers: list[tuple] = []
        ids: list[int] = []
        firsts = self.firsts[kind]
        for k in range(bisect.bisect_left(firsts, lo - self.span[kind]), bisect.bisect_left(firsts, hi)):
            ids += bf[firsts[k]]
        if self.long[kind]:
            buckets, b0 = self.long[kind], lo // LONG
            for i in range(b0, (hi - 1) // LONG + 1):
                for j in buckets.get(i, ()):
                    if max(copies[j][0] // LONG, b0) == i:  # each copy once: in its first bucket here
                        ids.append(j)
        for j in ids:
            f, d, need = copies[j]
            if d <= lo or f >= hi:
                continue
            if f >= lo and d <= hi:
                inside.append((d, f, 0, 0, j, need))
            elif crossing:
                share = sum(x for t, x in alloc[j] if lo <= t < hi)
                if share > 0:
                    crossers.append((min(d, hi), max(f, lo), 2, f, j, share))
        inside.sort()
        crossers.sort()
        return inside, crossers

    def _budgets(self, red: dict[int, float], lo: int, hi: int) -> list[float]:
        budgets = self.times[lo:hi]
        for t, r in red.items():
            budgets[t - lo] -= r
        return budgets

    def _lower(self, kind: str, red: dict[int, float], copy, lo: int, hi: int, inside) -> tuple[bool, tuple]:
        """The lower problem on ops ``[lo, hi)``: whether it stalls (a Hall violation: reject), and its EDF run."""
        budgets = self._budgets(red, lo, hi)
        jobs = inside if copy is None else sorted(inside + [(copy[1], copy[0], 1, 0, -1, copy[2])])
        stall, left, allocs, i = _edf(jobs, budgets, lo)
        if stall > self.tol:
            if copy is not None and i >= 0:
                for hall in _hall_interval(jobs, allocs, budgets, lo, i, self.tol):
                    self._note_violation(kind, red, copy, hall)
            return True, (budgets, jobs, left, allocs)
        return False, (budgets, jobs, left, allocs)

    def _region(self, kind: str, red: dict[int, float], copy, lo: int, hi: int, lower_ok: bool = False,
                upper_first: bool = False):
        """Decide on ops ``[lo, hi)``: ``(True, witness update)``, ``(False, None)`` or ``None`` (undecided).
        ``lower_ok``: the lower problem is known not to stall (that of a wider window did not);
        ``upper_first``: try the upper problem first (an accept is likely; a stall-free upper problem
        has a stall-free lower one, so the order changes nothing but the time)."""
        inside, crossers = self._gather(kind, lo, hi)
        if crossers:
            budgets = self._budgets(red, lo, hi)
            lower = inside if copy is None else sorted(inside + [(copy[1], copy[0], 1, 0, -1, copy[2])])
            if lower_ok or upper_first:
                jobs = sorted(lower + crossers)
                stall, left, allocs, _ = _edf(jobs, budgets, lo)
                if stall <= self.tol:
                    return True, (lo, hi, left, jobs, allocs)
                if lower_ok:
                    return None
                return (False, None) if self._lower(kind, red, copy, lo, hi, inside)[0] else None
        stalls, (budgets, lower, left, allocs) = self._lower(kind, red, copy, lo, hi, inside)
        if stalls:
            return False, None
        if crossers:
            jobs = sorted(lower + crossers)
            stall, left, allocs, _ = _edf(jobs, budgets, lo)
            if stall > self.tol:
                return None
            return True, (lo, hi, left, jobs, allocs)
        return True, (lo, hi, left, lower, allocs)

    # Over-full intervals: a Hall violation found for a new copy is kept as the interval's slack without
    # that copy and the op savings of that check (its budget less the needs of the copies inside it).
    # Commits only add copies and shrink budgets, so a kept slack never falls short of the true one, and
    # a later copy needing more than it inside the interval (less the savings there) must stall too: a
    # rejection without a local problem. A restore drops what was kept since the last snapshot.
    def _note_violation(self, kind: str, red: dict[int, float], copy, hall: tuple[int, int, float]) -> None:
        a, d, excess = hall
        if not (a <= copy[0] and copy[1] <= d):
            return
        slack = copy[2] + sum(r for t, r in red.items() if a <= t < d) - excess
        self.tight[kind].setdefault(d, []).append((a, slack))
        self.tight_log.append((kind, d))
        self.recent.append((kind, d, a, slack))
        del self.recent[:-RECENT]

    def _known_violation(self, kind: str, red: dict[int, float], copy) -> bool:
        by_end, tol = self.tight[kind], self.tol
        first, deadline, need = copy
        for k, d, a, slack in self.recent:  # the latest, however far they end
            if k == kind and a <= first and deadline <= d and need + sum(r for t, r in red.items() if a <= t < d) - slack > tol:
                return True
        for d in range(deadline, deadline + TIGHT_REACH):
            for a, slack in by_end.get(d, ()):
                if a <= first and need + sum(r for t, r in red.items() if a <= t < d) - slack > tol:
                    return True
        return False

    def _decide(self, kind: str, red: dict[int, float], copy):
        """Whether ``kind``'s copies (and ``copy``) complete without a stall on budgets less ``red``: see the class."""
        self.exact_checks += 1
        key = (kind, tuple(red.items()), None if copy is None else copy[2])
        if copy is not None and self._known_violation(kind, red, copy):
            self.last_reject = key
            return False, None
        upper_first = key != self.last_reject  # not the picker's next copy start after a rejection
        pts = list(red)
        if copy is not None:
            pts += [copy[0], copy[1] - 1]
        a0, b0 = min(pts), max(pts) + 1
        width = max(b0 - a0, 8)
        checked = 0  # the lower problems of windows up to this width do not stall
        while True:
            lo, hi = max(0, a0 - width), min(self.T, b0 + width)
            out = self._region(kind, red, copy, lo, hi, lower_ok=width <= checked, upper_first=upper_first)
            if out is not None:
                if not out[0]:
                    self.last_reject = key
                return out
            assert lo > 0 or hi < self.T, "the whole problem always decides"
            if not checked:  # undecided: most such checks reject, on a Hall violation a few widths out
                checked = width * LOOK_AHEAD
                lo2, hi2 = max(0, a0 - checked), min(self.T, b0 + checked)
                if self._lower(kind, red, copy, lo2, hi2, self._gather(kind, lo2, hi2, False)[0])[0]:
                    self.last_reject = key
                    return False, None
            width *= 2

    def _apply(self, kind: str, update, copy) -> None:
        lo, hi, left, jobs, allocs = update
        arr = self.left[kind]
        if arr[lo:hi] != left:
            for t, (x, y) in enumerate(zip(arr[lo:hi], left), lo):
                if x != y:
                    self._set(arr, t, y)
        al = self.alloc[kind]
        new_alloc = None
        for job, a in zip(jobs, allocs):
            j = job[4]
            if j < 0:
                new_alloc = a
            elif job[2] == 0:  # inside the window: its whole share
                if al[j] != a:
                    self._set(al, j, a)
            else:
                old = al[j]
                self._set(al, j, [x for x in old if x[0] < lo] + a + [x for x in old if x[0] >= hi])
        if copy is not None:
            self._append_copy(kind, copy, new_alloc)

    def try_add(self, serve: list[tuple[int, float]], kind: str | None = None,
                copy: tuple[int, int, float] | None = None) -> bool:
        """Serve more operands (``(op, saving)`` pairs) and add ``copy`` of ``kind``, if every copy still completes
        without a stall; commits and returns True, else changes nothing and returns False."""
        saved, times, tol = self.saved, self.times, self.tol
        new: dict[int, float] = {}
        for t, d in serve:
            new[t] = new.get(t, saved[t]) + d
        red = {}
        for t, v in new.items():
            r = times[t] - (max(self.compute[t], self.slow_mem[t] - v) + self.fixed[t])
            if r > 0:
                red[t] = r
        if copy is not None:
            first, deadline, need = copy
            first = max(first, 0)
            if deadline <= first:
                return False
            total = sum(times[first:deadline])
            for t, r in red.items():
                if first <= t < deadline:
                    total -= r
            if total < need * (1 + 1e-9):
                return False  # not even the whole budget of its window is enough
            copy = (first, deadline, need)
        exact = {}
        for k in KINDS:
            left = self.left[k]
            ok = True
            for t, r in red.items():
                if left[t] < r - tol:
                    ok = False
                    break
            mine = copy is not None and k == kind
            if ok and mine:
                avail = sum(left[first:deadline])
                for t, r in red.items():
                    if first <= t < deadline:
                        avail -= r if r < left[t] else left[t]
                ok = avail >= need * (1 + 1e-9)
            if ok:
                continue
            ok, update = self._decide(k, red, copy if mine else None)
            if not ok:
                return False
            exact[k] = update
        journal = self.journal
        for t, v in new.items():
            journal.append((saved, t, saved[t]))
            saved[t] = v
        for t, r in red.items():
            journal.append((times, t, times[t]))
            times[t] -= r
        for k in KINDS:
            mine = copy if k == kind else None
            if k in exact:
                self._apply(k, exact[k], mine)
                continue
            left = self.left[k]
            for t, r in red.items():
                journal.append((left, t, left[t]))
                left[t] = max(left[t] - r, 0.0)
            if mine is not None:
                need_left = need
                a = []
                for t in range(first, deadline):
                    lt = left[t]
                    take = need_left if need_left < lt else lt
                    if take > 0:
                        journal.append((left, t, lt))
                        left[t] = lt - take
                        a.append((t, take))
                        need_left -= take
                    if need_left <= 0:
                        break
                self._append_copy(k, mine, a)
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
    cross_program_prefetch: int = -1  # the (first) buffer prefetched across programs, or -1
    cross_program_prefetches: int = 0  # how many buffers were
    timed_out: bool = False


class _EvictionFailed(Exception):
    """An eviction found no copy budget: the try is uncommitted (:class:`_BufferTry`)."""


class _BufferTry:
    """One try at one buffer (:meth:`_Msa.allocate`): its touches in order, each served in fast memory
    when XLA's ladder allows (the open interval extended, the definition's interval, a prefetch), else
    in slow memory; the intervals committed to the heap and the copy resource as they are made.

    State: ``cur`` the open interval (:class:`_Open`, or None), ``pending`` the touch of a pure write
    whose value has no use yet, ``slow_ready`` the last op at which slow memory holds the current
    value (a prefetch copies from then on), ``prev_off`` the last closed interval's offset (tried
    first), ``stalled`` a use lacked copy budget, ``bad`` the touch whose eviction failed."""

    __slots__ = ("msa", "b", "retry", "slow", "read_only", "bend", "ops", "rd", "wr", "ds", "size", "align",
                 "copy_t", "max_interval", "heap", "res", "next_def", "out", "cur", "pending", "slow_ready",
                 "prev_off", "stalled", "bad")

    def __init__(self, msa: _Msa, b: int, retry: int, slow: frozenset[int], read_only: bool):
        self.msa, self.b, self.retry, self.slow, self.read_only = msa, b, retry, slow, read_only
        self.bend = int(msa.end[b])
        ops, rd, wr, ds = msa.touches_of(b)
        self.ops, self.rd, self.wr, self.ds = ops, rd, wr, ds
        m = len(ops)
        self.size, self.align = int(msa.size[b]), int(msa.align[b])
        self.copy_t = float(msa.copy_time[b])
        self.max_interval = msa.max_elapsed(self.copy_t, retry)
        self.heap, self.res = msa.heap, msa.res
        # next_def[k]: index of the first pure write after touch k (m if none): the end of k's value
        next_def = [m] * m
        for k in range(m - 2, -1, -1):
            next_def[k] = k + 1 if (wr[k + 1] and not rd[k + 1]) else next_def[k + 1]
        self.next_def = next_def
        self.out: list[FastInterval] = []
        self.cur: _Open | None = None
        self.pending: int | None = None
        self.slow_ready, self.prev_off, self.stalled, self.bad = -1, None, False, -1

    def run(self) -> tuple[list[FastInterval], str, int]:
        """Serve every touch; the answer of :meth:`_Msa.allocate`."""
        ops, rd, wr, deadline = self.ops, self.rd, self.wr, self.msa.deadline
        try:
            for k in range(len(ops)):
                if k % 64 == 63 and time.monotonic() > deadline:
                    raise _Timeout
                if wr[k] and not rd[k]:  # a pure write: a new value starts
                    self.finish_value(False)
                    self.pending = k
                    continue
                if self.pending is not None:  # the value's first use
                    served = self.first_use(k)
                elif self.cur is not None:
                    served = self.extend(k)
                else:
                    served = False
                if not served and not self.slow_write(k):
                    served = self.prefetch(k)
                if not served and wr[k]:
                    self.slow_ready = ops[k]  # updated in slow memory
            self.finish_value(True)
        except _EvictionFailed:
            return self.out, "uncommit", self.bad
        return self.out, ("async" if self.stalled else "ok"), -1

    def slow_write(self, k: int) -> bool:
        """Is touch ``k`` a write served in slow memory (required, or a read-only try)?"""
        return self.wr[k] and (self.read_only or k in self.slow)

    def fits(self, a: int, e: int, pool: list) -> bool:
        """Has the heap room for the buffer on ops ``[a, e)`` (``pool``: :meth:`_Heap.near` of a range holding it)?"""
        return self.heap.fits(a, e, self.size, self.align, pool)

    def chunk(self, k: int, a: int) -> int | None:
        """FindBestChunkCandidate for an interval occupying from op ``a`` and serving touch ``k``."""
        ops, heap, el, max_interval = self.ops, self.heap, self.msa.el, self.max_interval
        last = self.next_def[k] - 1
        j = k
        while j < last and el(ops[j], ops[j + 1]) < max_interval and not self.slow_write(j + 1):
            j += 1
        pool = heap.near(a, ops[j] + 1)  # every query below is inside [a, ops[j] + 1)
        if not self.fits(a, ops[k] + 1, pool):
            return None
        lo_, hi_ = k, j
        while lo_ < hi_:
            mid = (lo_ + hi_ + 1) // 2
            if self.fits(a, ops[mid] + 1, pool):
                lo_ = mid
            else:
                hi_ = mid - 1
        e = ops[lo_] + 1
        prev = self.prev_off
        if prev is not None and prev % self.align == 0 and heap.free(a, e, prev, self.size, pool):
            return prev
        return heap.best_fit(a, e, self.size, self.align, pool)

    def close(self) -> None:
        """Close the open interval: it is an answer's interval from now on."""
        cur = self.cur
        self.out.append(FastInterval(self.b, cur.offset, cur.start, cur.end, cur.copy_start))
        self.slow_ready = max(self.slow_ready, cur.end - 1)
        self.prev_off = cur.offset
        self.cur = None

    def evict(self, latest_end: int) -> None:
        """Evict: extend the open interval to the preferred eviction end and copy it back to slow memory;
        raises :class:`_EvictionFailed` when the copy has no budget."""
        cur, heap, size = self.cur, self.heap, self.size
        w, a = cur.last_write, cur.end
        latest_end = min(latest_end, self.bend)
        target = (1 + EVICTION_RETRY_MULTIPLIER * self.retry) * PREFERRED_OVERLAP_RATIO * self.copy_t
        e = a
        while e < latest_end and self.msa.el(w, e) < target:
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
        if not self.res.try_add([], "eviction", (w + 1, e, self.copy_t)):
            self.bad = cur.write_k
            raise _EvictionFailed
        heap.extend(cur.rect, e)
        cur.end = e
        self.msa.stats.evictions += 1

    def finish_value(self, at_end: bool) -> None:
        """The value ends (a pure write follows, or the touches end)."""
        cur, pending = self.cur, self.pending
        if cur is None and pending is not None and not self.slow_write(pending):
            d = self.ops[pending]
            off = self.chunk(pending, d)
            if off is not None and self.res.try_add([(d, self.ds[pending])]):
                self.cur = cur = _Open(off, d, None, d + 1, self.heap.add(d, d + 1, off, self.size), True, d,
                                       pending)
                self.msa.stats.no_copy += 1
        self.pending = None
        if cur is not None:
            if at_end and self.msa.output[self.b] and cur.dirty:
                self.evict(self.bend)
            self.close()

    def first_use(self, k: int) -> bool:
        """The value's first use, touch ``k``: AllocateSegment(definition, use), one interval from the
        definition without a copy; True when served."""
        pending = self.pending
        d, u = self.ops[pending], self.ops[k]
        served = False
        if not self.slow_write(pending) and not self.slow_write(k) and self.msa.el(d, u) < self.max_interval:
            off = self.chunk(k, d)
            if off is not None and self.res.try_add([(d, self.ds[pending]), (u, self.ds[k])]):
                wk = self.wr[k]
                self.cur = _Open(off, d, None, u + 1, self.heap.add(d, u + 1, off, self.size), True,
                                 u if wk else d, k if wk else pending)
                served = True
                self.msa.stats.no_copy += 1
        if not served:
            self.slow_ready = max(self.slow_ready, d)  # defined in slow memory
        self.pending = None
        return served

    def extend(self, k: int) -> bool:
        """Touch ``k`` with an interval open: keep the fast copy up to it (True), else evict it if dirty
        and close it (False)."""
        cur = self.cur
        p, u = self.ops[k - 1], self.ops[k]
        if (self.msa.el(p, u) < self.max_interval and not self.slow_write(k)
                and self.heap.free(cur.end, u + 1, cur.offset, self.size) and self.res.try_add([(u, self.ds[k])])):
            self.heap.extend(cur.rect, u + 1)
            cur.end = u + 1
            if self.wr[k]:
                cur.dirty, cur.last_write, cur.write_k = True, u, k
            self.msa.stats.no_copy += 1
            return True
        if cur.dirty:
            self.evict(u)
        self.close()
        return False

    def prefetch(self, k: int) -> bool:
        """Touch ``k`` by a prefetch: the first copy start of the picker's order with memory and copy
        budget; True when served."""
        msa, heap, v = self.msa, self.heap, self.ops[k]
        ds_k, copy_t = self.ds[k], self.copy_t
        reduction = float(msa.elapsed[v]) - (max(float(msa.compute[v]), float(msa.slow_mem[v]) - ds_k)
                                             + float(msa.fixed[v]))
        if msa.prefetcher is not None:  # the same picker and loop, compiled
            p, stalled = msa.prefetcher.pick(v, max(self.slow_ready, -1), copy_t, reduction, self.max_interval, ds_k,
                                             self.size, self.align)
            self.stalled = self.stalled or stalled
            return p is not None and self.commit_prefetch(k, p)
        picked = msa.picker(max(self.slow_ready, -1), v, copy_t, reduction, self.retry)
        if picked is None:
            return False
        earliest, latest, candidates = picked
        pool = heap.near(earliest + 1, v + 1)  # every query below is inside it
        if not self.fits(latest + 1, v + 1, pool):
            return False  # out of memory for every window
        lo_, hi_ = earliest, latest  # smallest copy start whose occupied range fits somewhere
        while lo_ < hi_:
            mid = (lo_ + hi_) // 2
            if self.fits(mid + 1, v + 1, pool):
                hi_ = mid
            else:
                lo_ = mid + 1
        p_mem, p_bad = lo_, latest + 1
        for p in candidates:
            if p < p_mem or p >= p_bad:
                continue
            if self.res.try_add([(v, ds_k)], "prefetch", (p + 1, v, copy_t)):
                return self.commit_prefetch(k, p)
            p_bad = p  # a later start has less budget: it would stall too
            self.stalled = True
        return False

    def commit_prefetch(self, k: int, p: int) -> bool:
        """Open the interval of touch ``k``'s prefetch copied from op ``p`` (its copy is committed); True."""
        v = self.ops[k]
        off = self.chunk(k, p + 1)
        assert off is not None
        wk = self.wr[k]
        self.cur = _Open(off, v, p, v + 1, self.heap.add(p + 1, v + 1, off, self.size), bool(wk),
                         v if wk else -1, k if wk else -1)
        self.msa.stats.prefetches += 1
        return True


MIN_DECIDED = 32  # the first positions of msa's buffer order, decided before the deadline is first read


class _Msa:
    """One run of memory-space assignment on one problem."""

    def __init__(self, problem: Problem, hardware, deadline: float, max_retries: int = MAX_RETRIES,
                 max_overlap: str = "buffer", cross_program_prefetch: int = 0,
                 overlap_ratio: float = MAX_OVERLAP_RATIO):
        self.problem = problem
        self.cross_program = int(cross_program_prefetch)
        self.deadline = deadline
        self.max_retries = max(1, int(max_retries))
        ev = PrefetchEvaluator.of(problem, hardware)
        base = ev.base
        self.compute, self.slow_mem, self.fixed = base.compute, base.slow_mem, base.fixed
        # XLA's cost analysis: op times with every operand in default (slow) memory.
        self.elapsed = ev.op_times(())
        self.prefix = np.concatenate(([0.0], np.cumsum(self.elapsed)))
        self.prefix_list = self.prefix.tolist()
        touches = problem.touches
        self.ptr, self.ops = touches.ptr, touches.ops
        self.reads, self.writes, self.output = touches.reads, touches.writes, touches.output
        n = problem.n
        self.dsum = np.bincount(ev.operand_touch, base.delta, minlength=len(self.ops))  # saving per touch
        self._lists = None  # touches_of's lists of the touch arrays
        self._touches = (-1, None)  # touches_of's last answer, by buffer
        a = problem.arrays
        self.size, self.align, self.end = a.size, a.alignment, a.end
        self.copy_time = a.size / float(hardware.copy_bw)
        cap = problem.capacity
        self.capacity = int(cap) if cap is not None else int(a.size.sum()) + int(a.alignment.max(initial=1))
        # MALLOCGAME_ENGINE: the compiled heap and copy resource (mallocgame._native) or this module's, the reference
        # they must match
        native = engine() == "native"
        self.heap = (NativeHeap if native else _Heap)(self.capacity)
        self.res = (NativeCopyResource if native else _CopyResource)(self.compute, self.slow_mem, self.fixed)
        # a use's prefetch (picker and copy-start loop) compiled, while the copy resource is the compiled one
        self.prefetcher = NativePrefetcher(self.prefix, self.heap, self.res) if native else None
        self.stats = _Stats()
        self.done = np.zeros(n, bool)
        self.max_overlap = max_overlap
        self.overlap_ratio = overlap_ratio
        self.memory_copy_time = self.capacity / float(hardware.copy_bw)

    # ------------------------------------------------------------ cost analysis

    def max_elapsed(self, copy_t: float, retry: int) -> float:
        """GetMaxElapsedInAlternateMemory: the longest stay without a copy, the longest prefetch window."""
        basis = self.memory_copy_time if self.max_overlap == "memory" else copy_t
        return self.overlap_ratio * basis * (2.0 ** retry)

    def el(self, a: int, b: int) -> float:
        """Elapsed time of the ops strictly between ``a`` and ``b`` (``a >= -1``): GetLogicalIntervalElapsed."""
        return self.prefix_list[b] - self.prefix_list[a + 1] if b > a + 1 else 0.0

    def benefit(self, t: int, d: float) -> float:
        """GetAlternateMemoryBenefit of a touch at op ``t`` saving ``d`` seconds of memory time."""
        m, c = float(self.slow_mem[t]), float(self.compute[t])
        return d if m > c else m - c

    def memory_boundedness(self) -> np.ndarray:
        if self.prefetcher is not None:  # the native engine: the same loop, compiled
            return msa_memory_boundedness(self.ptr, self.ops, self.reads, self.writes, self.dsum, self.slow_mem,
                                          self.compute, self.size)
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
        # el(p) = elapsed strictly between p and use, non-increasing in p: binary searches over the prefix sums
        # (the same float operations as evaluating every p, so the same window), then arrays over the window only
        pre = self.prefix_list
        top = pre[use]
        need = MIN_OVERLAP_RATIO * copy_t
        lo_, hi_ = start, use  # latest: last p with need <= el(p) + reduction
        while lo_ < hi_:
            mid = (lo_ + hi_) // 2
            if need <= (top - pre[mid + 1]) + reduction:
                lo_ = mid + 1
            else:
                hi_ = mid
        latest = lo_ - 1
        if latest < start:
            return None
        max_interval = self.max_elapsed(copy_t, retry)
        lo_, hi_ = start, latest  # earliest: first p < latest with el(p) <= max_interval, else latest
        while lo_ < hi_:
            mid = (lo_ + hi_) // 2
            if top - pre[mid + 1] <= max_interval:
                hi_ = mid
            else:
                lo_ = mid + 1
        earliest = lo_
        window = self.prefix[use] - self.prefix[earliest + 1:latest + 2]  # el(p) for p in [earliest, latest]
        preferred = earliest + int(np.argmin(np.abs(PREFERRED_OVERLAP_RATIO * copy_t - window)))
        el = window.tolist()
        start = earliest  # el[p - start] below: the window's index

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
        if self._touches[0] == b:  # the buffer being decided: its tries and required_slow read the same lists
            return self._touches[1]
        if self._lists is None:  # the touch arrays as lists once: a buffer's slice costs its length, not a call
            self._lists = (self.ptr.tolist(), self.end.tolist(), self.ops.tolist(), self.reads.tolist(),
                           self.writes.tolist(), self.dsum.tolist())
        ptr, end, ops_all, reads, writes, dsum = self._lists
        lo, hi = ptr[b], ptr[b + 1]
        e = end[b]
        ops = [t for t in ops_all[lo:hi] if t < e]
        m = len(ops)
        out = ops, reads[lo:lo + m], writes[lo:lo + m], dsum[lo:lo + m]
        self._touches = (b, out)
        return out

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
        return _BufferTry(self, b, retry, slow, read_only).run()

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
        saved = ev.saved(intervals)
        if not self.res.seed_full(saved, copies):  # the hint's copies stall: its stall is the baseline
            self.res = _FullCopyResource(self.compute, self.slow_mem, self.fixed)
            self.res.seed(saved, copies)
            self.prefetcher = None

    def cross_program_prefetch(self, answer: list[FastInterval]) -> None:
        """XLA's cross-program prefetch (``max_cross_program_prefetches``, XLA's default 1; here
        ``self.cross_program`` buffers): before every other buffer, the largest parameters (XLA's default
        ``size_compare``; ties: the lower index) that fit in fast memory are prefetched from the program's start
        (``copy_start = -1``), each kept until its last use (XLA's cross-program-prefetch freeing), serving every
        use without another copy. Our difference: each copy must complete without a stall within the ops before
        its first use (else the next candidate)."""
        cands = []
        for b in range(self.problem.n):
            lo, hi = int(self.ptr[b]), int(self.ptr[b + 1])
            if (self.done[b] or lo == hi or not 0 < self.size[b] <= self.capacity or self.output[b]
                    or self.writes[lo:hi].any()):
                continue
            cands.append((-int(self.size[b]), b))
        for _, b in sorted(cands):
            if self.stats.cross_program_prefetches >= self.cross_program:
                return
            ops, _, _, ds = self.touches_of(b)
            if not ops or ops[0] < 1:
                continue
            first, last = ops[0], ops[-1]
            size, align = int(self.size[b]), int(self.align[b])
            off = self.heap.best_fit(0, last + 1, size, align)
            if off is None:
                continue
            if not self.res.try_add([(t, d) for t, d in zip(ops, ds)], "prefetch", (0, first, float(self.copy_time[b]))):
                continue
            self.heap.add(0, last + 1, off, size)
            answer.append(FastInterval(b, off, first, last + 1, -1))
            self.done[b] = True
            self.stats.prefetches += 1
            self.stats.buffers_fast += 1
            if self.stats.cross_program_prefetches == 0:
                self.stats.cross_program_prefetch = b
            self.stats.cross_program_prefetches += 1
            self.res.snapshot()  # committed

    def run(self, answer: list[FastInterval]) -> list[FastInterval]:
        if self.cross_program:
            self.cross_program_prefetch(answer)
        if self.prefetcher is not None:  # the native engine: the same loop, compiled
            return self.run_native(answer)
        for k, b in enumerate(self.order().tolist()):
            if self.done[b] or self.ptr[b] == self.ptr[b + 1] or self.size[b] <= 0 or self.size[b] > self.capacity:
                continue
            # the first MIN_DECIDED buffers whatever the clock: a deadline that passed during set-up (a busy
            # machine, a short limit) must not leave the answer empty
            if k >= MIN_DECIDED and time.monotonic() > self.deadline:
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
                        self.heap.truncate(heap_n)
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
                self.heap.truncate(heap_n)
                self.res.restore(snap)
                self.stats.timed_out = True
                break
            if committed:
                self.stats.buffers_fast += 1
            answer.extend(committed)
            self.done[b] = True
        return answer

    def run_native(self, answer: list[FastInterval]) -> list[FastInterval]:
        """:meth:`run`'s buffer loop by :class:`mallocgame._native.NativeMsaLoop` over the compiled heap, copy
        resource and prefetcher: the same decisions, intervals and statistics."""
        loop = NativeMsaLoop(self.heap, self.res, self.prefetcher, self.ptr, self.ops, self.reads, self.writes,
                             self.dsum, self.output, self.size, self.align, self.end, self.copy_time, self.elapsed,
                             self.max_retries, self.max_overlap == "memory", self.overlap_ratio,
                             self.memory_copy_time)
        answer.extend(loop.run(self.order(), self.done, self.deadline, MIN_DECIDED, FastInterval))
        st = self.stats
        for key in ("prefetches", "evictions", "no_copy", "retries", "uncommits", "read_only", "buffers_fast"):
            setattr(st, key, getattr(st, key) + getattr(loop, key))
        st.timed_out = st.timed_out or loop.timed_out
        return answer


# ---------------------------------------------------------------------------- runs

STATS_KEYS = ("prefetches", "evictions", "no_copy", "retries", "uncommits", "read_only", "buffers_fast",
              "cross_program_prefetch", "cross_program_prefetches")


def check_options(max_retries: int, max_overlap: str, cross_program_prefetch: int = 0,
                  overlap_ratio: float = MAX_OVERLAP_RATIO) -> None:
    """The msa options, or :class:`InputError` (one line: bad input, exit 2)."""
    if (isinstance(overlap_ratio, bool) or not isinstance(overlap_ratio, (int, float))
            or not math.isfinite(overlap_ratio) or overlap_ratio < 1):
        raise InputError(f"msa: overlap_ratio must be a finite number >= 1, got {overlap_ratio!r}")
    if (isinstance(cross_program_prefetch, bool) or not isinstance(cross_program_prefetch, int)
            or cross_program_prefetch < 0):
        raise InputError(f"msa: cross_program_prefetch must be an integer >= 0, got {cross_program_prefetch!r}")
    if max_overlap not in ("buffer", "memory"):
        raise InputError(f"msa: max_overlap must be 'buffer' or 'memory', got {max_overlap!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 1:
        raise InputError(f"msa: max_retries must be a positive integer, got {max_retries!r}")


def msa_run(problem: Problem, hardware, deadline: float, *, start: list[FastInterval] | None = None,
            max_retries: int = MAX_RETRIES, max_overlap: str = "buffer",
            cross_program_prefetch: int = 0,
            overlap_ratio: float = MAX_OVERLAP_RATIO) -> tuple[list[FastInterval] | None, dict]:
    """One run of the algorithm until the monotonic ``deadline`` (``start``: intervals committed first).

    ``cross_program_prefetch``: how many buffers XLA's cross-program prefetch may take: 0 (here the
    default: the baseline every search builds, and the algorithm tests/msa_reference.py checks), 1
    (XLA's default; the ``msa`` solver tries it as a variant) or more (XLA's ``max_cross_program_prefetches``).
    0 is the default because taking buffers that way loses more often than it wins, and more than one loses
    more (docs/results.md, "msa's defaults").
    ``overlap_ratio``: XLA's ``max_overlap_to_async_copy_ratio``
    (default 10), the longest no-copy stay and prefetch window in copy times (of the buffer, or of the whole
    fast memory with ``max_overlap="memory"``); larger keeps long-lived buffers fast without a copy.

    Returns the answer (``None`` when the validator rejects it, which would be a bug) and the
    run's statistics (``cut_short``, also ``timed_out``: whether the deadline cut it short, leaving
    buffers undecided, in slow memory). Deterministic.
    """
    check_options(max_retries, max_overlap, cross_program_prefetch, overlap_ratio)
    msa = _Msa(problem, hardware, deadline, max_retries, max_overlap, cross_program_prefetch, overlap_ratio)
    answer: list[FastInterval] = []
    if start is not None:
        msa.seed(start, PrefetchEvaluator.of(problem, hardware))
        answer = list(start)
    answer = msa.run(answer)
    st = msa.stats
    stats = {key: getattr(st, key) for key in STATS_KEYS}
    stats.update(exact_copy_checks=msa.res.exact_checks, timed_out=st.timed_out, cut_short=st.timed_out)
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

