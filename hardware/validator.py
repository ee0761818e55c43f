"""The validator: the only judge of "valid" (docs/architecture.md, "Scoring").

Checks, for a placement of a problem: one entry per buffer; in pack mode every buffer
placed; offsets non-negative and multiples of the buffer's alignment; ``offset + size``
within the capacity; and no two placed buffers whose live ranges overlap sharing an
address. The overlap check is a sweep over time with the live placed buffers kept sorted
by offset, so it costs O(n log n) plus list moves, never all pairs.

Examples:
    >>> from mallocgame.problem.model import KEY_WIDTH, Buffer, Problem
    >>> p = Problem("t", (Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3)), capacity=8)
    >>> validate(p, [0, 4]) is None, validate(p, [0, 2])
    (True, "buffers 'a' and 'b' overlap: live [0, 2) and [1, 3), addresses [0, 4) and [2, 6)")
"""

from __future__ import annotations

import bisect
from operator import attrgetter
from typing import Sequence

import numpy as np

from mallocgame._native import first_overlap_merged, interval_columns_loop, offset_columns_loop
from mallocgame.problem.intervals import overlapping_pairs
from mallocgame.problem.model import KEY_WIDTH, Buffer, Problem
from mallocgame.runtime.native_engine import engine


def validate(problem: Problem, offsets: Sequence[int | None] | np.ndarray, *,
             capacity: int | None = None, mode: str | None = None) -> str | None:
    """The first violation as one line, or ``None`` when the placement is valid.

    ``capacity`` and ``mode`` default to the problem's own.
    """
    capacity = problem.capacity if capacity is None else capacity
    mode = problem.mode if mode is None else mode
    if engine() == "native":
        verdict = _columns_verdict(problem, offsets, capacity, mode)
        if verdict is not _LOOK_CLOSER:
            return verdict
    bufs = problem.buffers
    if isinstance(offsets, np.ndarray):
        offsets = [None if o < 0 else int(o) for o in offsets.tolist()]
    if len(offsets) != len(bufs):
        return f"solution has {len(offsets)} entries for {len(bufs)} buffers"
    if _valid_at_once(problem, offsets, capacity, mode):
        return None
    for b, off in zip(bufs, offsets):
        violation = _buffer_violation(b, off, capacity, mode)
        if violation is not None:
            return violation
    return first_overlap(problem, offsets)


def _buffer_violation(b: Buffer, off: int | None, capacity: int | None, mode: str) -> str | None:
    """The first rule buffer ``b`` at ``off`` breaks on its own (placed in pack mode, offset, alignment,
    capacity), or ``None``."""
    if off is None:
        return f"buffer {b.id!r} has no offset (pack mode places every buffer)" if mode == "pack" else None
    if off < 0:
        return f"buffer {b.id!r}: negative offset {off}"
    if off % b.alignment:
        return f"buffer {b.id!r}: offset {off} is not a multiple of its alignment {b.alignment}"
    if capacity is not None and off + b.size > capacity:
        return f"buffer {b.id!r}: offset {off} + size {b.size} = {off + b.size} exceeds capacity {capacity}"
    return None


_LOOK_CLOSER = object()  # _columns_verdict: the columns cannot say; the reference path judges


def _columns_verdict(problem: Problem, offsets, capacity: int | None, mode: str):
    """:func:`validate`'s verdict read from the answer's columns (:func:`offset_columns`) and the compiled sweep:
    the same first violation, found without an object per buffer; ``_LOOK_CLOSER`` when the offsets are no
    64-bit ints, their count is wrong or a top would not fit 64 bits."""
    cols = _sweepable_columns(problem, offsets)
    if cols is None:
        return _LOOK_CLOSER
    off, placed = cols
    a = problem.arrays
    bad = placed & ((off < 0) | (off % a.alignment != 0))
    if capacity is not None and capacity < 2 ** 63:  # (above, no top that fits 64 bits exceeds it)
        bad |= placed & (off > capacity - a.size)
    if mode == "pack":
        bad |= ~placed
    if bad.any():  # the first buffer in index order that breaks a rule of its own, as the reference loop finds it
        i = int(np.argmax(bad))
        return _buffer_violation(problem.buffers[i], int(off[i]) if placed[i] else None, capacity, mode)
    i, j = _sweep_pair(problem, off, placed)
    return None if i < 0 else _overlap_message(problem, i, j, (int(off[i]), int(off[j])), (0, 1))


