"""Sweeps over live ranges that stand in for the interference graph (docs/architecture.md, "The core").

Two buffers interfere when their half-open live ranges overlap. Real traces have up to
hundreds of millions of such pairs, so only :func:`mallocgame.problem.graph.interference_graph`
materialises them; everything here is a sweep over sorted starts: components
(:func:`components`), the live-bytes profile (:func:`live_profile`) and its maximum
(:func:`max_live`), the maximal live sets (:func:`maximal_live_sets`), CSR neighbour
lists, and :class:`OverlapIndex`, which answers "who overlaps ``[s, e)``" without a graph.
Each is the one implementation of its kind in the project.

Example:
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> p = Problem("t", (Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5), Buffer("c", 2, 5, 6)))
    >>> components(p), max_live(p)
    ([[0, 1], [2]], 8)
"""

from __future__ import annotations

import numpy as np

from mallocgame._native import checkpoint_runs_loop, checkpoint_sets_loop, live_sum_loop
from mallocgame.problem.model import Problem, derived_facts
from mallocgame.runtime.native_engine import engine


def next_open(nxt: list[int], t: int) -> int:
    """The first slot ``>= t`` still open in a union-find "next slot" list, with path compression.

    ``nxt[t] == t`` while slot ``t`` is open; closing it is ``nxt[t] = t + 1``; ``nxt`` has one
    sentinel past the last slot. Serving copies from per-op budgets this way (the evaluator's
    copy service, msa's earliest-deadline-first reservations) skips exhausted slots in amortised
    near-constant time, however long the copy windows are.

    Example:
        >>> nxt = list(range(5)); nxt[1] = 2; nxt[2] = 3
        >>> next_open(nxt, 1), nxt[1]
        (3, 3)
    """
    root = t
    while nxt[root] != root:
        root = nxt[root]
    while nxt[t] != root:
        nxt[t], t = root, nxt[t]
    return root


def count_overlapping_pairs(start: np.ndarray, end: np.ndarray) -> int:
    """Number of interfering pairs, in O(n log n) without listing them."""
    s_sorted, e_sorted = np.sort(start), np.sort(end)
    # For each i: buffers starting strictly before s_i that are still live at s_i ...
    before = np.searchsorted(s_sorted, start, side="left") - np.searchsorted(e_sorted, start, side="right")
    # ... plus ties on the start, counted once per pair.
    _, ties = np.unique(start, return_counts=True)
    return int(before.sum() + (ties * (ties - 1) // 2).sum())


def components(problem: Problem) -> list[list[int]]:
    """Connected components of the interference graph, as sorted lists of buffer indices.

    For an interval graph these are the maximal runs of overlapping intervals in start
    order, so one sort suffices. Components are ordered by their first start time.
    """
    a = problem.arrays
    return [sorted(part.tolist()) for part in component_runs(a.start, a.end)]


def component_runs(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """Components of the intervals ``[start, end)`` as index arrays in start order (shapes ``[k]``).

    A new component begins where a start is at or past every end seen so far.
    """
    order = np.lexsort((end, start))
    if len(order) == 0:
        return []
    reach = np.maximum.accumulate(end[order])
    cut = np.flatnonzero(start[order][1:] >= reach[:-1]) + 1
    return np.split(order, cut)


def component_count(start: np.ndarray, end: np.ndarray) -> int:
    """How many components :func:`component_runs` finds, without building them."""
    if len(start) == 0:
        return 0
    order = np.lexsort((end, start))
    reach = np.maximum.accumulate(end[order])
    return 1 + int(np.count_nonzero(start[order][1:] >= reach[:-1]))


def components_of(start: np.ndarray, end: np.ndarray) -> list[list[int]]:
    """:func:`components` of bare arrays."""
    return [sorted(part.tolist()) for part in component_runs(start, end)]


def live_profile_of(start: np.ndarray, end: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(times, live_bytes)`` of intervals: bytes live on ``[times[k], times[k+1])``, shapes ``[m]``."""
    times = np.sort(np.concatenate([start, end]))  # np.unique's sorted values, by one sort (not a hash table)
    if len(times):
        times = times[np.concatenate(([True], times[1:] != times[:-1]))]
    delta = np.zeros(len(times), np.int64)
    np.add.at(delta, np.searchsorted(times, start), size)
    np.add.at(delta, np.searchsorted(times, end), -size)
    return times, np.cumsum(delta)


def live_profile(problem: Problem, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(times, live_bytes)``: bytes live on ``[times[k], times[k+1])``, shapes ``[m]``.

    ``mask`` (bool ``[n]``) restricts the profile to some buffers.
    """
    a = problem.arrays
    if mask is None:
        return live_profile_of(a.start, a.end, a.size)
    return live_profile_of(a.start[mask], a.end[mask], a.size[mask])


def max_live_of(size: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
    """Largest number of bytes live at one time among intervals ``[start, end)`` of ``size`` bytes."""
    if len(size) == 0:
        return 0
    return int(max(0, live_profile_of(start, end, size)[1].max()))


def max_live(problem: Problem) -> int:
    """Largest number of bytes live at one time: a lower bound on any packing's peak (built once per problem)."""
    facts = derived_facts(problem)
    if "max_live" not in facts:
        a = problem.arrays
        facts["max_live"] = max_live_of(a.size, a.start, a.end)
    return facts["max_live"]


def maximal_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The maximal moments (sorted): starts followed by a release before the next start, where the
    live sets of :func:`maximal_live_sets` are taken."""
    if len(start) == 0:
        return np.zeros(0, np.int64)
    starts = np.unique(start)
    next_start = np.append(starts[1:], np.iinfo(np.int64).max)
    ends_sorted = np.sort(end)
    released = np.searchsorted(ends_sorted, next_start, side="right") > np.searchsorted(ends_sorted, starts, side="right")
    return starts[released]


def maximal_live_csr(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The maximal live sets as CSR arrays ``(times [m], indptr [m+1], indices [nnz])``.

    Row ``r`` lists (sorted) the intervals live at ``times[r]``, a start followed by a release
    before the next start: the maximal cliques of the interval graph (see
    :func:`maximal_live_sets`). Without a Python loop: the maximal moments inside
    ``[start_i, end_i)`` are a contiguous run of ``times``, so each interval adds itself to a run
    of rows.
    """
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    if len(start) == 0:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64)
    times = maximal_times(start, end)
    lo = np.searchsorted(times, start, side="left")
    hi = np.searchsorted(times, end, side="left")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    # Interval i covers rows lo[i] .. hi[i]-1: its entries, in interval order, then sorted by row.
    first = np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.repeat(lo, counts) + (np.arange(total) - first)
    cols = np.repeat(np.arange(len(start), dtype=np.int64), counts)
    by_row = np.argsort(rows, kind="stable")  # stable: columns stay sorted within a row
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=len(times))))).astype(np.int64)
    return times, indptr, cols[by_row]