def _sweepable_columns(problem: Problem, offsets) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`offset_columns` of ``offsets`` when the compiled paths can read them: one per buffer of ``problem`` and
    every ``offset + size`` within a 64-bit integer; else ``None`` (the Python reference judges)."""
    cols = offset_columns(offsets)
    if cols is None or len(cols[0]) != problem.n:
        return None
    off, placed = cols
    if placed.any() and int(off[placed].max()) + int(problem.arrays.size.max()) >= 2 ** 63:
        return None
    return cols


def _sweep_pair(problem: Problem, off: np.ndarray, placed: np.ndarray) -> tuple[int, int]:
    """The compiled sweep (``first_overlap_merged``) over the placed buffers: the pair :func:`first_overlap`'s Python
    sweep finds first, or ``(-1, -1)``."""
    a = problem.arrays
    index = np.flatnonzero(placed)
    by_start = index[np.argsort(a.start[index], kind="stable")]
    by_end = index[np.argsort(a.end[index], kind="stable")]
    return first_overlap_merged(by_start, by_end, np.ascontiguousarray(a.start, np.int64),
                                np.ascontiguousarray(a.end, np.int64), off, off + a.size)


def _valid_at_once(problem: Problem, offsets: Sequence[int | None], capacity: int | None, mode: str) -> bool:
    """True when every check of :func:`validate` passes, checked column-wise (every interfering pair
    of placed buffers, when there are at most :data:`PAIR_LIMIT`). False says only "look closer":
    the per-buffer loop and the sweep then find the first violation, or pass too."""
    placed = np.fromiter((o is not None for o in offsets), bool, len(offsets))
    if mode == "pack" and not placed.all():
        return False
    try:
        off = np.array([o for o in offsets if o is not None])
    except (OverflowError, TypeError, ValueError):
        return False
    if len(off) and off.dtype.kind != "i":  # floats, huge or odd values: the loop judges them
        return False
    off = off.astype(np.int64)
    a = problem.arrays
    size, align = a.size[placed], a.alignment[placed]
    top = off + size
    if len(off) and (off.min() < 0 or (off % align).any() or (capacity is not None and top.max() > capacity)):
        return False
    pairs = overlapping_pairs(a.start[placed], a.end[placed], max_pairs=PAIR_LIMIT)
    if pairs is None:
        return _disjoint_all_live(a.start[placed], a.end[placed], off, top) or first_overlap(problem, offsets) is None
    i, j = pairs
    return not ((off[i] < top[j]) & (off[j] < top[i])).any()


def _disjoint_all_live(start: np.ndarray, end: np.ndarray, off: np.ndarray, top: np.ndarray) -> bool:
    """True when every range ``[start, end)`` shares one time (all live at once, every pair interferes) and the
    address ranges ``[off, top)``, sorted, do not meet. False says only "look closer" (the sweep decides)."""
    if len(off) == 0 or start.max() >= end.min():
        return False
    order = np.argsort(off, kind="stable")
    return bool((top[order][:-1] <= off[order][1:]).all())


PAIR_LIMIT = 4_000_000  # past this many interfering pairs the sweep is cheaper than listing them


def first_overlap(problem: Problem, offsets: Sequence[int | None]) -> str | None:
    """The first pair of live-overlapping placed buffers that share an address, if any.

    With the ``native`` engine (``mallocgame.runtime.native_engine``) the sweep runs compiled
    (``mallocgame._native.first_overlap_merged``, the same events in the same order, the same pair) whenever the
    offsets fit 64-bit integers; ``python`` runs the loop below, the reference.
    """
    if engine() == "native":
        pair = _native_first_overlap(problem, offsets)
        if pair is not None:
            return None if pair[0] < 0 else _overlap_message(problem, pair[0], pair[1], offsets)
    bufs = problem.buffers
    events = []  # (time, kind, index); kind 0 = release, sorts before 1 = allocate at equal times
    for i, (b, off) in enumerate(zip(bufs, offsets)):
        if off is not None:
            events.append((b.start, 1, i))
            events.append((b.end, 0, i))
    events.sort()
    active = _SortedBlocks()  # (offset, top, index), disjoint, sorted
    for _, kind, i in events:
        off = offsets[i]
        item = (off, off + bufs[i].size, i)
        if kind == 0:
            active.remove(item)
            continue
        for near in active.neighbours(item):
            if near is not None and near[0] < item[1] and item[0] < near[1]:
                return _overlap_message(problem, near[2], i, offsets)
        active.insert(item)
    return None


def _native_first_overlap(problem: Problem, offsets: Sequence[int | None]) -> tuple[int, int] | None:
    """The compiled sweep's ``(i, j)`` (``(-1, -1)``: no overlap), or ``None`` when an offset or a top does not fit
    a 64-bit integer (the Python sweep then judges)."""
    cols = None if isinstance(offsets, np.ndarray) else _sweepable_columns(problem, offsets)
    if cols is None:
        return None
    return _sweep_pair(problem, *cols)


class _SortedBlocks:
    """A sorted list of distinct items kept in blocks of at most ``2 * BLOCK``: an insert or a delete moves one
    block, not every item after it (hundreds of thousands of buffers live at once would make the sweep quadratic)."""

    BLOCK = 512

    def __init__(self):
        self.blocks: list[list] = []
        self.firsts: list = []  # each block's first item

    def _find(self, item) -> tuple[int, int]:
        """``(block, position)`` where ``item`` is or would go."""
        b = max(bisect.bisect_right(self.firsts, item) - 1, 0)
        return b, bisect.bisect_left(self.blocks[b], item)

    def neighbours(self, item) -> tuple:
        """The items just before and just after where ``item`` would go (``None`` at an end)."""
        if not self.blocks:
            return None, None
        b, p = self._find(item)
        block = self.blocks[b]
        before = block[p - 1] if p > 0 else self.blocks[b - 1][-1] if b > 0 else None
        after = block[p] if p < len(block) else self.blocks[b + 1][0] if b + 1 < len(self.blocks) else None
        return before, after

    def insert(self, item) -> None:
        if not self.blocks:
            self.blocks.append([item])
            self.firsts.append(item)
            return
        b, p = self._find(item)
        block = self.blocks[b]
        block.insert(p, item)
        if p == 0:
            self.firsts[b] = item
        if len(block) > 2 * self.BLOCK:
            half = block[self.BLOCK:]
            del block[self.BLOCK:]
            self.blocks.insert(b + 1, half)
            self.firsts.insert(b + 1, half[0])

    def remove(self, item) -> None:
        b, p = self._find(item)
        block = self.blocks[b]
        del block[p]
        if not block:
            del self.blocks[b], self.firsts[b]
        elif p == 0:
            self.firsts[b] = block[0]


def _overlap_message(problem: Problem, i: int, j: int, offsets: Sequence[int | None],
                     at: tuple[int, int] | None = None) -> str:
    """Buffers ``i`` and ``j`` overlap; their offsets are ``offsets[i]`` and ``offsets[j]`` (``at``: the positions in
    ``offsets`` to read instead)."""
    a, b = problem.buffers[i], problem.buffers[j]
    oa, ob = (offsets[i], offsets[j]) if at is None else (offsets[at[0]], offsets[at[1]])
    return (f"buffers {a.id!r} and {b.id!r} overlap: live [{a.start}, {a.end}) and [{b.start}, {b.end}), "
            f"addresses [{oa}, {oa + a.size}) and [{ob}, {ob + b.size})")


def peak(problem: Problem, offsets: Sequence[int | None]) -> int:
    """Highest address used: max of ``offset + size`` over placed buffers (0 if none)."""
    if engine() == "native" and isinstance(offsets, (list, tuple)):
        cols = _sweepable_columns(problem, offsets)
        if cols is not None:
            off, placed = cols
            return int((off + problem.arrays.size)[placed].max()) if placed.any() else 0
    sizes = problem.arrays.size.tolist()  # the column: no buffer object made
    return max((off + z for z, off in zip(sizes, offsets) if off is not None), default=0)


def count_placed(offsets: Sequence[int | None]) -> int:
    """How many entries of ``offsets`` are not ``None`` (placed in fast memory)."""
    if engine() == "native" and isinstance(offsets, (list, tuple)):
        cols = offset_columns(offsets)
        if cols is not None:
            return int(cols[1].sum())
    return sum(o is not None for o in offsets)


def validate_intervals(problem: Problem, intervals: Sequence, *, capacity: int | None = None) -> str | None:
    """The first violation of a prefetch-mode answer (docs/prefetch.md section 3), or ``None``.

    ``intervals`` are [`FastInterval`][mallocgame.problem.model.FastInterval]s. Per interval: range, offset,
    alignment, capacity, the copy rule; per buffer: occupied ranges disjoint; across buffers:
    the occupied rectangles ``[occupied_from, end) x [offset, offset + size)`` disjoint (the
    same sweep as [`validate`][mallocgame.hardware.validator.validate], over the intervals as rectangles).
    """
    capacity = problem.capacity if capacity is None else capacity
    if _intervals_valid_at_once(problem, intervals, capacity):
        return None
    n_ops = len(problem.ops)
    touches = problem.touches
    bufs = problem.buffers
    by_buffer: dict[int, list] = {}
    for iv in intervals:
        if not 0 <= iv.buffer < problem.n:
            return f"interval of unknown buffer index {iv.buffer}"
        b = bufs[iv.buffer]
        where = f"buffer {b.id!r} interval [{iv.start}, {iv.end})"
        if not 0 <= iv.start < iv.end <= n_ops:
            return f"{where}: needs 0 <= start < end <= {n_ops} (the number of ops)"
        if iv.end > b.end:
            return f"{where}: ends after the buffer's live range [{b.start}, {b.end})"
        if iv.offset < 0:
            return f"{where}: negative offset {iv.offset}"
        if iv.offset % b.alignment:
            return f"{where}: offset {iv.offset} is not a multiple of its alignment {b.alignment}"
        if capacity is not None and iv.offset + b.size > capacity:
            return f"{where}: offset {iv.offset} + size {b.size} = {iv.offset + b.size} exceeds capacity {capacity}"
        ops, reads, writes = touches.of(iv.buffer)
        k = int(np.searchsorted(ops, iv.start))
        if iv.copy_start is None:
            if not (k < len(ops) and ops[k] == iv.start and writes[k] and not reads[k]):
                return (f"{where}: produced in place (no copy_start) but op {iv.start} is not a pure write of it; "
                        "prefetch it (set copy_start)")
        else:
            if not -1 <= iv.copy_start < iv.start:
                return f"{where}: copy_start {iv.copy_start} must be in [-1, start)"
            before = np.flatnonzero(writes[:k])
            last_write = int(ops[before[-1]]) if len(before) else -1
            if iv.copy_start < last_write:
                return (f"{where}: prefetch starts after op {iv.copy_start}, before the value written "
                        f"at op {last_write} exists")
        by_buffer.setdefault(iv.buffer, []).append(iv)
    for i, ivs in by_buffer.items():
        ivs.sort(key=lambda v: v.occupied_from)
        for a, b in zip(ivs, ivs[1:]):
            if b.occupied_from < a.end:
                return (f"buffer {bufs[i].id!r}: intervals [{a.start}, {a.end}) and [{b.start}, {b.end}) "
                        f"occupy fast memory at the same time (ops [{b.occupied_from}, {a.end}))")
    rects = [(iv, Buffer(f"{bufs[iv.buffer].id}[{iv.start}:{iv.end})", bufs[iv.buffer].size, iv.occupied_from, iv.end,
                         None, bufs[iv.buffer].alignment)) for ivs in by_buffer.values() for iv in ivs]
    shadow = Problem(problem.name, tuple(r for _, r in rects), capacity=capacity, mode="map")
    return first_overlap(shadow, [iv.offset for iv, _ in rects])


class AnswerTuple(tuple):
    """An answer (offsets, or a prefetch answer's FastIntervals) as a tuple that keeps its columns once read
    (``offset_columns``, ``interval_columns``): the judge hands it to the validator, the evaluator and the report,
    and each reads the columns of the first reading instead of the answer again. A tuple does not change, so its
    columns stay its own; it pickles as a plain tuple (the columns stay in this process)."""

    columns: dict[str, object]  # "offsets" or "intervals" -> the columns read

    def __new__(cls, answer: Sequence = ()):
        self = super().__new__(cls, answer)
        self.columns = {}
        return self

    def __reduce__(self):
        return tuple, (tuple(self),)


def answer_tuple(answer: Sequence) -> AnswerTuple:
    """``answer`` as an ``AnswerTuple`` (itself when it is one).

    Examples:
        >>> answer = answer_tuple([64, None, 0])
        >>> answer_tuple(answer) is answer, offset_columns(answer) is offset_columns(answer), answer == (64, None, 0)
        (True, True, True)
    """
    return answer if isinstance(answer, AnswerTuple) else AnswerTuple(answer)


def interval_columns(intervals: Sequence) -> np.ndarray | None:
    """A prefetch answer's intervals as read-only int64 columns ``[n, 6]``: ``(buffer, offset, start, end,
    has_copy, copy_start or 0)`` (``has_copy``: 1 when ``copy_start`` is not None), or ``None`` when a field is not
    an integer that fits in 64 bits. The validator and the evaluator read an answer this way; an
    ``AnswerTuple`` is read once.

    Examples:
        >>> from mallocgame.problem.model import FastInterval
        >>> interval_columns([FastInterval(0, 64, 2, 5, 1), FastInterval(1, 0, 0, 3)]).tolist()
        [[0, 64, 2, 5, 1, 1], [1, 0, 0, 3, 0, 0]]
    """
    return _read_once("intervals", intervals, _read_interval_columns)


def offset_columns(offsets: Sequence[int | None] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A map or pack answer's offsets as read-only columns ``(offset, placed)``: int64 ``[n]`` (0 where not
    placed) and bool ``[n]`` (``None`` is not placed; in an integer array, a negative entry, as ``validate``
    reads one), or ``None`` when an entry is not an integer that fits in 64 bits. An ``AnswerTuple`` is read
    once, as ``interval_columns`` reads one.

    Examples:
        >>> [c.tolist() for c in offset_columns([64, None, 0])]
        [[64, 0, 0], [True, False, True]]
    """
    return _read_once("offsets", offsets, _read_offset_columns)