def maximal_live_sets(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """Index sets (sorted, int64) of the intervals live together at each maximal moment.

    These are the maximal cliques of the interval graph: two intervals overlap iff both
    are live at the later start, so the sets cover every overlapping pair. The live set
    only grows between releases, so only a start followed by a release before the next
    start is maximal. Ordered by time. (:func:`maximal_live_csr` gives them as CSR arrays.)

    >>> [s.tolist() for s in maximal_live_sets(np.array([0, 1, 4]), np.array([3, 5, 6]))]
    [[0, 1], [1, 2]]
    """
    times, indptr, indices = maximal_live_csr(start, end)
    return np.split(indices, indptr[1:-1]) if len(times) else []


def overlap_index(problem: Problem) -> "OverlapIndex":
    """The problem's :class:`OverlapIndex`, built once per problem and shared by every user."""
    facts = derived_facts(problem)
    cached = facts.get("overlap_index")
    if cached is None:
        a = problem.arrays
        cached = facts["overlap_index"] = OverlapIndex(a.start, a.end)
    return cached


def overlapping_pairs(start: np.ndarray, end: np.ndarray, *, max_pairs: int = 20_000_000):
    """Every interfering pair once, as index arrays ``(a [p], b [p])``, or ``None`` past ``max_pairs``.

    In start order, the intervals starting inside ``[s_i, e_i)`` after ``i`` form one
    contiguous run, so the pairs come out of a few vectorised steps.
    """
    n = len(start)
    if count_overlapping_pairs(start, end) > max_pairs:
        return None
    order = np.lexsort((end, start))
    s_sorted = start[order]
    pos = np.arange(n)
    hi = np.searchsorted(s_sorted, end[order], side="left")
    counts = np.maximum(hi - pos - 1, 0)
    first = np.repeat(pos, counts)
    run_start = np.repeat(pos + 1 - np.cumsum(np.concatenate(([0], counts[:-1]))), counts)
    second = np.arange(len(first)) + run_start
    return order[first], order[second]


def neighbour_lists(start: np.ndarray, end: np.ndarray, *, max_pairs: int = 20_000_000):
    """The interference graph as CSR arrays ``(indptr [n+1], indices [2*pairs])``, or ``None``
    when it has more than ``max_pairs`` pairs.

    Built without a Python loop: in start order, the buffers starting inside ``[s_i, e_i)``
    after ``i`` form one contiguous run, which gives every pair exactly once.
    """
    n = len(start)
    pairs = overlapping_pairs(start, end, max_pairs=max_pairs)
    if pairs is None:
        return None
    a, b = pairs
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    by_src = np.argsort(src, kind="stable")
    indptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n))))
    return indptr, dst[by_src]


_SWEEP_CHECKPOINTS = 20_000  # up to this many checkpoints the index sweeps them one by one