def _read_once(what: str, answer: Sequence, read):
    """``read(answer)``, made read-only; for an ``AnswerTuple``, the columns of ``what`` it keeps, read the first
    time."""
    kept = answer.columns if isinstance(answer, AnswerTuple) else None
    if kept is not None and what in kept:
        return kept[what]
    cols = read(answer)
    for col in (() if cols is None else cols if isinstance(cols, tuple) else (cols,)):
        col.setflags(write=False)
    if kept is not None:
        kept[what] = cols
    return cols


def _read_interval_columns(intervals: Sequence) -> np.ndarray | None:
    if engine() == "native" and isinstance(intervals, (list, tuple)):
        cols = interval_columns_loop(intervals)  # exact ints only; anything else is read below
        if cols is not None:
            return cols
    try:
        return np.array([(iv.buffer, iv.offset, iv.start, iv.end, iv.copy_start is not None, iv.copy_start or 0)
                         for iv in intervals], np.int64).reshape(-1, 6)
    except (OverflowError, TypeError, ValueError):
        return None


def _read_offset_columns(offsets) -> tuple[np.ndarray, np.ndarray] | None:
    if isinstance(offsets, np.ndarray):
        if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or (
                offsets.dtype.kind == "u" and len(offsets) and int(offsets.max()) >= 2 ** 63):
            return None
        placed = offsets >= 0
        return np.where(placed, offsets, 0).astype(np.int64), placed
    if engine() == "native" and isinstance(offsets, (list, tuple)):
        cols = offset_columns_loop(offsets)  # exact ints only; anything else is read below
        if cols is not None:
            return cols
    placed = np.fromiter((o is not None for o in offsets), bool, len(offsets))
    try:
        given = np.array([o for o in offsets if o is not None])
    except (OverflowError, TypeError, ValueError):
        return None
    if len(given) and given.dtype.kind != "i":  # floats, bools, huge or odd values
        return None
    off = np.zeros(len(placed), np.int64)
    off[placed] = given
    return off, placed