class _CsrRows:
    """The rows of CSR arrays as a read-only sequence of int64 arrays (views, made when asked for)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray):
        self.indptr, self.indices = indptr, indices

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def __getitem__(self, k: int) -> np.ndarray:
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        k %= len(self)
        return self.indices[self.indptr[k]:self.indptr[k + 1]]

    def __iter__(self):
        return (self[k] for k in range(len(self)))


class OverlapIndex:
    """Static index answering "which buffers are live somewhere in ``[s, e)``".

    Built once per problem in O(n log n) and bounded memory: the buffers live at every
    ``stride``-th start (in start order) are stored, with ``stride`` chosen so that about
    ``budget`` indices are kept. A query combines the stored set nearest below ``s``
    (filtered by end), the few starts between that checkpoint and ``s``, and the starts
    inside ``(s, e)`` — each a contiguous slice or one vectorised filter. With many checkpoints the stored
    sets are filled in one compiled pass (``mallocgame._native.checkpoint_sets_loop``; ``MALLOCGAME_ENGINE=python``:
    the numpy reference, the same sets).

    Example:
        >>> import numpy as np
        >>> idx = OverlapIndex(np.array([0, 2, 5]), np.array([3, 5, 6]))
        >>> sorted(idx.query(2, 4).tolist()), sorted(idx.query(5, 6).tolist())
        ([0, 1], [2])
    """

    def __init__(self, start: np.ndarray, end: np.ndarray, *, budget: int = 4_000_000):
        self.start, self.end = start, end
        self.order = np.lexsort((end, start))
        self.sorted_start = start[self.order]
        n = len(start)
        if n == 0:
            self.stride, self.cp_time, self.cp_pos, self.cp_sets = 1, np.zeros(0, np.int64), np.zeros(0, np.int64), []
            return
        e_sorted = np.sort(end)
        native = engine() == "native"
        if native:
            live_sum = live_sum_loop(np.ascontiguousarray(self.sorted_start, np.int64), np.ascontiguousarray(e_sorted, np.int64))
        else:
            live_sum = (np.searchsorted(self.sorted_start, self.sorted_start, side="right") - np.searchsorted(
                e_sorted, self.sorted_start, side="right")).sum()
        self.stride = max(1, int(np.ceil(live_sum / budget)))
        cp_pos = np.arange(0, n, self.stride)
        self.cp_time = self.sorted_start[cp_pos]
        # Position just past every start <= checkpoint time: what the stored set covers.
        self.cp_pos = np.searchsorted(self.sorted_start, self.cp_time, side="right")
        # Checkpoint c stores the buffers at start positions j < cp_pos[c] still live at cp_time[c], in j order.
        if len(cp_pos) < _SWEEP_CHECKPOINTS:  # few checkpoints: sweep them, carrying the live set forward (O(budget + n))
            self.cp_sets = []
            live, done = np.zeros(0, np.int64), 0
            for t, p in zip(self.cp_time.tolist(), self.cp_pos.tolist()):
                live = np.concatenate([live, self.order[done:p]])
                live = live[self.end[live] > t]
                done = p
                self.cp_sets.append(live)
            return
        # many (a Python loop over them is too slow at scale): buffer j is in checkpoints c_lo(j)..c_hi(j), one
        # (c, j) pair each, grouped by c
        if native:
            c_lo, c_hi = checkpoint_runs_loop(np.ascontiguousarray(self.sorted_start, np.int64),
                                              np.ascontiguousarray(self.end[self.order], np.int64),
                                              np.ascontiguousarray(self.cp_time, np.int64),
                                              np.ascontiguousarray(self.cp_pos, np.int64))
        else:
            c_lo = np.searchsorted(self.cp_pos, np.arange(n), side="right")
            c_hi = np.searchsorted(self.cp_time, self.end[self.order], side="left") - 1
        if native:
            indptr, indices = checkpoint_sets_loop(np.ascontiguousarray(self.order, np.int64),
                                                   np.ascontiguousarray(c_lo, np.int64),
                                                   np.ascontiguousarray(c_hi, np.int64), len(cp_pos))
            self._checkpoint_csr = (indptr, indices)
            self.cp_sets = _CsrRows(indptr, indices)
            return
        count = np.maximum(c_hi - c_lo + 1, 0)
        first = np.cumsum(count) - count
        j_of = np.repeat(np.arange(n, dtype=np.int64), count)
        c_of = np.repeat(c_lo - first, count) + np.arange(int(count.sum()), dtype=np.int64)
        by_c = np.argsort(c_of, kind="stable")  # pairs come in j order, nearly sorted by c: a fast timsort
        indices = self.order[j_of[by_c]].astype(np.int64)
        indptr = np.concatenate(([0], np.cumsum(np.bincount(c_of, minlength=len(cp_pos))))).astype(np.int64)
        self._checkpoint_csr = (indptr, indices)
        self.cp_sets = _CsrRows(indptr, indices)

    def checkpoint_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored sets as CSR arrays ``(indptr [checkpoints+1], indices [stored])`` (built once), for the
        compiled placement loop."""
        csr = getattr(self, "_checkpoint_csr", None)
        if csr is None:
            lengths = np.array([len(c) for c in self.cp_sets], np.int64)
            indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            indices = np.concatenate(self.cp_sets).astype(np.int64) if self.cp_sets else np.zeros(0, np.int64)
            csr = self._checkpoint_csr = (indptr, indices)
        return csr

    def query(self, s: int, e: int) -> np.ndarray:
        """Indices of buffers with ``start < e`` and ``end > s`` (int64, unordered)."""
        if len(self.cp_time) == 0 or e <= s:
            return np.zeros(0, np.int64)
        k = int(np.searchsorted(self.cp_time, s, side="right")) - 1
        hi = int(np.searchsorted(self.sorted_start, e, side="left"))
        if k < 0:
            return self.order[:hi]
        stored = self.cp_sets[k]
        stored = stored[self.end[stored] > s]
        rest = self.order[self.cp_pos[k]:hi]
        rest = rest[self.end[rest] > s]
        return np.concatenate([stored, rest])