def _intervals_valid_at_once(problem: Problem, intervals: Sequence, capacity: int | None) -> bool:
    """True when every rule :func:`validate_intervals` checks holds, checked column-wise over all intervals (the
    occupied rectangles by every overlapping pair, when there are at most :data:`PAIR_LIMIT`). False says only
    "look closer": the loop then finds the first violation and its message. At 10k intervals the loop took
    0.25 s, which the searches' judges paid on every kept answer."""
    cols = interval_columns(intervals)
    if cols is None:
        return False
    buf, off, start, end, has_copy, copy_start = cols.T
    n_ops, a, touches = len(problem.ops), problem.arrays, problem.touches
    if len(buf) == 0:
        return True
    if buf.min() < 0 or buf.max() >= problem.n or start.min() < 0 or (start >= end).any() or end.max() > n_ops:
        return False
    size = a.size[buf]
    if (end > a.end[buf]).any() or off.min() < 0 or (off % a.alignment[buf]).any():
        return False
    if capacity is not None and (off + size > capacity).any():
        return False
    keys = touches.keys
    k = keys.searchsorted(buf * KEY_WIDTH + start)  # the first touch at or after start
    in_place = has_copy == 0
    at = np.minimum(k, max(len(keys) - 1, 0))
    if len(keys) == 0:
        if in_place.any():
            return False
    elif not ((keys[at] == buf * KEY_WIDTH + start) & touches.writes[at] & ~touches.reads[at])[in_place].all():
        return False
    pre = ~in_place
    if ((copy_start < -1) | (copy_start >= start))[pre].any():
        return False
    if len(keys):  # the last write before start must be at or before copy_start
        lw = touches.last_write[np.maximum(k - 1, 0)]
        written = (k > touches.ptr[buf]) & (lw >= touches.ptr[buf])
        if (pre & written & (copy_start < touches.ops[np.maximum(lw, 0)])).any():
            return False
    occ = np.where(in_place, start, copy_start + 1)
    order = np.lexsort((occ, buf))  # one buffer's occupied ranges disjoint: consecutive ones suffice
    same = buf[order][1:] == buf[order][:-1]
    if (same & (occ[order][1:] < end[order][:-1])).any():
        return False
    pairs = overlapping_pairs(occ, end, max_pairs=PAIR_LIMIT)
    top = off + size
    if pairs is None:
        return _disjoint_all_live(occ, end, off, top)
    i, j = pairs
    return not ((off[i] < top[j]) & (off[j] < top[i])).any()


def interval_peak(problem: Problem, intervals: Sequence) -> int:
    """Highest address a prefetch answer uses (0 if none)."""
    if not len(intervals):
        return 0
    sizes = problem.arrays.size
    try:  # column-wise; an answer with offsets that are no int64 (an invalid one) is summed one by one
        buf = np.fromiter(map(attrgetter("buffer"), intervals), np.int64, len(intervals))
        off = np.fromiter(map(attrgetter("offset"), intervals), np.int64, len(intervals))
        return int((off + sizes[buf]).max())
    except (OverflowError, TypeError, ValueError):
        return max(iv.offset + int(sizes[iv.buffer]) for iv in intervals)


def validate_schedule(problem: Problem, original: Problem | None = None) -> str | None:
    """The first violation of ``problem``'s op order as one line, or ``None`` (docs/architecture.md, "Schedules").

    The reference order is ``original``'s ops when given (an original workload: same op ids,
    each with the same operands, same buffer ids and sizes), else ``problem.original_order``;
    without either there is nothing to check. Every op must come after the ops it depends on
    in the reference order (the producers of what it reads, the readers of what it overwrites,
    its control predecessors), and every op must touch its buffers inside their live ranges.
    """
    ops = problem.ops
    ids = [op.id for op in ops]
    if original is not None:
        if sorted(ids) != sorted(op.id for op in original.ops):
            return f"the schedule's ops differ from the original's ({len(ops)} ops vs {len(original.ops)})"
        mine = {op.id: op for op in ops}
        for op in original.ops:
            if sorted(mine[op.id].operands, key=repr) != sorted(op.operands, key=repr):
                return f"op {op.id!r}: its operands differ from the original's"
        sizes = {b.id: b.size for b in original.buffers}
        if {b.id: b.size for b in problem.buffers} != sizes:
            return "the schedule's buffers (ids and sizes) differ from the original's"
        reference: tuple[str, ...] | None = tuple(op.id for op in original.ops)
        extra = tuple(original.control_deps)
    else:
        reference, extra = (problem.original_order or None), ()
    if reference is not None:
        if sorted(reference) != sorted(ids):
            return "original_order does not list the schedule's ops"
        check = problem.replace(control_deps=tuple(problem.control_deps) + extra) if extra else problem
        for u, v in check.dependencies(order=reference):
            if u > v:
                return (f"op {ids[v]!r} (step {v}) runs before op {ids[u]!r} (step {u}), "
                        "which it depends on in the original order")
    a = problem.arrays
    index = problem.index
    for t, op in enumerate(ops):
        for o in op.operands:
            i = index.get(o.buffer)
            if i is None:
                return f"op {op.id!r} touches unknown buffer {o.buffer!r}"
            if not a.start[i] <= t < a.end[i]:
                return (f"op {op.id!r} (step {t}) touches buffer {o.buffer!r} outside its live range "
                        f"[{a.start[i]}, {a.end[i]})")
    return None
